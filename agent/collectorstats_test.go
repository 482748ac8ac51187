package agent

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestCollectorStats checks the per-collector counters against what real
// sockets saw: the datagrams and bytes a listening collector received, send
// errors and lost samples only on the collector that refuses (no listener:
// ICMP port unreachable), too-large samples only on the collector whose
// maximum datagram size is below a sample, and a removed collector's
// counters forgotten.
func TestCollectorStats(t *testing.T) {
	const ifindex = 3
	dp := newFakeDataplane()
	good := newCollector(t)
	// A port nobody listens on: sends after the first fail with
	// ECONNREFUSED.
	l, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	refused := l.LocalAddr().(*net.UDPAddr).AddrPort()
	l.Close()
	a := New(Options{Workers: 2, Source: dp, Counters: countersFunc(func(r []sflow.Record, _ sflow.DataSource) ([]sflow.Record, error) { return r, nil })})
	cfg := Config{
		AgentAddress: netip.MustParseAddr("198.18.0.1"),
		Receivers: []ReceiverConfig{
			{Index: 1, Address: good.addr(), MaxDatagramSize: 400},
			{Index: 2, Address: refused, MaxDatagramSize: 400},
			{Index: 3, Address: good.addr(), MaxDatagramSize: 200},
		},
		Samplers: []SamplerConfig{
			{IfIndex: ifindex, Instance: 1, Receiver: 1, Rate: 1, HeaderBytes: 128},
			{IfIndex: ifindex, Instance: 2, Receiver: 2, Rate: 1, HeaderBytes: 128},
			{IfIndex: ifindex, Instance: 3, Receiver: 3, Rate: 1, HeaderBytes: 256},
		},
	}
	if err := a.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	const packets = 200
	sim := &kernelSim{dp: dp, ifindex: ifindex, packets: packets, frame: testFrame(), rng: newRNG(1), done: make(chan struct{})}
	readers := make([]SampleReader, 2)
	readers[a.WorkerOf(sflow.DataSource{Type: sflow.SourceIfIndex, Index: ifindex})] = sim
	done := sim.done // ReadSamples clears the field
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { a.Run(ctx, readers); close(ran) }()
	<-done
	time.Sleep(1200 * time.Millisecond) // one flush tick

	byRcv := map[int]CollectorTotals{}
	for _, c := range a.CollectorStats() {
		byRcv[c.Receiver] = c
	}
	if len(byRcv) != 3 {
		t.Fatalf("collector stats %+v, want 3 collectors", byRcv)
	}
	var bytes uint64
	for _, d := range good.datagrams() {
		bytes += uint64(len(d))
	}
	g, r, s := byRcv[1], byRcv[2], byRcv[3]
	if g.Address != good.addr() || r.Address != refused {
		t.Errorf("addresses %v %v", g.Address, r.Address)
	}
	if g.Datagrams != uint64(len(good.datagrams())) || g.Bytes != bytes || g.SendErrors != 0 || g.SamplesLost() != 0 {
		t.Errorf("good collector %+v; it received %d datagrams, %d bytes", g, len(good.datagrams()), bytes)
	}
	if r.SendErrors == 0 || r.SamplesUnsent == 0 || r.SamplesLost() != r.SamplesUnsent {
		t.Errorf("refusing collector %+v: want send errors and lost samples", r)
	}
	// Every sample to the refusing collector is either in a datagram sent
	// (before the ICMP error arrived) or counted lost.
	if r.Datagrams+r.SendErrors == 0 || r.SamplesUnsent > packets {
		t.Errorf("refusing collector %+v", r)
	}
	if s.TooLarge != packets || s.Datagrams != 0 || s.SamplesLost() != packets {
		t.Errorf("small collector %+v: want all %d samples too large", s, packets)
	}
	var sumErr uint64
	for i := 0; i < a.Workers(); i++ {
		sumErr += a.Stats(i).SendErrors.Load()
	}
	if sumErr != r.SendErrors {
		t.Errorf("worker send errors %d, collector send errors %d", sumErr, r.SendErrors)
	}

	// Removing receivers 2 and 3 forgets their counters; receiver 1 keeps
	// counting from where it was.
	cfg.Receivers, cfg.Samplers = cfg.Receivers[:1], cfg.Samplers[:1]
	if err := a.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(a.CollectorStats()) != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if cs := a.CollectorStats(); len(cs) != 1 || cs[0].Receiver != 1 || cs[0].Datagrams < g.Datagrams {
		t.Errorf("after removing receivers 2 and 3: %+v", cs)
	}
	cancel()
	<-ran
}
