package netlab

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// Tunnel is a tunnel between a lab's switch and its first host, built by
// AddTunnel over p1 taken out of the bridge (the underlay): the switch's
// end is the device Name in the switch namespace, the host's a device of
// the same name in Hosts[0], each with an overlay address.
type Tunnel struct {
	Kind     string // "vxlan", "gretap" or "ip6gretap"
	Name     string // the devices' name on both sides
	External bool   // the switch's end is collect_md (external): routes with encap send into it
	IPv6     bool   // the outer header is IPv6 (vxlan; ip6gretap always)
	VNI      uint32 // vxlan: the VNI; gretap: the key (0: none)
	Port     uint16 // vxlan: the UDP port (both ends)
	// FDB (vxlan, fixed): the switch's end has no remote; its FDB sends
	// the host's MAC to the host (a static entry) and everything else
	// to FloodRemote (the default, all-zeros entry), an address nobody
	// has: a remote taken from the wrong entry shows.
	FDB bool

	// Set by AddTunnel: the underlay (outer) addresses of the switch and
	// the host, and the overlay addresses of their devices.
	SwitchOuter, HostOuter     netip.Addr
	SwitchOverlay, HostOverlay netip.Addr
}

// Underlay and overlay addresses of AddTunnel (198.18.0.0/15; IPv6 in
// the ULA space, only inside the lab).
// FloodRemote is the default remote of a Tunnel with FDB set.
var FloodRemote = netip.MustParseAddr("198.18.1.77")

var (
	tunnelOuter4   = [2]netip.Addr{netip.MustParseAddr("198.18.1.1"), netip.MustParseAddr("198.18.1.2")}
	tunnelOuter6   = [2]netip.Addr{netip.MustParseAddr("fd00:5f::1"), netip.MustParseAddr("fd00:5f::2")}
	tunnelOverlay4 = [2]netip.Addr{netip.MustParseAddr("198.18.100.1"), netip.MustParseAddr("198.18.100.2")}
)

// AddTunnel builds tun between the switch and host 1 of l: p1 leaves the
// bridge and gets the underlay address (IPv6 enabled on it and on the
// host's eth0 for an IPv6 outer header), both ends get their device and
// overlay address, and the host's end knows the switch's overlay MAC (a
// permanent neighbour: no ARP through the tunnel). A collect_md switch
// end reaches the host's overlay address by a route with encap (ip route
// ... encap ip id VNI dst HOST). Everything lives in the lab's namespaces
// and goes with them.
func (l *Lab) AddTunnel(t testing.TB, tun *Tunnel) {
	t.Helper()
	sw, h := l.Switch, l.Hosts[0]
	outer := tunnelOuter4
	plen := "24"
	if tun.IPv6 || tun.Kind == "ip6gretap" {
		tun.IPv6 = true
		outer, plen = tunnelOuter6, "64"
	}
	tun.SwitchOuter, tun.HostOuter = outer[0], outer[1]
	tun.SwitchOverlay, tun.HostOverlay = tunnelOverlay4[0], tunnelOverlay4[1]
	run := func(ns string, args ...string) {
		t.Helper()
		if out, err := l.Run(ns, args[0], args[1:]...); err != nil {
			t.Fatalf("netlab: %v: %v\n%s", args, err, out)
		}
	}
	run(sw, "ip", "link", "set", "p1", "nomaster")
	if tun.IPv6 {
		run(sw, "sysctl", "-q", "-w", "net.ipv6.conf.p1.disable_ipv6=0", "net.ipv6.conf.p1.accept_dad=0")
		run(h, "sysctl", "-q", "-w", "net.ipv6.conf.eth0.disable_ipv6=0", "net.ipv6.conf.eth0.accept_dad=0")
	}
	run(sw, "ip", "addr", "add", tun.SwitchOuter.String()+"/"+plen, "dev", "p1", "nodad")
	run(h, "ip", "addr", "add", tun.HostOuter.String()+"/"+plen, "dev", "eth0", "nodad")
	// The underlay's neighbours are permanent: no ARP or ND to wait for.
	run(sw, "ip", "neigh", "replace", tun.HostOuter.String(), "lladdr", l.HostMACs[0].String(), "dev", "p1", "nud", "permanent")
	run(h, "ip", "neigh", "replace", tun.SwitchOuter.String(), "lladdr", PortMAC(1).String(), "dev", "eth0", "nud", "permanent")

	dev := func(local, remote netip.Addr, external bool) []string {
		switch tun.Kind {
		case "vxlan":
			a := []string{"ip", "link", "add", tun.Name, "type", "vxlan", "dstport", strconv.Itoa(int(tun.Port))}
			if external {
				return append(a, "external")
			}
			a = append(a, "id", fmt.Sprint(tun.VNI), "local", local.String())
			if !remote.IsValid() {
				return a
			}
			return append(a, "remote", remote.String())
		case "gretap", "ip6gretap":
			a := []string{"ip", "link", "add", tun.Name, "type", tun.Kind}
			if external {
				return append(a, "external")
			}
			a = append(a, "local", local.String(), "remote", remote.String())
			if tun.VNI != 0 {
				a = append(a, "key", fmt.Sprint(tun.VNI))
			}
			return a
		}
		t.Fatalf("netlab: tunnel kind %q", tun.Kind)
		return nil
	}
	swRemote := tun.HostOuter
	if tun.FDB {
		swRemote = netip.Addr{}
	}
	run(sw, dev(tun.SwitchOuter, swRemote, tun.External)...)
	run(h, dev(tun.HostOuter, tun.SwitchOuter, false)...)
	for _, ns := range []string{sw, h} {
		run(ns, "ip", "link", "set", tun.Name, "up")
	}
	run(sw, "ip", "addr", "add", tun.SwitchOverlay.String()+"/24", "dev", tun.Name)
	run(h, "ip", "addr", "add", tun.HostOverlay.String()+"/24", "dev", tun.Name)
	swMAC, hMAC := l.linkMAC(t, sw, tun.Name), l.linkMAC(t, h, tun.Name)
	run(h, "ip", "neigh", "replace", tun.SwitchOverlay.String(), "lladdr", swMAC, "dev", tun.Name, "nud", "permanent")
	run(sw, "ip", "neigh", "replace", tun.HostOverlay.String(), "lladdr", hMAC, "dev", tun.Name, "nud", "permanent")
	if tun.FDB {
		run(sw, "bridge", "fdb", "append", "00:00:00:00:00:00", "dev", tun.Name, "dst", FloodRemote.String())
		run(sw, "bridge", "fdb", "add", hMAC, "dev", tun.Name, "dst", tun.HostOuter.String())
	}
	if tun.External {
		// A collect_md device sends only what carries tunnel metadata:
		// the host's overlay address by a route that adds it.
		encap := []string{"ip", "route", "add", tun.HostOverlay.String() + "/32", "encap", "ip"}
		if tun.IPv6 {
			encap[len(encap)-1] = "ip6"
		}
		if tun.VNI != 0 {
			encap = append(encap, "id", fmt.Sprint(tun.VNI))
		}
		if tun.Kind != "vxlan" && tun.VNI != 0 {
			encap = append(encap, "key")
		}
		if tun.IPv6 {
			// A UDP checksum over IPv6 (RFC 8200 section 8.1): the host's
			// end, as any VXLAN device by default, drops zero checksums
			// (noudp6zerocsumrx).
			encap = append(encap, "csum")
		}
		encap = append(encap, "dst", tun.HostOuter.String(), "dev", tun.Name)
		run(sw, encap...)
	}
}

// linkMAC is the MAC address of link name in namespace ns.
func (l *Lab) linkMAC(t testing.TB, ns, name string) string {
	t.Helper()
	var mac string
	err := l.Do(ns, func() error {
		link, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		mac = link.Attrs().HardwareAddr.String()
		return nil
	})
	if err != nil {
		t.Fatalf("netlab: MAC of %s in %s: %v", name, ns, err)
	}
	return mac
}

// TunnelKinds is a probe of the tunnel link kinds the running kernel
// has (testskip.Features): a kind is available when a link of it can be
// made in the lab's switch namespace (removed at once). Build kernels
// without GRE (CONFIG_NET_IPGRE_DEMUX unset) refuse "gretap" with
// "Unknown device type".
func (l *Lab) TunnelKinds() testskip.Features { return tunnelKinds{l} }

type tunnelKinds struct{ l *Lab }

// Unavailable implements testskip.Features.
func (p tunnelKinds) Unavailable(kind string) error {
	args := []string{"link", "add", "sftnprobe0", "type", kind}
	switch kind {
	case "vxlan":
		args = append(args, "id", "1", "dstport", "4789")
	case "gretap":
		args = append(args, "remote", "198.18.1.2")
	case "ip6gretap":
		args = append(args, "remote", "fd00:5f::2")
	}
	if out, err := p.l.Run(p.l.Switch, "ip", args...); err != nil {
		return fmt.Errorf("ip link add type %s: %w: %s", kind, err, strings.TrimSpace(string(out)))
	}
	if out, err := p.l.Run(p.l.Switch, "ip", "link", "del", "sftnprobe0"); err != nil {
		return fmt.Errorf("removing the probe link: %w: %s", err, out)
	}
	return nil
}

// PingTunnel sends count ICMP echo requests, one at a time, from the
// host end of tun to the switch's overlay address (in through the
// switch's tunnel device, decapsulated; the replies out through it, to be
// encapsulated), and fails the test unless every one is answered.
func (l *Lab) PingTunnel(t testing.TB, tun *Tunnel, count int) {
	t.Helper()
	for i := 0; i < count; i++ {
		if err := l.Ping(0, tun.SwitchOverlay, 2*time.Second); err != nil {
			t.Fatalf("netlab: ping %d over the %s tunnel: %v", i, tun.Kind, err)
		}
	}
}
