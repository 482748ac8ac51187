package dataplane

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/clsact"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// TC verdicts of the operators' programs below (linux/pkt_cls.h).
const (
	tcActUnspec = -1
	tcActShot   = 2
)

// operatorProg loads a SchedCLS program named name that returns verdict
// for every frame, or, with oddOnly, drops (TC_ACT_SHOT) the test frames
// whose sequence number is odd and leaves the rest alone: an operator's
// ACL whose effect a test can see. The caller closes it once a filter
// holds it.
func operatorProg(t *testing.T, name string, verdict int32, oddOnly bool) *ebpf.Program {
	t.Helper()
	insns := asm.Instructions{asm.Mov.Imm(asm.R0, verdict), asm.Return()}
	if oddOnly {
		// The low byte of the sequence number (seqFrames) is at
		// udpPayloadOff+7 of the frame; skb->data is the MAC header.
		off := int16(udpPayloadOff + 7)
		insns = asm.Instructions{
			asm.LoadMem(asm.R2, asm.R1, 76, asm.Word), // __sk_buff.data
			asm.LoadMem(asm.R3, asm.R1, 80, asm.Word), // __sk_buff.data_end
			asm.Mov.Reg(asm.R4, asm.R2),
			asm.Add.Imm(asm.R4, int32(off)+1),
			asm.JGT.Reg(asm.R4, asm.R3, "pass"),
			asm.LoadMem(asm.R5, asm.R2, udpPayloadOff, asm.Byte), // first byte of the magic
			asm.JNE.Imm(asm.R5, seqMagic>>24, "pass"),
			asm.LoadMem(asm.R5, asm.R2, off, asm.Byte),
			asm.And.Imm(asm.R5, 1),
			asm.JEq.Imm(asm.R5, 0, "pass"),
			asm.Mov.Imm(asm.R0, tcActShot),
			asm.Return(),
			asm.Mov.Imm(asm.R0, tcActUnspec).WithSymbol("pass"),
			asm.Return(),
		}
	}
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.SchedCLS, License: "GPL", Instructions: insns})
	if err != nil {
		t.Fatalf("loading %s: %v", name, err)
	}
	return p
}

// addOperatorFilter adds prog as a direct-action cls_bpf filter, as an
// operator's tool would, at TC ingress of ifindex in the switch namespace.
func addOperatorFilter(t *testing.T, lab *netlab.Lab, ifindex int, prio uint16, handle uint32, name string, prog *ebpf.Program) {
	t.Helper()
	err := lab.Do(lab.Switch, func() error {
		return netlink.FilterAdd(&netlink.BpfFilter{
			FilterAttrs:  netlink.FilterAttrs{LinkIndex: ifindex, Parent: netlink.HANDLE_MIN_INGRESS, Priority: prio, Handle: handle, Protocol: unix.ETH_P_ALL},
			Fd:           prog.FD(),
			Name:         name,
			DirectAction: true,
		})
	})
	if err != nil {
		t.Fatalf("adding the operator's filter %s: %v", name, err)
	}
}

// tcCmd runs tc(8) in the switch namespace, as an operator would.
func tcCmd(t *testing.T, lab *netlab.Lab, args ...string) {
	t.Helper()
	if out, err := lab.Run(lab.Switch, "tc", args...); err != nil {
		t.Fatalf("tc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// others returns the filters of v that are not ours.
func (v tcView) others() []filterView {
	var out []filterView
	for _, f := range v.filters {
		if _, _, ok := clsact.ParseFilterName(f.name); !ok {
			out = append(out, f)
		}
	}
	return out
}

// forwardedSeqs sends k test frames (sequence numbers start..) from host 1
// to host 2 through the switch and returns the sequence numbers host 2
// received.
func forwardedSeqs(t *testing.T, lab *netlab.Lab, start uint32, k int) []uint32 {
	t.Helper()
	capt := lab.Capture(t, lab.Hosts[1], "eth0")
	got := make(chan []uint32, 1)
	go func() {
		var seqs []uint32
		err := capt.Collect(time.Second, func(f netlab.Frame) bool {
			if seq, ok := frameSeq(f.Data); ok && !f.Outgoing && seq >= start && seq < start+uint32(k) {
				seqs = append(seqs, seq)
			}
			return true
		})
		if err != nil {
			t.Errorf("capture on host 2: %v", err)
		}
		got <- seqs
	}()
	lab.SendFrames(t, 0, seqFrames(lab, 0, lab.HostMACs[1], start, k, 16))
	seqs := <-got
	slices.Sort(seqs)
	return seqs
}

// checkOddDropped fails t unless exactly the even sequence numbers of
// start..start+k-1 are in seqs: the operator's ACL works.
func checkOddDropped(t *testing.T, what string, seqs []uint32, start uint32, k int) {
	t.Helper()
	var want []uint32
	for s := start; s < start+uint32(k); s++ {
		if s%2 == 0 {
			want = append(want, s)
		}
	}
	if !slices.Equal(seqs, want) {
		t.Errorf("%s: host 2 received %d test frames, want the %d even ones (the operator's filter drops odd ones)", what, len(seqs), len(want))
	}
}

// TestClsactOperatorFilters: on a port where an operator already has a TC
// ingress setup, the sampler's clsact mode adds its filter at priority 1
// and leaves theirs working; the pool counts every frame received,
// including those the operator's filter then drops (the sampler is first);
// detaching removes our filter only, never their qdisc.
//
//   - clsact: the operator's clsact qdisc, a cls_bpf ACL at priority 10
//     dropping odd test frames and a u32 filter at 20 (made with tc(8));
//   - ingress: the same on a legacy ingress qdisc;
//   - shared-priority-1: the operator's ACL is itself a cls_bpf filter of
//     protocol all at priority 1; ours joins that priority and still runs
//     first (cls_bpf runs its newest filter first).
func TestClsactOperatorFilters(t *testing.T) {
	for _, c := range []struct {
		name  string
		qdisc string
		prio  uint16
	}{{"clsact", "clsact", 10}, {"ingress", "ingress", 10}, {"shared-priority-1", "clsact", 1}} {
		t.Run(c.name, func(t *testing.T) {
			lab := netlab.New(t, 2)
			p1 := lab.PortIndex(t, 0)
			tcCmd(t, lab, "qdisc", "add", "dev", "p1", c.qdisc)
			acl := operatorProg(t, "op_acl", 0, true)
			addOperatorFilter(t, lab, p1, c.prio, 7, "operator-acl", acl)
			acl.Close()
			tcCmd(t, lab, "filter", "add", "dev", "p1", "parent", "ffff:fff2", "prio", "20", "protocol", "ip",
				"u32", "match", "ip", "protocol", "17", "0xff")
			theirs := tcIngress(t, lab, p1)
			if len(theirs.filters) != 2 || theirs.qdisc != c.qdisc {
				t.Fatalf("operator's setup: qdisc %q, filters %+v", theirs.qdisc, theirs.filters)
			}
			checkOddDropped(t, "operator's filter alone", forwardedSeqs(t, lab, 0, 200), 0, 200)

			d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, Hook: HookTC, TCMode: TCModeClsact})
			c1 := startCollector(t, d, 0)
			defer c1.stop(t)
			if err := d.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 64}); err != nil {
				t.Fatal(err)
			}
			v := tcIngress(t, lab, p1)
			if v.ours() == nil || v.qdisc != c.qdisc || !slices.Equal(v.others(), theirs.filters) {
				t.Fatalf("after attaching: qdisc %q, filters %+v; want the operator's %q and %+v plus ours", v.qdisc, v.filters, c.qdisc, theirs.filters)
			}
			if v.filters[0] != *v.ours() {
				t.Errorf("our filter is not first in the dump: %+v", v.filters)
			}

			const k = 400
			before := lab.RxPackets(t, lab.Switch, "p1")
			checkOddDropped(t, "with the sampler", forwardedSeqs(t, lab, 1000, k), 1000, k)
			rx := lab.RxPackets(t, lab.Switch, "p1") - before
			pc, err := d.Stats().Ingress(p1)
			if err != nil {
				t.Fatal(err)
			}
			sampled := map[uint32]bool{}
			for _, s := range c1.waitFor(int(pc.Samples), 5*time.Second) {
				if seq, ok := frameSeq(s.Header); ok && seq >= 1000 && seq < 1000+k {
					sampled[seq] = true
				}
			}
			t.Logf("rx_packets delta %d, counters %+v, %d distinct test frames sampled", rx, pc, len(sampled))
			if pc.Pool != rx || pc.Samples != pc.Pool {
				t.Errorf("pool %d, samples %d; want both = rx_packets delta %d (every frame, before the operator's filter)", pc.Pool, pc.Samples, rx)
			}
			if len(sampled) != k {
				t.Errorf("%d of %d test frames sampled at rate 1, the dropped ones included", len(sampled), k)
			}

			if err := d.DetachPort(p1); err != nil {
				t.Fatal(err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			after := tcIngress(t, lab, p1)
			if after.qdisc != c.qdisc || !slices.Equal(after.filters, theirs.filters) {
				t.Errorf("after detach and Close: qdisc %q, filters %+v; want the operator's %q and %+v untouched", after.qdisc, after.filters, c.qdisc, theirs.filters)
			}
			checkOddDropped(t, "after the sampler left", forwardedSeqs(t, lab, 2000, 200), 2000, 200)
		})
	}
}

// TestClsactQdiscKept: the clsact qdisc the sampler created is removed at
// detach only if it is empty: an egress filter an operator added to it
// meanwhile keeps it (and the filter) in place.
func TestClsactQdiscKept(t *testing.T) {
	lab := netlab.New(t, 2)
	p1 := lab.PortIndex(t, 0)
	var logs logBuffer
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, Hook: HookTC, TCMode: TCModeClsact, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := d.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	v := tcIngress(t, lab, p1)
	if v.qdisc != "clsact" || v.ours() == nil || !strings.HasSuffix(v.ours().name, clsact.QdiscTag) {
		t.Fatalf("qdisc %q, filters %+v: want a clsact qdisc of ours, named so in our filter", v.qdisc, v.filters)
	}
	tcCmd(t, lab, "filter", "add", "dev", "p1", "egress", "prio", "5", "protocol", "ip", "u32", "match", "ip", "protocol", "17", "0xff")
	if err := d.DetachPort(p1); err != nil {
		t.Fatal(err)
	}
	v = tcIngress(t, lab, p1)
	if v.qdisc != "clsact" || len(v.filters) != 0 {
		t.Errorf("after detach: qdisc %q, ingress filters %+v; want the qdisc kept, no filter", v.qdisc, v.filters)
	}
	out, err := lab.Run(lab.Switch, "tc", "filter", "show", "dev", "p1", "egress")
	if err != nil || !strings.Contains(string(out), "u32") {
		t.Errorf("the operator's egress filter is gone (%v):\n%s", err, out)
	}
	if !strings.Contains(logs.String(), "clsact qdisc created by the sampler kept") {
		t.Errorf("keeping the qdisc was not logged:\n%s", logs.String())
	}
}

// TestClsactPriorityTaken: a filter of another kind at priority 1 leaves
// no place before it. Hook tc refuses the port with an error saying so
// and leaves nothing behind; hook auto samples the port with XDP instead.
func TestClsactPriorityTaken(t *testing.T) {
	lab := netlab.New(t, 2)
	p1 := lab.PortIndex(t, 0)
	tcCmd(t, lab, "qdisc", "add", "dev", "p1", "clsact")
	tcCmd(t, lab, "filter", "add", "dev", "p1", "ingress", "prio", "1", "protocol", "ip", "u32", "match", "ip", "protocol", "17", "0xff")
	theirs := tcIngress(t, lab, p1)

	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, Hook: HookTC, TCMode: TCModeClsact})
	err := d.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 64})
	t.Logf("hook tc: %v", err)
	if err == nil || !strings.Contains(err.Error(), "priority 1") || !errors.Is(err, unix.EINVAL) {
		t.Errorf("AttachPort error %v; want the kernel's EINVAL explained (priority 1 taken)", err)
	}
	if m := d.AttachMode(p1); m != "" {
		t.Errorf("attach mode %q after a refused attach", m)
	}
	if v := tcIngress(t, lab, p1); !slices.Equal(v.filters, theirs.filters) || v.qdisc != "clsact" {
		t.Errorf("after the refusal: qdisc %q, filters %+v; want %+v untouched", v.qdisc, v.filters, theirs.filters)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	var logs logBuffer
	a := openAuto(t, lab, Config{Workers: 1, MaxPorts: 4, TCMode: TCModeClsact, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := a.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	if m := a.AttachMode(p1); m != AttachNative {
		t.Errorf("hook auto: attach mode %q, want %q (XDP in place of TC)", m, AttachNative)
	}
	if !strings.Contains(logs.String(), "sampling with XDP instead") {
		t.Errorf("the fallback was not logged:\n%s", logs.String())
	}
	if v := tcIngress(t, lab, p1); !slices.Equal(v.filters, theirs.filters) {
		t.Errorf("hook auto: filters %+v; want %+v untouched", v.filters, theirs.filters)
	}
}

// TestClsactSharedBlock: a port whose clsact qdisc binds a shared filter
// block (ingress_block) is refused at TC, since our filter would apply to
// every port of the block; hook auto samples it with XDP.
func TestClsactSharedBlock(t *testing.T) {
	lab := netlab.New(t, 2)
	p1 := lab.PortIndex(t, 0)
	tcCmd(t, lab, "qdisc", "add", "dev", "p1", "ingress_block", "7", "clsact")
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, Hook: HookTC, TCMode: TCModeClsact})
	err := d.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 64})
	t.Logf("hook tc: %v", err)
	if err == nil || !strings.Contains(err.Error(), "shared filter block 7") {
		t.Errorf("AttachPort error %v; want the shared block refused", err)
	}
	if v := tcIngress(t, lab, p1); len(v.filters) != 0 || v.qdisc != "clsact" {
		t.Errorf("after the refusal: qdisc %q, filters %+v; want the operator's qdisc, no filter", v.qdisc, v.filters)
	}
	a := openAuto(t, lab, Config{Workers: 1, MaxPorts: 4, TCMode: TCModeClsact})
	if err := a.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	if m := a.AttachMode(p1); m != AttachNative {
		t.Errorf("hook auto: attach mode %q, want %q", m, AttachNative)
	}
}

// clsactHelper is the helper role of TestCleanupClsactAfterKill: it
// attaches the sampler in clsact mode to the ports named in env and waits.
func clsactHelper(ports string) error {
	d, err := Open(Config{Workers: 1, MaxPorts: 4, Hook: HookTC, TCMode: TCModeClsact})
	if err != nil {
		return err
	}
	for _, name := range strings.Split(ports, ",") {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := d.AttachPort(l.Attrs().Index, PortConfig{Rate: 1, HeaderBytes: 64}); err != nil {
			return err
		}
	}
	return nil
}

// TestCleanupClsactAfterKill: a filter outlives the process that added it.
// While that process lives, Open leaves its filters alone; after SIGKILL
// the next Open removes them (and the qdisc the process created, not the
// one an operator had), and never a filter that only looks like ours.
func TestCleanupClsactAfterKill(t *testing.T) {
	lab := netlab.New(t, 4)
	p := make([]int, 4)
	for i := range p {
		p[i] = lab.PortIndex(t, i)
	}
	// p2: a filter at our priority and handle, named like ours (of an
	// owner that does not live), but not running tc_sampler.
	// p3: one running a program named tc_sampler, but not named like ours.
	// p4: an operator's clsact qdisc and filter, where the helper adds its
	// own filter.
	tcCmd(t, lab, "qdisc", "add", "dev", "p2", "clsact")
	tcCmd(t, lab, "qdisc", "add", "dev", "p3", "clsact")
	tcCmd(t, lab, "qdisc", "add", "dev", "p4", "clsact")
	look := operatorProg(t, "op_lookalike", tcActUnspec, false)
	addOperatorFilter(t, lab, p[1], clsact.FilterPrio, clsact.FilterHandle, clsact.FilterName("0123456789abcdef", true), look)
	look.Close()
	named := operatorProg(t, "tc_sampler", tcActUnspec, false)
	addOperatorFilter(t, lab, p[2], clsact.FilterPrio, clsact.FilterHandle, "operator", named)
	named.Close()
	tcCmd(t, lab, "filter", "add", "dev", "p4", "ingress", "prio", "20", "protocol", "ip", "u32", "match", "ip", "protocol", "17", "0xff")
	foreign := map[int]tcView{}
	for _, i := range []int{1, 2, 3} {
		foreign[i] = tcIngress(t, lab, p[i])
	}

	t.Setenv(helperEnv, "clsact")
	t.Setenv(helperPortsEnv, "p1,p4")
	proc := lab.Start(t, lab.Switch, os.Args[0]).Process
	deadline := time.Now().Add(10 * time.Second)
	for tcIngress(t, lab, p[0]).ours() == nil || tcIngress(t, lab, p[3]).ours() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the helper (pid %d) did not attach to p1 and p4", proc.Pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	helper := map[int]filterView{0: *tcIngress(t, lab, p[0]).ours(), 3: *tcIngress(t, lab, p[3]).ours()}
	checkHelperFilters := func(when string) {
		t.Helper()
		for i, f := range helper {
			if got := tcIngress(t, lab, p[i]).ours(); got == nil || *got != f {
				t.Errorf("%s: p%d's filter %+v, want the helper's %+v", when, i+1, got, f)
			}
		}
	}

	// 1. The helper lives: Open leaves its filters alone.
	var logs logBuffer
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	checkHelperFilters("Open while their owner lives")
	if !strings.Contains(logs.String(), "TC filter of a live sflowswitchd left alone") || !strings.Contains(logs.String(), "ours_found=2 stale_removed=0") {
		t.Errorf("Open did not report the live owner's filters:\n%s", logs.String())
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	// 2. SIGKILL: unlike a BPF link, the filters stay.
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := proc.Wait(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	checkHelperFilters("after SIGKILL")

	// 3. The next Open removes them, and only them.
	var logs2 logBuffer
	openIn(t, lab, Config{Workers: 1, MaxPorts: 4, Logger: slog.New(slog.NewTextHandler(&logs2, nil))})
	t.Logf("Open log:\n%s", logs2.String())
	checkTCDetached(t, lab, p[0]) // the helper's filter and the qdisc it created
	if v := tcIngress(t, lab, p[3]); v.ours() != nil || v.qdisc != "clsact" || len(v.others()) != 1 || v.others()[0].kind != "u32" {
		t.Errorf("p4: qdisc %q, filters %+v; want the operator's qdisc and u32 filter only", v.qdisc, v.filters)
	}
	for i, want := range foreign {
		if got := tcIngress(t, lab, p[i]); got.qdisc != want.qdisc || !slices.Equal(got.filters, want.filters) {
			t.Errorf("p%d: %+v after cleanup, want the foreign %+v untouched", i+1, got, want)
		}
	}
	for _, want := range []string{
		"stale_removed=2", "clsact_qdisc=removed", `clsact_qdisc="kept (not created by its owner)"`,
		"TC filter named like ours runs another program: left alone",
		"cls_bpf filter at the sampler's priority and handle is not ours: left alone",
	} {
		if !strings.Contains(logs2.String(), want) {
			t.Errorf("Open's log lacks %q", want)
		}
	}
}

// TestClsactPortGone: a port deleted while sampled through our filter took
// the filter and the qdisc with it; RemovePort (the daemon's detach of a
// vanished port) is no error, and a Dataplane opened afterwards finds
// nothing to clean up.
func TestClsactPortGone(t *testing.T) {
	lab := netlab.New(t, 2)
	var logs logBuffer
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, Hook: HookTC, TCMode: TCModeClsact, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	i := lab.AddPort(t)
	name := fmt.Sprintf("p%d", i)
	idx := lab.LinkIndex(lab.Switch, name)
	if err := d.AttachPort(idx, PortConfig{Rate: 1, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	if m := kernelAttachment(t, lab, idx); m != AttachClsact {
		t.Fatalf("KernelAttachment %q, want %q", m, AttachClsact)
	}
	lab.DelPort(t, i)
	if err := d.RemovePort(idx); err != nil {
		t.Errorf("RemovePort of a deleted port: %v", err)
	}
	if m := kernelAttachment(t, lab, idx); m != "" {
		t.Errorf("KernelAttachment of a deleted port: %q", m)
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("warnings for a port that is simply gone:\n%s", logs.String())
	}
	var logs2 logBuffer
	openIn(t, lab, Config{Workers: 1, MaxPorts: 4, Logger: slog.New(slog.NewTextHandler(&logs2, nil))})
	if !strings.Contains(logs2.String(), "ours_found=0 stale_removed=0") {
		t.Errorf("Open after the port left:\n%s", logs2.String())
	}
}
