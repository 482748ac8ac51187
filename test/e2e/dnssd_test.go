package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sfdaemon "github.com/sflowswitchd/sflowswitchd/daemon"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// dnsTTL is the TTL dnsmasq gives its records (--local-ttl) in the DNS-SD
// test; the daemon's floor between queries is lowered to 1 s for the test
// (sfdaemon.DNSSDTestIntervalsEnv), 3 s without a TTL.
const dnsTTL = 2

// dnsServer is a dnsmasq serving the DNS-SD records of the test's zone
// in the lab's collector namespace, on the collector address, port 53.
type dnsServer struct {
	t   *testing.T
	lab *netlab.Lab
	bin string
	cmd *exec.Cmd
}

// serve (re)starts dnsmasq with records: each "srv:HOST:PORT" an SRV
// record of _sflow._udp.example.net (HOST.example.net resolving to the
// collector address), each "txt:K=V" a TXT string; local makes
// example.net a local domain (an unknown name there is NXDOMAIN; without
// it dnsmasq, with no upstream server, REFUSES such a query). dnsmasq
// reads SRV and TXT records only at start, so a zone change is a restart.
func (s *dnsServer) serve(local bool, records ...string) {
	s.t.Helper()
	s.stop()
	const name = "_sflow._udp.example.net"
	args := []string{"-k", "-C", "/dev/null", "--no-resolv", "--no-hosts", "--user=root", "--pid-file",
		"--port=53", "--listen-address=" + s.lab.CollectorAddr.String(), "--bind-interfaces",
		"--local-ttl=" + strconv.Itoa(dnsTTL), "--log-facility=-", "--log-queries"}
	if local {
		args = append(args, "--local=/example.net/")
	}
	var txt []string
	hosts := map[string]bool{}
	for _, r := range records {
		kind, v, _ := strings.Cut(r, ":")
		switch kind {
		case "srv":
			host, port, _ := strings.Cut(v, ":")
			args = append(args, fmt.Sprintf("--srv-host=%s,%s.example.net,%s", name, host, port))
			if !hosts[host] {
				hosts[host] = true
				args = append(args, fmt.Sprintf("--host-record=%s.example.net,%s", host, s.lab.CollectorAddr))
			}
		case "txt":
			txt = append(txt, v)
		}
	}
	if len(txt) > 0 {
		args = append(args, "--txt-record="+name+","+strings.Join(txt, ","))
	}
	s.cmd = s.lab.Start(s.t, s.lab.Collector, s.bin, args...)
	// dnsmasq is serving once its socket is bound.
	deadline := time.Now().Add(testutil.Scaled(5 * time.Second))
	for !strings.Contains(fmt.Sprint(s.cmd.Stdout), "started, version") {
		if time.Now().After(deadline) {
			s.t.Fatalf("dnsmasq did not start: %s", s.cmd.Stdout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills dnsmasq (by PID): queries then get no answer.
func (s *dnsServer) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// waitDNSMetric waits until the daemon's metric name{label} satisfies ok
// and returns its value.
func waitDNSMetric(t *testing.T, lab *netlab.Lab, d *daemon, what, name, label string, ok func(uint64) bool) uint64 {
	t.Helper()
	deadline := time.Now().Add(testutil.Scaled(10 * time.Second))
	for {
		m, err := fetchMetrics(lab)
		if err == nil {
			var v uint64
			var have bool
			if label == "" {
				v, have = m.scalar(name), true
			} else {
				v, have = m.get(name, label)
			}
			if have && ok(v) {
				return v
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: metric %s{%s} never as wanted (%v)\n%s", what, name, label, err, d.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// samplesIn returns the flow samples of p1 in dgs of frames numbered in
// [first, first+count).
func samplesIn(dgs []datagram, p1 uint32, first uint64, count int) []flowRec {
	var out []flowRec
	for _, f := range flowSamplesOf(dgs, p1) {
		if n, ok := frameNumber(f.header); ok && n >= first && n < first+uint64(count) {
			out = append(out, f)
		}
	}
	return out
}

// waitSettled waits until the flow samples every collector received stop
// changing (the 1 s flush, then 1 s without a new sample).
func waitSettled(t *testing.T, cols ...*collector) {
	t.Helper()
	time.Sleep(1300 * time.Millisecond)
	prev := -1
	for {
		n := 0
		for _, c := range cols {
			n += len(flowSamplesOf(c.snapshot(t), 0))
		}
		if n == prev {
			return
		}
		prev = n
		time.Sleep(testutil.Scaled(time.Second))
	}
}

// TestDNSSD runs the daemon configured by DNS-SD alone (-dns-sd, the
// search list of its resolv.conf naming example.net) against a real
// dnsmasq, and checks each outcome in the datagrams (both decoders;
// goflow2 and tshark read the same rates and pools as ours):
//   - two SRV records: both collectors receive every sampled port's
//     samples, at the TXT's sampling rate, and no counter sample while
//     the TXT says polling=0;
//   - a TXT change (new sampling, new polling) is applied within its TTL
//     (plus the query floor): the samples of frames sent afterwards carry
//     the new rate, in number 1/rate, counter samples start, and
//     datagram and sample sequence numbers continue without a gap;
//   - a removed SRV record stops that collector and not the other;
//   - NXDOMAIN stops sFlow (no sample of frames sent meanwhile), the
//     records coming back start it again;
//   - REFUSED and no answer at all keep the configuration in force;
//   - bad TXT values (sampling=abc, headerBytes=99999) are reported (log,
//     metric) and leave their settings as they were (the rate in the
//     samples; headerBytes is checked by config/dnssd's TestBadValues:
//     the test's frames are shorter than any header size).
func TestDNSSD(t *testing.T) {
	dnsmasq, err := exec.LookPath("dnsmasq")
	if err != nil {
		t.Fatalf("dnsmasq is needed for this test (Debian package dnsmasq-base; scripts/install-deps.sh test installs it): %v", err)
	}
	lab := newLab(t, 1)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	c1, c2 := listen(t, lab, collectorPort), listen(t, lab, collectorPort+1)
	dns := &dnsServer{t: t, lab: lab, bin: dnsmasq}
	t.Cleanup(dns.stop)
	srv1, srv2 := fmt.Sprintf("srv:c1:%d", collectorPort), fmt.Sprintf("srv:c2:%d", collectorPort+1)
	dns.serve(true, srv1, srv2, "txt:txtvers=1", "txt:sampling=20", "txt:polling=0")

	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte(fmt.Sprintf("nameserver %s\nsearch example.net\noptions timeout:1 attempts:1\n", lab.CollectorAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(sfdaemon.DNSSDTestIntervalsEnv, "1s,3s")
	d := startDaemon(t, lab, "-dns-sd", "-dns-sd-resolv-conf", resolv, "-dns-sd-start-delay", "0", "-ports", "p1")
	waitDNSMetric(t, lab, d, "first answer", "sflowswitchd_dnssd_collectors", "", func(v uint64) bool { return v == 2 })
	d.waitReady(t, lab, "p1")
	waitRate(t, lab, d, "p1", 20)

	// phase sends count frames from first and checks the samples each
	// collector in cols received of them: rate, number within 4 sigmas.
	phase := func(name string, first uint64, count, rate int, cols ...*collector) {
		t.Helper()
		sendNumbered(t, lab, 0, 0, first, count)
		waitSettled(t, c1, c2)
		for i, c := range cols {
			got := samplesIn(c.snapshot(t), p1, first, count)
			for _, f := range got {
				if f.rate != uint32(rate) {
					t.Fatalf("%s: collector %d: a sample has rate %d, want %d\n%s", name, i+1, f.rate, rate, d.log())
				}
			}
			mean, sd, ok := withinSigmas(len(got), count, 1/float64(rate), 4)
			t.Logf("%s: collector %d: %d samples at rate %d, expected %.0f ± %.1f", name, i+1, len(got), rate, mean, sd)
			if !ok {
				t.Errorf("%s: collector %d: %d samples of %d frames at rate %d, want %.0f ± 4×%.1f", name, i+1, len(got), count, rate, mean, sd)
			}
		}
	}
	// none checks that no collector in cols received a sample of the
	// frames of [first, first+count), sent now.
	none := func(name string, first uint64, count int, cols ...*collector) {
		t.Helper()
		sendNumbered(t, lab, 0, 0, first, count)
		waitSettled(t, c1, c2)
		for _, c := range cols {
			if got := samplesIn(c.snapshot(t), p1, first, count); len(got) != 0 {
				t.Errorf("%s: collector on port %d received %d samples of frames sent while it was off", name, c.port, len(got))
			}
		}
	}
	p1Source := sflow.DataSource{Type: sflow.SourceIfIndex, Index: p1}

	// Two collectors, both receiving; polling=0: no counter sample.
	phase("two collectors", 1, 4000, 20, c1, c2)
	for i, c := range []*collector{c1, c2} {
		if n := len(counterSamplesOf(c.snapshot(t), p1Source)); n != 0 {
			t.Errorf("collector %d: %d counter samples of p1 with polling=0", i+1, n)
		}
	}

	// A TXT change: applied within the TTL and the query floor.
	changed := time.Now()
	dns.serve(true, srv1, srv2, "txt:txtvers=1", "txt:sampling=50", "txt:polling=1")
	waitRate(t, lab, d, "p1", 50)
	took := time.Since(changed) - 1200*time.Millisecond // waitRate's worker tick
	t.Logf("TXT change applied %v after the zone changed (TTL %d s, floor 1 s)", took.Round(10*time.Millisecond), dnsTTL)
	if limit := testutil.Scaled(time.Duration(dnsTTL)*time.Second + time.Second + 2*time.Second); took > limit {
		t.Errorf("TXT change applied after %v, want within the TTL %d s and the floor (%v with slack)", took, dnsTTL, limit)
	}
	phase("after the TXT change", 4001, 10000, 50, c1, c2)
	for i, c := range []*collector{c1, c2} {
		c.waitFor(t, testutil.Scaled(5*time.Second), "counter samples of p1 with polling=1", func(dgs []datagram) bool {
			return len(counterSamplesOf(dgs, p1Source)) >= 2
		})
		dgs := c.snapshot(t)
		checkDatagramSequences(t, dgs)
		checkSampleSequences(t, dgs)
		checkIndependentDecoders(t, dgs, c.port, p1)
		var prev uint32
		for j, f := range flowSamplesOf(dgs, p1) {
			if f.pool < prev {
				t.Errorf("collector %d: flow sample %d: sample_pool ran backwards %d -> %d across the DNS-SD change", i+1, j, prev, f.pool)
			}
			prev = f.pool
		}
		var up uint32
		for j, dg := range dgs {
			if dg.our.Uptime < up {
				t.Errorf("collector %d: datagram %d: uptime ran backwards %d -> %d", i+1, j, up, dg.our.Uptime)
			}
			up = dg.our.Uptime
		}
	}

	// c2's SRV record removed: c2 stops, c1 goes on.
	dns.serve(true, srv1, "txt:sampling=50", "txt:polling=1")
	waitDNSMetric(t, lab, d, "SRV removed", "sflowswitchd_dnssd_collectors", "", func(v uint64) bool { return v == 1 })
	waitSettled(t, c1, c2)
	phase("c2 removed: c1", 20001, 4000, 50, c1)
	if got := samplesIn(c2.snapshot(t), p1, 20001, 4000); len(got) != 0 {
		t.Errorf("c2 removed: c2 received %d samples of frames sent after its SRV record went", len(got))
	}

	// NXDOMAIN: sFlow stops; the records coming back start it.
	empty := func() uint64 {
		m, _ := fetchMetrics(lab)
		v, _ := m.get("sflowswitchd_dnssd_queries_total", `outcome="empty"`)
		return v
	}
	before := empty()
	dns.serve(true)
	waitDNSMetric(t, lab, d, "NXDOMAIN", "sflowswitchd_dnssd_queries_total", `outcome="empty"`, func(v uint64) bool { return v > before })
	if !strings.Contains(d.log(), "sFlow stopped") {
		t.Errorf("the empty answer is not logged\n%s", d.log())
	}
	waitSettled(t, c1, c2)
	none("NXDOMAIN", 30001, 4000, c1, c2)
	dns.serve(true, srv1, srv2, "txt:sampling=50", "txt:polling=1")
	waitDNSMetric(t, lab, d, "records back", "sflowswitchd_dnssd_collectors", "", func(v uint64) bool { return v == 2 })
	time.Sleep(1200 * time.Millisecond) // a worker tick
	phase("records back", 40001, 5000, 50, c1, c2)

	// REFUSED (example.net no longer local, no upstream), then no
	// answer at all: the configuration stays.
	errs := func() uint64 {
		m, _ := fetchMetrics(lab)
		v, _ := m.get("sflowswitchd_dnssd_queries_total", `outcome="error"`)
		return v
	}
	before = errs()
	dns.serve(false)
	waitDNSMetric(t, lab, d, "REFUSED", "sflowswitchd_dnssd_queries_total", `outcome="error"`, func(v uint64) bool { return v > before })
	phase("REFUSED", 50001, 5000, 50, c1, c2)
	before = errs()
	dns.stop()
	waitDNSMetric(t, lab, d, "no answer", "sflowswitchd_dnssd_queries_total", `outcome="error"`, func(v uint64) bool { return v > before })
	phase("no answer", 60001, 5000, 50, c1, c2)

	// Bad values: reported, the settings as they were.
	m, _ := fetchMetrics(lab)
	badBefore, _ := m.get("sflowswitchd_dnssd_problems_total", `kind="bad_value"`)
	dns.serve(true, srv1, srv2, "txt:sampling=abc", "txt:headerBytes=99999", "txt:polling=1")
	waitDNSMetric(t, lab, d, "bad values", "sflowswitchd_dnssd_problems_total", `kind="bad_value"`, func(v uint64) bool { return v >= badBefore+2 })
	for _, s := range []string{`bad_value \"sampling=abc\"`, `bad_value \"headerBytes=99999\"`} {
		if !strings.Contains(d.log(), s) {
			t.Errorf("no log line with %s\n%s", s, d.log())
		}
	}
	phase("bad values", 70001, 5000, 50, c1, c2)
	if !d.alive() {
		t.Fatalf("daemon died\n%s", d.log())
	}
}
