package agent

// Backoff: when the samples a port offers exceed a quota, its
// sampling rate steps up until they fit, and steps back down when the
// load falls. The rate in force is an integer R_eff >= the configured
// rate: the kernel samples at the power of two below it (KernelRate) and
// the workers sub-sample exactly on top, so every sample carries the rate
// actually in force (the kernel tells each sample's kernel rate, and the
// samples taken before a step are sub-sampled against their own). Pools
// are the kernel's counts and stay exact.
//
// Control, every DefaultBackoffInterval (Options.BackoffInterval): a port's frame rate
// is its kernel-selected samples per second times the kernel rate in
// force; the rate needed is the smallest that keeps the port under the
// port quota and the agent under the agent quota (shared in proportion
// to what each port offers at its configured rate). A rate above the one
// in force is applied at once (one step, however far); a lower one only
// when even half the quota would be kept for backoffHold (hysteresis),
// and then to the rate that keeps the port at half its quota, or the
// configured rate. A port that received nothing in an interval keeps its
// rate (an agent quota does not step idle ports up).

import (
	"context"
	"math"
	"time"
)

// SampleCounter is what the backoff reads from the dataplane: the
// samples the kernel selected on a port so far (delivered or dropped).
type SampleCounter interface {
	PortSamples(ifindex uint32) (uint64, bool)
}

// ExactRater is implemented by a SampleCounter whose ports may be sampled
// at their exact rate (PortSampling.Rate: psample's tc sample rules)
// rather than at the kernel's power of two: ExactRate says which, so that
// the backoff takes a port's frames as its samples times the rate they
// were taken at.
type ExactRater interface {
	ExactRate(ifindex uint32) bool
}

// Backoff configures sampling backoff: quotas in samples per second (0:
// none) per agent and per port.
type Backoff struct {
	AgentQuota, PortQuota uint64
}

func (b Backoff) on() bool { return b.AgentQuota > 0 || b.PortQuota > 0 }

// backoffHold is how long a port must fit in half its quotas before its
// rate steps down.
const backoffHold = 3 * time.Second

// DefaultBackoffInterval is how often the backoff reads the ports'
// samples: a flood is answered within it (what arrives before is
// delivered, or counted in drops). Only while a quota is set: an agent
// without one has no such timer.
const DefaultBackoffInterval = 250 * time.Millisecond

// BackoffStep is one change of a port's rate in force, for logs and
// metrics (Options.OnBackoff).
type BackoffStep struct {
	IfIndex               uint32
	Configured, From      uint32
	To                    uint32
	SamplesPerSecond      float64 // offered at the rate in force before the step
	FramesPerSecond       float64
	AgentQuota, PortQuota uint64
}

// portLoad is the backoff's state of one port.
type portLoad struct {
	last  uint64        // kernel samples at the last reading
	below time.Duration // how long it has been within half the quota
}

// EffectiveRate returns the rate in force on port ifindex (the configured
// rate, or the backoff's) and the configured one; 0, 0 for a port not
// sampled.
func (a *Agent) EffectiveRate(ifindex uint32) (effective, configured uint32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	configured = minSamplerRate(&a.cfg, ifindex)
	return max(configured, a.override[ifindex]), configured
}

// minSamplerRate is the lowest non-zero rate of c's samplers of ifindex.
func minSamplerRate(c *Config, ifindex uint32) uint32 {
	var r uint32
	for _, s := range c.Samplers {
		if s.IfIndex == ifindex && s.Rate != 0 && (r == 0 || s.Rate < r) {
			r = s.Rate
		}
	}
	return r
}

// withOverrides returns c with the rates of backed-off ports raised to
// the rate in force. Called with mu held.
func (a *Agent) withOverrides(c Config) Config {
	if len(a.override) == 0 {
		return c
	}
	c.Samplers = append([]SamplerConfig(nil), c.Samplers...)
	for i, s := range c.Samplers {
		if o := a.override[s.IfIndex]; o > s.Rate && s.Rate != 0 {
			c.Samplers[i].Rate = o
		}
	}
	return c
}

// runBackoff adjusts the rates in force every interval until ctx ends.
func (a *Agent) runBackoff(ctx context.Context, sc SampleCounter, interval time.Duration) {
	loads := map[uint32]*portLoad{}
	t := time.NewTicker(interval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		dt := now.Sub(last).Seconds()
		last = now
		if steps := a.backoffTick(sc, loads, dt); len(steps) > 0 {
			for _, s := range steps {
				a.log.Info("sampling backoff", "ifindex", s.IfIndex, "configured", s.Configured, "from", s.From, "to", s.To,
					"samples_per_second", math.Round(s.SamplesPerSecond), "frames_per_second", math.Round(s.FramesPerSecond),
					"agent_quota", s.AgentQuota, "port_quota", s.PortQuota)
				if a.opts.OnBackoff != nil {
					a.opts.OnBackoff(s)
				}
			}
			if err := a.Apply(a.Config()); err != nil {
				a.log.Warn("sampling backoff: applying the rates in force", "err", err)
			}
		}
	}
}

// backoffTick reads every sampled port's kernel samples, decides the
// rates in force and returns the changes (overrides updated).
func (a *Agent) backoffTick(sc SampleCounter, loads map[uint32]*portLoad, dt float64) []BackoffStep {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.opts.Backoff
	type port struct {
		idx              uint32
		cfg, eff, kernel uint32
		frames           float64 // frames per second
		offered          float64 // samples per second at the rate in force
	}
	var ports []port
	var atCfg float64 // samples per second of every port at its configured rate
	for _, idx := range sortedKeys(a.ports) {
		p := a.ports[idx]
		n, ok := sc.PortSamples(idx)
		if !ok {
			continue
		}
		l := loads[idx]
		if l == nil {
			loads[idx] = &portLoad{last: n}
			continue
		}
		d := n - l.last
		if n < l.last {
			d = 0 // reattached: counters restarted
		}
		l.last = n
		cfg := minSamplerRate(&a.cfg, idx)
		if cfg == 0 || dt <= 0 || p.KernelRate == 0 {
			continue
		}
		pt := port{idx: idx, cfg: cfg, eff: max(cfg, a.override[idx]), kernel: p.KernelRate}
		pt.offered = float64(d) / dt
		taken := p.KernelRate // the rate the samples were taken at
		if er, ok := sc.(ExactRater); ok && p.Rate != 0 && er.ExactRate(idx) {
			taken = p.Rate
		}
		pt.frames = pt.offered * float64(taken)
		atCfg += pt.frames / float64(cfg)
		ports = append(ports, pt)
	}
	for idx := range loads {
		if _, ok := a.ports[idx]; !ok {
			delete(loads, idx)
		}
	}
	// need is the rate that keeps port p within frac of its quotas. The
	// agent quota is shared in proportion to each port's load at its
	// configured rate: every port's rate scales by the same factor.
	need := func(p port, frac float64) uint32 {
		r := float64(p.cfg)
		if b.PortQuota > 0 {
			r = max(r, p.frames/(float64(b.PortQuota)*frac))
		}
		if b.AgentQuota > 0 {
			r = max(r, float64(p.cfg)*atCfg/(float64(b.AgentQuota)*frac))
		}
		if r >= math.MaxUint32 {
			return math.MaxUint32
		}
		return uint32(math.Ceil(r))
	}
	var steps []BackoffStep
	for _, p := range ports {
		l := loads[p.idx]
		to := p.eff
		if up := need(p, 1); up > p.eff && p.frames > 0 {
			// A quarter above what fits: the load measured over one
			// interval is noisy, and a rate that fits it exactly would
			// creep up in many small steps.
			to, l.below = uint32(min(math.MaxUint32, math.Ceil(float64(up)*1.25))), 0
		} else if down := max(p.cfg, need(p, 0.5)); down < p.eff {
			if l.below += time.Duration(dt * float64(time.Second)); l.below >= backoffHold {
				to, l.below = down, 0
			}
		} else {
			l.below = 0
		}
		if to == p.eff {
			continue
		}
		if to == p.cfg {
			delete(a.override, p.idx)
		} else {
			a.override[p.idx] = to
		}
		steps = append(steps, BackoffStep{IfIndex: p.idx, Configured: p.cfg, From: p.eff, To: to,
			SamplesPerSecond: p.offered, FramesPerSecond: p.frames, AgentQuota: b.AgentQuota, PortQuota: b.PortQuota})
	}
	return steps
}
