package agent

import (
	"net/netip"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent/persist"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestIdleUntilNextPoll: an idle worker sleeps until the tick of its next
// counter poll (at most maxIdle), and the ticks it slept through advance
// every poller's countdown, so no poll is late or lost and none comes in
// a burst: pollers with countdowns 3, 5 and 9 (intervals 20, 20, 30 s)
// make the worker wake at the tick 2 s after the next; after those 3
// ticks the first polls (once) and restarts at 20, the others wait 2 and
// 6 more.
func TestIdleUntilNextPoll(t *testing.T) {
	var polled []uint32
	counters := countersFunc(func(recs []sflow.Record, ds sflow.DataSource) ([]sflow.Record, error) {
		polled = append(polled, ds.Index)
		return append(recs, &sflow.IfCounters{IfIndex: ds.Index}), nil
	})
	w := newWorker(0, slogDiscard(), newFakeDataplane(), counters, nil, persist.New(4096), 1)
	defer w.closeAll()
	cfg := workerConfig{agent: netip.MustParseAddr("198.18.0.1"),
		receivers: []ReceiverConfig{{Index: 1, Address: netip.MustParseAddrPort("127.0.0.1:9")}}}
	for i, iv := range []time.Duration{20 * time.Second, 20 * time.Second, 30 * time.Second} {
		cfg.pollers = append(cfg.pollers, PollerConfig{Source: sflow.DataSource{Type: sflow.SourceIfIndex, Index: uint32(i + 1)},
			Instance: 1, Receiver: 1, Interval: iv})
	}
	w.apply(cfg)
	for i, c := range []int{3, 5, 9} {
		w.pollers[i].countdown = c
	}
	next := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	if got, want := w.idleUntil(next), next.Add(2*time.Second); !got.Equal(want) {
		t.Fatalf("idleUntil = %v, want the tick 2 s after the next (%v)", got, want)
	}
	w.tick(3)
	if len(polled) != 1 || polled[0] != 1 {
		t.Fatalf("after 3 ticks polled %v, want [1]", polled)
	}
	for i, want := range []int{20, 2, 6} {
		if c := w.pollers[i].countdown; c != want {
			t.Errorf("poller %d countdown %d, want %d", i+1, c, want)
		}
	}
	// No poller with an interval: the sleep is bounded by maxIdle.
	for _, p := range w.pollers {
		p.cfg.Interval = 0
	}
	if got, want := w.idleUntil(next), next.Add(maxIdle); !got.Equal(want) {
		t.Errorf("idleUntil without pollers = %v, want %v", got, want)
	}
}
