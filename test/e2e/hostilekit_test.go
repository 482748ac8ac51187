package e2e

// Helpers of the hostile suite (hostile_*_test.go): inputs an
// attacker with local access, or a broken configuration tool, can give
// the daemon, each tried against the real binary with its bound as an
// assertion. `make test` runs the short form; `make hostile`
// (HOSTILE_FULL=1) the full sizes that once broke the daemon, and
// writes the table of test/e2e/README.md (HOSTILE_REPORT).

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// hostileFull reports whether the suite runs at full size (make hostile).
func hostileFull() bool { return os.Getenv("HOSTILE_FULL") == "1" }

// sized returns short in make test, full under make hostile.
func sized(short, full int) int {
	if hostileFull() {
		return full
	}
	return short
}

// hostileRow is one case of the suite: a row of the table in
// docs/reference/bounds.md.
type hostileRow struct {
	Case  string // the input path and what was sent
	Bound string // the assertion
	Peak  string // what was measured
}

var hostileReportMu sync.Mutex

// recordHostile logs r and appends it to HOSTILE_REPORT (make hostile
// writes the header), as a Markdown table row.
func recordHostile(t *testing.T, r hostileRow) {
	t.Helper()
	row := fmt.Sprintf("| %s | %s | %s |\n", r.Case, r.Bound, r.Peak)
	t.Logf("hostile report: %s", strings.TrimSpace(row))
	name := os.Getenv("HOSTILE_REPORT")
	if name == "" {
		return
	}
	hostileReportMu.Lock()
	defer hostileReportMu.Unlock()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("hostile report: %v", err)
	}
	if _, err := f.WriteString(row); err != nil {
		f.Close()
		t.Fatalf("hostile report: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("hostile report: %v", err)
	}
}

// mib formats bytes as MiB.
func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// peakWatch samples a process's open descriptors and threads every 20 ms
// until stopped (its peak RSS is VmHWM, kept by the kernel).
type peakWatch struct {
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	fds     int
	threads int
}

func watchPeaks(t *testing.T, pid int) *peakWatch {
	t.Helper()
	w := &peakWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			fds, threads, ok := fdsThreads(pid)
			if ok {
				w.mu.Lock()
				w.fds, w.threads = max(w.fds, fds), max(w.threads, threads)
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { w.end() })
	return w
}

// end stops the sampling and returns the peaks.
func (w *peakWatch) end() (fds, threads int) {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fds, w.threads
}

// fdsThreads counts a process's open descriptors and threads.
func fdsThreads(pid int) (int, int, bool) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, false
	}
	threads := 0
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			threads, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return len(ents), threads, true
}

// cpuTime is a process's user + system CPU time (/proc/PID/stat).
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("stat: %v", err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// refusal is how a daemon that refused to start ended.
type refusal struct {
	code    int
	took    time.Duration // from the exec of the daemon's binary to its exit
	maxRSS  uint64        // peak RSS (VmHWM, read until the exit)
	out     string
	longest int // the longest output line, bytes
}

// runRefused runs the daemon with args in the lab's switch namespace and
// waits (at most timeout) for it to exit, as a daemon refusing its
// settings does. Its peak RSS is its VmHWM, read every 200 µs until it
// exits (getrusage's ru_maxrss would not do: it keeps the high-water
// mark of the image before each exec, here the test's own, as Go starts
// a child with vfork).
func runRefused(t *testing.T, lab *netlab.Lab, timeout time.Duration, args ...string) refusal {
	t.Helper()
	cmd := lab.Start(t, lab.Switch, daemonBin, hermetic(t, -1, args)...)
	pid := cmd.Process.Pid
	start := waitExec(t, pid, daemonBin)
	var r refusal
	status := fmt.Sprintf("/proc/%d/status", pid)
	deadline := start.Add(timeout)
	for {
		hwm, ok := vmHWM(status)
		if !ok {
			break // exited (a zombie has no memory left to report)
		}
		r.maxRSS = max(r.maxRSS, hwm)
		if time.Now().After(deadline) {
			t.Fatalf("daemon %q still running after %v (peak RSS %s)", args, timeout, mib(r.maxRSS))
		}
		time.Sleep(200 * time.Microsecond)
	}
	r.took = time.Since(start)
	if err := cmd.Wait(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("waiting for the daemon: %v", err)
		}
	}
	r.code, r.out = cmd.ProcessState.ExitCode(), cmd.Stdout.(fmt.Stringer).String()
	for _, l := range strings.Split(r.out, "\n") {
		r.longest = max(r.longest, len(l))
	}
	return r
}

// vmHWM reads the VmHWM of a /proc/PID/status file; false when the
// process is gone or has no memory (exited).
func vmHWM(status string) (uint64, bool) {
	b, err := os.ReadFile(status)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// waitLog waits until the daemon's log contains want.
func (d *daemon) waitLog(t *testing.T, timeout time.Duration, want string) {
	t.Helper()
	// Bounds scaled under emulation. A process that seems gone must stay
	// gone a while before the wait gives up: while it execs (an upgrade
	// in place, from any of its threads), its thread group leader shows
	// as a zombie until the exec completes, for 26 ms and more under TCG.
	timeout = testutil.Scaled(timeout)
	deadline := time.Now().Add(timeout)
	var goneSince time.Time
	for !strings.Contains(d.log(), want) {
		alive := d.alive()
		switch {
		case alive:
			goneSince = time.Time{}
		case goneSince.IsZero():
			goneSince = time.Now()
		}
		gone := !alive && time.Since(goneSince) > testutil.Scaled(time.Second)
		if time.Now().After(deadline) || gone {
			t.Fatalf("no %q in the daemon's log within %v (alive %v):\n%s", want, timeout, alive, tail(d.log(), 4000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// dialSwitch opens a TCP connection to addr from inside the lab's switch
// namespace.
func dialSwitch(lab *netlab.Lab, addr string) (net.Conn, error) {
	var c net.Conn
	err := lab.Do(lab.Switch, func() error {
		var err error
		c, err = net.DialTimeout("tcp", addr, 2*time.Second)
		return err
	})
	return c, err
}

// scrapeStatus makes one GET /metrics on a new connection from the switch
// namespace and returns the HTTP status (0: no answer within timeout).
func scrapeStatus(lab *netlab.Lab, timeout time.Duration) int {
	c, err := dialSwitch(lab, metricsAddr)
	if err != nil {
		return 0
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// logLines counts the daemon's log lines.
func (d *daemon) logLines() int { return strings.Count(d.log(), "\n") }

// samplesFlow sends frames from host 0 to p1 and waits for one of their
// flow samples at col: sampling is still delivered.
func samplesFlow(t *testing.T, lab *netlab.Lab, col *countingCollector, what string) {
	t.Helper()
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	col.markNow()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sendNumbered(t, lab, 0, 0, 1, 50)
		if _, ok := col.firstSince(p1, 100*time.Millisecond); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no flow sample of p1 within 10 s", what)
		}
	}
}
