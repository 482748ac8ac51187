package agent

import (
	"testing"

	"github.com/sflowswitchd/sflowswitchd/agent/persist"
)

// TestPortPoolAtSample: each sample's pool is its CPU's count at the frame
// plus the other CPUs' latest reported counts; consecutive pools strictly
// increase while CPUs interleave, and a CPU never seen before grows the
// table.
func TestPortPoolAtSample(t *testing.T) {
	p := newPortPool(0, nil, 0)
	steps := []struct {
		cpu  uint32
		pool uint64
		want uint64
	}{
		{0, 5, 5},
		{1, 3, 8},
		{0, 9, 12},
		{1, 4, 13},
		{uint32(len(p.cpu)) + 3, 2, 15}, // a CPU beyond NumCPU
		{0, 10, 16},
	}
	prev := uint64(0)
	for i, s := range steps {
		got := p.at(false, false, s.cpu, s.pool)
		if got != s.want {
			t.Errorf("step %d: cpu %d pool %d -> %d, want %d", i, s.cpu, s.pool, got, s.want)
		}
		if got <= prev {
			t.Errorf("step %d: pool %d not above previous %d", i, got, prev)
		}
		prev = got
	}
	// A stale (smaller) count never lowers the pool: the sample is still a
	// frame after the previous; an absurd CPU number is ignored.
	if got := p.at(false, false, 1, 1); got != 17 {
		t.Errorf("stale count: %d, want 17", got)
	}
	if got := p.at(false, false, maxCPUs, 1<<40); got != 17 {
		t.Errorf("absurd CPU: %d, want 17", got)
	}
}

func TestPortPoolNoAlloc(t *testing.T) {
	p := newPortPool(0, nil, 0)
	n := uint64(0)
	if a := testing.AllocsPerRun(1000, func() { n++; p.at(false, false, 0, n) }); a != 0 {
		t.Errorf("%.1f allocations per sample", a)
	}
}

// BenchmarkPortPoolAt: one kernel sample's pool at sample time (two CPUs
// alternating), done for every kernel sample.
func BenchmarkPortPoolAt(b *testing.B) {
	p := newPortPool(0, nil, 0)
	var n uint64
	b.ReportAllocs()
	for b.Loop() {
		n++
		p.at(false, false, uint32(n&1), n)
	}
}

// BenchmarkPortPoolCommitted: BenchmarkPortPoolAt as the worker does it
// with a persistent state: each sample marked (what it changes kept for
// persist), and the pool persisted every 32 samples, in the middle of a
// sample (a send: the ring position stored up to it). A send holds at
// least 32 samples (one per datagram), most often many more.
func BenchmarkPortPoolCommitted(b *testing.B) {
	st := persist.New(64)
	p := newPortPool(0, st, 7)
	var n uint64
	b.ReportAllocs()
	for b.Loop() {
		n++
		p.mark(n)
		p.at(false, false, uint32(n&1), n)
		if n%32 == 0 {
			p.persist(n)
		}
	}
}

// TestPortPoolBothDirections: a port sampled both ways has a count per CPU
// in each direction; the pool is their sum, and the same CPU's counts of
// the two directions never replace each other.
func TestPortPoolBothDirections(t *testing.T) {
	p := newPortPool(0, nil, 0)
	steps := []struct {
		egress bool
		cpu    uint32
		pool   uint64
		want   uint64
	}{
		{false, 0, 5, 5},
		{true, 0, 2, 7}, // egress of CPU 0: added, not compared with ingress' 5
		{false, 0, 6, 8},
		{true, 1, 4, 12},
		{true, 0, 3, 13},
		{true, 0, 1, 14}, // stale: still a frame after the previous
	}
	for i, s := range steps {
		if got := p.at(s.egress, false, s.cpu, s.pool); got != s.want {
			t.Errorf("step %d: egress %v cpu %d pool %d -> %d, want %d", i, s.egress, s.cpu, s.pool, got, s.want)
		}
	}
}

// TestPortPoolPersists: the per-CPU counts a pool was told live in the
// agent's state, so the next program (the same region adopted) continues
// the port's pools where they were; another attachment (another base)
// starts afresh, and so does a port freed.
func TestPortPoolPersists(t *testing.T) {
	mem := make([]byte, persist.Words(16)*8)
	st, err := persist.Open(mem)
	if err != nil {
		t.Fatal(err)
	}
	p := newPortPool(100, st, 7)
	p.at(false, false, 0, 5)
	p.at(false, false, 1, 3)
	p.persist(0) // the ring position stored: the worker keeps them

	st2, err := persist.Open(mem) // the next program
	if err != nil || !st2.Adopted() {
		t.Fatalf("state not adopted: %v", err)
	}
	p2 := newPortPool(100, st2, 7)
	if got := p2.at(false, false, 0, 6); got != 9 {
		t.Errorf("continued pool: %d, want 6 + 3 told before", got)
	}
	if got := newPortPool(200, st2, 7).at(false, false, 0, 1); got != 1 {
		t.Errorf("new attachment's pool: %d, want 1 (afresh)", got)
	}
	p2.free(st2, 7)
	if got := newPortPool(200, st2, 7).at(false, false, 1, 2); got != 2 {
		t.Errorf("pool after free: %d, want 2", got)
	}
}

// TestPortPoolSum: records that carry the kernel's every-CPU sum give the
// pool directly; records without it (an older program's, left in a ring)
// still count by CPU, and the larger of the two views counts; a sum read
// while another CPU's sample was being taken (smaller than the previous
// pool) is raised to one above it; the directions add up.
func TestPortPoolSum(t *testing.T) {
	p := newPortPool(0, nil, 0)
	steps := []struct {
		egress, all bool
		cpu         uint32
		pool        uint64
		want        uint64
	}{
		{false, false, 0, 5, 5},  // an older program's record: CPU 0 alone
		{false, true, 1, 40, 40}, // the sum: CPU 1's frames and CPU 0's since
		{false, true, 0, 39, 41}, // read while CPU 1's sample was taken: raised
		{false, true, 0, 50, 50},
		{false, false, 1, 20, 51}, // an old per-CPU record: below the sum, one frame on
		{true, true, 0, 7, 57},    // egress sum adds
		{false, true, 1, 60, 67},
	}
	prev := uint64(0)
	for i, s := range steps {
		got := p.at(s.egress, s.all, s.cpu, s.pool)
		if got != s.want {
			t.Errorf("step %d: egress %v sum %v cpu %d pool %d -> %d, want %d", i, s.egress, s.all, s.cpu, s.pool, got, s.want)
		}
		if got <= prev {
			t.Errorf("step %d: pool %d not above previous %d", i, got, prev)
		}
		prev = got
	}
}

// TestPortPoolSumsPersist: a port sampled both ways, taken over by the
// next program (the same state). Its first sample there is an egress one:
// the pool adds the ingress sum the earlier program last saw (not 0), and
// stays above the pool of the earlier program's last sample, as it would
// have in one program.
func TestPortPoolSumsPersist(t *testing.T) {
	mem := make([]byte, persist.Words(16)*8)
	st, err := persist.Open(mem)
	if err != nil {
		t.Fatal(err)
	}
	p := newPortPool(100, st, 7)
	if got := p.at(false, true, 0, 500); got != 500 {
		t.Fatalf("ingress sum 500: pool %d", got)
	}
	if got := p.at(true, true, 1, 20); got != 520 {
		t.Fatalf("egress sum 20: pool %d", got)
	}
	p.persist(0)
	st2, err := persist.Open(mem)
	if err != nil || !st2.Adopted() {
		t.Fatalf("state not adopted: %v", err)
	}
	p2 := newPortPool(100, st2, 7)
	if got := p2.at(true, true, 1, 19); got != 521 {
		t.Errorf("next program, a stale egress sum 19: pool %d, want 521 (one above the last)", got)
	}
	if got := p2.at(true, true, 0, 25); got != 525 {
		t.Errorf("next program, egress sum 25: pool %d, want 500 + 25", got)
	}
	if got := newPortPool(200, st2, 7).at(true, true, 0, 3); got != 3 {
		t.Errorf("another attachment: pool %d, want 3 (afresh)", got)
	}
}

// TestPortPoolPersistUncommitted: the state a pool persists while a
// sample is being handled (the ring position stored up to it, before a
// send) leaves that sample out, per-CPU count included; persisted
// between samples, it has all of them.
func TestPortPoolPersistUncommitted(t *testing.T) {
	mem := make([]byte, persist.Words(16)*8)
	st, err := persist.Open(mem)
	if err != nil {
		t.Fatal(err)
	}
	p := newPortPool(0, st, 7)
	p.mark(1)
	p.at(false, false, 0, 5) // an older program's record: CPU 0's count
	p.mark(2)
	p.at(false, true, 1, 40) // the every-CPU sum
	p.mark(3)
	p.at(false, false, 1, 41)
	p.persist(3) // sample 3 being handled: not covered by the ring position
	next := func() *portPool {
		st2, err := persist.Open(append([]byte(nil), mem...))
		if err != nil || !st2.Adopted() {
			t.Fatalf("state not adopted: %v", err)
		}
		return newPortPool(0, st2, 7)
	}
	if q := next(); q.last != 40 || q.inAll != 40 || q.cpu[0] != 5 || (len(q.cpu) > 1 && q.cpu[1] != 0) {
		t.Fatalf("persisted during sample 3: last %d, sum %d, CPUs %v; want 40, 40, [5 0 ...]", q.last, q.inAll, q.cpu)
	}
	// Sample 3 read again by the next program: its own pool, not raised.
	if got := next().at(false, false, 1, 41); got != 46 {
		t.Fatalf("sample 3 read again: pool %d, want 46 (CPU 1's 41 + CPU 0's 5)", got)
	}
	p.persist(0) // after the batch: everything
	if q := next(); q.last != 46 || (len(q.cpu) > 1 && q.cpu[1] != 41) {
		t.Fatalf("persisted after the batch: last %d, CPUs %v; want 46, [5 41 ...]", q.last, q.cpu)
	}
}
