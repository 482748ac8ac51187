package dataplane

import (
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pinfs"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestPinnedReleaseAdoptEgress: ports sampled at egress across an
// upgrade in place. Release detaches the egress samplers (they are not
// pinned) but keeps what they counted, and records each port's
// directions: the Open that takes over reports p1 (both ways) and p2
// (egress only) as sampled so, p1's ingress sampler still attached and
// p2 with nothing attached, and their egress counts equal to the frames
// they sent until the Release. Attaching them anew at egress starts
// their egress pools from zero, p1's ingress pool continuing.
func TestPinnedReleaseAdoptEgress(t *testing.T) { forTCModes(t, testPinnedReleaseAdoptEgress) }

func testPinnedReleaseAdoptEgress(t *testing.T, tc tcCase) {
	dir := pinfs.Dir(t)
	lab := netlab.New(t, 3)
	cfg := Config{Workers: 1, MaxPorts: 4, Hook: HookTC, TCMode: tc.mode, PinDir: dir, StateWords: 64, Logger: testLogger(t)}
	var d *Dataplane
	must(t, lab.Do(lab.Switch, func() (err error) { d, err = Open(cfg); return }))
	p1, p2 := lab.PortIndex(t, 0), lab.PortIndex(t, 1)
	must(t, d.AttachPort(p1, PortConfig{Rate: 4, HeaderBytes: 64, Direction: sflow.DirectionBoth}))
	must(t, d.AttachPort(p2, PortConfig{Rate: 4, HeaderBytes: 64, Direction: sflow.DirectionEgress}))
	base := readPortsAndPools(t, lab, d, p1, p2)
	// Out at p1 and at p2 (the bridge forwards between the hosts).
	lab.SendFrames(t, 1, seqFrames(lab, 1, lab.HostMACs[0], 0, 500, 32))
	lab.SendFrames(t, 0, seqFrames(lab, 0, lab.HostMACs[1], 1000, 300, 32))
	time.Sleep(50 * time.Millisecond)
	before := readPortsAndPools(t, lab, d, p1, p2)
	if before.out1 != before.tx1-base.tx1+base.out1 || before.out2 != before.tx2-base.tx2+base.out2 {
		t.Fatalf("egress pools before the release %d, %d; the ports sent %d, %d", before.out1, before.out2,
			before.tx1-base.tx1, before.tx2-base.tx2)
	}
	h, err := d.Release()
	must(t, err)
	if m := kernelEgress(t, lab, p1); m != "" {
		t.Errorf("after Release p1's egress sampler is still attached (%s)", m)
	}

	cfg.Handover = h
	d = openAuto(t, lab, cfg)
	if !d.Pinned().Adopted() {
		t.Fatal("not adopted")
	}
	ap := d.Pinned().Ports()
	if ap[p1].Direction != sflow.DirectionBoth || ap[p2].Direction != sflow.DirectionEgress {
		t.Errorf("adopted directions p1 %v, p2 %v; want both, egress", ap[p1].Direction, ap[p2].Direction)
	}
	if d.AttachMode(p1) != tc.want || d.egressAttachMode(p1) != "" || d.AttachMode(p2) != "" || d.egressAttachMode(p2) != "" {
		t.Errorf("attached after the take-over: p1 %q/%q, p2 %q/%q; want p1's ingress only",
			d.AttachMode(p1), d.egressAttachMode(p1), d.AttachMode(p2), d.egressAttachMode(p2))
	}
	eg := d.Pinned().Egress()
	if eg[p1].Pool != before.out1 || eg[p2].Pool != before.out2 {
		t.Errorf("adopted egress pools p1 %d, p2 %d; want %d, %d (counted until the release)", eg[p1].Pool, eg[p2].Pool, before.out1, before.out2)
	}
	// Attached anew at egress: from zero, p1's ingress continuing.
	must(t, d.updatePort(p1, PortConfig{Rate: 4, HeaderBytes: 64, Direction: sflow.DirectionBoth}))
	must(t, d.AttachPort(p2, PortConfig{Rate: 4, HeaderBytes: 64, Direction: sflow.DirectionEgress}))
	after := readPortsAndPools(t, lab, d, p1, p2)
	if after.in1 != after.rx1-base.rx1+base.in1 {
		t.Errorf("p1's ingress pool %d, the port received %d since the attach", after.in1, after.rx1-base.rx1+base.in1)
	}
	lab.SendFrames(t, 1, seqFrames(lab, 1, lab.HostMACs[0], 2000, 200, 32))
	time.Sleep(50 * time.Millisecond)
	end := readPortsAndPools(t, lab, d, p1, p2)
	if end.out1 != end.tx1-after.tx1+after.out1 || after.out1 > 10 {
		t.Errorf("p1's new egress pool %d (at attach %d); the port sent %d since", end.out1, after.out1, end.tx1-after.tx1)
	}
	must(t, d.Close())
	if e := pinfs.Entries(t, dir); len(e) != 0 {
		t.Errorf("after Close the pin directory holds %v", e)
	}
}

func kernelEgress(t *testing.T, lab *netlab.Lab, ifindex int) string {
	t.Helper()
	var m string
	must(t, lab.Do(lab.Switch, func() (err error) { m, err = KernelAttachmentEgress(ifindex); return }))
	return m
}

// TestPortHook: a port's own hook (PortConfig.Hook) over the
// Dataplane's: under auto, a veth port is sampled at TC, and one set to
// XDP at XDP; UpdatePort keeps a port where it was attached.
func TestPortHook(t *testing.T) {
	lab := netlab.New(t, 2)
	d := openAuto(t, lab, Config{Workers: 1, MaxPorts: 4})
	p1, p2 := lab.PortIndex(t, 0), lab.PortIndex(t, 1)
	must(t, d.AttachPort(p1, PortConfig{Rate: 4, HeaderBytes: 64, Hook: HookXDP}))
	must(t, d.AttachPort(p2, PortConfig{Rate: 4, HeaderBytes: 64}))
	if m := d.AttachMode(p1); m != AttachNative && m != AttachGeneric {
		t.Errorf("p1 set to XDP attached as %q", m)
	}
	if m := d.AttachMode(p2); m != AttachTCX && m != AttachClsact {
		t.Errorf("p2 (auto, veth) attached as %q, want TC", m)
	}
	must(t, d.updatePort(p1, PortConfig{Rate: 8, HeaderBytes: 64, Hook: HookTC}))
	if m := d.AttachMode(p1); m != AttachNative && m != AttachGeneric {
		t.Errorf("p1 moved to %q by UpdatePort, want it kept at XDP", m)
	}
	if err := d.AttachPort(lab.PortIndex(t, 1)+1000, PortConfig{Rate: 4, HeaderBytes: 64, Hook: HookPsample}); err == nil {
		t.Error("a port's hook psample accepted by the dataplane")
	}
}
