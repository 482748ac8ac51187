package agent

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// onceReader hands n samples of ifindex to the worker at its first read,
// then nothing.
type onceReader struct {
	n       int
	ifindex uint32
	frame   []byte
	at      chan time.Time
}

func (r *onceReader) ReadSamples(deadline time.Time, fn func(*PacketSample)) (int, error) {
	if r.n > 0 {
		n := r.n
		for ; r.n > 0; r.n-- {
			fn(&PacketSample{IfIndex: r.ifindex, FrameLen: uint32(len(r.frame)), Header: r.frame})
		}
		r.at <- time.Now()
		return n, nil
	}
	time.Sleep(time.Until(deadline))
	return 0, os.ErrDeadlineExceeded
}

// TestWorkerSendsCompleteDatagramsWhenDrained: the datagrams a batch of
// kernel samples fills leave as soon as the ring is drained, not at the
// one-second tick; the datagram being filled waits for the tick, and its
// uptime is the time it was sent (sflow_version_5.txt), not when its first
// sample arrived.
func TestWorkerSendsCompleteDatagramsWhenDrained(t *testing.T) {
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
	// 128-byte headers: 7 flow samples per 1400-byte datagram, so 15
	// samples fill two datagrams and start a third.
	rd := &onceReader{n: 15, ifindex: ifindex, frame: testFrame(), at: make(chan time.Time, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { a.Run(ctx, []SampleReader{rd}); close(ran) }()
	defer func() { cancel(); <-ran }()
	handed := <-rd.at
	for time.Since(handed) < 300*time.Millisecond && len(col.datagrams()) < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(col.datagrams()); n != 2 {
		t.Fatalf("%d datagrams within 300 ms of the batch, want the 2 complete ones", n)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(col.datagrams()); n != 2 {
		t.Fatalf("%d datagrams before the tick, want 2 (the third is being filled)", n)
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(col.datagrams()) < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	dgs := col.datagrams()
	if len(dgs) != 3 {
		t.Fatalf("%d datagrams after the tick, want 3", len(dgs))
	}
	var uptimes [3]uint32
	for i, b := range dgs {
		d, err := sflow.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		want := 7
		if i == 2 {
			want = 1
		}
		if d.SequenceNumber != uint32(i+1) || len(d.Samples) != want {
			t.Fatalf("datagram %d: sequence %d, %d samples; want %d, %d", i, d.SequenceNumber, len(d.Samples), i+1, want)
		}
		uptimes[i] = d.Uptime
	}
	// The third datagram got its sample with the first two but was sent at
	// the tick, about a second after the agent started.
	if uptimes[2] < uptimes[1]+500 || uptimes[2] < 900 {
		t.Fatalf("uptimes %v: the flushed datagram does not carry its send time", uptimes)
	}
}
