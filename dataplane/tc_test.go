package dataplane

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/sflowswitchd/sflowswitchd/internal/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testskip"
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

// tcxIngress asks the kernel (BPF_PROG_QUERY; bpftool 7.1 does not know
// TCX) which programs are attached at TCX ingress of ifindex.
func tcxIngress(t *testing.T, lab *netlab.Lab, ifindex int) []string {
	t.Helper()
	var names []string
	err := lab.Do(lab.Switch, func() error {
		r, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return err
		}
		for _, p := range r.Programs {
			prog, err := ebpf.NewProgramFromID(p.ID)
			if err != nil {
				return err
			}
			info, err := prog.Info()
			prog.Close()
			if err != nil {
				return err
			}
			names = append(names, info.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("querying TCX ingress of ifindex %d: %v", ifindex, err)
	}
	return names
}

// TestTCSampleFields attaches the sampler at TC ingress of p1 at rate 1
// and checks every field of the delivered samples against the frames sent,
// including frames with one and two VLAN tags: the kernel takes the outer
// tag out of the frame before TC ingress (skb_vlan_untag), and the sampler
// must put it back, so that the sampled header and frame length are the
// frame as received, as with XDP.
func TestTCSampleFields(t *testing.T) {
	lab := netlab.New(t, 2)
	d := openIn(t, lab, Config{Workers: 2, MaxPorts: 8, Hook: HookTC})
	p1 := portIndex(t, lab, 0)
	if err := d.AttachPort(p1, PortConfig{Rate: 1, Mode: ModeInline, HeaderBytes: 100, Worker: 1}); err != nil {
		t.Fatal(err)
	}
	if m := d.AttachMode(p1); m != AttachTCX {
		t.Errorf("attach mode %q, want %q", m, AttachTCX)
	}
	if names := tcxIngress(t, lab, p1); !slices.Equal(names, []string{"tc_sampler"}) {
		t.Errorf("the kernel lists %q at p1's TCX ingress, want [tc_sampler]", names)
	}

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
	pc, err := d.PortCounters(p1)
	if err != nil {
		t.Fatal(err)
	}
	if pc.Samples != pc.Pool || pc.Drops != 0 || pc.Pool < k || uint64(len(got)) != pc.Samples {
		t.Errorf("counters %+v after %d frames, %d samples read; want samples == pool >= %d, drops 0", pc, k, len(got), k)
	}
}

// TestHookAuto: with the default hook a veth port is sampled at TC
// ingress and a monitor port with XDP; a TC port that becomes a monitor
// port moves to XDP and keeps its counters, its pool still exact.
func TestHookAuto(t *testing.T) {
	// Without TCX hook auto is XDP everywhere (TestHookAutoWithoutTCX).
	testskip.Feature(t, ProbeFeatures(), FeatureTCX)
	lab := netlab.New(t, 2)
	d := openAuto(t, lab, Config{Workers: 1, MaxPorts: 4})
	if d.cfg.Hook != HookAuto {
		t.Fatalf("Config.Hook %v, want auto", d.cfg.Hook)
	}
	p1, p2 := portIndex(t, lab, 0), portIndex(t, lab, 1)
	if err := d.AttachPort(p1, PortConfig{Rate: 4, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	if err := d.AttachPort(p2, PortConfig{Rate: 4, Mode: ModeMonitor, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	if m1, m2 := d.AttachMode(p1), d.AttachMode(p2); m1 != AttachTCX || m2 != AttachNative {
		t.Fatalf("attach modes: inline veth port %q, monitor port %q; want %q and %q", m1, m2, AttachTCX, AttachNative)
	}

	send := func(k int, start uint32) (rx uint64) {
		before := lab.RxPackets(t, lab.Switch, "p1")
		lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, start, k, 32))
		return lab.RxPackets(t, lab.Switch, "p1") - before
	}
	rx := send(2000, 0)
	pc, err := d.PortCounters(p1)
	if err != nil {
		t.Fatal(err)
	}
	if pc.Pool != rx {
		t.Fatalf("TC pool %d != rx_packets delta %d", pc.Pool, rx)
	}

	if err := d.UpdatePort(p1, PortConfig{Rate: 4, Mode: ModeMonitor, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	if m := d.AttachMode(p1); m != AttachNative {
		t.Fatalf("after the change to monitor: attach mode %q, want native", m)
	}
	if names := tcxIngress(t, lab, p1); len(names) != 0 {
		t.Errorf("still at p1's TCX ingress after the move to XDP: %q", names)
	}
	rx += send(2000, 2000)
	pc2, err := d.PortCounters(p1)
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
