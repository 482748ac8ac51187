package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// startNotified starts the daemon with NOTIFY_SOCKET set to a datagram
// socket of the test (through env(1), which execs: the PID is the
// daemon's) and returns the states it sends there.
func startNotified(t *testing.T, lab *netlab.Lab, args ...string) (*daemon, <-chan string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	states := make(chan string, 16)
	go func() {
		buf := make([]byte, 512)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			states <- string(buf[:n])
		}
	}()
	args = append([]string{"NOTIFY_SOCKET=" + sock, daemonBin, "-metrics", metricsAddr}, hermetic(t, -1, args)...)
	cmd := lab.Start(t, lab.Switch, "env", args...)
	return &daemon{cmd: cmd, out: cmd.Stdout.(fmt.Stringer)}, states
}

// TestHostileSignalsAtStart: a SIGHUP sent while
// the daemon starts never kills it: it waits and is applied once start-up
// completed (the rate the file was changed to is in force); the daemon
// tells systemd READY=1 only then. Before, a SIGHUP in the first ~60 ms
// killed it (exit 129, no log line). The offsets are from the exec of
// the daemon's binary (/proc/PID/exe), from 5 ms: the daemon catches
// signals from about 1 ms after its exec (the Go runtime's start and
// the first package initializations, GODEBUG=inittrace=1), before which
// no Go program can (docs/reference/bounds.md, Signals). That millisecond is CPU time:
// on a loaded machine the daemon may not have had it 30 ms after its
// exec (a run at load 17 saw a SIGHUP 30 ms after the exec kill it, most
// likely before that initialization; another had 3 ms of CPU 13 ms after
// the exec), so the signal also waits until the daemon's main thread has
// run for minInitCPU since the exec (schedstat), and the CPU time it had
// is logged with it.
func TestHostileSignalsAtStart(t *testing.T) {
	// minInitCPU is three times the CPU time the daemon takes to reach
	// internal/earlysignal's initialization (0.8-1.0 ms on this machine),
	// at least: three times what its binary takes, here, to start and
	// print its usage (-h), which includes that initialization. Under
	// emulation (the VMs' TCG) that is tens of milliseconds: a SIGHUP
	// 46 ms of CPU after the exec killed the daemon in the 6.1 VM.
	minInitCPU := max(3*time.Millisecond, 3*usageCPU(t))
	t.Logf("a signal waits until the daemon had %v of CPU", minInitCPU)
	offsets := []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond, 60 * time.Millisecond}
	if hostileFull() {
		offsets = []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond,
			40 * time.Millisecond, 60 * time.Millisecond, 80 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond, 200 * time.Millisecond}
	}
	lab := newLab(t, 1)
	conf := filepath.Join(t.TempDir(), "sflowswitchd.conf")
	write := func(rate int) {
		t.Helper()
		body := fmt.Sprintf("sampling = %d\nports = [\"p1\"]\npolling = 0\n[[collector]]\naddress = \"%s:%d\"\n", rate, lab.CollectorAddr, collectorPort)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var worstReady time.Duration
	survived := 0
	for _, off := range offsets {
		write(100)
		d, states := startNotified(t, lab, "-config", conf)
		pid := d.cmd.Process.Pid
		start := waitExec(t, pid, daemonBin)
		cpu0 := onCPU(pid) // nsenter's and env's, before the exec
		time.Sleep(off - time.Since(start))
		for onCPU(pid)-cpu0 < minInitCPU && time.Since(start) < 5*time.Second {
			time.Sleep(100 * time.Microsecond)
		}
		write(50)
		sent, cpu := time.Since(start), onCPU(pid)-cpu0
		d.signal(t, syscall.SIGHUP)
		var ready time.Duration
		select {
		case st := <-states:
			ready = time.Since(start)
			if st != "READY=1" {
				t.Errorf("offset %v: first state %q, want READY=1", off, st)
			}
		case <-time.After(10 * time.Second):
			if !d.alive() {
				d.waitExit(t, 5*time.Second)
				t.Fatalf("SIGHUP %v after the start (%v on CPU) killed the daemon (%v), no READY=1\n%s", sent, cpu, d.cmd.ProcessState, tail(d.log(), 2000))
			}
			t.Fatalf("SIGHUP %v after the start: no READY=1 within 10 s\n%s", sent, tail(d.log(), 2000))
		}
		worstReady = max(worstReady, ready)
		// READY=1 follows the start-up's last log line (which reaches
		// the test through a pipe, so it may arrive a moment later).
		d.waitLog(t, 2*time.Second, "sflowswitchd running")
		d.waitLog(t, 5*time.Second, "configuration reloaded")
		if i, j := strings.Index(d.log(), "sflowswitchd running"), strings.Index(d.log(), "configuration reloaded"); i < 0 || j < i {
			t.Errorf("offset %v: the reload was applied before the start-up completed:\n%s", off, tail(d.log(), 2000))
		}
		waitMetric(t, d, "p1 at the reloaded rate 50", func() (metrics, error) { return fetchMetrics(lab) }, func(m metrics) bool {
			v, ok := m.get("sflowswitchd_port_sampling_rate", `port="p1"`)
			return ok && v == 50
		})
		survived++
		d.signal(t, syscall.SIGTERM)
		if code := d.waitExit(t, 10*time.Second); code != 0 {
			t.Errorf("offset %v: exit %d after SIGTERM, want 0", off, code)
		}
		t.Logf("SIGHUP %v after the start (%v on CPU): survived, READY=1 at %v, reload applied", sent, cpu, ready)
	}
	recordHostile(t, hostileRow{
		Case:  fmt.Sprintf("SIGHUP %d ms to %d ms after the start (%d starts)", offsets[0]/time.Millisecond, offsets[len(offsets)-1]/time.Millisecond, len(offsets)),
		Bound: "never killed; the reload applied once start-up completed; READY=1 after it",
		Peak:  fmt.Sprintf("%d/%d survived and reloaded; READY=1 at most %.0f ms after the start", survived, len(offsets), worstReady.Seconds()*1000),
	})
}

// waitExec waits until process pid runs the binary bin (nsenter and env
// exec on their way to it) and returns when it saw it.
func waitExec(t *testing.T, pid int, bin string) time.Time {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == bin {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d does not run %s within 5 s", pid, bin)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// onCPU is the time the main thread of process pid has run on a CPU
// (/proc/PID/schedstat, first field: nanoseconds). The Go runtime's start
// and the package initializations run there.
func onCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			return time.Duration(ns)
		}
	}
	return 0
}

// usageCPU is the most CPU time (user + system) the daemon's binary took,
// in three runs, to start and print its usage (-h).
func usageCPU(t *testing.T) time.Duration {
	t.Helper()
	var most time.Duration
	for i := 0; i < 3; i++ {
		cmd := exec.Command(daemonBin, "-h")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s -h: %v\n%s", daemonBin, err, out)
		}
		most = max(most, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
	}
	return most
}
