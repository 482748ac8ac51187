package dataplane

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// TestPoolExact: sample_pool is every frame the port received
// (sflow_version_5.txt, flow_sample.sample_pool), so the pool of p1 must
// equal the kernel's rx_packets delta of p1 exactly, in both delivery
// modes.
func TestPoolExact(t *testing.T) {
	for _, c := range []struct {
		hook Hook
		mode Mode
		tc   *tcCase // HookTC: how it is attached
	}{{HookXDP, ModeInline, nil}, {HookXDP, ModeMonitor, nil}, {HookTC, ModeInline, &tcCases[0]}, {HookTC, ModeInline, &tcCases[1]}} {
		mode := c.mode
		name := c.hook.String()
		var tcMode TCMode
		if c.tc != nil {
			name += "/" + c.tc.name
			tcMode = c.tc.mode
		}
		t.Run(name+"/"+mode.String(), func(t *testing.T) {
			if c.tc != nil && c.tc.want == AttachTCX {
				testskip.Feature(t, kernelFeatures(), features.FeatureTCX)
			}
			lab := netlab.New(t, 2)
			d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, Hook: c.hook, TCMode: tcMode})
			p1 := lab.PortIndex(t, 0)
			if err := d.AttachPort(p1, PortConfig{Rate: 16, Mode: mode, HeaderBytes: 128}); err != nil {
				t.Fatal(err)
			}
			if c.tc != nil && d.AttachMode(p1) != c.tc.want {
				t.Fatalf("attach mode %q, want %q", d.AttachMode(p1), c.tc.want)
			}
			const k = 10000
			before := lab.RxPackets(t, lab.Switch, "p1")
			lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, 0, k, 32))
			after := lab.RxPackets(t, lab.Switch, "p1")
			pc, err := d.Stats().Ingress(p1)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("rx_packets delta %d, counters %+v", after-before, pc)
			if pc.Pool != after-before {
				t.Errorf("pool %d != rx_packets delta %d", pc.Pool, after-before)
			}
			if pc.Pool < k {
				t.Errorf("pool %d < %d frames sent", pc.Pool, k)
			}
			if pc.Samples > pc.Pool || pc.Samples == 0 {
				t.Errorf("samples %d not in 1..pool %d", pc.Samples, pc.Pool)
			}
			if mode == ModeMonitor && pc.Drops != pc.Samples {
				// No AF_XDP socket is in the XSKMAP: every redirect fails
				// and must be counted.
				t.Errorf("monitor mode without sockets: drops %d != samples %d", pc.Drops, pc.Samples)
			}
			if mode == ModeInline && pc.Drops != 0 {
				t.Errorf("inline mode with a large ring: %d drops", pc.Drops)
			}
		})
	}
}

// TestSamplingStatistics checks the random 1-in-rate sampling: the number
// of samples is binomial(K, 1/rate), and the gaps between consecutive
// sampled sequence numbers follow the geometric distribution (chi-square
// goodness of fit), as sFlow's random skip sampling requires
// (sflow_version_5.txt section 4.2.1, Appendix B). Each bound is set from
// the number of comparisons a run makes (statsComparisons), so that a
// correct sampler fails a run with probability statsFamilyAlpha at most
// (Bonferroni), not 1 - (1-α)^m.
func TestSamplingStatistics(t *testing.T) {
	t.Run("xdp", func(t *testing.T) { testSamplingStatistics(t, HookXDP, nil) })
	t.Run("tc", func(t *testing.T) {
		forTCModes(t, func(t *testing.T, c tcCase) { testSamplingStatistics(t, HookTC, &c) })
	})
}

// statsFamilyAlpha is the probability that a run of TestSamplingStatistics
// fails with a correct sampler; statsComparisons the tests a run makes: 3
// attachments (xdp, tcx, clsact) × 3 rates × 2 (count, gaps).
const (
	statsFamilyAlpha = 1e-4
	statsComparisons = 3 * 3 * 2
)

// statsAlpha is one comparison's significance level, and statsZ the
// two-sided normal bound at it (4.54 standard deviations).
var (
	statsAlpha = statsFamilyAlpha / statsComparisons
	statsZ     = math.Sqrt2 * math.Erfinv(1-statsAlpha)
)

func testSamplingStatistics(t *testing.T, hook Hook, tc *tcCase) {
	lab := netlab.New(t, 2)
	cfg := Config{Workers: 1, MaxPorts: 4, RingBytes: 8 << 20, Hook: hook}
	if tc != nil {
		cfg.TCMode = tc.mode
	}
	d := openIn(t, lab, cfg)
	p1 := lab.PortIndex(t, 0)
	c := startCollector(t, d, 0)
	defer c.stop(t)
	attached := false
	var seq uint32
	for _, rate := range []uint32{1, 16, 256, 4096} {
		pc := PortConfig{Rate: rate, Mode: ModeInline, HeaderBytes: 64}
		if !attached {
			if err := d.AttachPort(p1, pc); err != nil {
				t.Fatal(err)
			}
			if tc != nil && d.AttachMode(p1) != tc.want {
				t.Fatalf("attach mode %q, want %q", d.AttachMode(p1), tc.want)
			}
			attached = true
		} else if err := d.updatePort(p1, pc); err != nil { // run-time change, no re-attach
			t.Fatal(err)
		}
		k := min(1000*int(rate), 400000)
		k = max(k, 20000)
		before, err := d.Stats().Ingress(p1)
		if err != nil {
			t.Fatal(err)
		}
		first := seq
		start := time.Now()
		for sent := 0; sent < k; {
			n := min(50000, k-sent)
			lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, seq, n, 16))
			seq += uint32(n)
			sent += n
		}
		sendTime := time.Since(start)
		after, err := d.Stats().Ingress(p1)
		if err != nil {
			t.Fatal(err)
		}
		taken := after.Samples - before.Samples
		all := c.waitFor(int(after.Samples), 10*time.Second)
		var seqs []int64
		for _, s := range all {
			if q, ok := frameSeq(s.Header); ok && q >= first && q < seq {
				seqs = append(seqs, int64(q-first))
			}
		}
		slices.Sort(seqs)
		t.Logf("rate %d: sent %d frames in %v, pool +%d, samples +%d, drops +%d, test-frame samples read %d",
			rate, k, sendTime, after.Pool-before.Pool, taken, after.Drops-before.Drops, len(seqs))
		if after.Drops != before.Drops {
			t.Fatalf("rate %d: %d drops with a large ring and a running reader", rate, after.Drops-before.Drops)
		}
		if uint64(len(seqs)) != taken {
			t.Errorf("rate %d: read %d test-frame samples, counter says %d taken", rate, len(seqs), taken)
		}
		p := 1 / float64(rate)
		if rate == 1 {
			if len(seqs) != k {
				t.Errorf("rate 1: %d samples of %d frames", len(seqs), k)
			}
			continue
		}
		mean, sd := float64(k)*p, math.Sqrt(float64(k)*p*(1-p))
		if dev := math.Abs(float64(len(seqs))-mean) / sd; dev > statsZ {
			t.Errorf("rate %d: %d samples, expected %.1f ± %.1f (%.1f sd off, bound %.2f)", rate, len(seqs), mean, sd, dev, statsZ)
		}
		gaps := make([]int64, 0, len(seqs))
		prev := int64(-1)
		for _, s := range seqs {
			if s == prev {
				t.Fatalf("rate %d: sequence %d sampled twice", rate, s)
			}
			gaps = append(gaps, s-prev)
			prev = s
		}
		chi2, df, pv := chiSquareGeometric(gaps, p)
		t.Logf("rate %d: gaps chi-square %.2f, df %d, p-value %.4f", rate, chi2, df, pv)
		if df < 2 {
			t.Errorf("rate %d: too few gap bins (%d df) for a meaningful test", rate, df)
		}
		if pv <= statsAlpha {
			t.Errorf("rate %d: gaps are not geometric: chi-square %.2f, df %d, p %.2g (bound %.2g)", rate, chi2, df, pv, statsAlpha)
		}
	}
}

// chiSquareGeometric bins gaps (values >= 1) into intervals of roughly
// equal probability under Geometric(p) on {1,2,...}, merging bins so each
// expects at least 5 observations, and returns the chi-square statistic,
// its degrees of freedom and the p-value.
func chiSquareGeometric(gaps []int64, p float64) (chi2 float64, df int, pvalue float64) {
	n := float64(len(gaps))
	cdf := func(g int64) float64 { // P(G <= g)
		if g < 1 {
			return 0
		}
		return 1 - math.Pow(1-p, float64(g))
	}
	bins := max(2, min(20, len(gaps)/10))
	// Upper edges: the smallest gap whose CDF reaches j/bins.
	var edges []int64
	for j := 1; j < bins; j++ {
		q := float64(j) / float64(bins)
		e := int64(math.Ceil(math.Log(1-q) / math.Log(1-p)))
		for e > 1 && cdf(e-1) >= q {
			e--
		}
		for cdf(e) < q {
			e++
		}
		if len(edges) == 0 || e > edges[len(edges)-1] {
			edges = append(edges, e)
		}
	}
	type bin struct {
		lo, hi int64 // (lo, hi]; hi < 0 means infinity
		obs    float64
		exp    float64
	}
	var bs []bin
	lo := int64(0)
	for _, e := range edges {
		bs = append(bs, bin{lo: lo, hi: e, exp: n * (cdf(e) - cdf(lo))})
		lo = e
	}
	bs = append(bs, bin{lo: lo, hi: -1, exp: n * (1 - cdf(lo))})
	for _, g := range gaps {
		for i := range bs {
			if g > bs[i].lo && (bs[i].hi < 0 || g <= bs[i].hi) {
				bs[i].obs++
				break
			}
		}
	}
	// Merge bins expecting fewer than 5 into their neighbour.
	var merged []bin
	for _, b := range bs {
		if len(merged) > 0 && merged[len(merged)-1].exp < 5 {
			m := &merged[len(merged)-1]
			m.hi, m.obs, m.exp = b.hi, m.obs+b.obs, m.exp+b.exp
			continue
		}
		merged = append(merged, b)
	}
	if l := len(merged); l > 1 && merged[l-1].exp < 5 {
		merged[l-2].obs += merged[l-1].obs
		merged[l-2].exp += merged[l-1].exp
		merged = merged[:l-1]
	}
	for _, b := range merged {
		chi2 += (b.obs - b.exp) * (b.obs - b.exp) / b.exp
	}
	df = len(merged) - 1
	if df < 1 {
		return chi2, df, 1
	}
	return chi2, df, upperGammaQ(float64(df)/2, chi2/2)
}

// upperGammaQ is the regularized upper incomplete gamma function Q(a, x),
// the chi-square survival function at 2x with 2a degrees of freedom
// (series for x < a+1, Lentz continued fraction otherwise).
func upperGammaQ(a, x float64) float64 {
	if x <= 0 {
		return 1
	}
	lga, _ := math.Lgamma(a)
	if x < a+1 {
		sum, term := 1/a, 1/a
		for n := 1; n < 1000; n++ {
			term *= x / (a + float64(n))
			sum += term
			if math.Abs(term) < math.Abs(sum)*1e-15 {
				break
			}
		}
		return 1 - sum*math.Exp(-x+a*math.Log(x)-lga)
	}
	const tiny = 1e-300
	b := x + 1 - a
	c := 1 / tiny
	dd := 1 / b
	h := dd
	for i := 1; i < 1000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		dd = an*dd + b
		if math.Abs(dd) < tiny {
			dd = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		dd = 1 / dd
		del := dd * c
		h *= del
		if math.Abs(del-1) < 1e-15 {
			break
		}
	}
	return math.Exp(-x+a*math.Log(x)-lga) * h
}

// TestUpperGammaQ checks the p-value function against chi-square table
// values (critical values at p = 0.05 and 0.001).
func TestUpperGammaQ(t *testing.T) {
	for _, c := range []struct {
		df   int
		x, p float64
	}{
		{1, 3.841, 0.05}, {5, 11.070, 0.05}, {10, 18.307, 0.05},
		{10, 29.588, 0.001}, {19, 30.144, 0.05}, {2, 13.816, 0.001},
	} {
		got := upperGammaQ(float64(c.df)/2, c.x/2)
		if math.Abs(got-c.p) > c.p*0.01 {
			t.Errorf("Q(df %d, x %.3f) = %.6f, want %.6f", c.df, c.x, got, c.p)
		}
	}
}

// TestChiSquareGeometricRejects makes sure the gap test can fail: constant
// gaps (a deterministic 1-in-N sampler) must be rejected, and geometric
// gaps from a known-good generator accepted.
func TestChiSquareGeometricRejects(t *testing.T) {
	fixed := make([]int64, 1000)
	for i := range fixed {
		fixed[i] = 256
	}
	if _, _, pv := chiSquareGeometric(fixed, 1.0/256); pv > statsAlpha {
		t.Errorf("deterministic gaps accepted: p %.6f", pv)
	}
	// Inverse-transform geometric gaps from a fixed LCG stream.
	x := uint64(12345)
	geo := make([]int64, 1000)
	for i := range geo {
		x = x*6364136223846793005 + 1442695040888963407
		u := (float64(x>>11) + 0.5) / (1 << 53)
		geo[i] = int64(math.Ceil(math.Log(u) / math.Log(1-1.0/256)))
	}
	if chi2, df, pv := chiSquareGeometric(geo, 1.0/256); pv <= statsAlpha {
		t.Errorf("geometric gaps rejected: chi2 %.2f df %d p %.6f", chi2, df, pv)
	}
}
