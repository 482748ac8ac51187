// Package egress is egress sampling: the TC egress sampler
// (dataplane/bpf/tc_egress.c), attached per port next to (or instead of)
// the ingress sampler by the sampler loader (package dataplane). Each
// direction has its own counters (pool, samples, drops, skip) at the
// port's slot: the ingress samplers' `counters` array, and the egress
// object's own, loaded with the first port sampled at egress. The port's
// config entry, the rings and the FIB generation are shared.
package egress

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/sflowswitchd/sflowswitchd/dataplane/pin"
	"github.com/sflowswitchd/sflowswitchd/dataplane/portstats"

	"github.com/sflowswitchd/sflowswitchd/dataplane/clsact"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
)

// Sampler is the egress sampler's shared part (dataplane/bpf/tc_egress.c),
// loaded with the first port sampled at egress (Load): tc_out_take and
// its program array, the hand-over map, and the egress counters (mapped
// like the ingress ones).
type Sampler struct {
	spec      *ebpf.CollectionSpec
	take      *ebpf.Program
	takeProgs *ebpf.Map
	hands     *ebpf.Map
	counters  *ebpf.Map
	pages     *portstats.Pages
	cpuSlots  int
}

// Shared is what the egress sampler shares with the loader's XDP sampler.
type Shared struct {
	// Spec and Objs are the XDP sampler as loaded: the maps the egress
	// sampler uses too (configs, rings, transit), and their specs.
	Spec *ebpf.CollectionSpec
	Objs *bpf.SamplerObjects
	// CPUSlots, MaxPorts and WakeupBytes size the sampler as the loader's.
	CPUSlots, MaxPorts, WakeupBytes int
	// Pin is the pin directory (nil: nothing pinned), where the egress
	// counters are pinned for the program that takes over (pin.go).
	Pin *pin.State
	Log *slog.Logger
}

// Port is a port's attachment at TC egress.
type Port struct {
	link interface{ Close() error } // TCX egress link or cls_bpf filter (clsact egress)
	prog *ebpf.Program              // the port's own instance of tc_out_sampler
	tcx  bool                       // a TCX link, not a clsact filter
}

// Close detaches and unloads the port's egress program; nil does nothing.
func (e *Port) Close() error {
	if e == nil {
		return nil
	}
	return errors.Join(e.link.Close(), e.prog.Close())
}

// Load loads the egress sampler's shared part (the loader does it once,
// with the first port sampled at egress).
func Load(sh Shared) (*Sampler, error) {
	spec, err := bpf.LoadTcEgress()
	if err != nil {
		return nil, fmt.Errorf("loading the egress sampler spec: %w", err)
	}
	if err := spec.Variables[bpf.TcEgressVarCpuSlots].Set(uint32(sh.CPUSlots)); err != nil {
		return nil, fmt.Errorf("egress sampler: setting cpu_slots: %w", err)
	}
	if err := spec.Variables[bpf.TcEgressVarWakeupBytes].Set(uint64(sh.WakeupBytes)); err != nil {
		return nil, fmt.Errorf("egress sampler: setting wakeup_bytes: %w", err)
	}
	shared := map[string]*ebpf.Map{
		bpf.TcEgressMapPortConfigs:     sh.Objs.PortConfigs,
		bpf.TcEgressMapPortConfigsHigh: sh.Objs.PortConfigsHigh,
		bpf.TcEgressMapRings:           sh.Objs.Rings,
		bpf.TcEgressMapRingIdle:        sh.Objs.RingIdle,
		bpf.TcEgressMapTransitPending:  sh.Objs.TransitPending,
		bpf.TcEgressMapTransitParked:   sh.Objs.TransitParked,
		bpf.TcEgressMapTransitOutcomes: sh.Objs.TransitOutcomes,
	}
	for name := range shared {
		spec.Maps[name] = sh.Spec.Maps[name].Copy()
	}
	// Its own counters: the egress pools, one line per port slot and CPU,
	// as the ingress array.
	spec.Maps[bpf.TcEgressMapCounters].MaxEntries = uint32(sh.MaxPorts * sh.CPUSlots)
	var o struct {
		Take      *ebpf.Program `ebpf:"tc_out_take"`
		TakeProgs *ebpf.Map     `ebpf:"take_progs"`
		Hands     *ebpf.Map     `ebpf:"sample_hands"`
		Counters  *ebpf.Map     `ebpf:"counters"`
	}
	if err := bpf.LoadAndAssign(spec, &o, &ebpf.CollectionOptions{MapReplacements: shared}); err != nil {
		return nil, bpf.LoadError("loading the egress sampler", err)
	}
	e := &Sampler{spec: spec, take: o.Take, takeProgs: o.TakeProgs, hands: o.Hands, counters: o.Counters, cpuSlots: sh.CPUSlots}
	if err := o.TakeProgs.Put(uint32(0), o.Take); err != nil {
		return nil, errors.Join(fmt.Errorf("installing tc_out_take: %w", err), e.Close())
	}
	if err := pinCounters(sh.Pin, o.Counters); err != nil {
		// Sampled all the same; a take-over then restarts the egress
		// pools (their base misses what the egress samplers counted).
		sh.Log.Warn("egress counters not pinned: a crash or an upgrade loses the egress pools", "err", err)
	}
	pages, err := portstats.Map(o.Counters, sh.MaxPorts, sh.CPUSlots)
	if err != nil {
		return nil, errors.Join(err, e.Close())
	}
	e.pages = pages
	return e, nil
}

// Pages are the egress counters, mapped.
func (e *Sampler) Pages() *portstats.Pages { return e.pages }

// Close unloads the egress sampler's shared part and unmaps its counters;
// nil does nothing.
func (e *Sampler) Close() error {
	if e == nil {
		return nil
	}
	var errs []error
	if e.pages != nil {
		errs = append(errs, e.pages.Close())
	}
	for _, c := range []interface{ Close() error }{e.take, e.takeProgs, e.hands, e.counters} {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// program loads the port's own instance of tc_out_sampler, with its
// counter slot and ifindex patched in as for the ingress programs.
func (e *Sampler) program(ifindex int, slot uint32) (*ebpf.Program, error) {
	spec := e.spec.Copy()
	if err := bpf.PatchPortImms(spec.Programs[bpf.TcEgressProgTcOutSampler].Instructions, ifindex, slot, e.cpuSlots); err != nil {
		return nil, err
	}
	var o struct {
		Prog *ebpf.Program `ebpf:"tc_out_sampler"`
	}
	err := bpf.LoadAndAssign(spec, &o, &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		bpf.TcEgressMapCounters:    e.counters,
		bpf.TcEgressMapSampleHands: e.hands,
		bpf.TcEgressMapTakeProgs:   e.takeProgs,
	}})
	if err != nil {
		return nil, bpf.LoadError("loading the port's egress sampler", err)
	}
	return o.Prog, nil
}

// Attach loads the port's egress program and attaches it at TC egress of
// ifindex, first in the chain (a TCX link at the head where tcx, or our
// cls_bpf filter at priority 1 of the clsact qdisc's egress side,
// through filters), so that the pool counts every frame the kernel sends
// through the port before anyone's TC program can drop or redirect it.
// ownQdisc says the port's clsact qdisc was created by the filters' owner
// (its ingress filter says so). Its egress counters at slot are zeroed
// first. Must run in the port's netns.
func (e *Sampler) Attach(ifindex int, slot uint32, tcx bool, filters clsact.Filters, ownQdisc bool) (*Port, error) {
	e.pages.Zero(slot)
	prog, err := e.program(ifindex, slot)
	if err != nil {
		return nil, err
	}
	if !tcx {
		f, err := filters.Attach(prog, ifindex, clsact.Egress, ownQdisc)
		if err != nil {
			return nil, errors.Join(err, prog.Close())
		}
		return &Port{link: f, prog: prog}, nil
	}
	l, err := link.AttachTCX(link.TCXOptions{
		Interface: ifindex,
		Program:   prog,
		Attach:    ebpf.AttachTCXEgress,
		Anchor:    link.Head(),
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("attaching TCX egress: %w", err), prog.Close())
	}
	return &Port{link: l, prog: prog, tcx: true}, nil
}

// TCX reports whether the port's egress sampler is a TCX link (otherwise
// our clsact filter).
func (e *Port) TCX() bool { return e.tcx }

// OwnQdisc reports whether the port's egress sampler is our clsact filter
// on a qdisc its owner created.
func (e *Port) OwnQdisc() bool {
	f, ok := e.link.(*clsact.Filter)
	return ok && f.OwnQdisc()
}

// Program is the port's own instance of tc_out_sampler.
func (e *Port) Program() *ebpf.Program { return e.prog }
