// Package agentaddr chooses sFlowAgentAddress from the host's addresses in a
// documented order that does not depend on how the kernel lists them.
package agentaddr

import (
	"fmt"
	"net"
	"net/netip"
	"sort"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// HostAddr is one address configured on an interface.
type HostAddr struct {
	IfIndex  int
	IfName   string
	Up       bool // the interface is up
	Loopback bool // the interface is a loopback device
	Addr     netip.Addr
}

// Choose picks sFlowAgentAddress from explicit, the interface ifname or
// addrs; it also returns how the address was chosen. It picks, in this documented and
// stable order:
//
//  1. the explicit address (-agent-address / agent_address);
//  2. the named interface's (-agent-interface) best address by rank 3b-3d;
//  3. otherwise the best address of all up, non-loopback interfaces, ranked
//     a. up interfaces before down ones,
//     b. IPv4 before IPv6,
//     c. global unicast before private/ULA before link-local,
//     d. lower ifindex, then the lower address.
//
// The result depends only on the host's addresses, never on the order in
// which the kernel lists them, so a restart picks the same address.
func Choose(explicit, ifname string, addrs []HostAddr) (netip.Addr, string, error) {
	if explicit != "" {
		a, err := netip.ParseAddr(explicit)
		if err != nil {
			return netip.Addr{}, "", fmt.Errorf("agent address: %w", err)
		}
		return a.Unmap(), "configured", nil
	}
	var cands []HostAddr
	for _, h := range addrs {
		if ifname != "" {
			if h.IfName == ifname {
				cands = append(cands, h)
			}
			continue
		}
		if !h.Loopback && !h.Addr.IsLoopback() && !h.Addr.IsUnspecified() && !h.Addr.IsMulticast() {
			cands = append(cands, h)
		}
	}
	if len(cands) == 0 {
		if ifname != "" {
			return netip.Addr{}, "", fmt.Errorf("agent interface %q has no address", ifname)
		}
		return netip.Addr{}, "", fmt.Errorf("no usable interface address for the agent address; set -agent-address")
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.Up != b.Up {
			return a.Up
		}
		if a.Addr.Is4() != b.Addr.Is4() {
			return a.Addr.Is4()
		}
		if ra, rb := addrScope(a.Addr), addrScope(b.Addr); ra != rb {
			return ra < rb
		}
		if a.IfIndex != b.IfIndex {
			return a.IfIndex < b.IfIndex
		}
		return a.Addr.Less(b.Addr)
	})
	how := "ranked"
	if ifname != "" {
		how = "interface " + ifname
	}
	return cands[0].Addr, how, nil
}

// addrScope ranks an address: 0 global unicast, 1 private or ULA,
// 2 link-local, 3 anything else.
func addrScope(a netip.Addr) int {
	switch {
	case a.IsLinkLocalUnicast():
		return 2
	case a.IsPrivate():
		return 1
	case a.IsGlobalUnicast():
		return 0
	default:
		return 3
	}
}

// List lists the addresses of every interface in the current
// network namespace.
func List() ([]HostAddr, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	// One dump of every address, not one per link: a switch has thousands
	// of links and this runs at every port change.
	all, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("listing addresses: %w", err)
	}
	byIndex := make(map[int][]netlink.Addr)
	for _, a := range all {
		byIndex[a.LinkIndex] = append(byIndex[a.LinkIndex], a)
	}
	var out []HostAddr
	for _, l := range links {
		attrs := l.Attrs()
		for _, a := range byIndex[attrs.Index] {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok {
				continue
			}
			out = append(out, HostAddr{
				IfIndex:  attrs.Index,
				IfName:   attrs.Name,
				Up:       attrs.Flags&net.FlagUp != 0,
				Loopback: attrs.Flags&net.FlagLoopback != 0,
				Addr:     ip.Unmap(),
			})
		}
	}
	return out, nil
}

// DefaultRouteLinks returns the interfaces the default routes (IPv4 and
// IPv6, every next hop of a multipath route) leave through, by ifindex:
// on a switch, the management port.
func DefaultRouteLinks() (map[int]bool, error) {
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("listing routes: %w", err)
	}
	out := map[int]bool{}
	for _, r := range routes {
		if r.Dst != nil {
			if ones, _ := r.Dst.Mask.Size(); ones != 0 {
				continue
			}
		}
		if r.LinkIndex > 0 {
			out[r.LinkIndex] = true
		}
		for _, nh := range r.MultiPath {
			if nh.LinkIndex > 0 {
				out[nh.LinkIndex] = true
			}
		}
	}
	return out, nil
}
