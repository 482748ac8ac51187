package portfail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
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
	if got := tr.Failed(); len(got) != 1 || got[0] != (Port{Name: "swp2", IfIndex: 4, Reason: "refused"}) {
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

// TestVanishedAndTransient: a failing port that
// vanished is logged as gone under the name it had, never as `port
// sampled again port=""`; a port that vanished between discovery and the
// attach keeps the name it failed under; transient refusals (no
// descriptor left, no memory, busy) are classified for the metric and
// retried like every failure.
func TestVanishedAndTransient(t *testing.T) {
	var logBuf bytes.Buffer
	names := map[uint32]string{3: "swp1", 4: "swp2", 5: "swp3"}
	tr := New(slog.New(slog.NewTextHandler(&logBuf, nil)), func(i uint32) string { return names[i] })
	emfile := fmt.Errorf("attaching XDP: %w", syscall.EMFILE)
	tr.Note(errors.Join(&agent.PortError{IfIndex: 4, Err: emfile}, &agent.PortError{IfIndex: 5, Err: syscall.EBUSY},
		&agent.PortError{IfIndex: 3, Err: fmt.Errorf("x: %w", dataplane.ErrNoPortSlot)}))
	got := tr.Failed()
	want := []Port{{"swp1", 3, "no_slot"}, {"swp2", 4, "descriptors"}, {"swp3", 5, "busy"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("failed %+v, want %+v", got, want)
	}
	delete(names, 4) // swp2 vanishes while failing
	tr.Note(errors.Join(&agent.PortError{IfIndex: 5, Err: syscall.EBUSY}, &agent.PortError{IfIndex: 3, Err: dataplane.ErrNoPortSlot}))
	delete(names, 5) // swp3 vanishes between discovery and attach
	tr.Note(errors.Join(&agent.PortError{IfIndex: 5, Err: syscall.ENODEV}, &agent.PortError{IfIndex: 3, Err: dataplane.ErrNoPortSlot}))
	logs := logBuf.String()
	if strings.Contains(logs, `port=""`) || strings.Contains(logs, "sampled again") {
		t.Errorf("a vanished port logged without its name or as sampled again:\n%s", logs)
	}
	if !strings.Contains(logs, `failing port gone; no longer retried" port=swp2 ifindex=4`) {
		t.Errorf("swp2's disappearance not logged under its name:\n%s", logs)
	}
	if got := tr.Failed(); len(got) != 2 || got[1] != (Port{"swp3", 5, "gone"}) {
		t.Errorf("failed %+v, want swp3 gone under its name", got)
	}
}
