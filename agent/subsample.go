package agent

import "math/bits"

// KernelRate returns the hardware-style sampling rate for a port whose
// sampler instances have the given configured rates: the largest power of
// two not above the smallest rate (docs/ARCHITECTURE.md "Packet sampling"). Rates of
// 0 (sampling disabled) are ignored; it returns 0 when no rate is set.
func KernelRate(rates ...uint32) uint32 {
	var min uint32
	for _, r := range rates {
		if r != 0 && (min == 0 || r < min) {
			min = r
		}
	}
	if min == 0 {
		return 0
	}
	return 1 << (31 - bits.LeadingZeros32(min))
}

// keepAll is the sub-sampling threshold that keeps every kernel sample.
const keepAll = 1 << 32

// subsampleThreshold returns the threshold t such that a uniform random
// 32-bit value u is below t with probability kernelRate/rate: a sampler of
// rate N fed by kernel samples taken at rate H keeps each one with
// probability H/N. The result is rounded to the nearest 1/2^32, an error
// far below what any sample count can show.
func subsampleThreshold(kernelRate, rate uint32) uint64 {
	if rate == 0 || kernelRate >= rate {
		return keepAll
	}
	return (uint64(kernelRate)<<32 + uint64(rate)/2) / uint64(rate)
}

// rng is a per-worker xorshift64* generator (Vigna 2016): a few
// nanoseconds per value, no locks, no allocation. Statistical quality is
// ample for Bernoulli trials; it is not for cryptography.
type rng struct{ s uint64 }

func newRNG(seed uint64) rng {
	if seed == 0 {
		seed = 0x9E3779B97F4A7C15
	}
	return rng{s: seed}
}

// uint32 returns the next value's high 32 bits (the best-mixed ones).
func (r *rng) uint32() uint32 {
	r.s ^= r.s >> 12
	r.s ^= r.s << 25
	r.s ^= r.s >> 27
	return uint32((r.s * 2685821657736338717) >> 32)
}

// keep reports whether a sample is kept under threshold t.
func (r *rng) keep(t uint64) bool {
	return t >= keepAll || uint64(r.uint32()) < t
}
