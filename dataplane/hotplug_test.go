package dataplane

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/dataplane/portstats"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// xdpShown reports whether `bpftool net show` in the switch namespace
// lists an XDP program on link name.
func xdpShown(t *testing.T, lab *netlab.Lab, name string, ifindex int) bool {
	t.Helper()
	out := bpftoolNet(t, lab)
	xdp, _, _ := strings.Cut(out, "tc:")
	return strings.Contains(xdp, name+"("+strconv.Itoa(ifindex)+")")
}

// TestHotPlugAttachDetach attaches to a port added after Open, checks it
// samples, then detaches and checks that no link, config or counter state
// is left, and that the slot is reused from zero.
func TestHotPlugAttachDetach(t *testing.T) {
	lab := netlab.New(t, 1)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 1})

	i := lab.AddPort(t)
	name := "p" + strconv.Itoa(i)
	host := len(lab.Hosts) - 1
	idx := lab.LinkIndex(lab.Switch, name)
	if idx == 0 {
		t.Fatalf("no ifindex for hot-plugged %s", name)
	}
	pc := PortConfig{Rate: 4, Mode: ModeInline, HeaderBytes: 64}
	if err := d.AttachPort(idx, pc); err != nil {
		t.Fatal(err)
	}
	if !xdpShown(t, lab, name, idx) {
		t.Fatalf("bpftool does not show XDP on %s after AttachPort", name)
	}
	const k = 1000
	lab.SendFrames(t, host, seqFrames(lab, host, noHostMAC, 0, k, 32))
	c, err := d.Stats().Ingress(idx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pool < k || c.Samples == 0 {
		t.Fatalf("counters %+v after %d frames", c, k)
	}
	slot := d.ports[idx].slot

	if err := d.DetachPort(idx); err != nil {
		t.Fatal(err)
	}
	if xdpShown(t, lab, name, idx) {
		t.Errorf("bpftool still shows XDP on %s after DetachPort:\n%s", name, bpftoolNet(t, lab))
	}
	if x := switchLink(t, lab, name).Attrs().Xdp; x != nil && x.Attached {
		t.Errorf("netlink still reports XDP attached on %s: %+v", name, x)
	}
	var cfg bpf.SamplerPortConfig
	if err := d.objs.PortConfigs.Lookup(uint32(idx), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg != (bpf.SamplerPortConfig{}) {
		t.Errorf("config of ifindex %d not cleared: %+v", idx, cfg)
	}
	if s := d.stats.counters.Sum(slot); s != (portstats.Counters{}) {
		t.Errorf("counter slot %d not zeroed: %+v", slot, s)
	}
	if _, err := d.Stats().Ingress(idx); err == nil {
		t.Errorf("portstats.Counters of a detached port succeeded")
	}
	if m := d.AttachMode(idx); m != "" {
		t.Errorf("AttachMode of a detached port = %q", m)
	}

	// The only slot (MaxPorts 1) is free again; traffic on the detached
	// port must not be counted anywhere.
	lab.SendFrames(t, host, seqFrames(lab, host, noHostMAC, 0, 100, 32))
	if s := d.stats.counters.Sum(slot); s != (portstats.Counters{}) {
		t.Errorf("detached port still counted: %+v", s)
	}
	if err := d.AttachPort(idx, pc); err != nil {
		t.Fatalf("re-attach into the freed slot: %v", err)
	}
	if c, err := d.Stats().Ingress(idx); err != nil || c != (portstats.Counters{}) {
		t.Errorf("re-attached port counters %+v, %v; want zero", c, err)
	}

	// Hot-unplug while attached: the kernel detaches the link with the
	// device; DetachPort must still release the port's state.
	lab.DelPort(t, i)
	if err := d.DetachPort(idx); err != nil {
		t.Errorf("DetachPort after the device vanished: %v", err)
	}
	if err := d.AttachPort(lab.PortIndex(t, 0), pc); err != nil {
		t.Errorf("slot not released after unplug: %v", err)
	}
}
