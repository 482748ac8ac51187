package main

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
)

// The tc part: the TC hook's two attach modes side by side on the frames
// part's stream, so that their per-packet cost is compared in one run,
// alternating: a TCX link (Linux 6.6) and a cls_bpf filter on a clsact
// qdisc (the path of kernels without TCX, forced here with
// dataplane.TCModeClsact), each with a do-nothing program (tc_pass: the
// hook's own cost) and with the sampler; plus no program and the XDP
// sampler on the same veth port, for the choice of hook auto where TCX is
// missing.

// tcFloorProg loads tc_floor: xdp_floor's instructions (dataplane/bpf/sampler.c: find
// this CPU's counter line, count the frame, count the skip down) as a
// SchedCLS program returning TC_ACT_UNSPEC instead of XDP_PASS, with
// counters of its own. The floor of the TC sampler's unsampled path, as
// xdp_floor is the XDP sampler's: the same body, only the hook differs.
func tcFloorProg() (*ebpf.Program, error) {
	spec, err := bpf.LoadSampler()
	if err != nil {
		return nil, fmt.Errorf("loading sampler spec: %w", err)
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("possible CPUs: %w", err)
	}
	xf := spec.Programs["xdp_floor"]
	if xf == nil {
		return nil, errors.New("no xdp_floor in the sampler object")
	}
	ps := xf.Copy()
	ps.Name, ps.Type, ps.AttachType, ps.Flags, ps.SectionName = "tc_floor", ebpf.SchedCLS, ebpf.AttachNone, 0, "tc"
	// xdp_floor has one return value, XDP_PASS (2), set right before its
	// single exit; anything else means the program changed and this
	// translation must be looked at again.
	n := 0
	for i, ins := range ps.Instructions {
		if ins.OpCode.Class().IsALU() && ins.OpCode.ALUOp() == asm.Mov && ins.OpCode.Source() == asm.ImmSource && ins.Dst == asm.R0 && ins.Constant == 2 {
			ps.Instructions[i] = asm.Mov.Imm(asm.R0, -1).WithMetadata(ins.Metadata)
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("xdp_floor sets XDP_PASS in %d places, want 1: update tcFloorProg", n)
	}
	spec.Maps[bpf.SamplerMapCounters].MaxEntries = uint32(cpus)
	coll, err := ebpf.NewCollectionWithOptions(&ebpf.CollectionSpec{
		Maps:     map[string]*ebpf.MapSpec{bpf.SamplerMapCounters: spec.Maps[bpf.SamplerMapCounters]},
		Programs: map[string]*ebpf.ProgramSpec{"tc_floor": ps},
		Types:    spec.Types,
	}, ebpf.CollectionOptions{})
	if err != nil {
		return nil, fmt.Errorf("loading tc_floor: %w", err)
	}
	p := coll.DetachProgram("tc_floor")
	coll.Close() // the program keeps its map
	return p, nil
}

// tcPassProg loads a SchedCLS program that returns TC_ACT_UNSPEC (-1): the
// TC hooks' baseline.
func tcPassProg() (*ebpf.Program, error) {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "tc_pass", Type: ebpf.SchedCLS, License: "Dual BSD/GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()},
	})
	if err != nil {
		return nil, fmt.Errorf("loading tc_pass: %w", err)
	}
	return p, nil
}

// attachTCX attaches p at TCX ingress of p1.
func (b *bench) attachTCX(p *ebpf.Program) (func() error, error) {
	var l link.Link
	err := netnsutil.DoNamed(b.lab.sw, func() error {
		var err error
		l, err = link.AttachTCX(link.TCXOptions{Interface: b.p1, Program: p, Attach: ebpf.AttachTCXIngress, Anchor: link.Head()})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("attaching %s with TCX: %w", progName(p), err)
	}
	return l.Close, nil
}

func progName(p *ebpf.Program) string {
	if info, err := p.Info(); err == nil {
		return info.Name
	}
	return p.String()
}

// attachClsact adds p as a direct-action cls_bpf filter at priority 1 of
// a clsact qdisc on p1, as the sampler's clsact mode does; detaching
// deletes the qdisc (p1 has none of its own).
func (b *bench) attachClsact(p *ebpf.Program) (func() error, error) {
	q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: b.p1, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
	err := netnsutil.DoNamed(b.lab.sw, func() error {
		if err := netlink.QdiscAdd(q); err != nil {
			return err
		}
		err := netlink.FilterAdd(&netlink.BpfFilter{
			FilterAttrs:  netlink.FilterAttrs{LinkIndex: b.p1, Parent: netlink.HANDLE_MIN_INGRESS, Priority: 1, Handle: 1, Protocol: unix.ETH_P_ALL},
			Fd:           p.FD(),
			Name:         progName(p),
			DirectAction: true,
		})
		if err != nil {
			return errors.Join(err, netlink.QdiscDel(q))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("attaching %s with clsact: %w", progName(p), err)
	}
	return func() error {
		return netnsutil.DoNamed(b.lab.sw, func() error { return netlink.QdiscDel(q) })
	}, nil
}

// openTCSampler opens the TC sampler instance attached to p1 (mode tcx or
// clsact) as b.sampler, closing the previous one.
func (b *bench) openTCSampler(mode string) error {
	var id ebpf.ProgramID
	err := netnsutil.DoNamed(b.lab.sw, func() error {
		switch mode {
		case dataplane.AttachTCX:
			r, err := link.QueryPrograms(link.QueryOptions{Target: b.p1, Attach: ebpf.AttachTCXIngress})
			if err != nil {
				return err
			}
			if len(r.Programs) != 1 {
				return fmt.Errorf("%d programs at TCX ingress of p1, want 1", len(r.Programs))
			}
			id = r.Programs[0].ID
		case dataplane.AttachClsact:
			fs, err := netlink.FilterList(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: b.p1}}, netlink.HANDLE_MIN_INGRESS)
			if err != nil {
				return err
			}
			for _, f := range fs {
				if bf, ok := f.(*netlink.BpfFilter); ok && bf.Id != 0 {
					id = ebpf.ProgramID(bf.Id)
				}
			}
			if id == 0 {
				return errors.New("no cls_bpf filter at ingress of p1")
			}
		default:
			return fmt.Errorf("attach mode %q is not TC", mode)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("finding the TC sampler: %w", err)
	}
	p, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return fmt.Errorf("opening TC sampler program %d: %w", id, err)
	}
	if b.sampler != nil {
		if err := b.sampler.Close(); err != nil {
			return errors.Join(err, p.Close())
		}
	}
	b.sampler = p
	return nil
}

// openTCDataplanes opens the two TC Dataplanes of the tc part in the
// switch namespace: TCX, and clsact forced.
func (b *bench) openTCDataplanes() error {
	if b.dpTCX != nil {
		return nil // the tc part ran first
	}
	for _, m := range []struct {
		dp   **dataplane.Dataplane
		mode dataplane.TCMode
	}{{&b.dpTCX, dataplane.TCModeAuto}, {&b.dpClsact, dataplane.TCModeClsact}} {
		err := netnsutil.DoNamed(b.lab.sw, func() error {
			var err error
			*m.dp, err = dataplane.Open(dataplane.Config{Workers: 1, Hook: dataplane.HookTC, TCMode: m.mode})
			return err
		})
		if err != nil {
			return err
		}
	}
	var err error
	if b.tcPass, err = tcPassProg(); err != nil {
		return err
	}
	b.tcFloor, err = tcFloorProg()
	return err
}

// TC configurations of p1.
var (
	confTCXPass = config{name: "tc_pass, TCX link", prog: func(b *bench) *ebpf.Program { return b.tcPass },
		custom: func(b *bench) (func() error, error) { return b.attachTCX(b.tcPass) }}
	confClsactPass = config{name: "tc_pass, clsact filter", prog: func(b *bench) *ebpf.Program { return b.tcPass },
		custom: func(b *bench) (func() error, error) { return b.attachClsact(b.tcPass) }}
	confTCXFloor = config{name: "tc_floor (pool + skip countdown only), TCX link", prog: func(b *bench) *ebpf.Program { return b.tcFloor },
		custom: func(b *bench) (func() error, error) { return b.attachTCX(b.tcFloor) }}
	confClsactFloor = config{name: "tc_floor (pool + skip countdown only), clsact filter", prog: func(b *bench) *ebpf.Program { return b.tcFloor },
		custom: func(b *bench) (func() error, error) { return b.attachClsact(b.tcFloor) }}
	confTCXUnsampled    = config{name: "TC sampler unsampled (rate 2^30), TCX", prog: samplerProg, port: &cfgUnsampled, dp: func(b *bench) *dataplane.Dataplane { return b.dpTCX }}
	confClsactUnsampled = config{name: "TC sampler unsampled (rate 2^30), clsact", prog: samplerProg, port: &cfgUnsampled, dp: func(b *bench) *dataplane.Dataplane { return b.dpClsact }}
	confTCXN1000        = config{name: "TC sampler 1-in-1024, TCX", prog: samplerProg, port: &cfgN1000, dp: func(b *bench) *dataplane.Dataplane { return b.dpTCX }}
	confClsactN1000     = config{name: "TC sampler 1-in-1024, clsact", prog: samplerProg, port: &cfgN1000, dp: func(b *bench) *dataplane.Dataplane { return b.dpClsact }}
	confXDPN1000        = config{name: "XDP sampler 1-in-1024 (native, veth)", prog: samplerProg, port: &cfgN1000}
)

// tc is the tc part: the frames part's trials over the TC configurations.
func (b *bench) tc() error {
	if err := b.openTCDataplanes(); err != nil {
		return err
	}
	stop, err := b.startTCReaders()
	if err != nil {
		return err
	}
	confs := []config{confNone, confTCXPass, confClsactPass, confTCXFloor, confClsactFloor, confTCXUnsampled, confClsactUnsampled, confTCXN1000, confClsactN1000, confXDPN1000}
	pps, nsPkt, drops := newSeries(), newSeries(), newSeries()
	loads, err := b.overStream(confs, func(c config, readRx func() (uint64, error)) error {
		return b.framesTrial(c, readRx, pps, nsPkt, drops)
	})
	if serr := stop(); serr != nil && err == nil {
		err = serr
	}
	if err != nil {
		return err
	}

	w := b.out
	fmt.Fprintf(w, "## tc: TC ingress through a TCX link and through a clsact cls_bpf filter; %s, %d rounds x %v per configuration, order rotated each round (load average per round: %v)\n\n", b.streamDesc(), b.o.rounds, b.o.trial, loads)
	fmt.Fprintf(w, "| configuration on p1 | forwarded pps (median) | vs no program, median [min–max] | program ns/packet, bpf_stats, median [min–max] | ring drops | per-round pps |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|\n")
	for _, c := range confs {
		n := c.name
		r := ratios(pps.vals[n], pps.vals[confNone.name])
		ns := "n/a"
		if c.prog != nil {
			ns = fmt.Sprintf("%.1f [%.1f–%.1f]", nsPkt.median(n), minOf(nsPkt.vals[n]), maxOf(nsPkt.vals[n]))
		}
		dr := "n/a"
		if c.port != nil {
			dr = fmt.Sprintf("%.4f", drops.median(n))
		}
		fmt.Fprintf(w, "| %s | %.0f | %.3f [%.3f–%.3f] | %s | %s | %s |\n", n, pps.median(n),
			median(r), minOf(r), maxOf(r), ns, dr, list("%.0f", pps.vals[n]))
	}
	fmt.Fprintf(w, "\nclsact against TCX, per round (adjacent trials of the same round), median [min–max]:\n\n")
	fmt.Fprintf(w, "| pair | pps clsact / TCX | program ns/packet clsact − TCX |\n|---|---|---|\n")
	for _, p := range [][2]config{{confClsactPass, confTCXPass}, {confClsactUnsampled, confTCXUnsampled}, {confClsactN1000, confTCXN1000}} {
		r := ratios(pps.vals[p[0].name], pps.vals[p[1].name])
		d := diffs(nsPkt.vals[p[0].name], nsPkt.vals[p[1].name])
		fmt.Fprintf(w, "| %s / %s | %.3f [%.3f–%.3f] | %+.1f [%+.1f – %+.1f] |\n", p[0].name, p[1].name,
			median(r), minOf(r), maxOf(r), median(d), minOf(d), maxOf(d))
	}
	r := ratios(pps.vals[confClsactN1000.name], pps.vals[confXDPN1000.name])
	fmt.Fprintf(w, "| %s / %s | %.3f [%.3f–%.3f] | n/a |\n\n", confClsactN1000.name, confXDPN1000.name, median(r), minOf(r), maxOf(r))

	// The TC hook's unsampled cost, as the frames part gives the XDP
	// sampler's: against the do-nothing program of the same hook and
	// against the floor (the same body as xdp_floor), per attach mode.
	fmt.Fprintf(w, "The TC sampler's unsampled path against the do-nothing TC program and the floor, bpf_stats ns/packet, per-round differences (adjacent trials of the same round), median [min–max] and per round:\n\n")
	fmt.Fprintf(w, "| attach | difference | median [min–max] | per round |\n|---|---|---|---|\n")
	for _, m := range []struct {
		attach                 string
		pass, floor, unsampled config
	}{{"TCX", confTCXPass, confTCXFloor, confTCXUnsampled}, {"clsact", confClsactPass, confClsactFloor, confClsactUnsampled}} {
		for _, d := range []struct {
			name string
			a, b config
		}{{"unsampled − tc_pass", m.unsampled, m.pass}, {"unsampled − tc_floor", m.unsampled, m.floor}, {"tc_floor − tc_pass", m.floor, m.pass}} {
			x := diffs(nsPkt.vals[d.a.name], nsPkt.vals[d.b.name])
			fmt.Fprintf(w, "| %s | %s | %+.1f [%+.1f – %+.1f] | %s |\n", m.attach, d.name, median(x), minOf(x), maxOf(x), list("%.1f", x))
		}
	}
	fmt.Fprintln(w)
	return b.tcTestRun()
}

// tcTestRun is the tc part's BPF_PROG_TEST_RUN cross-check (hot cache, no
// frame path): tc_pass, tc_floor and the TC sampler's unsampled path on
// the 60-byte frame, alternating, every round, as testrun does for XDP.
func (b *bench) tcTestRun() error {
	confs := []config{confTCXPass, confTCXFloor, confTCXUnsampled}
	dur, statNs := newSeries(), newSeries()
	var loads []string
	for round := 0; round < b.o.rounds; round++ {
		loads = append(loads, loadavg())
		for _, c := range confs {
			detach := func() error { return nil }
			if c.port != nil {
				var err error
				if detach, err = b.attach(c); err != nil {
					return err
				}
			}
			s0, err := b.snap(c, nil)
			var d uint32
			if err == nil {
				d, err = newTestRunner(c.prog(b).FD(), b.frame, 0, false).runSkb(uint32(b.o.repeat))
			}
			var s1 snapshot
			if err == nil {
				s1, err = b.snap(c, nil)
			}
			if derr := detach(); err == nil {
				err = derr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			dur.add(c.name, float64(d))
			if runs := s1.runs - s0.runs; runs > 0 {
				statNs.add(c.name, float64(s1.runtime-s0.runtime)/float64(runs))
			}
		}
	}
	w := b.out
	fmt.Fprintf(w, "## tctestrun: BPF_PROG_TEST_RUN of the TC programs, repeat %d, 60-byte frame, %d rounds (load average per round: %v)\n\n", b.o.repeat, b.o.rounds, loads)
	fmt.Fprintf(w, "| program | test_run ns/run (median) | minus tc_pass | minus tc_floor | bpf_stats ns/run (median) | minus tc_pass | minus tc_floor | per-round test_run ns |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range confs {
		n := c.name
		fmt.Fprintf(w, "| %s | %.1f | %+.1f | %+.1f | %.1f | %+.1f | %+.1f | %s |\n", n, dur.median(n),
			median(diffs(dur.vals[n], dur.vals[confTCXPass.name])), median(diffs(dur.vals[n], dur.vals[confTCXFloor.name])),
			statNs.median(n), median(diffs(statNs.vals[n], statNs.vals[confTCXPass.name])), median(diffs(statNs.vals[n], statNs.vals[confTCXFloor.name])),
			list("%.0f", dur.vals[n]))
	}
	fmt.Fprintf(w, "\nThe programs run on an skb the kernel builds once (bpf_prog_test_run_skb), the TC sampler's instance attached to p1 (its counter slot and ifindex are load-time constants, so it needs no ingress device). test_run ns/run includes the loop around the program.\n\n")
	return nil
}

func minOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := xs[0]
	for _, x := range xs[1:] {
		m = max(m, x)
	}
	return m
}

// startTCReaders drains the TC Dataplanes' rings for the length of a part.
func (b *bench) startTCReaders() (func() error, error) {
	var readers []*ringCounter
	stop := func() error {
		var errs []error
		for _, rc := range readers {
			errs = append(errs, rc.close())
		}
		return errors.Join(errs...)
	}
	for _, dp := range []*dataplane.Dataplane{b.dpTCX, b.dpClsact} {
		rc, err := startRingCounter(dp)
		if err != nil {
			return nil, errors.Join(err, stop())
		}
		readers = append(readers, rc)
	}
	return stop, nil
}

// tcProfile is the tcprofile part: the profile part's method (bpf_stats
// off, perf sampling every CPU, samples attributed by address and symbol)
// on the TC configurations and the XDP sampler on the same veth port, so
// that what each hook runs around the program is counted per frame
// without bpf_stats' clock reads: clsact's classifier layer (tc_run: qdisc
// counters, tcf_classify, cls_bpf_classify) and XDP's copy on veth.
func (b *bench) tcProfile() error {
	if err := b.openTCDataplanes(); err != nil {
		return err
	}
	stop, err := b.startTCReaders()
	if err != nil {
		return err
	}
	confs := []config{confTCXPass, confTCXFloor, confTCXUnsampled, confClsactPass, confClsactUnsampled, confTCXN1000, confClsactN1000, confXDPN1000}
	res, period, loads, err := b.profileRun(confs, hookLayerSyms)
	if serr := stop(); serr != nil && err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	nsOf := func(n int, frames uint64) float64 { return float64(n) * float64(period) / float64(frames) }
	type fig struct{ prog, hook, both, rx []float64 }
	figs := map[string]*fig{}
	lost := 0
	for _, c := range confs {
		f := &fig{}
		for _, r := range res[c.name] {
			f.prog = append(f.prog, nsOf(r.c.prog, r.frames))
			f.hook = append(f.hook, nsOf(r.c.disp, r.frames))
			f.both = append(f.both, nsOf(r.c.prog+r.c.disp, r.frames))
			f.rx = append(f.rx, nsOf(r.c.rx, r.frames))
			lost += r.c.lost
		}
		figs[c.name] = f
	}
	mm := func(xs []float64) string {
		return fmt.Sprintf("%.1f [%.1f–%.1f]", median(xs), minOf(xs), maxOf(xs))
	}
	w := b.out
	fmt.Fprintf(w, "## tcprofile: TC ingress, TCX link and clsact filter; live frames, bpf_stats off, perf record -a -g cpu-clock:k every %d ns; %s, %d rounds x %v per configuration, order rotated each round (load average per round: %v)\n\n",
		period, b.streamDesc(), b.o.rounds, b.o.profTrial, loads)
	fmt.Fprintf(w, "| configuration on p1 | frames/trial (median) | program ns/frame | hook layer outside the program ns/frame | program + hook layer ns/frame | receive path ns/frame |\n|---|---|---|---|---|---|\n")
	for _, c := range confs {
		f := figs[c.name]
		var frames []float64
		for _, r := range res[c.name] {
			frames = append(frames, float64(r.frames))
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s |\n", c.name, median(frames), mm(f.prog), mm(f.hook), mm(f.both), mm(f.rx))
	}
	fmt.Fprintf(w, "\nDifferences per round (adjacent trials), median [min–max], σ between rounds:\n\n| pair | program + hook layer ns/frame | receive path ns/frame |\n|---|---|---|\n")
	for _, p := range [][2]config{{confTCXUnsampled, confTCXPass}, {confTCXUnsampled, confTCXFloor}, {confTCXFloor, confTCXPass},
		{confClsactUnsampled, confClsactPass}, {confClsactPass, confTCXPass}, {confClsactN1000, confTCXN1000}, {confXDPN1000, confClsactN1000}} {
		a, t := figs[p[0].name], figs[p[1].name]
		d1, d2 := diffs(a.both, t.both), diffs(a.rx, t.rx)
		fmt.Fprintf(w, "| %s − %s | %+.1f [%+.1f – %+.1f], σ %.1f | %+.1f [%+.1f – %+.1f], σ %.1f |\n", p[0].name, p[1].name,
			median(d1), minOf(d1), maxOf(d1), stddev(d1), median(d2), minOf(d2), maxOf(d2), stddev(d2))
	}
	fmt.Fprintf(w, "\nns/frame = samples x %d ns / frames received by host 2 in the window. Program: samples with a frame in the attached program's JIT image (or what it tail-calls). Hook layer: other samples with a frame in tc_run (the clsact qdisc's per-frame work: its counters, tcf_classify, cls_bpf_classify around the program; with a TCX link tc_run returns at once, and TCX's own call of the program is inlined into __netif_receive_skb_core, so it has no symbol and is in neither column) or, for XDP, in veth_xdp_rcv_skb (veth's copy of every frame into a page with headroom for XDP, the dispatcher, the skb rebuilt after XDP_PASS; not the NAPI poll around it). Receive path: samples with a __netif_receive_skb_core frame (the TC hook, TCX's inlined call included, the bridge, and host 2's receive): the figure that counts both TC modes' dispatch alike, coarser (hundreds of ns per frame, so its noise is larger); XDP runs before it, in veth's NAPI poll, so its receive path figure leaves the XDP part out. Lost-event records: %d.\n\n", period, lost)
	return nil
}
