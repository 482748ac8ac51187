package agent

import (
	"math"
	"testing"
)

func TestKernelRate(t *testing.T) {
	for _, tc := range []struct {
		rates []uint32
		want  uint32
	}{
		{nil, 0},
		{[]uint32{0}, 0},
		{[]uint32{1}, 1},
		{[]uint32{1000}, 512},
		{[]uint32{1024}, 1024},
		{[]uint32{10, 1000}, 8},
		{[]uint32{0, 3000, 100}, 64},
		{[]uint32{math.MaxUint32}, 1 << 31},
	} {
		if got := KernelRate(tc.rates...); got != tc.want {
			t.Errorf("KernelRate(%v) = %d, want %d", tc.rates, got, tc.want)
		}
	}
}

// TestSubsamplingRateIsExact checks that kernel sampling at H followed by
// sub-sampling with probability H/N keeps, in expectation, one packet in N:
// over many kernel samples the kept fraction is H/N within 4 standard
// deviations of the binomial.
func TestSubsamplingRateIsExact(t *testing.T) {
	r := newRNG(12345)
	for _, n := range []uint32{1, 3, 10, 100, 1000, 1500, 65535} {
		h := KernelRate(n)
		thr := subsampleThreshold(h, n)
		const trials = 2_000_000
		kept := 0
		for i := 0; i < trials; i++ {
			if r.keep(thr) {
				kept++
			}
		}
		p := float64(h) / float64(n)
		mean := p * trials
		sd := math.Sqrt(trials * p * (1 - p))
		if math.Abs(float64(kept)-mean) > 4*sd+1e-9 {
			t.Errorf("rate %d (kernel %d): kept %d of %d, want %.0f ± %.0f", n, h, kept, trials, mean, 4*sd)
		}
	}
}

func BenchmarkSubsampleKeep(b *testing.B) {
	r := newRNG(1)
	thr := subsampleThreshold(512, 1000)
	n := 0
	for i := 0; i < b.N; i++ {
		if r.keep(thr) {
			n++
		}
	}
	_ = n
}
