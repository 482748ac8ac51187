package dataplane

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// Hook is where in the kernel's receive path a port's sampler runs.
type Hook uint8

const (
	// HookAuto picks per port: TC for veth devices (see HookTC), XDP for
	// every other device and for monitor ports. The zero Hook.
	HookAuto Hook = iota
	// HookXDP runs the sampler as an XDP program: native (driver) mode,
	// or generic (skb) mode when the driver has no native XDP. The
	// cheapest hook on a NIC with native XDP: the frame is sampled before
	// the kernel allocates an skb for it.
	HookXDP
	// HookTC runs the sampler at TC ingress: after the skb exists, before
	// the bridge, routing or any TC program or filter of others. Attached
	// with a TCX link where the kernel has TCX (Linux 6.6), otherwise as a
	// cls_bpf filter at priority 1 of the port's clsact qdisc (package clsact).
	// On veth, XDP costs a copy of every frame (veth_convert_skb_to_xdp_buff
	// copies an skb without XDP_PACKET_HEADROOM into a page before the
	// program runs) and moves receive onto the device's NAPI ring; at TC
	// ingress neither happens (bench/README.md, "Hooks on veth"). Inline
	// delivery only: a monitor port always uses XDP (AF_XDP needs it).
	// The pool counts skbs as the stack sees them: on a device with GRO
	// enabled a merged packet counts once, so HookTC is for devices
	// without GRO (veth by default), which HookAuto respects.
	HookTC
	// HookPsample samples with tc's sample action (a matchall filter per
	// port, offloaded to a switch ASIC where the port offloads tc), the
	// samples read from the kernel's PSAMPLE channel (dataplane/psample,
	// source/psample.go): the path of switchdev switches, whose
	// forwarded traffic never reaches an XDP or TC program. The BPF
	// samplers attach to no port under it.
	HookPsample
)

// String returns "auto", "xdp", "tc" or "psample".
func (h Hook) String() string {
	switch h {
	case HookAuto:
		return "auto"
	case HookXDP:
		return "xdp"
	case HookTC:
		return "tc"
	case HookPsample:
		return "psample"
	}
	return fmt.Sprintf("Hook(%d)", uint8(h))
}

// ParseHook parses "auto", "xdp", "tc" or "psample".
func ParseHook(s string) (Hook, error) {
	for _, h := range []Hook{HookAuto, HookXDP, HookTC, HookPsample} {
		if s == h.String() {
			return h, nil
		}
	}
	return 0, fmt.Errorf("unknown sampler hook %q (want auto, xdp, tc or psample)", s)
}

// hookFor resolves the configured hook for a port in mode m: monitor
// ports are XDP; under HookAuto, veth ports and tunnel devices are TC,
// with or without TCX:
// a clsact filter costs some 25-55 ns per frame more than a TCX link, but
// XDP on veth costs some 175 ns more than the filter, for the copy veth
// makes of every frame (bench/README.md, "TC without TCX"). Runs in the
// port's netns.
func (d *Dataplane) hookFor(ifindex int, m Mode) Hook {
	if m == ModeMonitor {
		return HookXDP
	}
	switch d.cfg.Hook {
	case HookXDP, HookTC:
		return d.cfg.Hook
	}
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		// Attaching will fail with a clearer error.
		return HookXDP
	}
	if l.Type() == "veth" || KindOf(l.Type()) != PortPlain {
		// A tunnel device (VXLAN, gretap) has no native XDP either, and
		// only an skb carries what the tunnel removed (the outer header,
		// its metadata): TC ingress.
		return HookTC
	}
	return HookXDP
}

// linkName is the name of link ifindex, for the log ("" if unknown).
func (d *Dataplane) linkName(ifindex int) string {
	name := ""
	_ = d.inNetns(func() error {
		l, err := netlink.LinkByIndex(ifindex)
		if err == nil {
			name = l.Attrs().Name
		}
		return err
	})
	return name
}

// linkKind is the PortKind of link ifindex in the dataplane's netns. A
// link that cannot be read is PortPlain: attaching it fails with a
// clearer error, or it vanished.
func (d *Dataplane) linkKind(ifindex int) PortKind {
	k := PortPlain
	err := d.inNetns(func() error {
		l, err := netlink.LinkByIndex(ifindex)
		if err != nil {
			return err
		}
		k = KindOf(l.Type())
		return nil
	})
	if err != nil {
		d.log.Debug("reading the link's kind", "ifindex", ifindex, "err", err)
	}
	return k
}
