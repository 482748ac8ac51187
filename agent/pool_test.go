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
		got := p.at(s.cpu, s.pool)
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
	if got := p.at(1, 1); got != 16 {
		t.Errorf("stale count: %d, want 16", got)
	}
	if got := p.at(maxCPUs, 1<<40); got != 16 {
		t.Errorf("absurd CPU: %d, want 16", got)
	}
}

func TestPortPoolNoAlloc(t *testing.T) {
	p := newPortPool(0)
	n := uint64(0)
	if a := testing.AllocsPerRun(1000, func() { n++; p.at(0, n) }); a != 0 {
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
		p.at(uint32(n&1), n)
	}
}
