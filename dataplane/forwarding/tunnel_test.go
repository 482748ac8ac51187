package forwarding

import (
	"net/netip"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// tunnelTable: port 10 a fixed VXLAN device (VNI 100, local 198.18.1.1,
// port 4789, TOS inherited) whose FDB sends MAC ...:02 to 198.18.1.2 (VNI
// 200 on that entry) and everything else to the default 198.18.1.9;
// port 11 the same with two default remotes (head-end replication);
// port 12 a collect_md VXLAN device without local address; port 13 a
// fixed gretap (key and checksum out, key in); the route to 198.18.1.0/24
// leaves by port 4, which has 198.18.1.1/24.
func tunnelTable() *Table {
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	s := &snapshot{tunnels: map[uint32]*tunnelDev{
		10: {kind: tunnelVXLAN, vni: 100, local: a("198.18.1.1"), port: 4789, tos: 1, defaults: 1,
			fdb: map[[6]byte]vxlanRemote{{2, 0, 0, 0, 0, 2}: {a("198.18.1.2"), 200}, {}: {a("198.18.1.9"), 0}}},
		11: {kind: tunnelVXLAN, vni: 100, local: a("198.18.1.1"), port: 4789, defaults: 2,
			fdb: map[[6]byte]vxlanRemote{{}: {a("198.18.1.9"), 0}}},
		12: {kind: tunnelVXLAN, collectMD: true, port: 8472, fdb: map[[6]byte]vxlanRemote{}},
		13: {kind: tunnelGRE, local: a("198.18.1.1"), remote: a("198.18.1.3"), tos: 0x10, greOut: greLen(greKey | greCsum), greIn: greLen(greKey)},
	}, linkAddrs: map[uint32][]netip.Prefix{4: {netip.MustParsePrefix("198.18.1.1/24")}}}
	s.fib4.routes = map[netip.Prefix]*route{
		netip.MustParsePrefix("198.18.1.0/24"): {prefix: netip.MustParsePrefix("198.18.1.0/24"), ifindex: 4, hops: []nexthop{{oif: 4}}},
	}
	s.fib4.lens = []int{24}
	tb := New(0, nil)
	tb.store(s)
	return tb
}

// TestTunnel: the records of each kind of device and direction, from the
// kernel's metadata or the device's configuration and FDB; none where the
// outer header is not one known header; no allocation.
func TestTunnel(t *testing.T) {
	tb := tunnelTable()
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	known := [6]byte{2, 0, 0, 0, 0, 2}
	other := [6]byte{2, 0, 0, 0, 0, 7}
	frame := func(dst, src [6]byte) []byte {
		h := ipv4Frame(dst, src, "198.18.100.1", "198.18.100.2")
		h[15] = 0xb8 // inner TOS (EF)
		return h
	}
	v4 := func(len, proto uint32, src, dst string, dport, tos uint32) sflow.SampledIPv4 {
		return sflow.SampledIPv4{Length: len, Protocol: proto, SrcIP: a(src), DstIP: a(dst), DstPort: dport, TOS: tos}
	}
	for _, c := range []struct {
		name   string
		q      TunnelQuery
		header []byte
		ip     sflow.Record // nil: none
		vni    sflow.Record
	}{
		{"fixed egress, MAC in the FDB: its remote and VNI", TunnelQuery{Port: 10, Egress: true, FrameLen: 100}, frame(known, other),
			&sflow.ExtendedIPv4TunnelEgress{Header: v4(136, 17, "198.18.1.1", "198.18.1.2", 4789, 0xb8)}, &sflow.ExtendedVNIEgress{VNI: 200}},
		{"fixed egress, MAC not in the FDB: the default remote", TunnelQuery{Port: 10, Egress: true, FrameLen: 100}, frame(other, known),
			&sflow.ExtendedIPv4TunnelEgress{Header: v4(136, 17, "198.18.1.1", "198.18.1.9", 4789, 0xb8)}, &sflow.ExtendedVNIEgress{VNI: 100}},
		{"fixed ingress: the remote learned for the inner source", TunnelQuery{Port: 10, FrameLen: 100}, frame(other, known),
			&sflow.ExtendedIPv4TunnelIngress{Header: v4(136, 17, "198.18.1.2", "198.18.1.1", 4789, 0xb8)}, &sflow.ExtendedVNIIngress{VNI: 200}},
		{"replicated to two defaults: no one outer header", TunnelQuery{Port: 11, Egress: true, FrameLen: 100}, frame(other, known),
			nil, &sflow.ExtendedVNIEgress{VNI: 100}},
		{"collect_md ingress: the metadata", TunnelQuery{Port: 12, FrameLen: 100, Known: true, Src: a("198.18.1.2"), Dst: a("198.18.1.1"), ID: 7, TOS: 4}, frame(known, other),
			&sflow.ExtendedIPv4TunnelIngress{Header: v4(136, 17, "198.18.1.2", "198.18.1.1", 8472, 4)}, &sflow.ExtendedVNIIngress{VNI: 7}},
		{"collect_md egress without source: the route's", TunnelQuery{Port: 12, Egress: true, FrameLen: 100, Known: true, Src: netip.IPv4Unspecified(), Dst: a("198.18.1.2"), ID: 7}, frame(known, other),
			&sflow.ExtendedIPv4TunnelEgress{Header: v4(136, 17, "198.18.1.1", "198.18.1.2", 8472, 0)}, &sflow.ExtendedVNIEgress{VNI: 7}},
		{"collect_md without metadata: nothing", TunnelQuery{Port: 12, Egress: true, FrameLen: 100}, frame(known, other), nil, nil},
		{"gretap egress: key and checksum", TunnelQuery{Port: 13, Egress: true, FrameLen: 100}, frame(known, other),
			&sflow.ExtendedIPv4TunnelEgress{Header: v4(100+20+12, 47, "198.18.1.1", "198.18.1.3", 0, 0x10)}, nil},
		{"gretap ingress: key", TunnelQuery{Port: 13, FrameLen: 100}, frame(known, other),
			&sflow.ExtendedIPv4TunnelIngress{Header: v4(100+20+8, 47, "198.18.1.3", "198.18.1.1", 0, 0x10)}, nil},
		{"not a tunnel device", TunnelQuery{Port: 4, FrameLen: 100}, frame(known, other), nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sc TunnelRecords
			ip, vni := tb.Tunnel(&c.q, c.header, &sc)
			if (ip == nil) != (c.ip == nil) || (ip != nil && string(ip.AppendXDR(nil)) != string(c.ip.AppendXDR(nil))) || (ip != nil && ip.Format() != c.ip.Format()) {
				t.Errorf("ip record %#v, want %#v", ip, c.ip)
			}
			if (vni == nil) != (c.vni == nil) || (vni != nil && (vni.Format() != c.vni.Format() || string(vni.AppendXDR(nil)) != string(c.vni.AppendXDR(nil)))) {
				t.Errorf("vni record %#v, want %#v", vni, c.vni)
			}
			if n := testing.AllocsPerRun(100, func() { tb.Tunnel(&c.q, c.header, &sc) }); n != 0 {
				t.Errorf("%v allocations per lookup", n)
			}
		})
	}
}
