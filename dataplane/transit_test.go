package dataplane

import (
	"slices"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// TestTransitQueue follows sampled frames to where they leave (package transit):
// a burst of equal frames bridged from p1 to p2, where a token bucket
// (tbf, 8 Mbit/s) makes them queue. Every frame is sampled at p1 (TC,
// 1 in 1) and its record arrives only once the frame left p2's qdisc:
// reader.TransitSent through p2, the bytes queued ahead of it a whole number of
// frames and never more than were sent before it, its wait in the queue
// at least what those bytes take at the token rate, and the delay
// measured from the sample to the frame leaving consistent with both. The
// accounting: every record parked was delivered (sent), none left parked.
func TestTransitQueue(t *testing.T) {
	// 8 Mbit/s: a 1000-byte frame takes 1 ms to leave.
	const rateBytesPerSec = 1_000_000
	lab, d, p1, p2, c := transitLab(t, 256, "tbf", "rate", "8mbit", "burst", "1600", "limit", "1000000")
	const k, payload = 40, 958 // 958 + 42 header bytes = 1000-byte frames
	frames := seqFrames(lab, 0, lab.HostMACs[1], 0, k, payload)
	frameLen := uint32(len(frames[0]))
	lab.SendFrames(t, 0, frames)
	got := c.waitFor(k, testutil.Scaled(10*time.Second))

	bySeq := map[uint32]reader.RawSample{}
	for _, s := range got {
		if seq, ok := frameSeq(s.Header); ok && s.IfIndex == uint32(p1) {
			bySeq[seq] = s
		}
	}
	if len(bySeq) != k {
		t.Fatalf("%d of %d frames sampled", len(bySeq), k)
	}
	maxDepth := uint32(0)
	for seq := uint32(0); seq < k; seq++ {
		s := bySeq[seq]
		tr := s.Transit
		if s.Flags&reader.SampleTransit == 0 || tr.Status != reader.TransitSent {
			t.Errorf("frame %d: flags %#x, transit %+v: want sent", seq, s.Flags, tr)
			continue
		}
		if tr.OutIfIndex != uint32(p2) {
			t.Errorf("frame %d: left through ifindex %d, want p2 %d", seq, tr.OutIfIndex, p2)
		}
		if s.Flags&reader.SampleQueue == 0 {
			t.Errorf("frame %d: no queue depth although p2 has a qdisc", seq)
			continue
		}
		// The depth is the frames ahead of it in the queue: a whole
		// number of frames (the qdisc counts each at its length), never
		// more than the frames sent before it.
		if tr.Depth%frameLen != 0 || tr.Depth > seq*frameLen {
			t.Errorf("frame %d: depth %d bytes: not a whole number of %d-byte frames, or more than the %d before it", seq, tr.Depth, frameLen, seq)
		}
		delay := time.Duration(tr.DoneNs - s.Timestamp)
		// Those bytes leave at the token rate before it can.
		wait := time.Duration(float64(tr.Depth) / rateBytesPerSec * float64(time.Second))
		if delay < wait-200*time.Microsecond {
			t.Errorf("frame %d: transit %v, less than the %v its %d queued bytes take at 8 Mbit/s", seq, delay, wait, tr.Depth)
		}
		maxDepth = max(maxDepth, tr.Depth)
		if seq%8 == 0 || seq == k-1 {
			t.Logf("frame %2d: depth %5d bytes (%2d frames), transit %v (queue drains in %v)", seq, tr.Depth, tr.Depth/frameLen, delay.Round(time.Microsecond), wait.Round(time.Microsecond))
		}
	}
	if maxDepth < 10*frameLen {
		t.Errorf("deepest queue %d bytes: the burst did not queue behind the token bucket", maxDepth)
	}
	st, err := d.Transit().Stats()
	if err != nil {
		t.Fatal(err)
	}
	parked, err := d.Transit().Parked()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("transit outcomes %+v, parked now %d", st, parked)
	if st.Parked != k || st.Sent != k || st.Queued != k || parked != 0 {
		t.Errorf("outcomes %+v, parked now %d: want %d parked, sent and queued, none left", st, parked, k)
	}
}

// transitLab is the lab of the transit tests: two ports, transit on with
// entries records, p1 sampled at TC 1 in 1 with its records collected, a
// root qdisc of kind (tc qdisc add ... root QDISC...) on p2 when given.
// It skips on a kernel that cannot follow frames.
func transitLab(t *testing.T, entries int, qdisc ...string) (*netlab.Lab, *Dataplane, int, int, *collector) {
	t.Helper()
	fs := kernelFeatures()
	testskip.Feature(t, fs, features.FeatureKernCtx)
	testskip.Feature(t, fs, features.FeatureTransit)
	lab := netlab.New(t, 2)
	if len(qdisc) > 0 {
		lab.AddQdisc(t, lab.Switch, "p2", qdisc[0], qdisc[1:]...)
	}
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, Hook: HookTC, TransitEntries: entries})
	if !d.Transit().On() {
		t.Fatal("transit is off although the kernel has its features")
	}
	p1, p2 := lab.PortIndex(t, 0), lab.PortIndex(t, 1)
	c := startCollector(t, d, 0)
	t.Cleanup(func() { c.stop(t) })
	if err := d.AttachPort(p1, PortConfig{Rate: 1, Mode: ModeInline, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	return lab, d, p1, p2, c
}

// TestTransitOff: with transit off (TransitEntries 0) records are
// delivered at once, without transit, and nothing is parked.
func TestTransitOff(t *testing.T) {
	lab := netlab.New(t, 2)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, Hook: HookTC})
	if d.Transit().On() {
		t.Fatal("transit on without TransitEntries")
	}
	p1 := lab.PortIndex(t, 0)
	c := startCollector(t, d, 0)
	defer c.stop(t)
	if err := d.AttachPort(p1, PortConfig{Rate: 1, Mode: ModeInline, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	const k = 20
	lab.SendFrames(t, 0, seqFrames(lab, 0, lab.HostMACs[1], 0, k, 32))
	n := 0
	for _, s := range c.waitFor(k, testutil.Scaled(5*time.Second)) {
		if _, ok := frameSeq(s.Header); !ok {
			continue
		}
		n++
		if s.Flags&(reader.SampleTransit|reader.SampleQueue) != 0 {
			t.Errorf("record with transit off has flags %#x", s.Flags)
		}
	}
	if n != k {
		t.Errorf("%d of %d frames sampled", n, k)
	}
	if st, err := d.Transit().Stats(); err != nil || st.Parked != 0 {
		t.Errorf("outcomes %+v (%v): nothing should have been parked", st, err)
	}
}

// TestTransitEnds: every way a wait can end delivers the record exactly
// once. A token bucket so slow (1 kbit/s: 8 s per 1000-byte frame) that
// a queued frame is still queued when the sweep looks: the first frame
// leaves on the bucket's burst (sent), the next wait in the queue until
// the sweep delivers them (stale: older than a second, with the depth
// they met), and a frame beyond the queue's limit is dropped at enqueue
// (dropped). Nothing stays parked.
func TestTransitEnds(t *testing.T) {
	lab, d, _, p2, c := transitLab(t, 16, "tbf", "rate", "1kbit", "burst", "1600", "limit", "2000")
	const k = 6
	lab.SendFrames(t, 0, seqFrames(lab, 0, lab.HostMACs[1], 0, k, 958))
	got := c.waitFor(k, testutil.Scaled(5*time.Second))
	status := map[uint32]int{}
	seen := map[uint32]bool{}
	for _, s := range got {
		seq, ok := frameSeq(s.Header)
		if !ok {
			continue
		}
		if seen[seq] {
			t.Errorf("frame %d delivered twice", seq)
		}
		seen[seq] = true
		tr := s.Transit
		status[tr.Status]++
		t.Logf("frame %d: flags %#x transit %+v after %v", seq, s.Flags, tr, time.Duration(tr.DoneNs-s.Timestamp).Round(time.Millisecond))
		switch {
		case seq == 0 && (tr.Status != reader.TransitSent || tr.OutIfIndex != uint32(p2)):
			t.Errorf("frame 0 (the bucket's burst): %+v, want sent through p2 (%d)", tr, p2)
		case tr.Status == reader.TransitStale:
			if s.Flags&reader.SampleQueue == 0 {
				t.Errorf("frame %d: stale in the queue but no depth", seq)
			}
			if age := time.Duration(tr.DoneNs - s.Timestamp); age < time.Second {
				t.Errorf("frame %d: stale after %v, before the 1 s bound", seq, age)
			}
		}
	}
	if len(seen) != k {
		t.Errorf("%d of %d frames delivered", len(seen), k)
	}
	if status[reader.TransitStale] == 0 || status[reader.TransitDropped] == 0 {
		t.Errorf("statuses %v: want stale (queued) and dropped (beyond the limit) records", status)
	}
	st, err := d.Transit().Stats()
	if err != nil {
		t.Fatal(err)
	}
	parked, err := d.Transit().Parked()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("transit outcomes %+v, parked now %d", st, parked)
	if st.Parked != k || st.Sent+st.Dropped+st.Consumed+st.Stale != k || parked != 0 {
		t.Errorf("outcomes %+v, parked now %d: want %d parked and ended, none left", st, parked, k)
	}
}

// BenchmarkTransitIdle: what transit costs every frame the machine
// queues, sends or frees while no record is parked (the usual state at
// ordinary sampling rates): frames bridged h1 -> p1 -> p2 -> h2, no port
// sampled, transit on. The kernel's own run-time statistics of each
// transit program (BPF_ENABLE_STATS, on while the benchmark runs) give
// ns per call and calls per forwarded frame; transit-ns/frame is their
// sum per frame. empty-xmit-ns/call is a program that does nothing on
// net_dev_start_xmit, timed the same way: the statistics' own clock
// reads are in every figure, so the difference is transit's. The BPF
// trampoline's entry and exit around each call are not in it.
func BenchmarkTransitIdle(b *testing.B) {
	fs := kernelFeatures()
	testskip.Feature(b, fs, features.FeatureKernCtx)
	testskip.Feature(b, fs, features.FeatureTransit)
	lab := netlab.New(b, 2)
	d := openIn(b, lab, Config{Workers: 1, MaxPorts: 4, Hook: HookTC, TransitEntries: 16})
	if !d.Transit().On() {
		b.Fatal("transit off")
	}
	progs := map[string]*ebpf.Program{
		"enqueue": d.transit.Objects().TransitEnqueue, "xmit": d.transit.Objects().TransitXmit,
		"drop": d.transit.Objects().TransitDrop, "consume": d.transit.Objects().TransitConsume,
	}
	// The baseline: a program that does nothing, on the same
	// tracepoint, timed the same way (the statistics' own clock reads
	// are in every figure).
	empty, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "net_dev_start_xmit",
		License: "GPL", Instructions: asm.Instructions{asm.LoadImm(asm.R0, 0, asm.DWord), asm.Return()},
	})
	if err != nil {
		b.Fatalf("loading the empty tp_btf program: %v", err)
	}
	defer empty.Close()
	el, err := link.AttachTracing(link.TracingOptions{Program: empty})
	if err != nil {
		b.Fatalf("attaching the empty tp_btf program: %v", err)
	}
	defer el.Close()
	progs["empty-xmit"] = empty
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("enabling BPF run-time statistics: %v", err)
	}
	defer stats.Close()
	read := func() map[string]ebpf.ProgramStats {
		out := map[string]ebpf.ProgramStats{}
		for n, p := range progs {
			s, err := p.Stats()
			if err != nil {
				b.Fatalf("stats of %s: %v", n, err)
			}
			out[n] = *s
		}
		return out
	}
	const per = 1000
	frames := seqFrames(lab, 0, lab.HostMACs[1], 0, per, 32)
	before := read()
	for b.Loop() {
		lab.SendFrames(b, 0, frames)
	}
	after := read()
	nframes := float64(b.N * per)
	var total time.Duration
	for n := range progs {
		runs := after[n].RunCount - before[n].RunCount
		rt := after[n].Runtime - before[n].Runtime
		if n != "empty-xmit" {
			total += rt
		}
		if runs > 0 {
			b.ReportMetric(float64(rt.Nanoseconds())/float64(runs), n+"-ns/call")
		}
		b.ReportMetric(float64(runs)/nframes, n+"-calls/frame")
	}
	b.ReportMetric(float64(total.Nanoseconds())/nframes, "transit-ns/frame")
}

// TestTransitNetem: a frame held by netem for 10 ms on its way out of p2
// reads a transit of 10 ms (10 ms ± 1 ms) from its sample at
// p1 to leaving p2's qdisc. netem is not in every kernel (Debian's have
// it; make vagrant-test runs this in their VMs).
func TestTransitNetem(t *testing.T) {
	lab, _, _, p2, c := transitLab(t, 64, "netem", "delay", "10ms")
	const k = 20
	for i := 0; i < k; i++ { // one at a time: each alone in the queue
		lab.SendFrames(t, 0, seqFrames(lab, 0, lab.HostMACs[1], uint32(i), 1, 32))
		time.Sleep(testutil.Scaled(15 * time.Millisecond))
	}
	got := c.waitFor(k, testutil.Scaled(5*time.Second))
	var delays []time.Duration
	for _, s := range got {
		seq, ok := frameSeq(s.Header)
		if !ok {
			continue
		}
		tr := s.Transit
		if tr.Status != reader.TransitSent || tr.OutIfIndex != uint32(p2) {
			t.Errorf("frame %d: %+v, want sent through p2 (%d)", seq, tr, p2)
			continue
		}
		delays = append(delays, time.Duration(tr.DoneNs-s.Timestamp))
	}
	if len(delays) != k {
		t.Fatalf("%d of %d frames followed to p2", len(delays), k)
	}
	slices.Sort(delays)
	med := delays[len(delays)/2]
	t.Logf("transit over netem delay 10ms: median %v, min %v, max %v", med, delays[0], delays[len(delays)-1])
	if med < 10*time.Millisecond || med > 11*time.Millisecond {
		t.Errorf("median transit %v, want 10 ms ± 1 ms (netem never releases a frame early)", med)
	}
	if delays[0] < 10*time.Millisecond {
		t.Errorf("a transit of %v, below netem's 10 ms", delays[0])
	}
}
