// Transit: sampled frames followed to where they leave the switch, for
// extended_egress_queue (1036), extended_transit (1039) and
// extended_queue (1040) (dataplane/bpf/transit.h says how).

package dataplane

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
)

// DefaultTransitEntries is how many sampled frames may wait at once to be
// followed (Config.TransitEntries, when on): a parked record is about
// 450 bytes of preallocated kernel memory, so 4096 take about 1.8 MiB.
const DefaultTransitEntries = 4096

// transitSweepEvery is how often user space runs transit_sweep while
// records are parked: the bound of a record's extra wait when the ring was
// full as its frame left, beside the stale bound (TRANSIT_STALE_NS, 1 s).
const transitSweepEvery = time.Second

// TransitStats are the counts of what became of the records parked to
// follow their frames (summed over CPUs), for the metrics.
type TransitStats struct {
	Parked   uint64 // records parked
	Unparked uint64 // delivered at once, without transit: the table full or the frame's address still parked
	Sent     uint64 // finished: the frame left through a port
	Dropped  uint64 // finished: the frame was dropped
	Consumed uint64 // finished: delivered on this host, or copied on
	Stale    uint64 // not seen again within a second
	Deferred uint64 // finished while the ring was full: delivered by the next sweep
	Queued   uint64 // went through a qdisc (a depth is known)
}

// transit is the loaded transit programs, their attachments and the
// sweep.
type transit struct {
	objs  bpf.TransitObjects
	links []link.Link
	stop  chan struct{}
	done  sync.WaitGroup
}

// startTransit loads and attaches the transit programs (dataplane/bpf/transit.c) on
// the samplers' maps and starts the sweep. Called from Open when
// Config.TransitEntries > 0, before any port is configured (or adopted
// ports are rewritten); an error leaves transit off (the samplers park
// nothing: no port gets PORT_F_TRANSIT).
func (d *Dataplane) startTransit() error {
	if err := d.features.Need(features.FeatureKernCtx, features.FeatureTransit); err != nil {
		return err
	}
	spec, err := bpf.LoadTransit()
	if err != nil {
		return fmt.Errorf("loading the transit spec: %w", err)
	}
	if err := spec.Variables[bpf.TransitVarWakeupBytes].Set(uint64(d.cfg.WakeupBytes)); err != nil {
		return fmt.Errorf("transit: setting wakeup_bytes: %w", err)
	}
	shared := map[string]*ebpf.Map{
		bpf.TransitMapTransitPending:  d.objs.TransitPending,
		bpf.TransitMapTransitParked:   d.objs.TransitParked,
		bpf.TransitMapTransitOutcomes: d.objs.TransitOutcomes,
		bpf.TransitMapRings:           d.objs.Rings,
	}
	for name := range shared {
		spec.Maps[name] = d.spec.Maps[name].Copy()
	}
	t := &transit{stop: make(chan struct{})}
	if err := bpf.LoadAndAssign(spec, &t.objs, &ebpf.CollectionOptions{MapReplacements: shared}); err != nil {
		return bpf.LoadError("loading the transit programs", err)
	}
	for _, p := range []*ebpf.Program{t.objs.TransitEnqueue, t.objs.TransitXmit, t.objs.TransitDrop, t.objs.TransitConsume} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return errors.Join(fmt.Errorf("attaching transit program %s: %w", p, err), t.close())
		}
		t.links = append(t.links, l)
	}
	d.transit = t
	t.done.Add(1)
	go d.sweepTransit(t)
	return nil
}

// sweepTransit runs transit_sweep once a second while records are parked
// (one map read a second otherwise).
func (d *Dataplane) sweepTransit(t *transit) {
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
		if err := d.objs.TransitParked.Lookup(uint32(0), &n); err != nil {
			d.log.Warn("transit: reading the parked count", "err", err)
			continue
		}
		if n == 0 {
			continue
		}
		if _, err := t.objs.TransitSweep.Run(&ebpf.RunOptions{Data: frame}); err != nil {
			d.log.Warn("transit: running the sweep", "err", err)
		}
	}
}

// close stops the sweep and detaches and unloads the transit programs.
// What is still parked stays in transit_pending (pinned with the
// samplers' maps, or freed with them).
func (t *transit) close() error {
	if t == nil {
		return nil
	}
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

// TransitOn reports whether sampled frames of TC ports are followed to
// where they leave (Config.TransitEntries, and the kernel allows it).
func (d *Dataplane) TransitOn() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.transit != nil
}

// TransitStats sums the per-CPU transit outcomes; zero when transit is
// off.
func (d *Dataplane) TransitStats() (TransitStats, error) {
	var per []bpf.TransitTransitStats
	if err := d.objs.TransitOutcomes.Lookup(uint32(0), &per); err != nil {
		return TransitStats{}, fmt.Errorf("dataplane: reading transit outcomes: %w", err)
	}
	var s TransitStats
	bpf.SumPerCPU(&s, per)
	return s, nil
}

// TransitParked is the number of records waiting for their frames now.
func (d *Dataplane) TransitParked() (uint64, error) {
	var n uint64
	if err := d.objs.TransitParked.Lookup(uint32(0), &n); err != nil {
		return 0, fmt.Errorf("dataplane: reading the parked count: %w", err)
	}
	return n, nil
}
