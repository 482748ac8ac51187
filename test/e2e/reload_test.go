package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// TestReload runs the daemon from a config file at rate 10, rewrites the
// file with rate 50 and sends SIGHUP: samples of frames sent afterwards
// carry rate 50 and their count follows 1/50, with sequence numbers and
// pools continuing. Then an invalid file and SIGHUP: the daemon logs why
// it refused the file and keeps sampling at 50.
func TestReload(t *testing.T) {
	lab := newLab(t, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	col := listen(t, lab, collectorPort)
	conf := filepath.Join(t.TempDir(), "sflowswitchd.conf")
	writeConf := func(body string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	config := func(rate, size int) string {
		return fmt.Sprintf("sampling = %d\npolling = 0\nports = [\"p1\", \"p2\"]\n\n[[collector]]\naddress = \"%s:%d\"\nmax_datagram_size = %d\n",
			rate, lab.CollectorAddr, collectorPort, size)
	}
	writeConf(config(10, 1400))
	d := startDaemon(t, lab, "-config", conf)
	d.waitReady(t, lab, "p1", "p2")

	// phase sends count frames numbered from first and checks that their
	// samples carry rate and that their number follows 1/rate.
	phase := func(name string, first uint64, count, rate int) {
		t.Helper()
		sendNumbered(t, lab, 0, 1, first, count)
		dgs := col.waitDelivered(t, lab)
		got := 0
		for _, f := range flowSamplesOf(dgs, p1) {
			num, ok := frameNumber(f.header)
			if !ok || num < first || num >= first+uint64(count) {
				continue
			}
			got++
			if f.rate != uint32(rate) {
				t.Fatalf("%s: sample of frame %d has rate %d, want %d\n%s", name, num, f.rate, rate, d.log())
			}
		}
		mean, sd, ok := withinSigmas(got, count, 1/float64(rate), 4)
		t.Logf("%s: %d samples at rate %d, expected %.0f ± %.1f", name, got, rate, mean, sd)
		if !ok {
			t.Errorf("%s: %d samples of %d frames at rate %d, want %.0f ± 4×%.1f", name, got, count, rate, mean, sd)
		}
	}
	phase("rate 10", 1, 5000, 10)

	// The collector's datagram size changes too, so the daemon reopens
	// its stream: the datagram sequence must still continue without a gap.
	writeConf(config(50, 1300))
	d.signal(t, syscall.SIGHUP)
	waitLog(t, d, "configuration reloaded")
	waitRate(t, lab, d, "p1", 50)
	phase("rate 50 after SIGHUP", 5001, 25000, 50)

	writeConf(strings.Replace(config(50, 1300), "sampling = 50", `sampling = "fast"`, 1)) // wrong type
	d.signal(t, syscall.SIGHUP)
	line := waitLog(t, d, "config reload refused")
	if !strings.Contains(line, conf) {
		t.Errorf("the refusal does not name the file %s: %s", conf, line)
	}
	t.Logf("daemon: %s", line)
	phase("rate 50 after a bad file", 30001, 25000, 50)
	if !d.alive() {
		t.Fatalf("daemon died\n%s", d.log())
	}

	dgs := col.snapshot(t)
	checkDatagramSequences(t, dgs)
	checkSampleSequences(t, dgs)
	var prev uint32
	for i, f := range flowSamplesOf(dgs, p1) {
		if f.pool < prev {
			t.Errorf("flow sample %d: sample_pool ran backwards %d -> %d across the reload", i, prev, f.pool)
		}
		prev = f.pool
	}
	checkIndependentDecoders(t, dgs, collectorPort, p1)
}

// waitLog waits up to 5 s for a daemon log line containing s and returns it.
func waitLog(t *testing.T, d *daemon, s string) string {
	t.Helper()
	deadline := time.Now().Add(testutil.Scaled(5 * time.Second))
	for {
		for _, line := range strings.Split(d.log(), "\n") {
			if strings.Contains(line, s) {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no daemon log line with %q\n%s", s, d.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRate waits until the metrics show rate for port, then one worker
// tick (the workers pick up a configuration between ring reads).
func waitRate(t *testing.T, lab *netlab.Lab, d *daemon, port string, rate uint64) {
	t.Helper()
	deadline := time.Now().Add(testutil.Scaled(5 * time.Second))
	for {
		m, err := fetchMetrics(lab)
		if err == nil {
			if v, ok := m.get("sflowswitchd_port_sampling_rate", `port="`+port+`"`); ok && v == rate {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never showed rate %d for %s (%v)\n%s", rate, port, err, d.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1200 * time.Millisecond)
}
