package agent

import (
	"context"
	"net/netip"
	"os"
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

// idleReader is an IdleReader: ReadIdle records that the worker slept idle
// and, like ReadSamples, hands over the samples put in ch when they come
// (or waits for the deadline).
type idleReader struct {
	ifindex uint32
	frame   []byte
	ch      chan int
	idle    chan time.Time // the deadline of each ReadIdle call
	wake    chan struct{}
}

// Wake implements Waker: the agent wakes its workers to stop.
func (r *idleReader) Wake() error {
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return nil
}

func (r *idleReader) read(deadline time.Time, fn func(*PacketSample)) (int, error) {
	select {
	case n := <-r.ch:
		for range n {
			fn(&PacketSample{IfIndex: r.ifindex, FrameLen: uint32(len(r.frame)), Header: r.frame})
		}
		return n, nil
	case <-r.wake:
		return 0, nil
	case <-time.After(time.Until(deadline)):
		return 0, os.ErrDeadlineExceeded
	}
}

func (r *idleReader) ReadSamples(deadline time.Time, fn func(*PacketSample)) (int, error) {
	return r.read(deadline, fn)
}

func (r *idleReader) ReadIdle(deadline time.Time, fn func(*PacketSample)) (int, error) {
	select {
	case r.idle <- deadline:
	default:
	}
	return r.read(deadline, fn)
}

// TestIdleWorkerSendsAtTheNextTick: a worker with nothing to do sleeps in
// ReadIdle until its next counter poll (20 s away here); a sample that
// wakes it leaves in a datagram at the next one-second tick, not at the
// poll: the worker, awake again, does not sleep past that tick.
func TestIdleWorkerSendsAtTheNextTick(t *testing.T) {
	const ifindex = 9
	dp := newFakeDataplane()
	col := newCollector(t)
	a := New(Options{Workers: 1, Source: dp})
	if err := a.Apply(Config{
		AgentAddress: netip.MustParseAddr("198.18.0.1"),
		Receivers:    []ReceiverConfig{{Index: 1, Address: col.addr(), MaxDatagramSize: 1400}},
		Samplers:     []SamplerConfig{{IfIndex: ifindex, Instance: 1, Receiver: 1, Rate: 1, HeaderBytes: 128}},
	}); err != nil {
		t.Fatal(err)
	}
	rd := &idleReader{ifindex: ifindex, frame: testFrame(), ch: make(chan int), idle: make(chan time.Time, 1), wake: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { a.Run(ctx, []SampleReader{rd}); close(ran) }()
	defer func() { cancel(); <-ran }()
	for round := 1; round <= 2; round++ {
		var deadline time.Time
		select {
		case deadline = <-rd.idle:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the worker never slept idle (ReadIdle)", round)
		}
		t.Logf("round %d: idle until %v from now", round, time.Until(deadline).Round(time.Millisecond))
		rd.ch <- 1
		woke := time.Now()
		for len(col.datagrams()) < round && time.Since(woke) < 3*time.Second {
			time.Sleep(10 * time.Millisecond)
		}
		if n := len(col.datagrams()); n != round {
			t.Fatalf("round %d: %d datagrams 3 s after the sample woke the idle worker, want %d (the sample waits for the idle deadline)", round, n, round)
		}
		t.Logf("round %d: the sample left %v after it woke the worker", round, time.Since(woke).Round(time.Millisecond))
	}
}
