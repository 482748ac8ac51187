package main

import (
	"strings"
	"testing"
)

func TestParseRoundLists(t *testing.T) {
	in := `# bench/xdp
## frames: trafgen h1 -> h2, 9 rounds

| configuration on p1 | pps (median) | per-round ns/packet |
|---|---|---|
| xdp_pass | 181702 | 56.5, 57.9, 56.7 |
| sampler | 180251 | 79.8, 67.0 |

text between tables
| program | per-round test_run ns |
|---|---|
| xdp_floor | 10, 11, 12, 13 |
`
	got, err := parseRoundLists(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d lists, want 2 (a 2-value list is not a per-round list): %v", len(got), got)
	}
	v := got["frames\x00xdp_pass: per-round ns/packet"]
	if len(v) != 3 || v[1] != 57.9 {
		t.Errorf("xdp_pass list %v", v)
	}
	if v := got["frames\x00xdp_floor: per-round test_run ns"]; len(v) != 4 {
		t.Errorf("second table: %v (keys %v)", v, got)
	}
}

func TestAgreeVerdict(t *testing.T) {
	for _, c := range []struct {
		a, b spread
		want string
	}{
		{spread{10, 9, 11}, spread{10.5, 10, 12}, "both"},
		{spread{10, 9, 11}, spread{12, 10, 13}, "one"}, // 10 is within 10–13, 12 is not within 9–11
		{spread{10, 9, 11}, spread{13, 10.5, 14}, "overlap"},
		{spread{10, 9, 11}, spread{20, 19, 21}, "no"},
	} {
		if got := agreeVerdict(c.a, c.b); got != c.want {
			t.Errorf("agreeVerdict(%v, %v) = %s, want %s", c.a, c.b, got, c.want)
		}
	}
}
