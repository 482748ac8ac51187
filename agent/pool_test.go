package agent

import "testing"

// TestPortPoolAtSample: each sample's pool is its CPU's count at the frame
// plus the other CPUs' latest reported counts; consecutive pools strictly
// increase while CPUs interleave, and a CPU never seen before grows the
// table.
func TestPortPoolAtSample(t *testing.T) {
	p := newPortPool(0)
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
		got := p.at(false, s.cpu, s.pool)
		if got != s.want {
			t.Errorf("step %d: cpu %d pool %d -> %d, want %d", i, s.cpu, s.pool, got, s.want)
		}
		if got <= prev {
			t.Errorf("step %d: pool %d not above previous %d", i, got, prev)
		}
		prev = got
	}
	// A stale (smaller) count never lowers the sum; an absurd CPU number
	// is ignored.
	if got := p.at(false, 1, 1); got != 16 {
		t.Errorf("stale count: %d, want 16", got)
	}
	if got := p.at(false, maxCPUs, 1<<40); got != 16 {
		t.Errorf("absurd CPU: %d, want 16", got)
	}
}

func TestPortPoolNoAlloc(t *testing.T) {
	p := newPortPool(0)
	n := uint64(0)
	if a := testing.AllocsPerRun(1000, func() { n++; p.at(false, 0, n) }); a != 0 {
		t.Errorf("%.1f allocations per sample", a)
	}
}

// BenchmarkPortPoolAt: one kernel sample's pool at sample time (two CPUs
// alternating), done for every kernel sample.
func BenchmarkPortPoolAt(b *testing.B) {
	p := newPortPool(0)
	var n uint64
	b.ReportAllocs()
	for b.Loop() {
		n++
		p.at(false, uint32(n&1), n)
	}
}

// TestPortPoolBothDirections: a port sampled both ways has a count per CPU
// in each direction; the pool is their sum, and the same CPU's counts of
// the two directions never replace each other.
func TestPortPoolBothDirections(t *testing.T) {
	p := newPortPool(0)
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
		{true, 0, 1, 13}, // stale
	}
	for i, s := range steps {
		if got := p.at(s.egress, s.cpu, s.pool); got != s.want {
			t.Errorf("step %d: egress %v cpu %d pool %d -> %d, want %d", i, s.egress, s.cpu, s.pool, got, s.want)
		}
	}
}
