package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// appAPISocket opens a UDP socket in the switch namespace connected to
// the daemon's application API.
func appAPISocket(t *testing.T, lab *netlab.Lab) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := lab.Do(lab.Switch, func() error {
		var err error
		c, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:36343")))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// procWchar is the bytes process pid wrote (/proc/PID/io wchar).
func procWchar(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	t.Fatal("no wchar in /proc/PID/io")
	return 0
}

// TestHostileAppStateFile: a local process creating
// application names (32 bytes of '<' and digits, no service port) as
// fast as the engine takes them (256 data sources; a new one when one
// has been idle 10 s) makes the state file grow by their entries only,
// written at most once a second (the daemon's bytes written stay within
// one file per second), and the next start reads every name back. Before,
// each new name rewrote and fsynced the whole file, '<' was stored as
// \u003c (183 bytes per name), and past 4 MiB the next start reported the
// file damaged and lost every index. The cap of 8192 names (and the file
// of 11,192 costliest names) is shown in apps/app's TestStateFileBounded.
func TestHostileAppStateFile(t *testing.T) {
	lab := newLab(t, 1)
	state, err := os.MkdirTemp("", "sflowswitchd-state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	args := []string{"-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort), "-ports", "p1", "-polling", "0",
		"-app-api", "127.0.0.1:36343", "-state-dir", state}
	d := startDaemon(t, lab, args...)
	d.waitReady(t, lab, "p1")
	pid := d.cmd.Process.Pid
	api := appAPISocket(t, lab)
	cycles := sized(2, 7) // 256 new names per cycle of 10.5 s (the engine's ReclaimIdle)
	w0, cpu0, start := procWchar(t, pid), cpuTime(t, pid), time.Now()
	sent := 0
	for c := 0; c < cycles; c++ {
		if c > 0 {
			time.Sleep(10500 * time.Millisecond)
		}
		for i := 0; i < 256; i++ {
			name := fmt.Sprintf("%s%08d", strings.Repeat("<", 24), sent)
			msg := fmt.Sprintf(`{"flow_sample":{"app_name":%q,"app_operation":{"operation":"x"}}}`, name)
			if _, err := api.Write([]byte(msg)); err != nil {
				t.Fatal(err)
			}
			sent++
			if i%32 == 31 {
				time.Sleep(2 * time.Millisecond) // within the socket's buffer
			}
		}
	}
	time.Sleep(2500 * time.Millisecond) // the last names flushed to the file
	took := time.Since(start)
	wrote, cpu := procWchar(t, pid)-w0, cpuTime(t, pid)-cpu0
	path := filepath.Join(state, "apps.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Applications map[string]uint32 `json:"applications"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("state file: %v", err)
	}
	n := len(st.Applications)
	perName := float64(len(b)) / float64(max(n, 1))
	bound := uint64(took/time.Second+3) * uint64(len(b))
	t.Logf("%d names sent in %v: %d in the file (%d bytes, %.0f per name); the daemon wrote %d bytes (bound %d), CPU %v",
		sent, took, n, len(b), perName, wrote, bound, cpu)
	if n < sent/2 {
		t.Errorf("only %d of %d names in the state file", n, sent)
	}
	if strings.Contains(string(b), `\u003c`) {
		t.Errorf("'<' escaped in the state file")
	}
	if wrote > bound {
		t.Errorf("the daemon wrote %d bytes for %d names in %v, bound %d (the file, %d bytes, once a second)", wrote, n, took, bound, len(b))
	}
	// The next start reads it all back.
	d.signal(t, syscall.SIGTERM)
	if code := d.waitExit(t, 10*time.Second); code != 0 {
		t.Errorf("exit %d", code)
	}
	d2 := startDaemon(t, lab, args...)
	d2.waitLog(t, 10*time.Second, "application data source indexes loaded")
	if strings.Contains(d2.log(), "damaged") || !strings.Contains(d2.log(), fmt.Sprintf("applications=%d", n)) {
		t.Errorf("restart did not read the %d names back:\n%s", n, tail(d2.log(), 2000))
	}
	recordHostile(t, hostileRow{
		Case:  fmt.Sprintf("application API: %d new app_names of 32 bytes ('<'), restart", sent),
		Bound: "at most 8192 names (≤ 1.7 MB, read back); written at most once a second (bytes written ≤ file × seconds); read back whole",
		Peak:  fmt.Sprintf("%d names, %d B (%.0f B/name); %d B written in %.0f s; CPU %.2f s", n, len(b), perName, wrote, took.Seconds(), cpu.Seconds()),
	})
}

// TestHostileAppAPIGarbage (already held; kept as a bound): random
// datagrams of every size up to the UDP maximum and broken JSON to the
// application API are refused and counted, at most a log line a second
// per reason, with flat memory, and sampling goes on.
func TestHostileAppAPIGarbage(t *testing.T) {
	lab := newLab(t, 1)
	col := listenCounting(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort), "-ports", "p1", "-polling", "0",
		"-sampling", "10", "-app-api", "127.0.0.1:36343")
	d.waitReady(t, lab, "p1")
	pid := d.cmd.Process.Pid
	hwm0, lines0 := usage(t, pid).HWM, d.logLines()
	api := appAPISocket(t, lab)
	rng := rand.New(rand.NewPCG(25, 25))
	n := sized(5000, 50000)
	broken := []string{`{`, `{"flow_sample":`, `{"flow_sample":{"app_name":"` + strings.Repeat("x", 60000) + `"}}`, `[1,2,3]`, `null`,
		`{"counter_sample":{"app_name":"a","app_resources":{"user_time":-1}}}`, `{"flow_sample":{"app_name":"a","sampling_rate":0}}`}
	start := time.Now()
	for i := 0; i < n; i++ {
		var msg []byte
		if i%2 == 0 {
			msg = make([]byte, rng.IntN(2000))
			if i%100 == 0 {
				msg = make([]byte, 65000)
			}
			for j := range msg {
				msg[j] = byte(rng.Uint32())
			}
		} else {
			msg = []byte(broken[rng.IntN(len(broken))])
		}
		api.Write(msg)
		if i%64 == 63 {
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	took := time.Since(start)
	hwm, lines := usage(t, pid).HWM, d.logLines()-lines0
	m := mustFetchMetrics(t, lab)
	rejected := m.sum("sflowswitchd_app_samples_rejected_total")
	drops, _ := m.value("sflowswitchd_app_api_socket_drops_total")
	reasons := len(m.rejectedByReason())
	bound := (int(took/time.Second) + 1) * reasons
	t.Logf("%d garbage datagrams in %v: %d rejected, %d dropped by the kernel; %d log lines (bound %d, %d reasons); peak RSS %s → %s",
		n, took, rejected, drops, lines, bound, reasons, mib(hwm0), mib(hwm))
	if rejected+drops != uint64(n) {
		t.Errorf("%d sent, %d rejected + %d dropped by the kernel: not all counted", n, rejected, drops)
	}
	if lines > bound {
		t.Errorf("%d log lines, bound %d", lines, bound)
	}
	if hwm > hwm0+16<<20 {
		t.Errorf("peak RSS %s → %s, bound +16 MiB", mib(hwm0), mib(hwm))
	}
	samplesFlow(t, lab, col, "after the garbage")
	recordHostile(t, hostileRow{
		Case:  fmt.Sprintf("application API: %d datagrams of random bytes (up to 65000) and broken JSON", n),
		Bound: "every one counted (rejected or socket drops); ≤ 1 log line a second per reason; RSS +16 MiB; sampling goes on",
		Peak:  fmt.Sprintf("%d rejected + %d dropped; %d lines in %.1f s; RSS %s → %s", rejected, drops, lines, took.Seconds(), mib(hwm0), mib(hwm)),
	})
}
