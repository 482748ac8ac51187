package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pinfs"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// zombieChildren returns the children of process pid that are zombies
// (exited, never waited for), with their command lines.
func zombieChildren(pid int) []string {
	var out []string
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, c := range strings.Fields(string(b)) {
			st, err := os.ReadFile("/proc/" + c + "/stat")
			if err != nil {
				continue
			}
			s := string(st)
			if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 && s[i+2] == 'Z' {
				out = append(out, c+" "+s[:i+1])
			}
		}
	}
	return out
}

// TestHostileSignalsAtUpgrade: signals that arrive while the daemon
// upgrades in place (SIGUSR2: check, stop, exec, start) never kill it,
// and leave no zombie: a SIGUSR2 every millisecond (upgrade after
// upgrade, signals landing in every exec), then a SIGHUP every 2 ms with
// a SIGUSR2 each second. The daemon keeps its PID, completes upgrades,
// has no zombie child at the end, and samples. Before, a signal during
// the exec took its default action (exit 140 for SIGUSR2, 129 for
// SIGHUP), and each SIGUSR2 during an upgrade left a zombie
// -upgrade-check process.
func TestHostileSignalsAtUpgrade(t *testing.T) {
	storm := time.Duration(sized(3, 30)) * time.Second
	lab := newLab(t, 1)
	col := listenCounting(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort), "-ports", "p1",
		"-sampling", "1", "-polling", "0", "-pin-dir", pinfs.Dir(t), "-state-dir", t.TempDir())
	d.waitReady(t, lab, "p1")
	pid := d.cmd.Process.Pid
	// alive is d.alive over 300 ms: while a multi-threaded process execs
	// from a thread other than its leader, the leader's /proc entry reads
	// as a zombie for a moment (the kernel's de_thread), which the storm
	// of upgrades makes likely to be seen.
	alive := func() bool {
		for i := 0; i < 6; i++ {
			if d.alive() {
				return true
			}
			time.Sleep(50 * time.Millisecond)
		}
		return false
	}
	phases := []struct {
		name       string
		every      time.Duration
		sig        syscall.Signal
		usr2Period time.Duration // an extra SIGUSR2 this often (0: none)
	}{
		{"SIGUSR2 every 1 ms", time.Millisecond, syscall.SIGUSR2, 0},
		{"SIGHUP every 2 ms, SIGUSR2 each second", 2 * time.Millisecond, syscall.SIGHUP, time.Second},
	}
	var report []string
	for _, ph := range phases {
		before := strings.Count(d.log(), "upgrade in place completed")
		beforeLines := len(strings.Split(d.log(), "\n")) - 1
		var sent atomic.Int64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			tick := time.NewTicker(ph.every)
			defer tick.Stop()
			last := time.Now()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if syscall.Kill(pid, ph.sig) != nil {
					return
				}
				sent.Add(1)
				if ph.usr2Period > 0 && time.Since(last) >= ph.usr2Period {
					last = time.Now()
					if syscall.Kill(pid, syscall.SIGUSR2) != nil {
						return
					}
				}
			}
		}()
		deadline := time.Now().Add(storm)
		for time.Now().Before(deadline) && alive() {
			time.Sleep(50 * time.Millisecond)
		}
		close(stop)
		<-done
		if !alive() {
			code := d.waitExit(t, 5*time.Second)
			t.Fatalf("%s: the daemon died (exit %d, %v) after %d signals\n%s", ph.name, code, d.cmd.ProcessState, sent.Load(), tail(d.log(), 3000))
		}
		// The last upgrade completes; then every check has been waited
		// for.
		time.Sleep(3 * time.Second)
		waitUntil(t, 30*time.Second, "the last upgrade completed", func() bool {
			return upgradeSettled(d.log())
		})
		upgrades := strings.Count(d.log(), "upgrade in place completed") - before
		// The new program's start is not held up by the storm (each
		// signal used to stop the verifier, which started over: 15 s).
		var slowest time.Duration
		for _, line := range strings.Split(d.log(), "\n")[beforeLines:] {
			if _, v, ok := strings.Cut(line, "stopped_to_running_ms="); ok {
				var ms int
				fmt.Sscanf(v, "%d", &ms)
				slowest = max(slowest, time.Duration(ms)*time.Millisecond)
			}
		}
		if bound := testutil.Scaled(10 * time.Second); slowest > bound {
			t.Errorf("%s: an upgrade took %v from stop to running, bound %v", ph.name, slowest, bound)
		}
		zombies := zombieChildren(pid)
		if len(zombies) > 0 {
			t.Errorf("%s: %d zombie children: %v", ph.name, len(zombies), zombies)
		}
		if upgrades < 1 {
			t.Errorf("%s: no upgrade completed\n%s", ph.name, tail(d.log(), 3000))
		}
		if d.cmd.Process.Pid != pid || !alive() {
			t.Fatalf("%s: the daemon is gone", ph.name)
		}
		d.waitReady(t, lab, "p1")
		samplesFlow(t, lab, col, "after "+ph.name)
		t.Logf("%s for %v: %d signals, %d upgrades completed (slowest %v from stop to running), %d zombies; alive, sampling", ph.name, storm, sent.Load(), upgrades, slowest, len(zombies))
		report = append(report, fmt.Sprintf("%s: %d signals, %d upgrades (slowest %.1f s), %d zombies", ph.name, sent.Load(), upgrades, slowest.Seconds(), len(zombies)))
	}
	if n := strings.Count(d.log(), "upgrade in place: the new program failed"); n > 0 {
		t.Errorf("%d upgrades rolled back", n)
	}
	recordHostile(t, hostileRow{
		Case:  fmt.Sprintf("signals during upgrades in place, %v each: a SIGUSR2 every 1 ms; a SIGHUP every 2 ms and a SIGUSR2 each second", storm),
		Bound: "never killed (same PID), upgrades complete, each within 10 s from stop to running, no zombie child, sampling after",
		Peak:  strings.Join(report, "; "),
	})
}

// upgradeSettled reports whether no upgrade is between its exec and its
// completion: the last "exec" line is followed by a "completed" one.
func upgradeSettled(log string) bool {
	return strings.LastIndex(log, "upgrade in place: exec") < strings.LastIndex(log, "upgrade in place completed") ||
		!strings.Contains(log, "upgrade in place: exec")
}
