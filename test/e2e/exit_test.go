package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// TestExit stops the daemon with SIGTERM (exit status 0 expected) and with
// SIGKILL; after either, no sampler may remain on any lab port: the daemon
// attaches with BPF links (XDP, TCX), which die with the process. On a
// kernel without TCX the veth ports' TC sampler is a clsact filter
// instead, which a SIGKILL leaves behind: then the next daemon must remove
// it at start, and leave nothing after a SIGTERM.
func TestExit(t *testing.T) {
	lab := newLab(t, 2)
	links := []string{"p1", "p2", "mgmt0", "br0"}
	for _, c := range []struct {
		name string
		sig  syscall.Signal
	}{{"SIGTERM", syscall.SIGTERM}, {"SIGKILL", syscall.SIGKILL}} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
				"-sampling", "10", "-ports", "p1,p2", "-polling", "1"}
			d := startDaemon(t, lab, args...)
			d.waitReady(t, lab, "p1", "p2")
			stale := 0 // clsact filters a SIGKILL leaves
			for _, l := range []string{"p1", "p2"} {
				m := samplerAttachment(t, lab, l)
				t.Logf("%s: attached %s", l, m)
				if m == dataplane.AttachClsact && c.sig == syscall.SIGKILL {
					stale++
				}
			}
			lab.SendFrames(t, 0, testFrames(lab, 0, 1, 1, 100))
			d.signal(t, c.sig)
			code := d.waitExit(t, 10*time.Second)
			if c.sig == syscall.SIGTERM && code != 0 {
				t.Errorf("exit status %d after SIGTERM, want 0\n%s", code, d.log())
			}
			if stale > 0 {
				// The filters stay with their owner dead; a new daemon
				// removes them at start, attaches its own, and removes
				// those at exit.
				time.Sleep(200 * time.Millisecond)
				for _, l := range []string{"p1", "p2"} {
					if m := samplerAttachment(t, lab, l); m != dataplane.AttachClsact {
						t.Errorf("%s: %q after SIGKILL, want the stale clsact filter still there", l, m)
					}
				}
				d2 := startDaemon(t, lab, args...)
				d2.waitReady(t, lab, "p1", "p2")
				if want := fmt.Sprintf("stale_removed=%d", stale); !strings.Contains(d2.log(), "removed stale TC filter") || !strings.Contains(d2.log(), want) {
					t.Errorf("the next daemon did not remove the stale filters (want %q):\n%s", want, d2.log())
				}
				d2.signal(t, syscall.SIGTERM)
				if code := d2.waitExit(t, 10*time.Second); code != 0 {
					t.Errorf("second daemon: exit status %d after SIGTERM\n%s", code, d2.log())
				}
			}
			// A killed process's BPF links are released when its files
			// are closed, which may trail the exit status slightly.
			deadline := time.Now().Add(testutil.Scaled(2 * time.Second))
			for _, l := range links {
				for samplerAttached(t, lab, l) {
					if time.Now().After(deadline) {
						t.Errorf("sampler still attached to %s after %s", l, c.name)
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			// bpftool as a second opinion: its "xdp:" section must be empty.
			if _, err := exec.LookPath("bpftool"); err == nil {
				out, err := lab.Run(lab.Switch, "bpftool", "net", "show")
				if err != nil {
					t.Fatalf("bpftool net show: %v\n%s", err, out)
				}
				if xdp := bpftoolXDP(string(out)); xdp != "" {
					t.Errorf("bpftool net show lists XDP programs after %s:\n%s", c.name, xdp)
				}
			}
		})
	}
}

// bpftoolXDP returns the non-empty lines of the "xdp:" section of
// `bpftool net show` output.
func bpftoolXDP(out string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " "):
			in = line == "xdp:"
		case in && strings.TrimSpace(line) != "":
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
