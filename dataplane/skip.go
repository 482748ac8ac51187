package dataplane

import "math"

// skipScaleShift is SKIP_SCALE_SHIFT of dataplane/bpf/sampler.h: the fraction bits of
// port_config.skip_scale.
const skipScaleShift = 12

// skipScale is the kernel's factor turning -log2(U) (U uniform in (0,1])
// into a geometric skip of mean rate-1 (dataplane/bpf/sampler.h draw_skip):
// 1/-log2(1-1/rate) in fixed point with skipScaleShift fraction bits, so
// that floor(-log2(U) * scale) = floor(ln U / ln(1-p)), the inverse of the
// geometric distribution's CDF (sflow_version_5.txt Appendix B: a random
// skip per sample). Rate 1 samples every frame: scale 0.
func skipScale(rate uint32) uint64 {
	if rate <= 1 {
		return 0
	}
	p := 1 / float64(rate)
	return uint64(math.Round(math.Ldexp(1/-math.Log2(1-p), skipScaleShift)))
}
