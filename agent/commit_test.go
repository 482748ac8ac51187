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

// ringSim is a pinned ring buffer as a process sees it: records from
// consumer position cons on, CommitRead storing the position of the record
// being handed (dataplane ringReader.commit), the position stored after
// each batch. kill, when set, ends the batch after that record (index)
// and keeps what a process SIGKILLed right there leaves behind: the agent
// state (mem) and the stored position, in killed.
type ringSim struct {
	recs    []PacketSample
	cons    int // stored consumer position
	handled int // the record being handed
	mem     []byte
	kill    int
	killed  chan killedState
	// killAtRead: the kill comes at the read after the first batch.
	killAtRead bool
}

type killedState struct {
	mem  []byte
	cons int
}

func (r *ringSim) CommitRead() { r.cons = r.handled }

func (r *ringSim) ReadSamples(deadline time.Time, fn func(*PacketSample)) (int, error) {
	if r.killAtRead && r.cons > 0 && r.killed != nil {
		// Killed between batches, the last one's datagram not sent.
		r.killed <- killedState{mem: append([]byte(nil), r.mem...), cons: r.cons}
		r.killed = nil
		r.recs = r.recs[:0]
	}
	n := 0
	for i := r.cons; i < len(r.recs); i++ {
		r.handled = i
		ps := r.recs[i]
		fn(&ps)
		n++
		if i == r.kill && r.killed != nil {
			r.killed <- killedState{mem: append([]byte(nil), r.mem...), cons: r.cons}
			r.killed = nil
			// The process is gone: it reads and stores nothing more.
			r.recs = r.recs[:0]
			return n, nil
		}
	}
	if n > 0 {
		r.cons = len(r.recs)
		return n, nil
	}
	time.Sleep(min(time.Until(deadline), 10*time.Millisecond))
	return 0, os.ErrDeadlineExceeded
}

// startRing starts an agent over state mem reading ring, one sampler of
// ifindex at 1 in 1; the returned function stops it.
func startRing(t *testing.T, mem []byte, ring SampleReader, col *collector, ifindex uint32) (stop func()) {
	t.Helper()
	st, err := persist.Open(mem)
	if err != nil {
		t.Fatal(err)
	}
	a := New(Options{Workers: 1, Source: newFakeDataplane(), State: st, SendBatch: 1})
	if err := a.Apply(Config{
		AgentAddress: netip.MustParseAddr("198.18.0.1"),
		Receivers:    []ReceiverConfig{{Index: 1, Address: col.addr(), MaxDatagramSize: 1400}},
		Samplers:     []SamplerConfig{{IfIndex: ifindex, Instance: 1, Receiver: 1, Rate: 1, HeaderBytes: 128}},
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { a.Run(ctx, []SampleReader{ring}); close(ran) }()
	return func() { cancel(); <-ran }
}

// flowSamples decodes the flow samples a collector received: sequence
// numbers and pools, in order.
func flowSamples(t *testing.T, c *collector) (seqs, pools []uint32) {
	t.Helper()
	for _, b := range c.datagrams() {
		d, err := sflow.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range d.Samples {
			if fs, ok := s.(*sflow.FlowSample); ok {
				seqs = append(seqs, fs.SequenceNumber)
				pools = append(pools, fs.SamplePool)
			}
		}
	}
	return seqs, pools
}

// TestKillMidBatchCommittedState: a process SIGKILLed in the middle of a
// ring batch, after it sent a datagram (the ring position stored up to its
// samples) and read three records more, whose samples waited in the next
// datagram. The process that takes over reads those records again. Their
// pools must be theirs (each record is one frame at 1 in 1: the last
// sample's pool is the port's frame count), and their sample sequence
// numbers must follow the last one sent, with no gap: only what the ring
// position committed may be kept in the agent's state. (Before, the pool
// of the latest sample read was kept at once, and the records read again
// were raised above it: the pools ran 4 frames ahead for good.)
func TestKillMidBatchCommittedState(t *testing.T) {
	const ifindex = 9
	const frames = 40
	frame := testFrame()
	recs := make([]PacketSample, frames)
	for i := range recs {
		recs[i] = PacketSample{IfIndex: ifindex, PoolSum: true, CPUPool: uint64(i + 1), KernelRate: 1,
			Header: frame, FrameLen: uint32(len(frame))}
	}
	mem := make([]byte, persist.Words(64)*8)
	if _, err := persist.Open(mem); err != nil {
		t.Fatal(err)
	}
	// 7 samples of 128-byte headers fill a 1400-byte datagram: the 8th
	// record's sample completes the first, which is sent (position 7
	// stored); records 8..10 are read, then the kill.
	const kill = 10
	ring := &ringSim{recs: append([]PacketSample(nil), recs...), mem: mem, kill: kill, killed: make(chan killedState, 1)}
	col1 := newCollector(t)
	stop1 := startRing(t, mem, ring, col1, ifindex)
	var k killedState
	select {
	case k = <-ring.killed:
	case <-time.After(10 * time.Second):
		t.Fatal("the ring was not read")
	}
	stop1()
	if k.cons != 7 {
		t.Fatalf("ring position at the kill %d, want 7 (the first datagram's samples)", k.cons)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(col1.datagrams()) < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	seqs1, pools1 := flowSamples(t, col1)
	if len(pools1) < 7 || pools1[6] != 7 || seqs1[6] != 7 {
		t.Fatalf("before the kill: sequence numbers %v, pools %v; want the first 7 at 1..7", seqs1, pools1)
	}

	// The next process: the state and the ring as the killed one left them.
	ring2 := &ringSim{recs: recs, cons: k.cons, mem: k.mem, kill: -1}
	col2 := newCollector(t)
	stop2 := startRing(t, k.mem, ring2, col2, ifindex)
	time.Sleep(200 * time.Millisecond) // read at once; the rest leave at the close
	stop2()
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, p := flowSamples(t, col2); len(p) >= frames-7 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	seqs2, pools2 := flowSamples(t, col2)
	if len(pools2) != frames-7 {
		t.Fatalf("after the take-over: %d samples, want %d (records 8..%d)", len(pools2), frames-7, frames)
	}
	for i := range pools2 {
		if pools2[i] != uint32(8+i) || seqs2[i] != uint32(8+i) {
			t.Fatalf("after the take-over, sample %d: sequence %d pool %d, want %d and %d (sequence numbers %v, pools %v)",
				i, seqs2[i], pools2[i], 8+i, 8+i, seqs2, pools2)
		}
	}
}

// TestHandleCommitNoAlloc: a kernel sample handled, and the ring position
// stored with the state that goes with it (before a send), allocate
// nothing once the port has been seen.
func TestHandleCommitNoAlloc(t *testing.T) {
	const ifindex = 9
	col := newCollector(t)
	a := New(Options{Workers: 1, Source: newFakeDataplane()})
	if err := a.Apply(Config{
		AgentAddress: netip.MustParseAddr("198.18.0.1"),
		Receivers:    []ReceiverConfig{{Index: 1, Address: col.addr(), MaxDatagramSize: 1400}},
		Samplers:     []SamplerConfig{{IfIndex: ifindex, Instance: 1, Receiver: 1, Rate: 1, HeaderBytes: 128}},
	}); err != nil {
		t.Fatal(err)
	}
	w := a.workers[0]
	w.apply(<-w.ctrl) // as the worker's loop does
	defer w.closeAll()
	frame := testFrame()
	ps := PacketSample{IfIndex: ifindex, PoolSum: true, KernelRate: 1, Header: frame, FrameLen: uint32(len(frame))}
	n := uint64(0)
	if allocs := testing.AllocsPerRun(1000, func() {
		n++
		ps.CPUPool = n
		w.handle(&ps)
		w.commitFn()
	}); allocs != 0 {
		t.Errorf("%.1f allocations per sample", allocs)
	}
	if got := *w.samplers[ifindex][0].seq; got != n {
		t.Errorf("persisted sequence number %d, want %d", got, n)
	}
	if got := w.pools[ifindex].sums[sumLast]; got != n {
		t.Errorf("persisted last pool %d, want %d", got, n)
	}
}

// TestKillAfterBatchCommittedState: killed between two batches, the
// first one's last datagram (records 8..10) made but not sent: the ring
// position covers the batch, so the state must have its pools and
// sequence numbers. The next process numbers the next records on from
// 11 (the collector sees samples 8..10 lost: sFlow's loss signal), with
// their own pools. (Kept only at sends, the numbers 8..10 were given
// again to other samples: a loss no collector could see.)
func TestKillAfterBatchCommittedState(t *testing.T) {
	const ifindex = 9
	frame := testFrame()
	mk := func(from, to int) []PacketSample {
		var out []PacketSample
		for i := from; i <= to; i++ {
			out = append(out, PacketSample{IfIndex: ifindex, PoolSum: true, CPUPool: uint64(i), KernelRate: 1,
				Header: frame, FrameLen: uint32(len(frame))})
		}
		return out
	}
	mem := make([]byte, persist.Words(64)*8)
	if _, err := persist.Open(mem); err != nil {
		t.Fatal(err)
	}
	ring := &ringSim{recs: mk(1, 10), mem: mem, kill: -1, killAtRead: true, killed: make(chan killedState, 1)}
	col1 := newCollector(t)
	stop1 := startRing(t, mem, ring, col1, ifindex)
	var k killedState
	select {
	case k = <-ring.killed:
	case <-time.After(10 * time.Second):
		t.Fatal("the ring was not read")
	}
	stop1()
	if k.cons != 10 {
		t.Fatalf("ring position at the kill %d, want 10 (the batch)", k.cons)
	}
	ring2 := &ringSim{recs: append(mk(1, 10), mk(11, 15)...), cons: k.cons, mem: k.mem, kill: -1}
	col2 := newCollector(t)
	stop2 := startRing(t, k.mem, ring2, col2, ifindex)
	time.Sleep(200 * time.Millisecond)
	stop2()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, p := flowSamples(t, col2); len(p) >= 5 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	seqs, pools := flowSamples(t, col2)
	if len(pools) != 5 {
		t.Fatalf("after the take-over: %d samples, want 5", len(pools))
	}
	for i := range pools {
		if pools[i] != uint32(11+i) || seqs[i] != uint32(11+i) {
			t.Fatalf("after the take-over, sample %d: sequence %d pool %d, want %d and %d (sequence numbers %v, pools %v)",
				i, seqs[i], pools[i], 11+i, 11+i, seqs, pools)
		}
	}
}
