package clsact

import "testing"

// TestTCFilterName: the names our filters carry, and what is not one.
func TestTCFilterName(t *testing.T) {
	for _, own := range []bool{false, true} {
		n := FilterName("0123456789abcdef", own)
		id, gotOwn, ok := ParseFilterName(n)
		if !ok || id != "0123456789abcdef" || gotOwn != own {
			t.Errorf("%q parsed as %q %v %v", n, id, gotOwn, ok)
		}
	}
	for _, n := range []string{"", "sflowswitchd/", "sflowswitchd/0123", "sflowswitchd/0123456789abcdeg",
		"sflowswitchd/0123456789abcdef/x", "x/0123456789abcdef", "tc_sampler.o:[tc]"} {
		if _, _, ok := ParseFilterName(n); ok {
			t.Errorf("%q taken for one of our names", n)
		}
	}
}
