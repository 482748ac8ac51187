package main

import (
	"fmt"
	"net"
	"net/netip"
	"sort"

	"github.com/vishvananda/netlink"
)

// hostAddr is one address configured on an interface.
type hostAddr struct {
	ifindex int
	ifname  string
	up      bool
	loop    bool
	addr    netip.Addr
}

// chooseAgentAddress picks sFlowAgentAddress, in this documented and
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
func chooseAgentAddress(explicit, ifname string, addrs []hostAddr) (netip.Addr, string, error) {
	if explicit != "" {
		a, err := netip.ParseAddr(explicit)
		if err != nil {
			return netip.Addr{}, "", fmt.Errorf("agent address: %w", err)
		}
		return a.Unmap(), "configured", nil
	}
	var cands []hostAddr
	for _, h := range addrs {
		if ifname != "" {
			if h.ifname == ifname {
				cands = append(cands, h)
			}
			continue
		}
		if !h.loop && !h.addr.IsLoopback() && !h.addr.IsUnspecified() && !h.addr.IsMulticast() {
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
		if a.up != b.up {
			return a.up
		}
		if a.addr.Is4() != b.addr.Is4() {
			return a.addr.Is4()
		}
		if ra, rb := addrScope(a.addr), addrScope(b.addr); ra != rb {
			return ra < rb
		}
		if a.ifindex != b.ifindex {
			return a.ifindex < b.ifindex
		}
		return a.addr.Less(b.addr)
	})
	how := "ranked"
	if ifname != "" {
		how = "interface " + ifname
	}
	return cands[0].addr, how, nil
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

// listHostAddrs lists the addresses of every interface in the current
// network namespace.
func listHostAddrs() ([]hostAddr, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	var out []hostAddr
	for _, l := range links {
		attrs := l.Attrs()
		addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return nil, fmt.Errorf("listing addresses of %s: %w", attrs.Name, err)
		}
		for _, a := range addrs {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok {
				continue
			}
			out = append(out, hostAddr{
				ifindex: attrs.Index,
				ifname:  attrs.Name,
				up:      attrs.Flags&net.FlagUp != 0,
				loop:    attrs.Flags&net.FlagLoopback != 0,
				addr:    ip.Unmap(),
			})
		}
	}
	return out, nil
}
