// Package transit follows sampled frames to where they leave the switch,
// for extended_egress_queue (1036), extended_transit (1039) and
// extended_queue (1040) (dataplane/bpf/transit.h says how): the transit
// programs, loaded on the sampler's maps and attached to the tracepoints
// where a frame leaves or ends, the sweep of records whose frame was not
// seen again, and the counts of what became of the records parked.
package transit

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
)

// transitSweepEvery is how often user space runs transit_sweep while
// records are parked: the bound of a record's extra wait when the ring was
// full as its frame left, beside the stale bound (TRANSIT_STALE_NS, 1 s).
const transitSweepEvery = time.Second

// Stats are the counts of what became of the records parked to
// follow their frames (summed over CPUs), for the metrics.
type Stats struct {
	Parked   uint64 // records parked
	Unparked uint64 // delivered at once, without transit: the table full or the frame's address still parked
	Sent     uint64 // finished: the frame left through a port
	Dropped  uint64 // finished: the frame was dropped
	Consumed uint64 // finished: delivered on this host, or copied on
	Stale    uint64 // not seen again within a second
	Deferred uint64 // finished while the ring was full: delivered by the next sweep
	Queued   uint64 // went through a qdisc (a depth is known)
}

// Transit is the following of sampled frames: the sampler's transit maps
// and, once Start succeeded, the transit programs, their attachments and
// the sweep.
type Transit struct {
	parked, outcomes *ebpf.Map // the sampler's transit_parked and transit_outcomes
	log              *slog.Logger

	on    atomic.Bool
	objs  bpf.TransitObjects
	links []link.Link
	stop  chan struct{}
	done  sync.WaitGroup
}

// New is the following of the sampler objs's sampled frames, off until
// Start.
func New(objs *bpf.SamplerObjects, log *slog.Logger) *Transit {
	return &Transit{parked: objs.TransitParked, outcomes: objs.TransitOutcomes, log: log}
}

// Start loads and attaches the transit programs (dataplane/bpf/transit.c)
// on the maps of the sampler objs (loaded from spec) and starts the
// sweep. The loader calls it from Open when Config.TransitEntries > 0,
// before any port is configured (or adopted ports are rewritten); an
// error leaves transit off (the samplers park nothing: no port gets
// PORT_F_TRANSIT).
func (t *Transit) Start(fs *features.Features, wakeupBytes int, spec *ebpf.CollectionSpec, objs *bpf.SamplerObjects) error {
	if err := fs.Need(features.FeatureKernCtx, features.FeatureTransit); err != nil {
		return err
	}
	sampler := spec
	spec, err := bpf.LoadTransit()
	if err != nil {
		return fmt.Errorf("loading the transit spec: %w", err)
	}
	if err := spec.Variables[bpf.TransitVarWakeupBytes].Set(uint64(wakeupBytes)); err != nil {
		return fmt.Errorf("transit: setting wakeup_bytes: %w", err)
	}
	shared := map[string]*ebpf.Map{
		bpf.TransitMapTransitPending:  objs.TransitPending,
		bpf.TransitMapTransitParked:   objs.TransitParked,
		bpf.TransitMapTransitOutcomes: objs.TransitOutcomes,
		bpf.TransitMapRings:           objs.Rings,
		bpf.TransitMapRingIdle:        objs.RingIdle,
	}
	for name := range shared {
		spec.Maps[name] = sampler.Maps[name].Copy()
	}
	t.stop = make(chan struct{})
	if err := bpf.LoadAndAssign(spec, &t.objs, &ebpf.CollectionOptions{MapReplacements: shared}); err != nil {
		return bpf.LoadError("loading the transit programs", err)
	}
	for _, p := range []*ebpf.Program{t.objs.TransitEnqueue, t.objs.TransitXmit, t.objs.TransitDrop, t.objs.TransitConsume} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return errors.Join(fmt.Errorf("attaching transit program %s: %w", p, err), t.unload())
		}
		t.links = append(t.links, l)
	}
	t.on.Store(true)
	t.done.Add(1)
	go t.sweep()
	return nil
}

// sweep runs transit_sweep once a second while records are parked (one
// map read a second otherwise).
func (t *Transit) sweep() {
	defer t.done.Done()
	tick := time.NewTicker(transitSweepEvery)
	defer tick.Stop()
	frame := make([]byte, 64) // any frame: the sweep reads none
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		var n uint64
		if err := t.parked.Lookup(uint32(0), &n); err != nil {
			t.log.Warn("transit: reading the parked count", "err", err)
			continue
		}
		if n == 0 {
			continue
		}
		if _, err := t.objs.TransitSweep.Run(&ebpf.RunOptions{Data: frame}); err != nil {
			t.log.Warn("transit: running the sweep", "err", err)
		}
	}
}

// Close stops the sweep and detaches and unloads the transit programs.
// What is still parked stays in transit_pending (pinned with the
// samplers' maps, or freed with them).
func (t *Transit) Close() error {
	if t == nil || !t.on.Swap(false) {
		return nil
	}
	return t.unload()
}

// unload stops the sweep and closes the links and objects there are.
func (t *Transit) unload() error {
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
	t.done.Wait()
	var errs []error
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	errs = append(errs, t.objs.Close())
	return errors.Join(errs...)
}

// On reports whether sampled frames of TC ports are followed to where
// they leave (Start succeeded).
func (t *Transit) On() bool { return t != nil && t.on.Load() }

// Stats sums the per-CPU transit outcomes; zero when transit is off.
func (t *Transit) Stats() (Stats, error) {
	var per []bpf.TransitTransitStats
	if err := t.outcomes.Lookup(uint32(0), &per); err != nil {
		return Stats{}, fmt.Errorf("dataplane: reading transit outcomes: %w", err)
	}
	var s Stats
	bpf.SumPerCPU(&s, per)
	return s, nil
}

// Parked is the number of records waiting for their frames now.
func (t *Transit) Parked() (uint64, error) {
	var n uint64
	if err := t.parked.Lookup(uint32(0), &n); err != nil {
		return 0, fmt.Errorf("dataplane: reading the parked count: %w", err)
	}
	return n, nil
}

// Objects are the transit programs and maps while On, for benchmarks.
func (t *Transit) Objects() *bpf.TransitObjects { return &t.objs }
