package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExit stops the daemon with SIGTERM (exit status 0 expected) and with
// SIGKILL; after either, no XDP program may remain on any lab port: the
// daemon attaches with BPF links, which die with the process.
func TestExit(t *testing.T) {
	lab := newLab(t, 2)
	links := []string{"p1", "p2", "mgmt0", "br0"}
	for _, c := range []struct {
		name string
		sig  syscall.Signal
	}{{"SIGTERM", syscall.SIGTERM}, {"SIGKILL", syscall.SIGKILL}} {
		t.Run(c.name, func(t *testing.T) {
			d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
				"-sampling", "10", "-ports", "p1,p2", "-polling", "1")
			d.waitReady(t, lab, "p1", "p2")
			lab.SendFrames(t, 0, testFrames(lab, 0, 1, 1, 100))
			d.signal(t, c.sig)
			code := d.waitExit(t, 10*time.Second)
			if c.sig == syscall.SIGTERM && code != 0 {
				t.Errorf("exit status %d after SIGTERM, want 0\n%s", code, d.log())
			}
			// A killed process's BPF links are released when its files
			// are closed, which may trail the exit status slightly.
			deadline := time.Now().Add(2 * time.Second)
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
