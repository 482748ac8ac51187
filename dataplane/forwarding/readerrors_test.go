package forwarding

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
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

// TestReadErrorsCountedAndRateLimited: with no descriptor left (a real
// EMFILE), every failed read of the tables is counted (ReadErrors), the
// first is logged, the next ones only in a line per interval that says
// how many were left out, and the tables read before stay.
func TestReadErrorsCountedAndRateLimited(t *testing.T) {
	defer func(d time.Duration) { readErrorsEvery = d }(readErrorsEvery)
	readErrorsEvery = 200 * time.Millisecond
	var buf bytes.Buffer
	tb := New(netns.None(), slog.New(slog.NewTextHandler(&buf, nil)))
	tb.refresh()
	if n := tb.ReadErrors(); n != 0 || buf.Len() != 0 {
		t.Fatalf("a read with descriptors left: %d errors, log %q", n, buf.String())
	}
	before := tb.snap.Load()
	underFDLimit(t, func() {
		for range 5 {
			tb.refresh()
		}
	})
	if n := tb.ReadErrors(); n != 5 {
		t.Errorf("%d read errors counted, want 5", n)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "too many open files") || !strings.Contains(lines[0], "suppressed_since_last=0") {
		t.Errorf("log after 5 failures within the interval: %q, want the first failure alone", lines)
	}
	if tb.snap.Load() != before {
		t.Errorf("a failed read replaced the tables")
	}
	time.Sleep(readErrorsEvery + 50*time.Millisecond)
	underFDLimit(t, tb.refresh)
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	if n := tb.ReadErrors(); n != 6 || len(lines) != 2 || !strings.Contains(lines[1], "suppressed_since_last=4") {
		t.Errorf("after the interval: %d errors, log %q; want 6 and a second line counting the 4 left out", n, lines)
	}
}
