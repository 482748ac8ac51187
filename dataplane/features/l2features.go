package features

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Layer-2 kernel features: the switch models the agent reads (VLAN-aware
// bridges, 802.1Q devices, bonds). Neither sampling nor the daemon's start
// depend on them; without one, that model is simply absent from the
// kernel (a port is never a member of such a device).
const (
	FeatureBridgeVLANFiltering = "bridge_vlan_filtering"
	Feature8021Q               = "8021q"
	FeatureBonding             = "bonding"
)

// l2Probes are the layer-2 feature rows, probed by ProbeL2Features.
var l2Probes = []Feature{
	{Name: FeatureBridgeVLANFiltering, Since: "3.9 (CONFIG_BRIDGE_VLAN_FILTERING)",
		UsedFor: "extended_switch VLANs from the bridge's PVIDs and per-VLAN FDB; per-VLAN counters",
		Without: "no VLAN-filtering bridge can exist: a sample's VLAN is its tag"},
	{Name: Feature8021Q, Since: "2.6 (module 8021q)",
		UsedFor: "802.1Q sub-interfaces (eth1.100) as routed outputs",
		Without: "no 802.1Q device can exist"},
	{Name: FeatureBonding, Since: "2.6 (module bonding)",
		UsedFor: "LAG counters (lag_port_stats) of bond members",
		Without: "no bond can exist: no LAG counters"},
}

// ProbeL2Features tells which layer-2 devices the running kernel can make:
// it creates a VLAN-filtering bridge, an 802.1Q device on a veth and a
// bond in a new, unnamed network namespace that disappears with the probe
// (the kernel loads the modules on demand, as for an operator's `ip link
// add`). It needs CAP_SYS_ADMIN (setns) and CAP_NET_ADMIN: tests and the
// lab use it; the daemon does not, since it never creates devices.
func ProbeL2Features() *Features {
	fs := &Features{Release: kernelRelease()}
	errs := make(map[string]error, len(l2Probes))
	if err := inThrowawayNetns(func(h *netlink.Handle) {
		errs[FeatureBridgeVLANFiltering] = probeBridgeVLAN(h)
		errs[Feature8021Q] = probeVLANDevice(h)
		errs[FeatureBonding] = probeBond(h)
	}); err != nil {
		for _, f := range l2Probes {
			errs[f.Name] = err
		}
	}
	for _, f := range l2Probes {
		f.Err = errs[f.Name]
		fs.List = append(fs.List, f)
	}
	return fs
}

// inThrowawayNetns runs fn with a netlink handle in a new network
// namespace that nothing names: it ends when the probe lets go of it.
func inThrowawayNetns(fn func(h *netlink.Handle)) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("own network namespace: %w", err)
			return
		}
		defer orig.Close()
		ns, err := netns.New() // unshare(CLONE_NEWNET): this thread is now in ns
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("new network namespace: %w", err)
			return
		}
		defer ns.Close()
		if err := netns.Set(orig); err != nil {
			// The thread stays locked: the runtime ends it with the
			// goroutine instead of reusing it in ns.
			errc <- fmt.Errorf("back to own network namespace: %w", err)
			return
		}
		runtime.UnlockOSThread()
		h, err := netlink.NewHandleAt(ns)
		if err != nil {
			errc <- fmt.Errorf("netlink in the probe namespace: %w", err)
			return
		}
		defer h.Close()
		fn(h)
		errc <- nil
	}()
	return <-errc
}

func probeBridgeVLAN(h *netlink.Handle) error {
	on := true
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "probebr"}, VlanFiltering: &on}
	if err := h.LinkAdd(br); err != nil {
		return fmt.Errorf("creating a bridge with vlan_filtering 1: %w", err)
	}
	l, err := h.LinkByName("probebr")
	if err != nil {
		return err
	}
	if b, ok := l.(*netlink.Bridge); !ok || b.VlanFiltering == nil || !*b.VlanFiltering {
		return errors.New("the kernel made the bridge without VLAN filtering (CONFIG_BRIDGE_VLAN_FILTERING off)")
	}
	return nil
}

func probeVLANDevice(h *netlink.Handle) error {
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "probev0"}, PeerName: "probev1"}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating the lower veth: %w", err)
	}
	l, err := h.LinkByName("probev0")
	if err != nil {
		return err
	}
	v := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "probev0.100", ParentIndex: l.Attrs().Index}, VlanId: 100}
	if err := h.LinkAdd(v); err != nil {
		return fmt.Errorf("creating an 802.1Q device: %w", err)
	}
	return nil
}

func probeBond(h *netlink.Handle) error {
	b := netlink.NewLinkBond(netlink.LinkAttrs{Name: "probebond"})
	b.Mode = netlink.BOND_MODE_802_3AD
	if err := h.LinkAdd(b); err != nil {
		return fmt.Errorf("creating a bond: %w", err)
	}
	return nil
}
