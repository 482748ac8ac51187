package main

import "testing"

func TestParseRate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"max", 0, true}, {"250k", 250e3, true}, {"2M", 2e6, true}, {"1500", 1500, true},
		{"1.5M", 1.5e6, true}, {"", 0, false}, {"k", 0, false}, {"-3k", 0, false}, {"0", 0, false},
	} {
		got, err := parseRate(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("parseRate(%q) = %v, %v; want %v, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := append([]float64(nil), c.in...)
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Errorf("median reordered its input %v", in)
			}
		}
	}
}

func TestRatiosDiffsPairByRound(t *testing.T) {
	a, b := []float64{2, 9, 4}, []float64{1, 3, 0}
	r := ratios(a, b) // the round with b = 0 is left out
	if len(r) != 2 || r[0] != 2 || r[1] != 3 {
		t.Errorf("ratios = %v, want [2 3]", r)
	}
	d := diffs(a, b[:2])
	if len(d) != 2 || d[0] != 1 || d[1] != 6 {
		t.Errorf("diffs = %v, want [1 6]", d)
	}
}
