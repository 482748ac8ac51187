package dataplane

// The FIB generation (bpf/fibgen.c): two fentry programs count the
// changes of the namespace's forwarding tables into fib_gens, which the
// samplers read around their bpf_fib_lookup calls (bpf/route.h). User
// space reads it around each copy of the routing table (FIBGen), so that
// a sample is given a route's prefix length only by a copy of the table
// that was in force when the sample was taken (dataplane/forwarding).

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/bpf"
)

// fibGen is the running FIB generation counter: its programs and links.
type fibGen struct {
	progs []*ebpf.Program
	links []link.Link
}

// startFIBGen loads fibgen.c's programs, sharing the samplers' fib_gens,
// and attaches them. call_fib_notifiers is needed (route entries, FIB
// rules); call_nexthop_notifiers (nexthop objects) is a static function
// a kernel may have inlined: without it a change of a nexthop object
// that does not also announce its routes goes uncounted, which is logged.
func (d *Dataplane) startFIBGen() error {
	spec, err := bpf.LoadFibGen()
	if err != nil {
		return fmt.Errorf("loading the FIB generation spec: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(d.ns), &st); err != nil {
		return fmt.Errorf("the dataplane's network namespace: %w", err)
	}
	if err := spec.Variables[bpf.FibGenVarNetnsIno].Set(uint32(st.Ino)); err != nil {
		return fmt.Errorf("setting netns_ino: %w", err)
	}
	spec.Maps[bpf.FibGenMapFibGens] = d.spec.Maps[bpf.SamplerMapFibGens].Copy()
	g := &fibGen{}
	for _, name := range []string{bpf.FibGenProgFibNotified, bpf.FibGenProgNexthopNotified} {
		s := spec.Copy()
		for n := range s.Programs {
			if n != name {
				delete(s.Programs, n)
			}
		}
		coll, err := ebpf.NewCollectionWithOptions(s, ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
			bpf.FibGenMapFibGens: d.objs.FibGens,
		}})
		if err == nil {
			prog := coll.DetachProgram(name)
			coll.Close()
			var l link.Link
			if l, err = link.AttachTracing(link.TracingOptions{Program: prog}); err != nil {
				prog.Close()
			} else {
				g.progs = append(g.progs, prog)
				g.links = append(g.links, l)
				continue
			}
		}
		if name == bpf.FibGenProgFibNotified {
			return errors.Join(fmt.Errorf("attaching %s (fentry/call_fib_notifiers): %w", name, err), g.close())
		}
		d.log.Warn("nexthop object changes are not counted in the FIB generation (fentry/call_nexthop_notifiers unavailable): extended_router relies on route announcements for them",
			"err", err)
	}
	d.fib = g
	return nil
}

func (g *fibGen) close() error {
	if g == nil {
		return nil
	}
	var errs []error
	for _, l := range g.links {
		errs = append(errs, l.Close())
	}
	for _, p := range g.progs {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// FIBGen returns the FIB generation of the dataplane's namespace (the
// count of FIB changes since Open, modulo 2^32, as the samples carry it);
// ok is false when the counter does not run (kernel without fentry or
// BTF: FeatureFIBGen). One map lookup (a system call): for refreshes of
// the route table, not per sample.
func (d *Dataplane) FIBGen() (gen uint32, ok bool) {
	if d.fib == nil {
		return 0, false
	}
	var v uint64
	if err := d.objs.FibGens.Lookup(uint32(0), &v); err != nil {
		return 0, false
	}
	return uint32(v), true
}
