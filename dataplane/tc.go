package dataplane

import (
	"errors"
	"fmt"

	"github.com/sflowswitchd/sflowswitchd/dataplane/clsact"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
	"github.com/sflowswitchd/sflowswitchd/dataplane/pin"
)

// AttachTCX is the attach mode AttachMode reports for a port sampled at
// TC ingress through a TCX link.
const AttachTCX = "tcx"

// AttachClsact is the attach mode AttachMode reports for a port sampled at
// TC ingress through a cls_bpf filter on a clsact qdisc (package clsact).
const AttachClsact = "clsact"

// TCMode is how a port sampled at TC ingress is attached (Config.TCMode).
type TCMode uint8

const (
	// TCModeAuto attaches with a TCX link where the kernel has TCX links
	// (Linux 6.6), otherwise with a cls_bpf filter on the port's clsact
	// qdisc (package clsact). The zero TCMode.
	TCModeAuto TCMode = iota
	// TCModeClsact always attaches with a cls_bpf filter, also where TCX
	// exists: the path of kernels before 6.6, so that tests and
	// benchmarks run it on newer kernels too.
	TCModeClsact
)

// String returns "auto" or "clsact".
func (m TCMode) String() string {
	switch m {
	case TCModeAuto:
		return "auto"
	case TCModeClsact:
		return "clsact"
	}
	return fmt.Sprintf("TCMode(%d)", uint8(m))
}

// TCAttachMode is how a kernel with fs attaches a port sampled at TC
// ingress: AttachTCX where it has TCX links (Linux 6.6), otherwise
// AttachClsact.
func TCAttachMode(fs *features.Features) string {
	if fs.Has(features.FeatureTCX) {
		return AttachTCX
	}
	return AttachClsact
}

// tcObjects is the TC sampler's shared part (dataplane/bpf/tc_sampler.c), loaded on
// the first TC port: tc_take_sample and the program array that port
// programs tail-call it through. Every other map is the XDP sampler's
// (counters, configs, rings, hand-over), so a port's counters and samples
// are the same whichever hook it uses.
type tcObjects struct {
	spec      *ebpf.CollectionSpec
	take      *ebpf.Program
	takeProgs *ebpf.Map
}

// sharedMaps are the XDP sampler's maps that the TC programs use.
func (d *Dataplane) sharedMaps() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		bpf.TcSamplerMapCounters:        d.objs.Counters,
		bpf.TcSamplerMapPortConfigs:     d.objs.PortConfigs,
		bpf.TcSamplerMapPortConfigsHigh: d.objs.PortConfigsHigh,
		bpf.TcSamplerMapRings:           d.objs.Rings,
		bpf.TcSamplerMapRingIdle:        d.objs.RingIdle,
		bpf.TcSamplerMapSampleHands:     d.objs.SampleHands,
		bpf.TcSamplerMapTransitPending:  d.objs.TransitPending,
		bpf.TcSamplerMapTransitParked:   d.objs.TransitParked,
		bpf.TcSamplerMapTransitOutcomes: d.objs.TransitOutcomes,
	}
}

// loadTC loads the TC sampler's shared part once. Called with mu held.
func (d *Dataplane) loadTC() (*tcObjects, error) {
	if d.tc != nil {
		return d.tc, nil
	}
	spec, err := bpf.LoadTcSampler()
	if err != nil {
		return nil, fmt.Errorf("loading TC sampler spec: %w", err)
	}
	if err := spec.Variables[bpf.TcSamplerVarCpuSlots].Set(uint32(d.cpuSlots)); err != nil {
		return nil, fmt.Errorf("TC sampler: setting cpu_slots: %w", err)
	}
	if err := spec.Variables[bpf.TcSamplerVarWakeupBytes].Set(uint64(d.cfg.WakeupBytes)); err != nil {
		return nil, fmt.Errorf("TC sampler: setting wakeup_bytes: %w", err)
	}
	// The shared maps exist already (the XDP sampler's): their specs
	// here must match them as sized at load, or the replacement is
	// refused.
	for name := range d.sharedMaps() {
		spec.Maps[name] = d.spec.Maps[name].Copy()
	}
	var o struct {
		Take      *ebpf.Program `ebpf:"tc_take_sample"`
		TakeProgs *ebpf.Map     `ebpf:"take_progs"`
	}
	repl := d.sharedMaps()
	if d.pinned.pin != nil {
		// The program array the ports' TC programs tail-call through is
		// pinned too: after an exec or a crash it still leads the old
		// programs to a sampled path (adopted here, then replaced).
		tp, err := d.pinned.pin.Map(pin.TCTake, spec.Maps[bpf.TcSamplerMapTakeProgs])
		if err != nil {
			return nil, fmt.Errorf("TC sampler: %w", err)
		}
		defer tp.Close() // LoadAndAssign clones it
		repl[bpf.TcSamplerMapTakeProgs] = tp
	}
	if err := bpf.LoadAndAssign(spec, &o, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return nil, bpf.LoadError("loading TC sampler", err)
	}
	if err := o.TakeProgs.Put(uint32(0), o.Take); err != nil {
		return nil, errors.Join(fmt.Errorf("installing tc_take_sample: %w", err), o.Take.Close(), o.TakeProgs.Close())
	}
	d.tc = &tcObjects{spec: spec, take: o.Take, takeProgs: o.TakeProgs}
	return d.tc, nil
}

// close unloads the TC sampler's shared part.
func (t *tcObjects) close() error {
	if t == nil {
		return nil
	}
	return errors.Join(t.take.Close(), t.takeProgs.Close())
}

// portProgramTC loads the port's own instance of tc_sampler, with its
// counter slot and ifindex patched in as for xdp_sampler (portProgram).
func (d *Dataplane) portProgramTC(ifindex int, slot uint32) (*ebpf.Program, error) {
	tc, err := d.loadTC()
	if err != nil {
		return nil, err
	}
	spec := tc.spec.Copy()
	if err := bpf.PatchPortImms(spec.Programs[bpf.TcSamplerProgTcSampler].Instructions, ifindex, slot, d.cpuSlots); err != nil {
		return nil, err
	}
	var o struct {
		Prog *ebpf.Program `ebpf:"tc_sampler"`
	}
	err = bpf.LoadAndAssign(spec, &o, &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		bpf.TcSamplerMapCounters:    d.objs.Counters,
		bpf.TcSamplerMapSampleHands: d.objs.SampleHands,
		bpf.TcSamplerMapTakeProgs:   tc.takeProgs,
	}})
	if err != nil {
		return nil, bpf.LoadError("loading the port's TC sampler", err)
	}
	return o.Prog, nil
}

// attachTC attaches prog at TC ingress of ifindex, first in the chain so
// that the pool counts every frame received, before any other TC program
// or filter can drop it: with a TCX link at the head of the TCX chain
// where the kernel has TCX (TCModeAuto), otherwise as a cls_bpf filter at
// priority 1 of the clsact qdisc (clsact.Filters.Attach). Must run in the port's
// netns. Returns the attachment and AttachTCX or AttachClsact. A TCX link,
// like an XDP link, dies with the process; a filter does not, which is
// why Open removes stale ones (clsact.RemoveStale).
func (d *Dataplane) attachTC(prog *ebpf.Program, ifindex int) (attachment, string, error) {
	if d.cfg.TCMode == TCModeClsact || !d.features.Has(features.FeatureTCX) {
		f, err := d.filters.Attach(prog, ifindex, clsact.Ingress, false)
		if err != nil {
			return nil, "", err
		}
		return f, AttachClsact, nil
	}
	l, err := link.AttachTCX(link.TCXOptions{
		Interface: ifindex,
		Program:   prog,
		Attach:    ebpf.AttachTCXIngress,
		Anchor:    link.Head(),
	})
	if err != nil {
		return nil, "", fmt.Errorf("attaching TCX ingress: %w", err)
	}
	return l, AttachTCX, nil
}

// attachment is how a port's program is attached: a BPF link (XDP, TCX;
// link.Link) or our cls_bpf filter (clsact.Filter).
type attachment interface {
	// Update swaps in another program, atomically.
	Update(*ebpf.Program) error
	// Close detaches the program.
	Close() error
}

// attachHook loads the port's program for hook and attaches it: the
// attachment, the program and the attach mode (AttachNative,
// AttachGeneric, AttachTCX or AttachClsact). Must run in the port's netns;
// called with mu held.
func (d *Dataplane) attachHook(hook Hook, ifindex int, slot uint32, m Mode) (attachment, *ebpf.Program, string, error) {
	if hook == HookTC {
		prog, err := d.portProgramTC(ifindex, slot)
		if err != nil {
			return nil, nil, "", err
		}
		a, mode, err := d.attachTC(prog, ifindex)
		if err != nil {
			return nil, nil, "", errors.Join(err, prog.Close())
		}
		return a, prog, mode, nil
	}
	prog, err := d.portProgram(ifindex, slot, m)
	if err != nil {
		return nil, nil, "", err
	}
	l, mode, err := attachXDP(prog, ifindex)
	if err != nil {
		return nil, nil, "", errors.Join(err, prog.Close())
	}
	return l, prog, mode, nil
}

// moveToXDP re-attaches a TC port with XDP for mode m (a port becoming a
// monitor port): the XDP link first, then the TC attachment (link or
// filter) goes. The counter slot, and so the port's counters, stay. Called
// with mu held.
func (d *Dataplane) moveToXDP(ifindex int, p *port, m Mode) error {
	var (
		l    attachment
		prog *ebpf.Program
		mode string
	)
	err := d.inNetns(func() error {
		var err error
		l, prog, mode, err = d.attachHook(HookXDP, ifindex, p.slot, m)
		return err
	})
	if err != nil {
		return err
	}
	errs := []error{d.pinned.forget(ifindex, p), p.link.Close(), p.prog.Close()}
	p.link, p.prog, p.hook, p.mode = l, prog, HookXDP, mode
	if err := d.pinned.record(ifindex, p); err != nil {
		d.log.Warn("port moved to XDP but not pinned: a crash or an upgrade detaches it", "ifindex", ifindex, "err", err)
	}
	d.log.Info("sampler moved from TC to XDP", "ifindex", ifindex, "mode", mode, "delivery", m)
	if err := errors.Join(errs...); err != nil {
		d.log.Warn("detaching the port's TC program", "ifindex", ifindex, "err", err)
	}
	return nil
}
