package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// bpfLinks counts process pid's descriptors of BPF links (each attached
// port holds one).
func bpfLinks(pid int) int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	es, _ := os.ReadDir(dir)
	n := 0
	for _, e := range es {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && strings.Contains(l, "bpf_link") {
			n++
		}
	}
	return n
}

// TestHostileDescriptorsAtStart: started under RLIMIT_NOFILE 64 with 8
// ports, the daemon runs out of descriptors: drop notifications cannot
// be turned on (EMFILE), and ports cannot all be attached. Each failure
// is counted and retried with backoff: once descriptors are available
// again (the limit raised) every port is sampled and drop notifications
// come on, without a SIGHUP. Then, with no descriptor left again (the
// soft limit below the open count), two ports are deleted: the deletion
// is applied and their descriptors freed (the BPF links held equal the
// ports attached). Before, the EMFILE at start turned drop
// notifications off for good, with no metric; and a deletion was never
// applied while descriptors were exhausted (listing the addresses for the
// agent address failed the whole reconfiguration), so the deleted ports'
// descriptors stayed held and the ports retried for "descriptors" never
// attached.
func TestHostileDescriptorsAtStart(t *testing.T) {
	const nports = 8
	lab := newLab(t, nports)
	// The Go runtime raises the soft limit to the hard one as the
	// program starts (os package), and raising a hard limit again takes
	// CAP_SYS_RESOURCE, which the test may lack: the daemon starts with
	// soft 1024 and hard 4096, and once the runtime has raised the soft
	// limit (long before the daemon opens its BPF objects and sockets) it
	// is set to 64.
	args := append([]string{"--nofile=1024:4096", "--", daemonBin, "-metrics", metricsAddr}, hermetic(t, -1, []string{
		"-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort), "-sampling", "1", "-ports", "p*", "-polling", "0", "-drops", "on"})...)
	cmd := lab.Start(t, lab.Switch, "prlimit", args...)
	d := &daemon{cmd: cmd, out: cmd.Stdout.(fmt.Stringer)}
	pid := cmd.Process.Pid
	waitExec(t, pid, daemonBin)
	for start := time.Now(); ; time.Sleep(100 * time.Microsecond) {
		var cur unix.Rlimit
		if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &cur); err != nil {
			t.Fatal(err)
		}
		if cur.Cur != 1024 {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the daemon's soft RLIMIT_NOFILE not raised by the Go runtime within 5 s (%d/%d)", cur.Cur, cur.Max)
		}
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 64, Max: 4096}, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(d.log(), "sflowswitchd running") {
		t.Fatalf("the daemon was running before its limit was set to 64")
	}
	var m metrics
	waitUntil(t, 30*time.Second, "the daemon running with ports failing for descriptors", func() bool {
		var err error
		m, err = fetchMetrics(lab)
		return err == nil && strings.Contains(d.log(), "sflowswitchd running") && strings.Contains(strings.Join(m, "\n"), `reason="descriptors"`)
	})
	if !strings.Contains(d.log(), "drop notifications off") {
		t.Fatalf("drop notifications did not fail at start under RLIMIT_NOFILE 64: the test does not exhaust descriptors at start\n%s", tail(d.log(), 3000))
	}
	fails, ok := m.value("sflowswitchd_drop_notifications_start_failures_total")
	if !ok || fails == 0 {
		t.Errorf("drop notifications' failure at start not counted (drop_notifications_start_failures_total %d, present %v)", fails, ok)
	}
	attached := 0
	for i := 1; i <= nports; i++ {
		if samplerAttached(t, lab, fmt.Sprintf("p%d", i)) {
			attached++
		}
	}
	t.Logf("under RLIMIT_NOFILE 64: %d of %d ports attached, drop notifications failed %d times so far", attached, nports, fails)

	// Descriptors available again.
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		t.Fatal(err)
	}
	wide := unix.Rlimit{Cur: old.Max, Max: old.Max}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &wide, nil); err != nil {
		t.Fatal(err)
	}
	present := func(deleted ...string) []string {
		var out []string
		for i := 1; i <= nports; i++ {
			if p := fmt.Sprintf("p%d", i); !slices.Contains(deleted, p) {
				out = append(out, p)
			}
		}
		return out
	}
	back := time.Now()
	deadline := back.Add(70 * time.Second)
	for {
		m, err := fetchMetrics(lab)
		missing := ""
		for _, p := range present() {
			if !samplerAttached(t, lab, p) {
				missing += " " + p
			}
		}
		on, _ := m.value("sflowswitchd_drop_notifications_on")
		if err == nil && missing == "" && on == 1 {
			break
		}
		if time.Now().After(deadline) || !d.alive() {
			t.Fatalf("70 s after descriptors were back: ports not sampled:%s; drop notifications on %d\n%s", missing, on, tail(d.log(), 4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(back)
	m = mustFetchMetrics(t, lab)
	fails, _ = m.value("sflowswitchd_drop_notifications_start_failures_total")
	retrying, _ := m.value("sflowswitchd_drop_notifications_retrying")
	if retrying != 0 || strings.Contains(strings.Join(m, "\n"), "sflowswitchd_port_sampling_failed{") {
		t.Errorf("still failing after recovery: retrying %d", retrying)
	}
	t.Logf("recovered %v after the limit was raised: every port sampled, drop notifications on after %d failed attempts", took, fails)
	if took > 65*time.Second {
		t.Errorf("recovered %v after, bound 65 s (the backoff's longest wait)", took)
	}

	// No descriptor left; two ports deleted.
	// One link per port, and drop notifications' (skb:kfree_skb).
	if links := bpfLinks(pid); links != nports+1 {
		t.Fatalf("%d BPF links held for %d ports attached and drop notifications", links, nports)
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 3, Max: wide.Max}, nil); err != nil {
		t.Fatal(err)
	}
	deleted := []string{"p1", "p2"}
	lab.DelPort(t, 1)
	lab.DelPort(t, 2)
	var links int
	waitUntil(t, 30*time.Second, "the deleted ports' BPF links closed", func() bool {
		links = bpfLinks(pid)
		return links == len(present(deleted...))+1
	})
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &wide, nil); err != nil {
		t.Fatal(err)
	}
	m = mustFetchMetrics(t, lab)
	for _, p := range deleted {
		if _, ok := m.get("sflowswitchd_port_sampling_rate", `port="`+p+`"`); ok {
			t.Errorf("deleted port %s still in the metrics", p)
		}
	}
	for _, p := range present(deleted...) {
		if !samplerAttached(t, lab, p) {
			t.Errorf("%s no longer sampled", p)
		}
	}
	recordHostile(t, hostileRow{
		Case:  "start under RLIMIT_NOFILE 64 with 8 ports and drop notifications; the limit raised; then no descriptor left and 2 ports deleted",
		Bound: "drop notifications' EMFILE counted and retried; every port sampled and notifications on within the backoff (≤ 65 s), no SIGHUP; deleted ports' BPF links closed while exhausted",
		Peak:  fmt.Sprintf("%d/%d ports attached at first, %d notification attempts failed; recovered in %.1f s; %d links for %d ports and drop notifications after the deletion", attached, nports, fails, took.Seconds(), links, len(present(deleted...))),
	})
}
