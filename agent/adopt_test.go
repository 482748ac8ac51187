package agent

import (
	"context"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// adoptDP is a dataplane as the kernel one behaves for a port taken over:
// ingress and egress counters; SetPort of an attached port keeps the
// counters of the directions it keeps and starts an added one from zero;
// RemovePort zeroes both.
type adoptDP struct {
	mu      sync.Mutex
	ports   map[uint32]PortSampling
	in, out uint64
	drops   uint64
}

func (f *adoptDP) SetPort(i uint32, p PortSampling) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, ok := f.ports[i]
	if !ok || old.Direction.OrIngress()&sflow.DirectionIngress == 0 {
		f.in = 0
	}
	if !ok || old.Direction.OrIngress()&sflow.DirectionEgress == 0 {
		f.out = 0
	}
	f.ports[i] = p
	return nil
}

func (f *adoptDP) RemovePort(i uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ports, i)
	f.in, f.out, f.drops = 0, 0, 0
	return nil
}

func (f *adoptDP) PortPool(uint32) (uint64, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.in + f.out, f.drops
}

// adoptReader hands the worker first the records that waited in the ring
// (held), then, once the port is sampled both ways again, live records:
// three frames in, one out, each sampled, with the kernel's every-CPU sum
// of its direction.
type adoptReader struct {
	dp      *adoptDP
	ifindex uint32
	held    []PacketSample
	live    int // live records still to make
	frame   []byte
	done    chan struct{}
}

func (r *adoptReader) ReadSamples(deadline time.Time, fn func(*PacketSample)) (int, error) {
	n := 0
	for _, ps := range r.held {
		ps.Header, ps.FrameLen = r.frame, uint32(len(r.frame))
		fn(&ps)
		n++
	}
	r.held = nil
	r.dp.mu.Lock()
	p, ok := r.dp.ports[r.ifindex]
	r.dp.mu.Unlock()
	for ; ok && p.Direction == sflow.DirectionBoth && r.live > 0; r.live-- {
		egress := r.live%4 == 1
		r.dp.mu.Lock()
		c := &r.dp.in
		if egress {
			c = &r.dp.out
		}
		*c++
		pool := *c
		r.dp.mu.Unlock()
		fn(&PacketSample{IfIndex: r.ifindex, Egress: egress, PoolSum: true, CPUPool: pool, KernelRate: 1,
			Header: r.frame, FrameLen: uint32(len(r.frame))})
		n++
	}
	if n > 0 {
		return n, nil
	}
	if r.live == 0 && r.done != nil {
		close(r.done)
		r.done = nil
	}
	time.Sleep(min(time.Until(deadline), 10*time.Millisecond))
	return 0, os.ErrDeadlineExceeded
}

// TestAdoptedBothPortPools: a port sampled both ways, taken over after an
// upgrade or a crash. Its ingress sampler continued (pinned); its egress
// sampler ended with the earlier program, having counted 4 frames (their
// samples read by it); ten ingress records, pools 991..1000, waited in
// the ring. The waiting records keep those pools with the egress count
// (995..1004), the egress sampler is attached anew with the ingress one
// continuing, and the pools after it continue them (1005..1012):
// contiguous, every frame counted once. (Before, the port was detached
// and attached anew under a base holding the live ingress count, which
// the waiting records then counted twice: 1991..) The port's drops
// continue likewise over what the ended sampler lost.
func TestAdoptedBothPortPools(t *testing.T) {
	const ifindex = 7
	dp := &adoptDP{ports: map[uint32]PortSampling{ifindex: {KernelRate: 1, HeaderBytes: 128, Direction: sflow.DirectionIngress}},
		in: 1000, drops: 3}
	r := &adoptReader{dp: dp, ifindex: ifindex, live: 8, frame: testFrame()}
	for p := uint64(991); p <= 1000; p++ {
		r.held = append(r.held, PacketSample{IfIndex: ifindex, PoolSum: true, CPUPool: p, KernelRate: 1})
	}
	done := make(chan struct{})
	r.done = done

	c := newCollector(t)
	a := New(Options{Workers: 1, Source: dp, Counters: countersFunc(func(r []sflow.Record, _ sflow.DataSource) ([]sflow.Record, error) { return r, nil })})
	a.Adopt(map[uint32]AdoptedPort{ifindex: {
		PortSampling: PortSampling{KernelRate: 1, HeaderBytes: 128, Direction: sflow.DirectionBoth},
		Attached:     sflow.DirectionIngress, EndedPool: 4, EndedDrops: 2,
	}})
	cfg := Config{
		AgentAddress: netip.MustParseAddr("198.18.0.1"),
		Receivers:    []ReceiverConfig{{Index: 1, Address: c.addr()}},
		Samplers:     []SamplerConfig{{IfIndex: ifindex, Instance: 1, Receiver: 1, Rate: 1, HeaderBytes: 128}},
		Directions:   map[uint32]sflow.Direction{ifindex: sflow.DirectionBoth},
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { a.Run(ctx, []SampleReader{r}); close(ran) }()
	if err := a.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if p := dp.ports[ifindex]; p.Direction != sflow.DirectionIngress {
		t.Fatalf("port changed while adopting: %+v", p)
	}
	for running := false; !running; time.Sleep(time.Millisecond) { // as in the daemon: the workers run
		a.mu.Lock()
		running = a.running
		a.mu.Unlock()
	}
	if err := a.EndAdoption(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("live records not read: the port was not sampled both ways again")
	}
	time.Sleep(1500 * time.Millisecond) // one flush tick
	cancel()
	<-ran

	var pools, drops []uint32
	for _, b := range c.datagrams() {
		d, err := sflow.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range d.Samples {
			if fs, ok := s.(*sflow.FlowSample); ok {
				pools = append(pools, fs.SamplePool)
				drops = append(drops, fs.Drops)
			}
		}
	}
	if len(pools) != 18 {
		t.Fatalf("%d samples, want 10 waiting + 8 live: pools %v", len(pools), pools)
	}
	for i, p := range pools {
		if p != uint32(995+i) {
			t.Fatalf("sample %d has pool %d, want %d: pools %v", i, p, 995+i, pools)
		}
	}
	for i, d := range drops { // the kernel's 3 and the ended sampler's 2
		if d != 5 {
			t.Fatalf("sample %d has drops %d, want 5: drops %v", i, d, drops)
		}
	}
	if p := dp.ports[ifindex]; p.Direction != sflow.DirectionBoth {
		t.Errorf("port sampled %v after the take-over, want both", p.Direction)
	}
}
