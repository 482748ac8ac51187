package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHostilePortName: a port whose name is not
// valid UTF-8 (ip link add $'p\xff\xfe') costs only itself: in every one
// of 10 scrapes every sampled port's series is present, the bad name
// with its invalid bytes replaced, nothing panics, and sampling goes on.
// Before, the port collector panicked in MustNewConstMetric, each scrape
// logged a 3 KB stack trace, and 4, 1, 1 and 0 of 10 ports' series were
// left in four scrapes.
func TestHostilePortName(t *testing.T) {
	const bad = "p\xff\xfe"
	lab := newLab(t, 3)
	col := listenCounting(t, lab, collectorPort)
	// Both ends of the veth in the switch namespace (hhos0 is not
	// selected by p*).
	if out, err := lab.Run(lab.Switch, "ip", "link", "add", bad, "type", "veth", "peer", "name", "hhos0"); err != nil {
		t.Fatalf("ip link add: %v\n%s", err, out)
	}
	for _, l := range []string{bad, "hhos0"} {
		if out, err := lab.Run(lab.Switch, "ip", "link", "set", l, "up"); err != nil {
			t.Fatalf("ip link set up: %v\n%s", err, out)
		}
	}
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "10", "-ports", "p*", "-polling", "1")
	d.waitReady(t, lab, "p1", "p2", "p3")
	lines0 := d.logLines()
	want := []string{`port="p1"`, `port="p2"`, `port="p3"`, "port=\"p\uFFFD\uFFFD\""}
	complete := 0
	for i := 0; i < 10; i++ {
		m := mustFetchMetrics(t, lab)
		n := 0
		for _, w := range want {
			if _, ok := m.get("sflowswitchd_port_sampling_rate", w); ok {
				n++
			} else {
				t.Errorf("scrape %d lacks the sampling rate of %s", i, w)
			}
		}
		if n == len(want) {
			complete++
		}
		time.Sleep(100 * time.Millisecond)
	}
	samplesFlow(t, lab, col, "beside a port named p\\xff\\xfe")
	logged := d.logLines() - lines0
	if strings.Contains(d.log(), "panic") || strings.Contains(d.log(), "goroutine ") {
		t.Errorf("a panic logged:\n%s", tail(d.log(), 3000))
	}
	if logged > 5 {
		t.Errorf("%d log lines during 10 scrapes, want at most 5:\n%s", logged, tail(d.log(), 3000))
	}
	recordHostile(t, hostileRow{
		Case:  "port named p\\xff\\xfe (not UTF-8) beside 3 ports, 10 scrapes",
		Bound: "every port's series in every scrape, no panic, ≤ 5 log lines, sampling goes on",
		Peak:  fmt.Sprintf("%d/10 scrapes complete, %d log lines", complete, logged),
	})
}

// TestHostileDescriptorsExhausted (what follows bounded connections, and the
// transient refusals): while the daemon has no descriptor left, a new
// port cannot be listed or attached; the failure is logged once and
// counted, retried with backoff, and the port is sampled within seconds
// of descriptors being available again, without a SIGHUP. Before, "listing
// links: too many open files" refused the new port and, 80 s after the
// descriptors were freed, it was still not sampled, with no metric and
// no log line naming it.
func TestHostileDescriptorsExhausted(t *testing.T) {
	lab := newLab(t, 1)
	col := listenCounting(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "1", "-ports", "p*", "-polling", "0")
	d.waitReady(t, lab, "p1")
	pid := d.cmd.Process.Pid
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		t.Fatal(err)
	}
	// No descriptor left: a soft limit below every descriptor open (the
	// kernel then refuses any new one with EMFILE; the open ones stay).
	tight := unix.Rlimit{Cur: 3, Max: old.Max}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &tight, nil); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &old, nil); err != nil {
				t.Errorf("restoring the daemon's descriptor limit: %v", err)
			}
		}
	}
	defer restore()
	lines0 := d.logLines()
	n := lab.AddPort(t)
	port := fmt.Sprintf("p%d", n)
	time.Sleep(3 * time.Second) // the daemon tries, fails, retries
	if samplerAttached(t, lab, port) {
		t.Fatalf("%s sampled without a descriptor to spare: the test does not exhaust them", port)
	}
	logged := d.logLines() - lines0
	restore()
	back := time.Now()
	deadline := back.Add(70 * time.Second)
	for !samplerAttached(t, lab, port) {
		if time.Now().After(deadline) || !d.alive() {
			t.Fatalf("%s not sampled 70 s after descriptors were available again:\n%s", port, tail(d.log(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(back)
	if !strings.Contains(d.log(), "too many open files") {
		t.Errorf("the failure's cause (EMFILE) not logged:\n%s", tail(d.log(), 3000))
	}
	m := mustFetchMetrics(t, lab)
	failures, _ := m.value("sflowswitchd_reconfigure_failures_total")
	t.Logf("sampled %v after descriptors were back; %d log lines while exhausted; %d reconfigure failures counted", took, logged, failures)
	if failures == 0 && !strings.Contains(d.log(), "reason=descriptors") {
		t.Errorf("the failure is neither counted (reconfigure_failures_total) nor classified (port_sampling_failed reason=descriptors):\n%s", tail(d.log(), 3000))
	}
	if took > 65*time.Second {
		t.Errorf("sampled %v after, bound 65 s (the backoff's longest wait)", took)
	}
	if logged > 10 {
		t.Errorf("%d log lines in 3 s of exhaustion, bound 10:\n%s", logged, tail(d.log(), 3000))
	}
	samplesFlow(t, lab, col, "after the exhaustion")
	recordHostile(t, hostileRow{
		Case:  "no descriptor left (RLIMIT_NOFILE at the open count) while a port is added, then freed",
		Bound: "logged once per streak and counted; the port sampled within the backoff (≤ 65 s) after, no SIGHUP",
		Peak:  fmt.Sprintf("sampled %.1f s after; %d log lines; %d failures counted", took.Seconds(), logged, failures),
	})
}
