package bpf

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// TestGeneratedLayouts: each Go type that user space reads kernel records
// or map values through has the size, field order, field offsets and
// field sizes of its C struct in the BTF of the committed object, the one
// the daemon loads. dataplane decodes ring and drop records through these
// types (dataplane/reader/ring.go, dataplane/drops/drops.go,
// dataplane/psample/tap.go), so a binding left behind
// by an edit of sampler.h or drops.c fails here, without a kernel.
func TestGeneratedLayouts(t *testing.T) {
	sampler, err := LoadSampler()
	if err != nil {
		t.Fatal(err)
	}
	drops, err := LoadDrops()
	if err != nil {
		t.Fatal(err)
	}
	tap, err := LoadPsampleTap()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec *ebpf.CollectionSpec
		name string // the C struct
		typ  any    // its generated Go type
	}{
		{sampler, "sample_meta", SamplerSampleMeta{}},
		{sampler, "port_config", SamplerPortConfig{}},
		{sampler, "port_counters", SamplerPortCounters{}},
		{sampler, "sample_hand", SamplerSampleHand{}},
		{drops, "drop_event", DropsDropEvent{}},
		{drops, "drop_config", DropsDropConfig{}},
		{drops, "drop_stats", DropsDropStats{}},
		{tap, "tap_sample", PsampleTapTapSample{}},
		{tap, "tap_stats", PsampleTapTapStats{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s *btf.Struct
			if err := c.spec.Types.TypeByName(c.name, &s); err != nil {
				t.Fatalf("struct %s in the object's BTF: %v", c.name, err)
			}
			compareLayout(t, s, reflect.TypeOf(c.typ))
		})
	}
}

// compareLayout checks the Go struct g field by field against the BTF
// struct s. Blank Go fields (structs.HostLayout, padding the generator
// adds) have no C member.
func compareLayout(t *testing.T, s *btf.Struct, g reflect.Type) {
	t.Helper()
	var fields []reflect.StructField
	for i := range g.NumField() {
		if f := g.Field(i); f.Name != "_" {
			fields = append(fields, f)
		}
	}
	// Go pads a struct that ends in a zero-size field (a C flexible array
	// member: sample_meta's data[]) so that the field's address stays
	// inside it; C does not. There the C size is where the member starts.
	size := g.Size()
	if last := fields[len(fields)-1]; last.Type.Size() == 0 {
		size = (last.Offset + uintptr(g.Align()) - 1) &^ (uintptr(g.Align()) - 1)
	}
	if uintptr(s.Size) != size {
		t.Errorf("size: C %d bytes, Go %s %d", s.Size, g, size)
	}
	if len(fields) != len(s.Members) {
		t.Fatalf("C has %d members, Go %s %d fields", len(s.Members), g, len(fields))
	}
	for i, m := range s.Members {
		f := fields[i]
		size, err := btf.Sizeof(m.Type)
		if err != nil {
			t.Fatalf("member %s: %v", m.Name, err)
		}
		// bpf2go names frame_len FrameLen and _pad Pad.
		if want := strings.ReplaceAll(m.Name, "_", ""); !strings.EqualFold(f.Name, want) {
			t.Errorf("member %d: C %s, Go %s", i, m.Name, f.Name)
		}
		if m.Offset.Bytes() != uint32(f.Offset) || uintptr(size) != f.Type.Size() {
			t.Errorf("%s: C offset %d size %d, Go %s offset %d size %d", m.Name, m.Offset.Bytes(), size, f.Name, f.Offset, f.Type.Size())
		}
	}
}
