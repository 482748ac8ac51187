package dataplane

import (
	"runtime"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// TestPoolSumAtFrame: a sample's pool is every CPU's count of the port at
// the sampled frame (dataplane/bpf/sampler.h port_pool_sum, reader.SamplePoolSum), not the
// sampling CPU's alone. Frames numbered 0..k-1 are sent in rounds from
// alternating CPUs, each round counted in full before the next starts, so
// the port's pool at frame n is exactly base + n + 1 whichever CPU
// counted it: every sample must carry that. (A pool of the sampling CPU's
// count alone falls short by the other CPU's frames whenever the CPUs
// take turns, which this test would report.)
func TestPoolSumAtFrame(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Fatalf("needs 2 CPUs to alternate, have %d", runtime.NumCPU())
	}
	t.Run("xdp", func(t *testing.T) { testPoolSumAtFrame(t, HookXDP, nil) })
	t.Run("tc", func(t *testing.T) {
		forTCModes(t, func(t *testing.T, c tcCase) { testPoolSumAtFrame(t, HookTC, &c) })
	})
}

func testPoolSumAtFrame(t *testing.T, hook Hook, tc *tcCase) {
	if tc != nil && tc.want == AttachTCX {
		testskip.Feature(t, kernelFeatures(), features.FeatureTCX)
	}
	lab := netlab.New(t, 2)
	cfg := Config{Workers: 1, MaxPorts: 4, Hook: hook}
	if tc != nil {
		cfg.TCMode = tc.mode
	}
	d := openIn(t, lab, cfg)
	p1 := lab.PortIndex(t, 0)
	c := startCollector(t, d, 0)
	defer c.stop(t)
	if err := d.AttachPort(p1, PortConfig{Rate: 8, Mode: ModeInline, HeaderBytes: 128}); err != nil {
		t.Fatal(err)
	}
	pc, err := d.Stats().Ingress(p1)
	if err != nil {
		t.Fatal(err)
	}
	base := pc.Pool
	const rounds, per = 8, 250
	for r := 0; r < rounds; r++ {
		lab.SendFramesOnCPU(t, 0, r%2, seqFrames(lab, 0, noHostMAC, uint32(r*per), per, 32))
		// The round is counted in full before the other CPU starts.
		want := base + uint64((r+1)*per)
		for deadline := time.Now().Add(testutil.Scaled(5 * time.Second)); ; {
			if pc, err = d.Stats().Ingress(p1); err != nil {
				t.Fatal(err)
			}
			if pc.Pool >= want || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if pc.Pool != want {
			t.Fatalf("round %d: port pool %d, want %d (other frames on the port?)", r, pc.Pool, want)
		}
	}
	got := c.waitFor(int(pc.Samples-pc.Drops), testutil.Scaled(5*time.Second))
	cpus := map[uint32]int{}
	checked := 0
	for _, s := range got {
		seq, ok := frameSeq(s.Header)
		if !ok || s.IfIndex != uint32(p1) {
			continue
		}
		checked++
		cpus[s.CPU]++
		if s.Flags&reader.SamplePoolSum == 0 {
			t.Errorf("frame %d (CPU %d): no reader.SamplePoolSum, pool %d", seq, s.CPU, s.CPUPool)
			continue
		}
		if want := base + uint64(seq) + 1; s.CPUPool != want {
			t.Errorf("frame %d (CPU %d): pool %d, want %d", seq, s.CPU, s.CPUPool, want)
		}
	}
	t.Logf("%d samples of %d frames checked, by CPU %v; port counters %+v", checked, rounds*per, cpus, pc)
	if checked == 0 || uint64(checked) != pc.Samples-pc.Drops {
		t.Errorf("checked %d samples, the port counted %d samples and %d drops", checked, pc.Samples, pc.Drops)
	}
	if len(cpus) < 2 {
		t.Errorf("every sample came from one CPU (%v): the rounds did not alternate CPUs", cpus)
	}
}
