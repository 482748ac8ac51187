package ratelog

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLimiter: a burst from many goroutines writes one line; the next
// line after the interval carries the count of the suppressed ones, and
// Total counts them all.
func TestLimiter(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{&buf, &mu}, nil))
	l := New(log, slog.LevelWarn, "scrape aborted", 100*time.Millisecond)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 500; i++ {
				l.Log("err", "broken pipe")
			}
		})
	}
	wg.Wait()
	mu.Lock()
	if n := strings.Count(buf.String(), "scrape aborted"); n != 1 {
		t.Errorf("%d lines for a burst of 4000, want 1:\n%s", n, buf.String())
	}
	mu.Unlock()
	time.Sleep(120 * time.Millisecond)
	if !l.Log("err", "broken pipe") {
		t.Fatalf("nothing written after the interval")
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "suppressed_since_last=3999") {
		t.Errorf("second line lacks the 3999 suppressed:\n%s", buf.String())
	}
	if l.Total.Load() != 4001 {
		t.Errorf("Total %d, want 4001", l.Total.Load())
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
