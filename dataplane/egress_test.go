package dataplane

import (
	"fmt"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/portstats"

	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"

	"github.com/sflowswitchd/sflowswitchd/dataplane/clsact"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// metaCollector is a collector that keeps the samples' whole records.
type metaCollector struct{ *collector }

func startMetaCollector(t *testing.T, d *Dataplane, worker int) metaCollector {
	t.Helper()
	return metaCollector{startCollecting(t, d, worker, true)}
}

// waitFor waits until the collector holds n samples (or timeout) and
// returns copies of the samples and records.
func (c metaCollector) waitFor(n int, timeout time.Duration) ([]reader.RawSample, []bpf.SamplerSampleMeta) {
	c.wait(n, timeout)
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]reader.RawSample(nil), c.got...), append([]bpf.SamplerSampleMeta(nil), c.meta...)
}

// linkTx returns a switch port's tx_packets and rx_packets.
// portsAndPools is one reading of p1's and p2's packet counts and of
// their samplers' pools.
type portsAndPools struct {
	rx1, tx1, tx2        uint64 // the links' packet counts
	in1, out1, out2, in2 uint64 // the pools: p1 in and out, p2 out and in
}

// readPortsAndPools reads the links' counts, the pools, and the links'
// counts again until the two link readings agree (no frame crossed the
// ports while the pools were read), so the pools and counts are of one
// moment.
func readPortsAndPools(t *testing.T, lab *netlab.Lab, d *Dataplane, p1, p2 int) portsAndPools {
	t.Helper()
	for try := 0; ; try++ {
		var r portsAndPools
		r.rx1, r.tx1 = linkPackets(t, lab, lab.Ports[0])
		_, r.tx2 = linkPackets(t, lab, lab.Ports[1])
		for _, x := range []struct {
			get  func(int) (portstats.Counters, error)
			port int
			to   *uint64
		}{{d.Stats().Ingress, p1, &r.in1}, {d.Stats().Egress, p1, &r.out1}, {d.Stats().Egress, p2, &r.out2}, {d.Stats().Ingress, p2, &r.in2}} {
			c, err := x.get(x.port)
			if err != nil {
				t.Fatal(err)
			}
			*x.to = c.Pool
		}
		rx1, tx1 := linkPackets(t, lab, lab.Ports[0])
		_, tx2 := linkPackets(t, lab, lab.Ports[1])
		if rx1 == r.rx1 && tx1 == r.tx1 && tx2 == r.tx2 {
			return r
		}
		if try == 100 {
			t.Fatalf("the ports' packet counts never held still over a reading of the pools")
		}
	}
}

func linkPackets(t *testing.T, lab *netlab.Lab, name string) (rx, tx uint64) {
	t.Helper()
	s := switchLink(t, lab, name).Attrs().Statistics
	if s == nil {
		t.Fatalf("no statistics for %s", name)
	}
	return s.RxPackets, s.TxPackets
}

// TestEgressSampling: a port sampled both ways at rate 1 reports every
// frame it receives once as an ingress sample and every frame it sends
// once as an egress sample (output port, input port from the skb), each
// direction's pool equal to the port's rx_packets and tx_packets since
// the attach; frames through a port sampled at egress only are sampled
// at egress only. Then the direction changes at run time (updatePort):
// both ways -> ingress -> egress, the attachments following.
func TestEgressSampling(t *testing.T) { forTCModes(t, testEgressSampling) }

func testEgressSampling(t *testing.T, tc tcCase) {
	lab := netlab.New(t, 3)
	d := openAuto(t, lab, Config{Workers: 1, MaxPorts: 8, TCMode: tc.mode})
	p1, p2 := lab.PortIndex(t, 0), lab.PortIndex(t, 1)
	if err := d.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 128, Direction: sflow.DirectionBoth}); err != nil {
		t.Fatal(err)
	}
	if err := d.AttachPort(p2, PortConfig{Rate: 1, HeaderBytes: 128, Direction: sflow.DirectionEgress}); err != nil {
		t.Fatal(err)
	}
	if m := d.egressAttachMode(p1); m != tc.want {
		t.Errorf("egress attach mode of p1 %q, want %q", m, tc.want)
	}
	if m := d.AttachMode(p2); m != "" {
		t.Errorf("p2 sampled at egress only has an ingress attachment %q", m)
	}
	var kernelView [2]string
	err := lab.Do(lab.Switch, func() error {
		var err error
		if kernelView[0], err = KernelAttachmentEgress(p1); err != nil {
			return err
		}
		kernelView[1], err = KernelAttachment(p2)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if kernelView[0] != tc.want || kernelView[1] != "" {
		t.Errorf("kernel shows p1 egress %q, p2 ingress %q; want %q and none", kernelView[0], kernelView[1], tc.want)
	}

	// The pools are compared with the ports' packet counts over the same
	// span: from a reading taken once both are attached, so a frame the
	// switch sends by itself between a baseline and an attach (the
	// bridge's IGMP or MLD reports) counts in neither.
	base := readPortsAndPools(t, lab, d, p1, p2)

	c := startMetaCollector(t, d, 0)
	const k = 40
	// host 0 -> host 1 (in at p1, out at p2) and host 1 -> host 0 (in at
	// p2, out at p1): the hosts' own MACs, so the bridge forwards each
	// frame out of one port once it has learned the source.
	lab.SendFrames(t, 0, seqFrames(lab, 0, lab.HostMACs[1], 0, k, 32))
	lab.SendFrames(t, 1, seqFrames(lab, 1, lab.HostMACs[0], 1000, k, 32))
	got, _ := c.waitFor(3*k, 5*time.Second)
	// Anything else? (A frame of another kind would show here as extra.)
	time.Sleep(100 * time.Millisecond)
	got, metas := c.waitFor(len(got)+1, 0)
	c.stop(t)

	type key struct {
		port   uint32
		egress bool
		seq    uint32
	}
	seen := map[key]int{}
	own := 0
	for i, s := range got {
		seq, ok := frameSeq(s.Header)
		if !ok {
			// The switch's own frames (its bridge's IGMP/MLD reports)
			// leave through the ports too: egress samples made here,
			// without an input port.
			if s.Flags&reader.SampleEgress != 0 && s.InIfIndex == 0 {
				own++
				continue
			}
			t.Errorf("sample of another frame: %+v %x", s, s.Header)
			continue
		}
		eg := s.Flags&reader.SampleEgress != 0
		seen[key{s.IfIndex, eg, seq}]++
		switch {
		case eg && s.InIfIndex == 0:
			t.Errorf("egress sample of seq %d on %d without an input port", seq, s.IfIndex)
		case eg && s.InIfIndex == s.IfIndex:
			t.Errorf("egress sample of seq %d: input = output %d", seq, s.IfIndex)
		case !eg && s.InIfIndex != 0:
			t.Errorf("ingress sample of seq %d with input %d", seq, s.InIfIndex)
		}
		if eg && s.RxQueue != 0 {
			t.Errorf("egress sample with rx queue %d", s.RxQueue)
		}
		if metas[i].Ifindex != s.IfIndex {
			t.Errorf("record copy mismatch")
		}
	}
	for i := uint32(0); i < k; i++ {
		// host 0 -> 1: in at p1, out at p2.
		if n := seen[key{uint32(p1), false, i}]; n != 1 {
			t.Errorf("seq %d: %d ingress samples on p1, want 1", i, n)
		}
		if n := seen[key{uint32(p2), true, i}]; n != 1 {
			t.Errorf("seq %d: %d egress samples on p2, want 1", i, n)
		}
		// host 1 -> 0: out at p1 (p2 is not sampled at ingress).
		if n := seen[key{uint32(p1), true, 1000 + i}]; n != 1 {
			t.Errorf("seq %d: %d egress samples on p1, want 1", 1000+i, n)
		}
	}
	if len(seen) != 3*k || len(got)-own != 3*k {
		t.Errorf("%d samples (%d the switch's own), %d distinct, want %d each", len(got), own, len(seen), 3*k)
	}
	for _, s := range got {
		if _, ok := frameSeq(s.Header); !ok {
			continue
		}
		if s.Flags&reader.SampleEgress != 0 && s.IfIndex == uint32(p2) && s.InIfIndex != uint32(p1) {
			t.Errorf("egress sample on p2: input %d, want p1 %d", s.InIfIndex, p1)
		}
		if s.Flags&reader.SampleEgress != 0 && s.IfIndex == uint32(p1) && s.InIfIndex != uint32(p2) {
			t.Errorf("egress sample on p1: input %d, want p2 %d", s.InIfIndex, p2)
		}
	}

	// Pools: exactly the port's packets in each direction over the span.
	end := readPortsAndPools(t, lab, d, p1, p2)
	if end.in1-base.in1 != end.rx1-base.rx1 || end.out1-base.out1 != end.tx1-base.tx1 || end.out2-base.out2 != end.tx2-base.tx2 {
		t.Errorf("pools: p1 in %d out %d, p2 out %d; port packets: p1 rx %d tx %d, p2 tx %d",
			end.in1-base.in1, end.out1-base.out1, end.out2-base.out2, end.rx1-base.rx1, end.tx1-base.tx1, end.tx2-base.tx2)
	}
	if end.in2 != 0 {
		t.Errorf("p2 (egress only) has an ingress pool %d", end.in2)
	}
	in1, err := d.Stats().Ingress(p1)
	if err != nil {
		t.Fatal(err)
	}
	out1, err := d.Stats().Egress(p1)
	if err != nil {
		t.Fatal(err)
	}
	out2, err := d.Stats().Egress(p2)
	if err != nil {
		t.Fatal(err)
	}
	if pool, _ := d.Stats().Pool(uint32(p1)); pool != in1.Pool+out1.Pool {
		t.Errorf("PortPool(p1) %d, want in + out %d", pool, in1.Pool+out1.Pool)
	}
	if in1.Samples != in1.Pool || out1.Samples != out1.Pool || in1.Drops+out1.Drops+out2.Drops != 0 {
		t.Errorf("counters at rate 1: in %+v out %+v, p2 out %+v", in1, out1, out2)
	}

	// Direction changes at run time.
	if err := d.updatePort(p1, PortConfig{Rate: 1, HeaderBytes: 128, Direction: sflow.DirectionIngress}); err != nil {
		t.Fatal(err)
	}
	if d.egressAttachMode(p1) != "" || d.AttachMode(p1) == "" || d.Stats().Direction(p1) != sflow.DirectionIngress {
		t.Errorf("after ingress: egress %q, ingress %q, direction %v", d.egressAttachMode(p1), d.AttachMode(p1), d.Stats().Direction(p1))
	}
	if err := d.updatePort(p1, PortConfig{Rate: 1, HeaderBytes: 128, Direction: sflow.DirectionEgress}); err != nil {
		t.Fatal(err)
	}
	if d.egressAttachMode(p1) != tc.want || d.AttachMode(p1) != "" || d.Stats().Direction(p1) != sflow.DirectionEgress {
		t.Errorf("after egress: egress %q, ingress %q, direction %v", d.egressAttachMode(p1), d.AttachMode(p1), d.Stats().Direction(p1))
	}
	base = readPortsAndPools(t, lab, d, p1, p2)
	c = startMetaCollector(t, d, 0)
	lab.SendFrames(t, 1, seqFrames(lab, 1, lab.HostMACs[0], 2000, k, 32))
	lab.SendFrames(t, 0, seqFrames(lab, 0, lab.HostMACs[1], 3000, k, 32))
	got, _ = c.waitFor(2*k, 5*time.Second)
	c.stop(t)
	var outP1, inP1 int
	for _, s := range got {
		seq, ok := frameSeq(s.Header)
		if !ok || s.IfIndex != uint32(p1) {
			continue
		}
		if s.Flags&reader.SampleEgress != 0 && seq >= 2000 && seq < 3000 {
			outP1++
		}
		if s.Flags&reader.SampleEgress == 0 {
			inP1++
		}
	}
	if outP1 != k || inP1 != 0 {
		t.Errorf("p1 egress only: %d egress samples (want %d), %d ingress (want 0)", outP1, k, inP1)
	}
	end = readPortsAndPools(t, lab, d, p1, p2)
	if end.out1-base.out1 != end.tx1-base.tx1 {
		t.Errorf("p1 egress pool +%d after the change, tx_packets +%d", end.out1-base.out1, end.tx1-base.tx1)
	}
	for _, p := range []int{p1, p2} {
		if err := d.DetachPort(p); err != nil {
			t.Fatal(err)
		}
	}
	err = lab.Do(lab.Switch, func() error {
		for _, p := range []int{p1, p2} {
			for _, f := range []func(int) (string, error){KernelAttachment, KernelAttachmentEgress} {
				if m, err := f(p); err != nil || m != "" {
					t.Errorf("ifindex %d still attached after detach: %q %v", p, m, err)
				}
			}
			q, err := clsact.IngressQdisc(p)
			if err != nil {
				return err
			}
			if q != nil {
				t.Errorf("ifindex %d keeps a %s qdisc after detach", p, q.Type())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkTCEgressUnsampled: the per-packet cost of a frame the egress
// sampler does not sample (rate 2^31): the port's own tc_out_sampler
// instance, run with BPF_PROG_TEST_RUN on a 64-byte frame (the kernel's
// mean time per run). What a port sampled both ways pays per sent frame
// on top of its ingress sampler.
func BenchmarkTCEgressUnsampled(b *testing.B) {
	lab := netlab.New(b, 1)
	d := openIn(b, lab, Config{Workers: 1, MaxPorts: 2, RingBytes: 64 << 20})
	p1 := lab.LinkIndex(lab.Switch, "p1")
	attach(PortConfig{Rate: 1 << 31, HeaderBytes: 128, Direction: sflow.DirectionEgress})(b, d, p1)
	d.mu.Lock()
	prog := d.ports[p1].out.Program()
	d.mu.Unlock()
	frame := seqFrames(lab, 0, noHostMAC, 0, 1, 22)[0] // 64 bytes
	var per time.Duration
	b.ResetTimer()
	err := lab.Do(lab.Switch, func() error {
		ret, dur, err := prog.Benchmark(frame, b.N, nil)
		if err == nil && ret != 0xffffffff { // TC_ACT_UNSPEC (-1)
			err = fmt.Errorf("returned %d, want TC_ACT_UNSPEC", int32(ret))
		}
		per = dur
		return err
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(per.Nanoseconds()), "kernel-ns/pkt")
}

// BenchmarkTCPass is BenchmarkTCEgressUnsampled's baseline: a SchedCLS
// program that only returns TC_ACT_UNSPEC, run the same way (the test
// run's own cost per run).
func BenchmarkTCPass(b *testing.B) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
	if err != nil {
		b.Fatal(err)
	}
	defer prog.Close()
	lab := netlab.New(b, 1)
	frame := seqFrames(lab, 0, noHostMAC, 0, 1, 22)[0] // 64 bytes
	b.ResetTimer()
	_, per, err := prog.Benchmark(frame, b.N, nil)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(per.Nanoseconds()), "kernel-ns/pkt")
}
