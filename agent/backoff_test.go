package agent

import (
	"net/netip"
	"testing"
	"time"
)

// countingDataplane is fakeDataplane with the kernel's selected samples
// per port set by the test (SampleCounter).
type countingDataplane struct {
	*fakeDataplane
	samples map[uint32]uint64
}

func (c *countingDataplane) PortSamples(i uint32) (uint64, bool) {
	n, ok := c.samples[i]
	return n, ok
}

// TestBackoffSteps drives the backoff's control by hand: a flood at 1 in 1
// over a quota of 1000 samples/s raises the rate in force in one step to
// what fits (the kernel at the power of two below, the workers exact on
// top), a steady load keeps it, and a fall brings it back to the
// configured rate only after backoffHold intervals within half the quota.
func TestBackoffSteps(t *testing.T) {
	dp := &countingDataplane{fakeDataplane: newFakeDataplane(), samples: map[uint32]uint64{3: 0}}
	a := New(Options{Workers: 1, Source: dp, Backoff: Backoff{PortQuota: 1000}})
	cfg := Config{
		AgentAddress: netip.MustParseAddr("198.18.0.1"),
		Receivers:    []ReceiverConfig{{Index: 1, Address: netip.MustParseAddrPort("198.18.0.2:6343")}},
		Samplers:     []SamplerConfig{{IfIndex: 3, Instance: 1, Receiver: 1, Rate: 1, HeaderBytes: 128}},
	}
	if err := a.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	loads := map[uint32]*portLoad{}
	tick := func(frames uint64) []BackoffStep {
		t.Helper()
		p, _ := dp.port(3)
		dp.samples[3] += frames / uint64(p.KernelRate)
		steps := a.backoffTick(dp, loads, 1)
		if len(steps) > 0 {
			if err := a.Apply(a.Config()); err != nil {
				t.Fatal(err)
			}
		}
		return steps
	}
	tick(0) // first reading
	steps := tick(50000)
	if len(steps) != 1 || steps[0].From != 1 || steps[0].To != 63 {
		t.Fatalf("flood of 50000 frames/s at quota 1000: steps %+v, want 1 -> 63 (50 and a quarter)", steps)
	}
	if eff, conf := a.EffectiveRate(3); eff != 63 || conf != 1 {
		t.Errorf("EffectiveRate %d (configured %d), want 63 (1)", eff, conf)
	}
	if p, _ := dp.port(3); p.KernelRate != 32 {
		t.Errorf("kernel rate %d, want 32 (the power of two below 63)", p.KernelRate)
	}
	if got := a.Config().Samplers[0].Rate; got != 1 {
		t.Errorf("Config() shows rate %d, want the configured 1", got)
	}
	if steps := tick(50000); len(steps) != 0 {
		t.Errorf("steady flood: steps %+v, want none", steps)
	}
	// The load falls to 100 frames/s: within half the quota at rate 1.
	for i := 1; i < int(backoffHold/time.Second); i++ {
		if steps := tick(100); len(steps) != 0 {
			t.Fatalf("interval %d after the fall: steps %+v, want none yet (hysteresis)", i, steps)
		}
	}
	steps = tick(100)
	if len(steps) != 1 || steps[0].To != 1 {
		t.Fatalf("after %v within half the quota: steps %+v, want back to 1", backoffHold, steps)
	}
	if p, _ := dp.port(3); p.KernelRate != 1 {
		t.Errorf("kernel rate %d after the fall, want 1", p.KernelRate)
	}
	// An agent quota is shared: two ports at 1000 frames/s each, agent
	// quota 1000: each port to rate 2.
	a.opts.Backoff = Backoff{AgentQuota: 1000}
	cfg.Samplers = append(cfg.Samplers, SamplerConfig{IfIndex: 4, Instance: 1, Receiver: 1, Rate: 1, HeaderBytes: 128})
	dp.samples[4] = 0
	if err := a.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	a.backoffTick(dp, loads, 1) // first reading of port 4
	dp.samples[3] += 1000
	dp.samples[4] += 1000
	steps = a.backoffTick(dp, loads, 1)
	if len(steps) != 2 || steps[0].To != 3 || steps[1].To != 3 {
		t.Errorf("agent quota 1000, two ports at 1000 samples/s: steps %+v, want both to 3 (2 and a quarter)", steps)
	}
}

// exactDataplane is countingDataplane whose ports are sampled at their
// exact rate (psample), not at the kernel's power of two (ExactRater).
type exactDataplane struct{ *countingDataplane }

func (exactDataplane) ExactRate(uint32) bool { return true }

// TestBackoffExactRate: on a port sampled at its exact rate (psample's
// tc sample rule at 1 in 100, not the kernel's 64), the backoff takes the
// port's frames as its samples times 100: 1000 samples/s over a quota of
// 100 are 100000 frames/s, which need 1 in 1000 (1250 with the quarter's
// margin), where the power of two would have made it 800.
func TestBackoffExactRate(t *testing.T) {
	dp := exactDataplane{&countingDataplane{fakeDataplane: newFakeDataplane(), samples: map[uint32]uint64{3: 0}}}
	a := New(Options{Workers: 1, Source: dp, Backoff: Backoff{PortQuota: 100}})
	cfg := Config{
		AgentAddress: netip.MustParseAddr("198.18.0.1"),
		Receivers:    []ReceiverConfig{{Index: 1, Address: netip.MustParseAddrPort("198.18.0.2:6343")}},
		Samplers:     []SamplerConfig{{IfIndex: 3, Instance: 1, Receiver: 1, Rate: 100, HeaderBytes: 128}},
	}
	if err := a.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if p, _ := dp.port(3); p.Rate != 100 || p.KernelRate != 64 {
		t.Fatalf("port %+v, want rate 100 (kernel 64)", p)
	}
	loads := map[uint32]*portLoad{}
	a.backoffTick(dp, loads, 1)
	dp.samples[3] += 1000
	steps := a.backoffTick(dp, loads, 1)
	if len(steps) != 1 || steps[0].To != 1250 || steps[0].FramesPerSecond != 100000 {
		t.Errorf("1000 samples/s at 1 in 100 over a quota of 100: steps %+v, want 100 -> 1250 at 100000 frames/s", steps)
	}
}
