package app

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostileName returns the i-th of distinct 32-byte application names
// that cost the most in JSON: control characters (\u00XX, 6 bytes each)
// and '<' (which encoding/json's default HTML escaping made \u003c).
func hostileName(i int) string {
	n := fmt.Sprintf("<\x01\x02%08d", i)
	return n + strings.Repeat("\x1f", maxApplication-len(n))
}

// TestStateFileBounded: a local process creating
// application names without end cannot grow the state file past what the
// daemon reads back: at most maxNamed names are kept, the least recently
// seen evicted first (also across a restart: the file keeps the order),
// every write is batched (one per flush, not one write and fsync per
// name), and a full file of the costliest names is read back whole. The
// file used to grow by 183 bytes per 32-byte name and, past 4 MiB, was
// reported damaged at the next start, losing every index.
func TestStateFileBounded(t *testing.T) {
	state := filepath.Join(t.TempDir(), "apps.json")
	var logged strings.Builder
	// One data source: the first 4 names stay running (the registry's
	// live names, 4 per source), never evicted.
	r := newRegistry(state, 1, testLogger(&logged))
	const total, running = maxNamed + 3000, 4
	start := time.Now()
	for i := 0; i < total; i++ {
		if _, err := r.assign(hostileName(i)); err != nil {
			t.Fatalf("name %d: %v", i, err)
		}
		if i%1000 == 999 {
			r.flush(false)
		}
	}
	r.flush(true)
	t.Logf("%d names assigned in %v, %d writes", total, time.Since(start), r.writes)
	if r.writes > total/1000+1 {
		t.Errorf("%d writes for %d names flushed %d times", r.writes, total, total/1000+1)
	}
	if len(r.named) != maxNamed {
		t.Errorf("%d names kept, want maxNamed %d", len(r.named), maxNamed)
	}
	fi, err := os.Stat(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("state file %d bytes for %d names", fi.Size(), maxNamed)
	if fi.Size() > maxStateBytes/2 {
		t.Errorf("state file %d bytes, bound %d (half of what is read back)", fi.Size(), maxStateBytes/2)
	}
	if n, bound := strings.Count(logged.String(), "taken over"), int(time.Since(start)/time.Second)+1; n > bound {
		t.Errorf("%d take-over lines for 3000 take-overs in %v, want at most %d (one a second)", n, time.Since(start), bound)
	}
	// Read back whole at the next start; the newest names are the ones
	// kept, and the oldest of them is evicted first.
	var logged2 strings.Builder
	r2 := newRegistry(state, 1, testLogger(&logged2))
	if strings.Contains(logged2.String(), "damaged") || len(r2.named) != maxNamed {
		t.Fatalf("read back %d names: %s", len(r2.named), logged2.String())
	}
	for _, i := range []int{0, running - 1, total - 1, total - maxNamed + running} {
		if _, ok := r2.named[hostileName(i)]; !ok {
			t.Errorf("name %d (running, or of the newest) not read back", i)
		}
	}
	if _, ok := r2.named[hostileName(total-maxNamed+running-1)]; ok {
		t.Errorf("name %d kept: older than every kept name but the running ones", total-maxNamed+running-1)
	}
	oldest := hostileName(0) // least recently seen in the file; nothing runs after a restart
	idx := r2.named[oldest]
	r2.resolve(hostileName(1), 0) // seen now: not the next to go
	got, err := r2.assign("after-restart")
	if err != nil || got != idx {
		t.Errorf("new name after restart got %d (%v), want %d: the index of the least recently seen name", got, err, idx)
	}
	if _, still := r2.named[oldest]; still {
		t.Errorf("least recently seen name not evicted")
	}
}

// TestStateFileOrder: the file lists names least recently seen first,
// written without HTML escaping; a name that is not valid UTF-8 keeps its
// index in memory but is not written (JSON would change it).
func TestStateFileOrder(t *testing.T) {
	state := filepath.Join(t.TempDir(), "apps.json")
	r := newRegistry(state, DefaultMaxSources, testLogger(nil))
	for _, n := range []string{"b<c", "a", "bad\xff", "c"} {
		if _, err := r.assign(n); err != nil {
			t.Fatal(err)
		}
	}
	r.resolve("b<c", 0)
	r.flush(true)
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"version\": 1,\n  \"applications\": {\n    \"a\": 150001,\n    \"c\": 150003,\n    \"b<c\": 150000\n  }\n}\n"
	if string(b) != want {
		t.Errorf("state file\n%s\nwant\n%s", b, want)
	}
	if idx, err := r.assign("bad\xff"); err != nil || idx != 150002 {
		t.Errorf("name not valid UTF-8: %d %v", idx, err)
	}
}
