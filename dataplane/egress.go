package dataplane

// Egress sampling: the TC egress sampler (dataplane/bpf/tc_egress.c), attached per
// port next to (or instead of) the ingress sampler. Each direction has its
// own counters (pool, samples, drops, skip) at the port's slot: the
// ingress samplers' `counters` array, and the egress object's own, loaded
// with the first port sampled at egress. The port's config entry, the
// rings and the FIB generation are shared.

import (
	"errors"
	"fmt"

	"github.com/sflowswitchd/sflowswitchd/dataplane/portstats"

	"github.com/sflowswitchd/sflowswitchd/dataplane/clsact"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// PortKind tells the sampled path what it may read about a port's frames
// beyond their bytes (dataplane/bpf/sampler.h PORT_KIND_*): a tunnel device's outer
// header.
type PortKind uint32

const (
	// PortPlain is any port that is not a tunnel device.
	PortPlain PortKind = 0
	// PortVXLAN is a VXLAN device.
	PortVXLAN PortKind = 1
	// PortGRE is an Ethernet-over-GRE device (gretap, ip6gretap).
	PortGRE PortKind = 2
)

// KindOf returns the PortKind of a link of netlink kind k (ports.Info.Kind).
func KindOf(k string) PortKind {
	switch k {
	case "vxlan":
		return PortVXLAN
	case "gretap", "ip6gretap":
		return PortGRE
	}
	return PortPlain
}

// egressObjects is the egress sampler's shared part (dataplane/bpf/tc_egress.c),
// loaded with the first port sampled at egress: tc_out_take and its
// program array, the hand-over map, and the egress counters (mapped like
// the ingress ones).
type egressObjects struct {
	spec      *ebpf.CollectionSpec
	take      *ebpf.Program
	takeProgs *ebpf.Map
	hands     *ebpf.Map
	counters  *ebpf.Map
	pages     *portstats.Pages
}

// egressPort is a port's attachment at TC egress.
type egressPort struct {
	link attachment    // TCX egress link or cls_bpf filter (clsact egress)
	prog *ebpf.Program // the port's own instance of tc_out_sampler
	mode string        // AttachTCX or AttachClsact
}

// close detaches and unloads the port's egress program.
func (e *egressPort) close() error {
	if e == nil {
		return nil
	}
	return errors.Join(e.link.Close(), e.prog.Close())
}

// loadEgress loads the egress sampler's shared part once. Called with mu
// held.
func (d *Dataplane) loadEgress() (*egressObjects, error) {
	if d.egress != nil {
		return d.egress, nil
	}
	spec, err := bpf.LoadTcEgress()
	if err != nil {
		return nil, fmt.Errorf("loading the egress sampler spec: %w", err)
	}
	if err := spec.Variables[bpf.TcEgressVarCpuSlots].Set(uint32(d.cpuSlots)); err != nil {
		return nil, fmt.Errorf("egress sampler: setting cpu_slots: %w", err)
	}
	if err := spec.Variables[bpf.TcEgressVarWakeupBytes].Set(uint64(d.cfg.WakeupBytes)); err != nil {
		return nil, fmt.Errorf("egress sampler: setting wakeup_bytes: %w", err)
	}
	shared := map[string]*ebpf.Map{
		bpf.TcEgressMapPortConfigs:     d.objs.PortConfigs,
		bpf.TcEgressMapPortConfigsHigh: d.objs.PortConfigsHigh,
		bpf.TcEgressMapRings:           d.objs.Rings,
		bpf.TcEgressMapTransitPending:  d.objs.TransitPending,
		bpf.TcEgressMapTransitParked:   d.objs.TransitParked,
		bpf.TcEgressMapTransitOutcomes: d.objs.TransitOutcomes,
	}
	for name := range shared {
		spec.Maps[name] = d.spec.Maps[name].Copy()
	}
	// Its own counters: the egress pools, one line per port slot and CPU,
	// as the ingress array.
	spec.Maps[bpf.TcEgressMapCounters].MaxEntries = uint32(d.cfg.MaxPorts * d.cpuSlots)
	var o struct {
		Take      *ebpf.Program `ebpf:"tc_out_take"`
		TakeProgs *ebpf.Map     `ebpf:"take_progs"`
		Hands     *ebpf.Map     `ebpf:"sample_hands"`
		Counters  *ebpf.Map     `ebpf:"counters"`
	}
	if err := bpf.LoadAndAssign(spec, &o, &ebpf.CollectionOptions{MapReplacements: shared}); err != nil {
		return nil, bpf.LoadError("loading the egress sampler", err)
	}
	e := &egressObjects{spec: spec, take: o.Take, takeProgs: o.TakeProgs, hands: o.Hands, counters: o.Counters}
	if err := o.TakeProgs.Put(uint32(0), o.Take); err != nil {
		return nil, errors.Join(fmt.Errorf("installing tc_out_take: %w", err), e.close())
	}
	if err := d.pinEgress(o.Counters); err != nil {
		// Sampled all the same; a take-over then restarts the egress
		// pools (their base misses what the egress samplers counted).
		d.log.Warn("egress counters not pinned: a crash or an upgrade loses the egress pools", "err", err)
	}
	pages, err := portstats.Map(o.Counters, d.cfg.MaxPorts, d.cpuSlots)
	if err != nil {
		return nil, errors.Join(err, e.close())
	}
	e.pages = pages
	d.egress = e
	d.egressPages.Store(pages)
	return e, nil
}

// close unloads the egress sampler's shared part and unmaps its counters.
func (e *egressObjects) close() error {
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

// portProgramEgress loads the port's own instance of tc_out_sampler, with
// its counter slot and ifindex patched in as for the ingress programs.
func (d *Dataplane) portProgramEgress(ifindex int, slot uint32) (*ebpf.Program, error) {
	e, err := d.loadEgress()
	if err != nil {
		return nil, err
	}
	spec := e.spec.Copy()
	if err := d.patchPortImms(spec.Programs[bpf.TcEgressProgTcOutSampler].Instructions, ifindex, slot); err != nil {
		return nil, err
	}
	var o struct {
		Prog *ebpf.Program `ebpf:"tc_out_sampler"`
	}
	err = bpf.LoadAndAssign(spec, &o, &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		bpf.TcEgressMapCounters:    e.counters,
		bpf.TcEgressMapSampleHands: e.hands,
		bpf.TcEgressMapTakeProgs:   e.takeProgs,
	}})
	if err != nil {
		return nil, bpf.LoadError("loading the port's egress sampler", err)
	}
	return o.Prog, nil
}

// attachEgress loads the port's egress program and attaches it at TC
// egress of ifindex, first in the chain (a TCX link at the head, or our
// cls_bpf filter at priority 1 of the clsact qdisc's egress side), so
// that the pool counts every frame the kernel sends through the port
// before anyone's TC program can drop or redirect it. ownQdisc says the
// port's clsact qdisc was created by this Dataplane (its ingress filter
// says so). Must run in the port's netns; called with mu held.
func (d *Dataplane) attachEgress(ifindex int, slot uint32, ownQdisc bool) (*egressPort, error) {
	prog, err := d.portProgramEgress(ifindex, slot)
	if err != nil {
		return nil, err
	}
	if d.cfg.TCMode == TCModeClsact || !d.features.Has(features.FeatureTCX) {
		f, err := d.filters.Attach(prog, ifindex, clsact.Egress, ownQdisc)
		if err != nil {
			return nil, errors.Join(err, prog.Close())
		}
		return &egressPort{link: f, prog: prog, mode: AttachClsact}, nil
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
	return &egressPort{link: l, prog: prog, mode: AttachTCX}, nil
}

// ownsQdisc reports whether p's ingress attachment is our clsact filter on
// a qdisc this Dataplane created.
func (p *port) ownsQdisc() bool {
	if f, ok := p.link.(*clsact.Filter); ok && f != nil {
		return f.OwnQdisc()
	}
	if p.out != nil {
		if f, ok := p.out.link.(*clsact.Filter); ok {
			return f.OwnQdisc()
		}
	}
	return false
}

// PortCountersEgress sums the port's per-CPU egress counters (zeros when
// the port is not sampled at egress), through the memory-mapped egress
// counter array: no syscall, no lock.
func (d *Dataplane) PortCountersEgress(ifindex int) (portstats.Counters, error) {
	if slots := d.slotOf.Load(); slots != nil {
		if s, ok := (*slots)[ifindex]; ok {
			if !s.dirs.Has(sflow.DirectionEgress) {
				return portstats.Counters{}, nil
			}
			if pages := d.egressPages.Load(); pages != nil {
				return pages.Sum(s.slot), nil
			}
			return portstats.Counters{}, nil
		}
	}
	return portstats.Counters{}, fmt.Errorf("dataplane: egress counters of ifindex %d: %w", ifindex, ErrNotAttached)
}

// PortDirection returns the directions ifindex is sampled in (0 when it is
// not attached). No lock.
func (d *Dataplane) PortDirection(ifindex int) sflow.Direction {
	if slots := d.slotOf.Load(); slots != nil {
		return (*slots)[ifindex].dirs
	}
	return 0
}

// EgressAttachMode reports how the egress sampler is attached to ifindex:
// AttachTCX, AttachClsact, or "" when the port is not sampled at egress.
func (d *Dataplane) EgressAttachMode(ifindex int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.ports[ifindex]; ok && p.out != nil {
		return p.out.mode
	}
	return ""
}
