package agent

import (
	"bytes"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/agent/persist"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// underFDLimit runs f with the process's descriptor limit at its lowest
// free descriptor, so that the next open fails with EMFILE.
func underFDLimit(t *testing.T, f func()) {
	t.Helper()
	// The lowest free descriptor: the one a dup gets.
	free, err := unix.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Close(free); err != nil {
		t.Fatal(err)
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: uint64(free), Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
			t.Fatal(err)
		}
	}()
	f()
}

// TestPollErrorsCountedAndRateLimited: counters read from /proc (as the
// host counters are) with no descriptor left, a real EMFILE: every failed
// poll is counted (PollErrors, sflowswitchd_poll_errors_total), the first
// is logged, the next ones only in one line per interval that says how
// many were left out.
func TestPollErrorsCountedAndRateLimited(t *testing.T) {
	defer func(d time.Duration) { pollErrorsEvery = d }(pollErrorsEvery)
	pollErrorsEvery = 200 * time.Millisecond
	var buf bytes.Buffer
	procStat := countersFunc(func(recs []sflow.Record, ds sflow.DataSource) ([]sflow.Record, error) {
		b, err := os.ReadFile("/proc/self/stat")
		if err != nil {
			return recs, err
		}
		if len(b) == 0 {
			t.Error("empty /proc/self/stat")
		}
		return recs, nil
	})
	w := newWorker(0, slog.New(slog.NewTextHandler(&buf, nil)), newFakeDataplane(), procStat, nil, persist.New(4096), 1)
	defer w.closeAll()
	cfg := workerConfig{agent: netip.MustParseAddr("198.18.0.1"),
		receivers: []ReceiverConfig{{Index: 1, Address: netip.MustParseAddrPort("127.0.0.1:9")}}}
	for i := range 3 {
		cfg.pollers = append(cfg.pollers, PollerConfig{Source: sflow.DataSource{Type: sflow.SourceIfIndex, Index: uint32(i + 1)},
			Instance: 1, Receiver: 1, Interval: 20 * time.Second})
	}
	w.apply(cfg)
	pollAll := func() {
		for _, p := range w.pollers {
			w.poll(p)
		}
	}
	pollAll()
	if n := w.stats.PollErrors.Load(); n != 0 || buf.Len() != 0 {
		t.Fatalf("polls with descriptors left: %d errors, log %q", n, buf.String())
	}
	underFDLimit(t, func() {
		for range 5 {
			pollAll()
		}
	})
	if n := w.stats.PollErrors.Load(); n != 15 {
		t.Errorf("%d poll errors counted, want 15", n)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "too many open files") || !strings.Contains(lines[0], "suppressed_since_last=0") {
		t.Errorf("log after 15 failed polls within the interval: %q, want the first failure alone", lines)
	}
	time.Sleep(pollErrorsEvery + 50*time.Millisecond)
	underFDLimit(t, func() { w.poll(w.pollers[0]) })
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	if n := w.stats.PollErrors.Load(); n != 16 || len(lines) != 2 || !strings.Contains(lines[1], "suppressed_since_last=14") {
		t.Errorf("after the interval: %d errors, log %q; want 16 and a second line counting the 14 left out", n, lines)
	}
}
