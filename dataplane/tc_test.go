package dataplane

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/clsact"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// tagged returns f with 802.1Q/802.1ad tags inserted after the MAC
// addresses, outermost first: tags[i] = TPID<<16 | TCI.
func tagged(f []byte, tags ...uint32) []byte {
	out := append([]byte(nil), f[:12]...)
	for _, tag := range tags {
		out = binary.BigEndian.AppendUint32(out, tag)
	}
	return append(out, f[12:]...)
}

// tcCase is one way of attaching the TC sampler.
type tcCase struct {
	name string // subtest name
	mode TCMode // Config.TCMode
	want string // AttachMode
}

// tcCases: a TCX link (where the kernel has TCX) and a clsact cls_bpf
// filter (forced, so that it runs on kernels with TCX too).
var tcCases = []tcCase{
	{"tcx", TCModeAuto, AttachTCX},
	{"clsact", TCModeClsact, AttachClsact},
}

// kernelFeatures is the running kernel's probe, once per test binary.
var kernelFeatures = sync.OnceValue(features.ProbeFeatures)

// forTCModes runs f as one subtest per TC attach mode; the TCX subtest
// skips on a kernel without TCX (the probe says so).
func forTCModes(t *testing.T, f func(t *testing.T, c tcCase)) {
	for _, c := range tcCases {
		t.Run(c.name, func(t *testing.T) {
			if c.want == AttachTCX {
				testskip.Feature(t, kernelFeatures(), features.FeatureTCX)
			}
			f(t, c)
		})
	}
}

// tcView is what the kernel shows at TC ingress of a port: the programs
// of its TCX chain (none on a kernel without TCX) and its ingress filters.
type tcView struct {
	tcx     []string     // program names, in order
	filters []filterView // in dump order
	qdisc   string       // "clsact", "ingress" or ""
}

// filterView is one ingress filter as the kernel dumps it.
type filterView struct {
	kind   string
	prio   uint16
	handle uint32
	name   string // TCA_BPF_NAME of a bpf filter
	prog   string // its program's name
	progID int
}

// ours reports whether v holds our filter (priority 1, our handle, named
// by an owner, program tc_sampler).
func (v tcView) ours() *filterView {
	for i, f := range v.filters {
		if _, _, ok := clsact.ParseFilterName(f.name); ok && f.kind == "bpf" && f.prio == clsact.FilterPrio && f.handle == clsact.FilterHandle && f.prog == "tc_sampler" {
			return &v.filters[i]
		}
	}
	return nil
}

// tcIngress asks the kernel what is attached at TC ingress of ifindex in
// the switch namespace.
func tcIngress(t *testing.T, lab *netlab.Lab, ifindex int) tcView {
	t.Helper()
	var v tcView
	err := lab.Do(lab.Switch, func() error {
		q, err := clsact.IngressQdisc(ifindex)
		if err != nil {
			return err
		}
		if q != nil {
			v.qdisc = q.Type()
		}
		if kernelFeatures().Has(features.FeatureTCX) {
			if v.tcx, err = tcxNames(ifindex); err != nil {
				return err
			}
		}
		if q == nil {
			return nil
		}
		fs, err := netlink.FilterList(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: ifindex}}, netlink.HANDLE_MIN_INGRESS)
		if err != nil {
			return err
		}
		for _, f := range fs {
			a := f.Attrs()
			if a.Handle == 0 {
				continue // the priority's classifier instance itself
			}
			fv := filterView{kind: f.Type(), prio: a.Priority, handle: a.Handle}
			if bf, ok := f.(*netlink.BpfFilter); ok {
				fv.name, fv.progID = bf.Name, bf.Id
				if fv.prog, err = bpf.ProgramName(uint32(bf.Id)); err != nil {
					return err
				}
			}
			v.filters = append(v.filters, fv)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("querying TC ingress of ifindex %d: %v", ifindex, err)
	}
	return v
}

// kernelAttachment is KernelAttachment in the switch namespace.
func kernelAttachment(t *testing.T, lab *netlab.Lab, ifindex int) string {
	t.Helper()
	var m string
	err := lab.Do(lab.Switch, func() error {
		var err error
		m, err = KernelAttachment(ifindex)
		return err
	})
	if err != nil {
		t.Fatalf("KernelAttachment(%d): %v", ifindex, err)
	}
	return m
}

// tcxNames returns the names of the programs at TCX ingress of ifindex.
func tcxNames(ifindex int) ([]string, error) {
	r, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range r.Programs {
		prog, err := ebpf.NewProgramFromID(p.ID)
		if err != nil {
			return nil, err
		}
		info, err := prog.Info()
		prog.Close()
		if err != nil {
			return nil, err
		}
		names = append(names, info.Name)
	}
	return names, nil
}

// checkTCAttached fails t unless the sampler is at TC ingress of ifindex
// as c says, and only there.
func checkTCAttached(t *testing.T, lab *netlab.Lab, ifindex int, c tcCase) {
	t.Helper()
	if m := kernelAttachment(t, lab, ifindex); m != c.want {
		t.Errorf("KernelAttachment %q, want %q", m, c.want)
	}
	v := tcIngress(t, lab, ifindex)
	switch c.want {
	case AttachTCX:
		if !slices.Equal(v.tcx, []string{"tc_sampler"}) || v.ours() != nil {
			t.Errorf("TCX ingress %q, our filter %v; want [tc_sampler] and no filter", v.tcx, v.ours())
		}
	case AttachClsact:
		if len(v.tcx) != 0 || v.ours() == nil {
			t.Errorf("TCX ingress %q, filters %+v; want no TCX program and our filter", v.tcx, v.filters)
		}
	}
}

// checkTCDetached fails t if anything of the sampler is left at TC
// ingress of ifindex, our clsact qdisc included (the lab's ports have
// none of their own).
func checkTCDetached(t *testing.T, lab *netlab.Lab, ifindex int) {
	t.Helper()
	if m := kernelAttachment(t, lab, ifindex); m == AttachTCX || m == AttachClsact {
		t.Errorf("KernelAttachment %q after the sampler left TC", m)
	}
	if v := tcIngress(t, lab, ifindex); len(v.tcx) != 0 || len(v.filters) != 0 || v.qdisc != "" {
		t.Errorf("left at TC ingress: TCX %q, filters %+v, qdisc %q", v.tcx, v.filters, v.qdisc)
	}
}

// TestTCSampleFields attaches the sampler at TC ingress of p1 at rate 1
// and checks every field of the delivered samples against the frames sent,
// including frames with one and two VLAN tags: the kernel takes the outer
// tag out of the frame before TC ingress (skb_vlan_untag), and the sampler
// must put it back, so that the sampled header and frame length are the
// frame as received, as with XDP.
func TestTCSampleFields(t *testing.T) { forTCModes(t, testTCSampleFields) }

func testTCSampleFields(t *testing.T, tc tcCase) {
	lab := netlab.New(t, 2)
	d := openIn(t, lab, Config{Workers: 2, MaxPorts: 8, Hook: HookTC, TCMode: tc.mode})
	p1 := lab.PortIndex(t, 0)
	if err := d.AttachPort(p1, PortConfig{Rate: 1, Mode: ModeInline, HeaderBytes: 100, Worker: 1}); err != nil {
		t.Fatal(err)
	}
	if m := d.AttachMode(p1); m != tc.want {
		t.Errorf("attach mode %q, want %q", m, tc.want)
	}
	checkTCAttached(t, lab, p1, tc)

	c := startCollector(t, d, 1)
	const k = 60
	var frames [][]byte
	sent := map[uint32][]byte{} // sequence -> frame as sent
	for i, f := range seqFrames(lab, 0, noHostMAC, 0, k, 16) {
		switch i % 3 {
		case 1: // short frame, one 802.1Q tag (VLAN 291, priority 5)
			f = tagged(f, 0x8100<<16|5<<13|291)
		case 2: // long frame, QinQ: 802.1ad outer, 802.1Q inner
			f = tagged(seqFrames(lab, 0, noHostMAC, uint32(i), 1, 400)[0], 0x88a8<<16|100, 0x8100<<16|200)
		}
		frames = append(frames, f)
		sent[uint32(i)] = f
	}
	lab.SendFrames(t, 0, frames)
	got := c.waitFor(k, 5*time.Second)
	c.stop(t)

	matched := 0
	for _, s := range got {
		var f []byte
		for _, tags := range []int{0, 1, 2} {
			if seq, ok := frameSeq(append(append([]byte(nil), s.Header[:min(12, len(s.Header))]...), s.Header[min(12+4*tags, len(s.Header)):]...)); ok {
				if g := sent[seq]; g != nil && len(g) == int(s.FrameLen) {
					f = g
					break
				}
			}
		}
		if f == nil {
			continue // other traffic
		}
		matched++
		if s.IfIndex != uint32(p1) || s.Rate != 1 || s.Timestamp == 0 {
			t.Errorf("sample %+v: want ifindex %d rate 1", s, p1)
		}
		if want := f[:min(len(f), 100)]; !bytes.Equal(s.Header, want) {
			t.Errorf("frame of %d bytes: header\n%x\nwant\n%x", len(f), s.Header, want)
		}
	}
	if matched != k {
		t.Errorf("matched %d samples of test frames, want %d (got %d samples)", matched, k, len(got))
	}
	pc, err := d.Stats().Ingress(p1)
	if err != nil {
		t.Fatal(err)
	}
	if pc.Samples != pc.Pool || pc.Drops != 0 || pc.Pool < k || uint64(len(got)) != pc.Samples {
		t.Errorf("counters %+v after %d frames, %d samples read; want samples == pool >= %d, drops 0", pc, k, len(got), k)
	}
	if err := d.DetachPort(p1); err != nil {
		t.Fatal(err)
	}
	checkTCDetached(t, lab, p1)
}

// TestHookAuto: with the default hook a veth port is sampled at TC
// ingress and a monitor port with XDP; a TC port that becomes a monitor
// port moves to XDP and keeps its counters, its pool still exact, and
// nothing of the sampler stays at TC ingress.
func TestHookAuto(t *testing.T) { forTCModes(t, testHookAuto) }

func testHookAuto(t *testing.T, tc tcCase) {
	lab := netlab.New(t, 2)
	d := openAuto(t, lab, Config{Workers: 1, MaxPorts: 4, TCMode: tc.mode})
	if d.cfg.Hook != HookAuto {
		t.Fatalf("Config.Hook %v, want auto", d.cfg.Hook)
	}
	p1, p2 := lab.PortIndex(t, 0), lab.PortIndex(t, 1)
	if err := d.AttachPort(p1, PortConfig{Rate: 4, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	if err := d.AttachPort(p2, PortConfig{Rate: 4, Mode: ModeMonitor, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	if m1, m2 := d.AttachMode(p1), d.AttachMode(p2); m1 != tc.want || m2 != AttachNative {
		t.Fatalf("attach modes: inline veth port %q, monitor port %q; want %q and %q", m1, m2, tc.want, AttachNative)
	}
	checkTCAttached(t, lab, p1, tc)

	send := func(k int, start uint32) (rx uint64) {
		before := lab.RxPackets(t, lab.Switch, "p1")
		lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, start, k, 32))
		return lab.RxPackets(t, lab.Switch, "p1") - before
	}
	rx := send(2000, 0)
	pc, err := d.Stats().Ingress(p1)
	if err != nil {
		t.Fatal(err)
	}
	if pc.Pool != rx {
		t.Fatalf("TC pool %d != rx_packets delta %d", pc.Pool, rx)
	}

	if err := d.updatePort(p1, PortConfig{Rate: 4, Mode: ModeMonitor, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	if m := d.AttachMode(p1); m != AttachNative {
		t.Fatalf("after the change to monitor: attach mode %q, want native", m)
	}
	if m := kernelAttachment(t, lab, p1); m != AttachNative {
		t.Errorf("after the change to monitor: KernelAttachment %q, want native", m)
	}
	checkTCDetached(t, lab, p1)
	rx += send(2000, 2000)
	pc2, err := d.Stats().Ingress(p1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("counters before the move %+v, after %+v, rx_packets %d", pc, pc2, rx)
	if pc2.Pool != rx {
		t.Errorf("pool %d after the move to XDP != rx_packets delta %d since attach", pc2.Pool, rx)
	}
	if pc2.Samples <= pc.Samples {
		t.Errorf("no samples counted after the move to XDP: %+v -> %+v", pc, pc2)
	}
}

// TestHookAutoWithoutTCX: on a kernel without TCX links (before 6.6; here
// the probe's answer switched off) hook auto still samples a veth port at
// TC ingress, through our clsact filter, and the pool is exact.
func TestHookAutoWithoutTCX(t *testing.T) {
	lab := netlab.New(t, 2)
	d := openAuto(t, lab, Config{Workers: 1, MaxPorts: 4, Features: withoutFeatures(t, features.FeatureTCX)})
	p1 := lab.PortIndex(t, 0)
	if err := d.AttachPort(p1, PortConfig{Rate: 4, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	if m := d.AttachMode(p1); m != AttachClsact {
		t.Fatalf("attach mode %q, want %q", m, AttachClsact)
	}
	checkTCAttached(t, lab, p1, tcCases[1])
	before := lab.RxPackets(t, lab.Switch, "p1")
	lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, 0, 2000, 32))
	rx := lab.RxPackets(t, lab.Switch, "p1") - before
	pc, err := d.Stats().Ingress(p1)
	if err != nil {
		t.Fatal(err)
	}
	if pc.Pool != rx || pc.Samples == 0 {
		t.Errorf("counters %+v, rx_packets delta %d: want pool == rx and samples > 0", pc, rx)
	}
}
