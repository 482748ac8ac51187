package dataplane

// The FIB generation (dataplane/bpf/fib_seq.h): the kernel's own count of the
// changes of a namespace's forwarding tables (net->ipv4.fib_seq +
// net->ipv6.fib_seq), which the samplers read around their
// bpf_fib_lookup calls (dataplane/bpf/route.h). User space reads it around each copy
// of the routing table (FIBGen), so that a sample is given a route's
// prefix length only by a copy of the table that was in force when the
// sample was taken (dataplane/forwarding, router.go).

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
)

// fibGen is the loaded reader of the FIB generation (dataplane/bpf/fibgen.c).
type fibGen struct {
	prog *ebpf.Program
}

// startFIBGen loads fibgen.c's reader and checks that it reads a
// generation in the dataplane's namespace.
func (d *Dataplane) startFIBGen() error {
	spec, err := bpf.LoadFibGen()
	if err != nil {
		return fmt.Errorf("loading the FIB generation spec: %w", err)
	}
	var objs bpf.FibGenObjects
	if err := bpf.LoadAndAssign(spec, &objs, nil); err != nil {
		return fmt.Errorf("loading the FIB generation reader: %w", err)
	}
	g := &fibGen{prog: objs.FibGenRead}
	d.fib = g
	if _, ok := d.FIBGen(); !ok {
		d.fib = nil
		return errors.Join(errors.New("the FIB generation reader reads nothing (no bpf_cast_to_kern_ctx?)"), g.close())
	}
	return nil
}

func (g *fibGen) close() error {
	if g == nil {
		return nil
	}
	return g.prog.Close()
}

// fibGenFrame is the frame the reader runs on (an Ethernet header's
// worth; the reader looks only at the device).
var fibGenFrame = make([]byte, 64)

// FIBGen returns the FIB generation of the dataplane's namespace, as the
// samples carry it (modulo 2^32); ok is false when it cannot be read
// (kernel without bpf_cast_to_kern_ctx: features.FeatureKernCtx). One
// system call (BPF_PROG_TEST_RUN, on a thread in the namespace, whose
// loopback device the kernel gives the program): for refreshes of the
// route table, never per sample.
func (d *Dataplane) FIBGen() (gen uint32, ok bool) {
	if d.fib == nil {
		return 0, false
	}
	var ret uint32
	err := d.inNetns(func() error {
		var err error
		ret, err = d.fib.prog.Run(&ebpf.RunOptions{Data: fibGenFrame})
		return err
	})
	if err != nil || ret == 0 {
		return 0, false
	}
	return ret - 1, true
}
