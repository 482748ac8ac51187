package agent

import (
	"bytes"
	"context"
	"math"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/agent/persist"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// fakeDataplane records port settings and serves pools from counters the
// test's reader advances, as the kernel would.
type fakeDataplane struct {
	mu    sync.Mutex
	ports map[uint32]PortSampling
	pool  map[uint32]*atomic.Uint64
}

func newFakeDataplane() *fakeDataplane {
	return &fakeDataplane{ports: map[uint32]PortSampling{}, pool: map[uint32]*atomic.Uint64{}}
}

func (f *fakeDataplane) SetPort(i uint32, p PortSampling) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ports[i] = p
	if f.pool[i] == nil {
		f.pool[i] = new(atomic.Uint64)
	}
	return nil
}

func (f *fakeDataplane) RemovePort(i uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ports, i)
	f.pool[i].Store(0)
	return nil
}

func (f *fakeDataplane) PortPool(i uint32) (uint64, uint64) {
	f.mu.Lock()
	p := f.pool[i]
	f.mu.Unlock()
	if p == nil {
		return 0, 0
	}
	return p.Load(), 0
}

func (f *fakeDataplane) port(i uint32) (PortSampling, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.ports[i]
	return p, ok
}

// kernelSim plays the kernel for one port: it counts every packet in the
// pool and hands 1 in KernelRate (at random) to the worker.
type kernelSim struct {
	dp      *fakeDataplane
	ifindex uint32
	packets int
	frame   []byte
	rng     rng
	done    chan struct{}
	sampled int
}

func (k *kernelSim) ReadSamples(deadline time.Time, fn func(*PacketSample)) (int, error) {
	p, ok := k.dp.port(k.ifindex)
	n := 0
	for k.packets > 0 && ok && n < 64 {
		k.packets--
		k.dp.pool[k.ifindex].Add(1)
		if k.rng.uint32()%p.KernelRate == 0 {
			k.sampled++
			n++
			fn(&PacketSample{IfIndex: k.ifindex, FrameLen: uint32(len(k.frame)), Header: k.frame})
		}
	}
	if n > 0 {
		return n, nil
	}
	if k.packets == 0 && k.done != nil {
		close(k.done)
		k.done = nil
	}
	time.Sleep(time.Until(deadline))
	return 0, os.ErrDeadlineExceeded
}

type countersFunc func(recs []sflow.Record, ds sflow.DataSource) ([]sflow.Record, error)

func (f countersFunc) AppendCounters(recs []sflow.Record, ds sflow.DataSource) ([]sflow.Record, error) {
	return f(recs, ds)
}

// collector is a UDP listener on loopback keeping every datagram.
type collector struct{ *testutil.Collector }

func newCollector(t *testing.T) *collector { return &collector{testutil.NewCollector(t)} }

func (c *collector) addr() netip.AddrPort { return c.Addr() }

func (c *collector) datagrams() [][]byte { return c.Datagrams() }

func testFrame() []byte {
	f := make([]byte, 300)
	copy(f, []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00})
	for i := 14; i < len(f); i++ {
		f[i] = byte(i)
	}
	return f
}

// TestAgentEndToEndSubsampling runs a worker fed by a simulated kernel
// sampling at the power-of-two rate and checks, on two real UDP
// collectors, decoded by goflow2 and by our decoder: the sample count for
// rate 1000 is within 4 standard deviations of K/1000, datagram and sample
// sequence numbers are contiguous, the pool of the last sample is the
// packets counted, and both collectors got the same samples.
func TestAgentEndToEndSubsampling(t *testing.T) {
	const (
		ifindex = 7
		K       = 3_000_000
		N       = 1000
	)
	dp := newFakeDataplane()
	c1, c2 := newCollector(t), newCollector(t)
	a := New(Options{Workers: 1, Source: dp, Counters: countersFunc(func(r []sflow.Record, _ sflow.DataSource) ([]sflow.Record, error) { return r, nil })})
	cfg := Config{
		AgentAddress: netip.MustParseAddr("198.18.0.1"),
		Receivers: []ReceiverConfig{
			{Index: 1, Address: c1.addr(), MaxDatagramSize: 1400},
			{Index: 2, Address: c2.addr(), MaxDatagramSize: 600},
		},
		Samplers: []SamplerConfig{
			{IfIndex: ifindex, Instance: 1, Receiver: 1, Rate: N, HeaderBytes: 128},
			{IfIndex: ifindex, Instance: 2, Receiver: 2, Rate: N, HeaderBytes: 128},
		},
	}
	if err := a.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if p, _ := dp.port(ifindex); p.KernelRate != 512 || p.HeaderBytes != 128 {
		t.Fatalf("dataplane told %+v, want kernel rate 512, 128 header bytes", p)
	}
	simDone := make(chan struct{}) // the worker clears sim.done: keep our own copy (-race)
	sim := &kernelSim{dp: dp, ifindex: ifindex, packets: K, frame: testFrame(), rng: newRNG(99), done: simDone}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { a.Run(ctx, []SampleReader{sim}); close(ran) }()
	<-simDone
	time.Sleep(1500 * time.Millisecond) // one flush tick
	cancel()
	<-ran
	time.Sleep(100 * time.Millisecond)

	var pools [2][]uint32
	for ci, c := range []*collector{c1, c2} {
		dgs := c.datagrams()
		if len(dgs) == 0 {
			t.Fatalf("collector %d got nothing", ci+1)
		}
		var samples, lastPool, lastSampleSeq uint32
		for i, b := range dgs {
			if ci == 1 && len(b) > 600 {
				t.Fatalf("datagram of %d bytes exceeds receiver 2's maximum 600", len(b))
			}
			var gp goflow.Packet
			if err := goflow.DecodeMessageVersion(bytes.NewBuffer(b), &gp); err != nil {
				t.Fatalf("goflow2 rejects datagram %d: %v", i, err)
			}
			d, err := sflow.Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if d.SequenceNumber != uint32(i+1) || gp.SequenceNumber != uint32(i+1) {
				t.Fatalf("datagram %d has sequence %d (goflow2 %d)", i, d.SequenceNumber, gp.SequenceNumber)
			}
			for _, s := range gp.Samples {
				fs, ok := s.(goflow.FlowSample)
				if !ok {
					t.Fatalf("unexpected sample %T", s)
				}
				samples++
				if fs.Header.SampleSequenceNumber != lastSampleSeq+1 {
					t.Fatalf("sample sequence %d after %d", fs.Header.SampleSequenceNumber, lastSampleSeq)
				}
				lastSampleSeq = fs.Header.SampleSequenceNumber
				if fs.SamplingRate != N || fs.Input != ifindex || fs.Header.SourceIdValue != ifindex {
					t.Fatalf("sample fields %+v", fs)
				}
				if fs.SamplePool < lastPool {
					t.Fatalf("pool ran backwards: %d after %d", fs.SamplePool, lastPool)
				}
				lastPool = fs.SamplePool
				pools[ci] = append(pools[ci], fs.SamplePool)
				hdr := fs.Records[0].Data.(goflow.SampledHeader)
				if hdr.FrameLength != 304 || hdr.OriginalLength != 128 || !bytes.Equal(hdr.HeaderData, testFrame()[:128]) {
					t.Fatalf("sampled header %+v", hdr)
				}
			}
		}
		mean := float64(K) / N
		sd := math.Sqrt(float64(K) * (1.0 / N) * (1 - 1.0/N))
		if math.Abs(float64(samples)-mean) > 4*sd {
			t.Errorf("collector %d: %d samples, want %.0f ± %.0f", ci+1, samples, mean, 4*sd)
		}
		if lastPool > K {
			t.Errorf("pool %d exceeds packets %d", lastPool, K)
		}
		t.Logf("collector %d: %d datagrams, %d samples (expected %.0f), last pool %d", ci+1, len(dgs), samples, mean, lastPool)
	}
	// Both receivers' samplers have the same rate: they must report the
	// same packets.
	if len(pools[0]) != len(pools[1]) {
		t.Fatalf("collectors got different samples: %d vs %d", len(pools[0]), len(pools[1]))
	}
	for i := range pools[0] {
		if pools[0][i] != pools[1][i] {
			t.Fatalf("sample %d: pool %d vs %d", i, pools[0][i], pools[1][i])
		}
	}
	st := a.Stats(0)
	if got := st.FlowSamples.Load(); got == 0 || st.SendErrors.Load() != 0 {
		t.Fatalf("stats: flow samples %d, send errors %d", got, st.SendErrors.Load())
	}
}

// TestApplyRefusesInvalid checks that a bad configuration is refused whole.
func TestApplyRefusesInvalid(t *testing.T) {
	dp := newFakeDataplane()
	a := New(Options{Source: dp})
	bad := Config{Samplers: []SamplerConfig{{IfIndex: 1, Receiver: 9, Rate: 10, HeaderBytes: 128}}}
	if err := a.Apply(bad); err == nil {
		t.Fatal("sampler naming a missing receiver accepted")
	}
	if len(dp.ports) != 0 {
		t.Fatalf("refused configuration touched the dataplane: %v", dp.ports)
	}
}

func BenchmarkWorkerHandle(b *testing.B) {
	dp := newFakeDataplane()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	go func() {
		buf := make([]byte, 65536)
		for {
			if _, err := conn.Read(buf); err != nil {
				return
			}
		}
	}()
	w := newWorker(0, slogDiscard(), dp, nil, nil, persist.New(64), 1)
	_ = dp.SetPort(3, PortSampling{KernelRate: 1})
	w.apply(workerConfig{
		agent:     netip.MustParseAddr("198.18.0.1"),
		receivers: []ReceiverConfig{{Index: 1, Address: conn.LocalAddr().(*net.UDPAddr).AddrPort()}},
		samplers:  []samplerSpec{{cfg: SamplerConfig{IfIndex: 3, Instance: 1, Receiver: 1, Rate: 1, HeaderBytes: 128}, kernelRate: 1}},
	})
	ps := PacketSample{IfIndex: 3, FrameLen: 300, Header: testFrame()[:128]}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w.handle(&ps)
	}
	b.StopTimer()
	w.closeAll()
}

func TestVLANTag(t *testing.T) {
	untagged := testFrame()
	if _, _, ok := vlanTag(untagged); ok {
		t.Fatal("untagged frame reported a VLAN")
	}
	tagged := append([]byte(nil), untagged[:12]...)
	tagged = append(tagged, 0x81, 0x00, 0xa0, 0x64, 0x08, 0x00) // priority 5, VLAN 100
	tagged = append(tagged, untagged[14:]...)
	vlan, prio, ok := vlanTag(tagged)
	if !ok || vlan != 100 || prio != 5 {
		t.Fatalf("got vlan %d prio %d ok %v, want 100 5 true", vlan, prio, ok)
	}
	if _, _, ok := vlanTag(tagged[:15]); ok {
		t.Fatal("short header reported a VLAN")
	}
	// Pre-standard Q-in-Q (0x9100) outer tag over an 802.1Q tag: the
	// outer VLAN is the one reported.
	qinq := append([]byte(nil), untagged[:12]...)
	qinq = append(qinq, 0x91, 0x00, 0x20, 0x07, 0x81, 0x00, 0x00, 0x64, 0x08, 0x00)
	qinq = append(qinq, untagged[14:]...)
	if vlan, prio, ok := vlanTag(qinq); !ok || vlan != 7 || prio != 1 {
		t.Fatalf("0x9100 tag: got vlan %d prio %d ok %v, want 7 1 true", vlan, prio, ok)
	}
}

// TestExtendedSwitchFromTaggedFrame checks that a sample of an 802.1Q
// tagged frame carries extended_switch with its VLAN and priority (decoded
// by goflow2), and an untagged one none.
func TestExtendedSwitchFromTaggedFrame(t *testing.T) {
	dp := newFakeDataplane()
	c := newCollector(t)
	_ = dp.SetPort(3, PortSampling{KernelRate: 1})
	w := newWorker(0, slogDiscard(), dp, nil, nil, persist.New(64), 1)
	w.apply(workerConfig{
		agent:     netip.MustParseAddr("198.18.0.1"),
		receivers: []ReceiverConfig{{Index: 1, Address: c.addr()}},
		samplers:  []samplerSpec{{cfg: SamplerConfig{IfIndex: 3, Instance: 1, Receiver: 1, Rate: 1, HeaderBytes: 128}, kernelRate: 1}},
	})
	f := testFrame()
	tagged := append(append(append([]byte(nil), f[:12]...), 0x81, 0x00, 0x60, 0xc8, 0x08, 0x00), f[14:]...) // prio 3, VLAN 200
	w.handle(&PacketSample{IfIndex: 3, FrameLen: uint32(len(tagged)), Header: tagged})
	w.handle(&PacketSample{IfIndex: 3, FrameLen: uint32(len(f)), Header: f})
	w.closeAll()
	deadline := time.Now().Add(2 * time.Second)
	for len(c.datagrams()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	dgs := c.datagrams()
	if len(dgs) != 1 {
		t.Fatalf("got %d datagrams, want 1", len(dgs))
	}
	var gp goflow.Packet
	if err := goflow.DecodeMessageVersion(bytes.NewBuffer(dgs[0]), &gp); err != nil {
		t.Fatal(err)
	}
	if len(gp.Samples) != 2 {
		t.Fatalf("got %d samples", len(gp.Samples))
	}
	first := gp.Samples[0].(goflow.FlowSample)
	if len(first.Records) != 2 {
		t.Fatalf("tagged frame: %d records, want sampled_header + extended_switch", len(first.Records))
	}
	sw, ok := first.Records[1].Data.(goflow.ExtendedSwitch)
	if !ok || sw.SrcVlan != 200 || sw.SrcPriority != 3 || sw.DstVlan != 200 || sw.DstPriority != 3 {
		t.Fatalf("extended_switch %+v", first.Records[1].Data)
	}
	if second := gp.Samples[1].(goflow.FlowSample); len(second.Records) != 1 {
		t.Fatalf("untagged frame: %d records, want only sampled_header", len(second.Records))
	}
}

// sleepyReader has no samples: it waits until the deadline unless woken.
type sleepyReader struct{ wake chan struct{} }

func (r *sleepyReader) ReadSamples(deadline time.Time, fn func(*PacketSample)) (int, error) {
	select {
	case <-r.wake:
		return 0, nil
	case <-time.After(time.Until(deadline)):
		return 0, os.ErrDeadlineExceeded
	}
}

func (r *sleepyReader) Wake() error {
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return nil
}

// TestApplyReachesIdleWorkerAtOnce checks that Apply wakes a worker that is
// waiting for samples and returns only once the worker runs the new
// configuration, before the kernel is told to sample a new port.
func TestApplyReachesIdleWorkerAtOnce(t *testing.T) {
	dp := newFakeDataplane()
	c := newCollector(t)
	a := New(Options{Workers: 1, Source: dp})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &sleepyReader{wake: make(chan struct{}, 1)}
	go a.Run(ctx, []SampleReader{r})
	time.Sleep(1100 * time.Millisecond) // the worker is now waiting in its reader
	cfg := Config{
		Receivers: []ReceiverConfig{{Index: 1, Address: c.addr()}},
		Samplers:  []SamplerConfig{{IfIndex: 9, Instance: 1, Receiver: 1, Rate: 100, HeaderBytes: 128}},
	}
	start := time.Now()
	if err := a.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Fatalf("Apply took %v: the idle worker was not woken", took)
	}
	if len(a.workers[0].samplers[9]) != 1 {
		t.Fatal("worker does not know the new sampler when Apply returns")
	}
	if _, ok := dp.port(9); !ok {
		t.Fatal("dataplane not told to sample the new port")
	}
}

// TestKernelRateTravelsWithSample checks that a sample taken at a kernel
// rate other than the configured one is sub-sampled against its own rate.
func TestKernelRateTravelsWithSample(t *testing.T) {
	dp := newFakeDataplane()
	w := newWorker(0, slogDiscard(), dp, nil, nil, persist.New(64), 7)
	conn := newCollector(t)
	w.apply(workerConfig{
		receivers: []ReceiverConfig{{Index: 1, Address: conn.addr()}},
		samplers:  []samplerSpec{{cfg: SamplerConfig{IfIndex: 3, Instance: 1, Receiver: 1, Rate: 64, HeaderBytes: 128}, kernelRate: 64}},
	})
	defer w.closeAll()
	// Configured kernel rate 64 would keep everything; samples taken at
	// rate 1 (before a change reached the kernel) must be kept 1 in 64.
	const n = 64000
	for i := 0; i < n; i++ {
		w.handle(&PacketSample{IfIndex: 3, FrameLen: 60, KernelRate: 1, Header: testFrame()[:60]})
	}
	kept := float64(w.stats.FlowSamples.Load())
	mean, sd := float64(n)/64, math.Sqrt(float64(n)*(1.0/64)*(63.0/64))
	if math.Abs(kept-mean) > 4*sd {
		t.Fatalf("kept %v of %d samples taken at rate 1 for sampler rate 64, want %.0f ± %.0f", kept, n, mean, 4*sd)
	}
}
