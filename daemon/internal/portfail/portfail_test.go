package portfail

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
)

// TestNoteAndRetry: a port failing is logged once and listed; a refusal
// of the whole configuration changes nothing; the retry loop reapplies
// while a port fails and stops when it is sampled again.
func TestNoteAndRetry(t *testing.T) {
	var logBuf bytes.Buffer
	names := map[uint32]string{3: "swp1", 4: "swp2"}
	tr := New(slog.New(slog.NewTextHandler(&logBuf, nil)), func(i uint32) string { return names[i] })
	slotsFull := errors.New("no free port slot")
	tr.Note(errors.Join(&agent.PortError{IfIndex: 4, Err: slotsFull}))
	tr.Note(errors.Join(&agent.PortError{IfIndex: 4, Err: slotsFull}))
	if got := tr.Failed(); len(got) != 1 || got[0] != (Port{Name: "swp2", IfIndex: 4}) {
		t.Fatalf("failed %+v, want swp2", got)
	}
	if n := strings.Count(logBuf.String(), "port not sampled"); n != 1 {
		t.Errorf("failure logged %d times, want once:\n%s", n, logBuf.String())
	}
	tr.Note(errors.New("refused whole"))
	if got := tr.Failed(); len(got) != 1 {
		t.Fatalf("a whole refusal changed the failing ports: %+v", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var reapplied atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.Retry(ctx, func() error {
			reapplied.Add(1)
			tr.Note(nil) // the port is sampled now
			return nil
		})
	}()
	deadline := time.Now().Add(3 * retryMin)
	for len(tr.Failed()) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := tr.Failed(); len(got) != 0 || reapplied.Load() != 1 {
		t.Fatalf("after the retry: failed %+v, %d reapplies, want none and 1", got, reapplied.Load())
	}
	if !strings.Contains(logBuf.String(), "port sampled again") {
		t.Errorf("recovery not logged:\n%s", logBuf.String())
	}
	cancel()
	<-done
}
