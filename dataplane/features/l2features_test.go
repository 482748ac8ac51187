package features

import (
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// TestProbeL2Features runs the layer-2 probe and logs what it found; each
// row must be named and either available or carry a reason.
func TestProbeL2Features(t *testing.T) {
	testskip.Root(t)
	fs := ProbeL2Features()
	if len(fs.List) != len(l2Probes) {
		t.Fatalf("%d rows, want %d", len(fs.List), len(l2Probes))
	}
	for _, f := range fs.List {
		t.Logf("%s: available=%v err=%v", f.Name, f.Available(), f.Err)
		if f.Err == nil && !fs.Has(f.Name) {
			t.Errorf("%s: Has disagrees with Err", f.Name)
		}
	}
}
