package dataplane

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// helperEnv selects the helper role of a re-executed test binary;
// helperPortsEnv names the ports of the clsact role.
const (
	helperEnv      = "SFLOWSWITCHD_DATAPLANE_HELPER"
	helperPortsEnv = "SFLOWSWITCHD_DATAPLANE_HELPER_PORTS"
)

// TestMain runs the helper role of a re-executed test binary instead of
// the tests when helperEnv is set: TestCleanupAfterKill and
// TestCleanupClsactAfterKill start it in the switch namespace, and it
// attaches the sampler (to p1 with a BPF link or in legacy netlink mode;
// or as clsact filters) and waits to be killed.
func TestMain(m *testing.M) {
	role := os.Getenv(helperEnv)
	if role == "" {
		os.Exit(m.Run())
	}
	if err := runHelper(role); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	fmt.Println("helper: attached, waiting to be killed")
	select {}
}

func runHelper(role string) error {
	switch role {
	case "clsact":
		return clsactHelper(os.Getenv(helperPortsEnv))
	case "pin":
		return pinHelper()
	}
	d, err := Open(Config{Workers: 1, MaxPorts: 2, Hook: HookXDP})
	if err != nil {
		return err
	}
	l, err := netlink.LinkByName("p1")
	if err != nil {
		return fmt.Errorf("p1: %w", err)
	}
	switch role {
	case "link":
		return d.AttachPort(l.Attrs().Index, PortConfig{Rate: 1, HeaderBytes: 64})
	case "legacy":
		if err := netlink.LinkSetXdpFdWithFlags(l, d.objs.XdpSampler.FD(), nl.XDP_FLAGS_DRV_MODE); err != nil {
			return fmt.Errorf("legacy attach: %w", err)
		}
		return nil
	}
	return fmt.Errorf("unknown role %q", role)
}

// xdpProg returns the id of the XDP program attached to a switch port (0
// if none).
func xdpProg(t *testing.T, lab *netlab.Lab, name string) uint32 {
	t.Helper()
	x := switchLink(t, lab, name).Attrs().Xdp
	if x == nil || !x.Attached {
		return 0
	}
	return x.ProgId
}

// waitXDP polls until the attachment state of p1 is want (or timeout).
func waitXDP(t *testing.T, lab *netlab.Lab, want bool, timeout time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if (xdpProg(t, lab, "p1") != 0) == want {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logBuffer is a concurrency-safe buffer for a slog handler.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCleanupAfterKill: a process that attached with a BPF link and is
// SIGKILLed leaves nothing attached; one that attached in legacy mode
// leaves its program behind, and the next Open in that namespace removes
// it. A live link of another process is never removed.
func TestCleanupAfterKill(t *testing.T) {
	lab := netlab.New(t, 2)
	start := func(role string) *os.Process {
		t.Setenv(helperEnv, role)
		cmd := lab.Start(t, lab.Switch, os.Args[0])
		if !waitXDP(t, lab, true, 10*time.Second) {
			t.Fatalf("%s helper (pid %d) did not attach to p1", role, cmd.Process.Pid)
		}
		return cmd.Process
	}
	kill := func(p *os.Process) {
		if err := p.Kill(); err != nil {
			t.Fatalf("kill %d: %v", p.Pid, err)
		}
		if _, err := p.Wait(); err != nil {
			t.Fatalf("wait %d: %v", p.Pid, err)
		}
	}

	// 1. Link mode. While the helper lives, our Open must leave its link
	// alone; after SIGKILL the kernel has detached it.
	p := start("link")
	id := xdpProg(t, lab, "p1")
	var logs logBuffer
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if got := xdpProg(t, lab, "p1"); got != id {
		t.Fatalf("Open removed a live link's program (prog %d -> %d); log:\n%s", id, got, logs.String())
	}
	if !strings.Contains(logs.String(), "owned by a live BPF link left alone") {
		t.Errorf("Open did not report the live link; log:\n%s", logs.String())
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	kill(p)
	if !waitXDP(t, lab, false, 5*time.Second) {
		t.Fatalf("XDP program %d still attached to p1 after the link owner was SIGKILLed:\n%s", xdpProg(t, lab, "p1"), bpftoolNet(t, lab))
	}

	// 2. Legacy mode: survives the kill, removed by the next Open.
	p = start("legacy")
	kill(p)
	time.Sleep(200 * time.Millisecond)
	stale := xdpProg(t, lab, "p1")
	if stale == 0 {
		t.Fatalf("legacy attachment vanished with its process; the cleanup test is void")
	}
	var logs2 logBuffer
	openIn(t, lab, Config{Workers: 1, MaxPorts: 2, Logger: slog.New(slog.NewTextHandler(&logs2, nil))})
	t.Logf("Open log:\n%s", logs2.String())
	if got := xdpProg(t, lab, "p1"); got != 0 {
		t.Errorf("stale legacy program %d still attached after Open (now %d):\n%s", stale, got, bpftoolNet(t, lab))
	}
	if !strings.Contains(logs2.String(), "removed stale legacy XDP program") || !strings.Contains(logs2.String(), "stale_removed=1") {
		t.Errorf("Open did not log the removal")
	}
}
