package forwarding

// Tunnel records (sflow_tunnels.txt; sflow/flow_tunnel.go): for a frame
// sampled on a tunnel device, the outer header the device removed at
// ingress (decapsulation: extended_ipv4/ipv6_tunnel_ingress,
// extended_vni_ingress) or adds at egress (encapsulation: the _egress
// records).
//
// Two sources, the kernel's first:
//
//   - the tunnel metadata on the frame (a collect_md device: what
//     vxlan_rcv / ip_tunnel_rcv attached at ingress, what a route's encap,
//     tc tunnel_key or bpf_skb_set_tunnel_key attached for egress), read
//     by the sampler at sample time (dataplane/bpf/tunnel.h): the outer addresses,
//     TOS and tunnel id exactly as the kernel used them;
//   - for a device with a fixed VNI and remote (no metadata on its
//     frames), its configuration (IFLA_VXLAN_*, IFLA_GRE_*) and, for
//     VXLAN, its FDB: at egress the remote of the inner destination MAC
//     (or the default remote, the all-zeros entry, when the MAC is not
//     in it and there is exactly one), at ingress the remote learned for
//     the inner source MAC. These come from this table's copy, which
//     follows link and neighbour changes (forwarding.go).
//
// What the kernel does not expose is reported as it is known: the outer
// UDP destination port is the device's (IFLA_VXLAN_PORT, which a VXLAN
// device sends to and listens on); the source port, a hash of the inner
// flow chosen at send and gone from the frame by the time the ingress
// sampler sees it, is 0. The outer length is the inner frame's plus the
// encapsulation's headers (IP, UDP + VXLAN, or GRE with its optional
// fields). A VNI record is sent for VXLAN only: a GRE key is not a
// virtual network identifier.

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/sflowswitchd/sflowswitchd/internal/ethernet"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// IP protocols of the outer header.
const (
	protoUDP = 17
	protoGRE = 47
)

// GRE flags of IFLA_GRE_IFLAGS / OFLAGS (include/uapi/linux/if_tunnel.h).
const (
	greCsum = 0x8000
	greKey  = 0x2000
	greSeq  = 0x1000
)

// tunnelKind is what a tunnel device encapsulates in.
type tunnelKind uint8

const (
	tunnelVXLAN tunnelKind = iota + 1
	tunnelGRE
)

// tunnelDev is a tunnel device's configuration, as netlink reports it.
type tunnelDev struct {
	kind      tunnelKind
	collectMD bool       // external / collect_md: the tunnel comes from each frame's metadata
	vni       uint32     // VXLAN: the device's VNI
	local     netip.Addr // configured local address (zero: chosen by the route)
	remote    netip.Addr // configured remote or group (zero: none)
	port      uint16     // VXLAN: outer UDP destination port
	tos       uint8      // configured TOS; 1 = inherit from the inner packet
	greOut    uint16     // GRE: header length added at egress
	greIn     uint16     // GRE: header length removed at ingress
	// fdb: VXLAN remotes by inner MAC (bridge fdb ... dst); the
	// all-zeros MAC is the default remote, defaults how many there are.
	fdb      map[[6]byte]vxlanRemote
	defaults int
}

// vxlanRemote is one VXLAN FDB entry: the remote and, when set, its VNI.
type vxlanRemote struct {
	addr netip.Addr
	vni  uint32
}

// TunnelQuery is what a sample on a tunnel device tells: the port, the
// direction, the frame's length, and the kernel's tunnel metadata when it
// had some (Known; dataplane/bpf/tunnel.h).
type TunnelQuery struct {
	Port     uint32
	Egress   bool
	FrameLen uint32 // the inner frame's length, without FCS
	Known    bool
	Src, Dst netip.Addr // outer source and destination
	ID       uint32     // tunnel id (VNI, GRE key)
	TOS      uint8
}

// TunnelRecords is the caller's scratch for the records Tunnel returns:
// they point into it, valid until its next use. No allocation per
// sample.
type TunnelRecords struct {
	v4In   sflow.ExtendedIPv4TunnelIngress
	v4Out  sflow.ExtendedIPv4TunnelEgress
	v6In   sflow.ExtendedIPv6TunnelIngress
	v6Out  sflow.ExtendedIPv6TunnelEgress
	vniIn  sflow.ExtendedVNIIngress
	vniOut sflow.ExtendedVNIEgress
}

// Tunnel returns the tunnel records of a frame sampled on a tunnel device
// (header: its first bytes, the inner frame): ip, the outer IP header's
// (nil when its addresses are not known), and vni (nil unless VXLAN). It
// does not allocate.
func (t *Table) Tunnel(q *TunnelQuery, header []byte, sc *TunnelRecords) (ip, vni sflow.Record) {
	s := t.snap.Load()
	dev := s.tunnels[q.Port]
	if dev == nil {
		return nil, nil
	}
	var src, dst netip.Addr
	var id uint32
	var tos uint8
	switch {
	case q.Known:
		src, dst, id, tos = q.Src, q.Dst, q.ID, q.TOS
		if q.Egress && src.IsUnspecified() {
			// Metadata without a source (a route's encap without src):
			// the device sends from its local address, or else from
			// the address the route to the remote chooses.
			src = dev.local
			if !src.IsValid() {
				src = s.sourceFor(dst)
			}
		}
		if !q.Egress && dst.IsUnspecified() {
			// A kernel before 5.19 does not tell the outer destination
			// (no local address in the helper's key): this host's, the
			// device's local address when it has one.
			dst = dev.local
		}
	case dev.collectMD:
		return nil, nil // a collect_md device's frame without metadata: it has no tunnel
	default:
		src, dst, id = dev.fixed(q.Egress, header)
		tos = dev.tos
		if tos == 1 {
			tos = innerTOS(header)
		}
	}
	if dev.kind == tunnelVXLAN {
		if q.Egress {
			sc.vniOut.VNI = id
			vni = &sc.vniOut
		} else {
			sc.vniIn.VNI = id
			vni = &sc.vniIn
		}
	}
	if !src.IsValid() || !dst.IsValid() || src.Is4() != dst.Is4() {
		return nil, vni
	}
	proto, sport, dport, encap := uint32(protoUDP), uint32(0), uint32(dev.port), uint32(16) // UDP + VXLAN
	if dev.kind == tunnelGRE {
		proto, dport, encap = protoGRE, 0, uint32(dev.greOut)
		if !q.Egress {
			encap = uint32(dev.greIn)
		}
		if q.Known {
			encap = 4 // the base header, and the key when the metadata has one
			if id != 0 {
				encap += 4
			}
		}
	}
	if src.Is4() {
		h := sflow.SampledIPv4{Length: q.FrameLen + 20 + encap, Protocol: proto, SrcIP: src, DstIP: dst,
			SrcPort: sport, DstPort: dport, TOS: uint32(tos)}
		if q.Egress {
			sc.v4Out.Header = h
			return &sc.v4Out, vni
		}
		sc.v4In.Header = h
		return &sc.v4In, vni
	}
	h := sflow.SampledIPv6{Length: q.FrameLen + 40 + encap, Protocol: proto, SrcIP: src, DstIP: dst,
		SrcPort: sport, DstPort: dport, Priority: uint32(tos)}
	if q.Egress {
		sc.v6Out.Header = h
		return &sc.v6Out, vni
	}
	sc.v6In.Header = h
	return &sc.v6In, vni
}

// sourceFor is the source address the kernel chooses for a packet to dst
// without one (inet_select_addr, ipv6_dev_get_saddr), as this copy knows
// it: the preferred source of the route to dst, else the address of the
// route's output device whose prefix holds dst, else its first address of
// dst's family. The zero Addr when there is no route.
func (s *snapshot) sourceFor(dst netip.Addr) netip.Addr {
	f := &s.fib4
	if dst.Is6() {
		f = &s.fib6
	}
	r := f.match(dst)
	if r == nil {
		return netip.Addr{}
	}
	if r.src.IsValid() {
		return r.src
	}
	oif := r.ifindex
	if oif == 0 && len(r.hops) > 0 {
		oif = r.hops[0].oif
	}
	var first netip.Addr
	for _, p := range s.linkAddrs[oif] {
		a := p.Addr()
		if a.Is4() != dst.Is4() || a.IsLinkLocalUnicast() {
			continue
		}
		if p.Contains(dst) {
			return a
		}
		if !first.IsValid() {
			first = a
		}
	}
	return first
}

// fixed returns the outer source, destination and tunnel id of a frame on
// a device without metadata, from its configuration and FDB: at egress
// the remote the inner destination MAC is sent to, at ingress the remote
// learned for the inner source MAC. An address not known is the zero
// Addr.
func (dev *tunnelDev) fixed(egress bool, header []byte) (src, dst netip.Addr, id uint32) {
	id = dev.vni
	remote := dev.remote
	if dev.kind == tunnelVXLAN && len(header) >= 12 {
		mac := [6]byte(header[0:6]) // the inner destination
		if !egress {
			mac = [6]byte(header[6:12]) // the inner source, learned from the outer source
		}
		r, ok := dev.fdb[mac]
		switch {
		case ok:
			remote = r.addr
		case egress && dev.defaults == 1:
			r = dev.fdb[[6]byte{}]
			remote = r.addr
		case egress && dev.defaults > 1:
			// Replicated to every default remote: no one outer header.
			remote = netip.Addr{}
		}
		if ok && r.vni != 0 {
			id = r.vni
		}
	}
	if egress {
		return dev.local, remote, id
	}
	return remote, dev.local, id
}

// innerTOS is the TOS / traffic class of the inner frame's IP packet (a
// device that inherits it), 0 when not IP.
func innerTOS(h []byte) uint8 {
	eh, ok := ethernet.Parse(h)
	if !ok {
		return 0
	}
	off := eh.Len
	switch {
	case eh.EtherType == ethernet.TypeIPv4 && len(h) >= off+2 && h[off]>>4 == 4:
		return h[off+1]
	case eh.EtherType == ethernet.TypeIPv6 && len(h) >= off+2 && h[off]>>4 == 6:
		return h[off]<<4 | h[off+1]>>4
	}
	return 0
}

// tunnelOf returns the tunnel configuration of link l, nil for a link
// that is not a tunnel device the sampler reports.
func tunnelOf(l netlink.Link) *tunnelDev {
	switch v := l.(type) {
	case *netlink.Vxlan:
		return &tunnelDev{kind: tunnelVXLAN, collectMD: v.FlowBased, vni: uint32(v.VxlanId),
			local: addrOf(v.SrcAddr), remote: addrOf(v.Group), port: uint16(v.Port), tos: uint8(v.TOS),
			fdb: map[[6]byte]vxlanRemote{}}
	case *netlink.Gretap:
		return &tunnelDev{kind: tunnelGRE, collectMD: v.FlowBased, local: addrOf(v.Local), remote: addrOf(v.Remote),
			tos: v.Tos, greOut: greLen(v.OFlags), greIn: greLen(v.IFlags)}
	}
	return nil
}

// greLen is the length of a GRE header with flags f (RFC 2890: 4 bytes,
// plus 4 for each of checksum, key and sequence number).
func greLen(f uint16) uint16 {
	n := uint16(4)
	for _, b := range []uint16{greCsum, greKey, greSeq} {
		if f&b != 0 {
			n += 4
		}
	}
	return n
}

// addrOf is ip as a netip.Addr, the zero Addr for none or unspecified.
func addrOf(ip net.IP) netip.Addr {
	if a, ok := netip.AddrFromSlice(ip); ok && !a.Unmap().IsUnspecified() {
		return a.Unmap()
	}
	return netip.Addr{}
}

// addTunnelFDB records a VXLAN FDB entry (bridge fdb ... dev VXLAN dst
// REMOTE) of a device in tunnels.
func addTunnelFDB(tunnels map[uint32]*tunnelDev, n *netlink.Neigh) {
	dev := tunnels[uint32(n.LinkIndex)]
	if dev == nil || dev.kind != tunnelVXLAN || len(n.HardwareAddr) != 6 {
		return
	}
	a := addrOf(n.IP)
	if !a.IsValid() {
		return
	}
	mac := [6]byte(n.HardwareAddr)
	if mac == ([6]byte{}) {
		dev.defaults++
		if dev.defaults > 1 {
			return // the first is kept; several mean replication (fixed)
		}
	}
	dev.fdb[mac] = vxlanRemote{addr: a, vni: uint32(n.VNI)}
}
