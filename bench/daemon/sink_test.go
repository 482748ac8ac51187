package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// TestCountFlowSamples checks the sink's datagram walk against goflow2's
// decoding of the shared golden datagrams, and that the malformed ones are
// flagged.
func TestCountFlowSamples(t *testing.T) {
	dir := testutil.GoldenDir(t)
	good := []string{"counters_app", "counters_host", "counters_if", "expanded", "flow_app", "flow_core"}
	total := 0
	for _, name := range good {
		b, err := os.ReadFile(filepath.Join(dir, name+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		var p goflow.Packet
		if err := goflow.DecodeMessageVersion(bytes.NewBuffer(b), &p); err != nil {
			t.Fatalf("%s: goflow2: %v", name, err)
		}
		want := 0
		for _, s := range p.Samples {
			switch s.(type) {
			case goflow.FlowSample, goflow.ExpandedFlowSample, *goflow.FlowSample, *goflow.ExpandedFlowSample:
				want++
			}
		}
		total += want
		got, ok := countFlowSamples(b)
		if !ok || got != want {
			t.Errorf("%s: countFlowSamples = %d, %v; goflow2 counts %d flow samples", name, got, ok, want)
		}
	}
	if total == 0 {
		t.Fatal("goflow2 found no flow sample in the golden datagrams: the comparison checks nothing")
	}
	for _, name := range []string{"bad_version", "bad_nsamples", "bad_samplelen", "truncated", "trailing"} {
		b, err := os.ReadFile(filepath.Join(dir, name+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := countFlowSamples(b); ok {
			t.Errorf("%s: accepted as well-formed", name)
		}
	}
}
