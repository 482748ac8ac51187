package e2e

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// tunnelRecord is what one tunnel record of a flow sample says, as any
// decoder reads it: the record's format, and the outer header's fields or
// the VNI.
type tunnelRecord struct {
	format            uint32
	length, proto     uint32
	src, dst          netip.Addr
	sport, dport, tos uint32
	vni               uint32
}

func (r tunnelRecord) String() string {
	if r.format == 1029 || r.format == 1030 {
		return fmt.Sprintf("%d{vni %d}", r.format, r.vni)
	}
	return fmt.Sprintf("%d{len %d proto %d %v:%d -> %v:%d tos %d}", r.format, r.length, r.proto, r.src, r.sport, r.dst, r.dport, r.tos)
}

// TestTunnelRecords runs the daemon on a switch whose tunnel device to a
// host (netlab.AddTunnel) is sampled both ways at rate 1, while the host
// pings the switch through the tunnel: each echo request is sampled at
// the device's ingress (decapsulated), each reply at its egress (to be
// encapsulated). Every such flow sample, as our decoder reads it, ends
// with the tunnel records (last: tshark 4.0 cannot skip records it does
// not know):
//   - at ingress extended_ipv4/ipv6_tunnel_ingress (1024/1026) from the
//     host's underlay address to the switch's, at egress
//     extended_ipv4/ipv6_tunnel_egress (1023/1025) the other way, with
//     protocol 17 and the device's UDP port for VXLAN, 47 for GRE, and the
//     outer length;
//   - for VXLAN extended_vni_ingress / _egress (1030/1029) with the VNI;
//   - sflowswitchd_tunnel_samples_total counts them as ok.
//
// goflow2 v2.2.6 keeps these records raw: their bytes are decoded here by
// the spec's layout (sflow_tunnels.txt: a sampled_ipv4 or sampled_ipv6
// structure, or one unsigned int) and must say the same. tshark reads
// every flow sample (the records before them) as ours does.
func TestTunnelRecords(t *testing.T) {
	for _, c := range []struct {
		name string
		tun  netlab.Tunnel
	}{
		{"vxlan-fixed-v4", netlab.Tunnel{Kind: "vxlan", VNI: 5001, Port: 4789}},
		{"vxlan-external-v4", netlab.Tunnel{Kind: "vxlan", VNI: 5002, Port: 4789, External: true}},
		{"vxlan-fixed-v6", netlab.Tunnel{Kind: "vxlan", VNI: 5003, Port: 4789, IPv6: true}},
		{"vxlan-external-v6", netlab.Tunnel{Kind: "vxlan", VNI: 5004, Port: 4789, IPv6: true, External: true}},
		{"gretap-fixed", netlab.Tunnel{Kind: "gretap", VNI: 77}},
		{"gretap-external", netlab.Tunnel{Kind: "gretap", External: true}},
	} {
		t.Run(c.name, func(t *testing.T) { testTunnelRecords(t, c.tun) })
	}
}

func testTunnelRecords(t *testing.T, tun netlab.Tunnel) {
	lab := newLab(t, 1)
	testskip.Feature(t, lab.TunnelKinds(), tun.Kind)
	tun.Name = "sftnvx0"
	lab.AddTunnel(t, &tun)
	port := uint32(lab.LinkIndex(lab.Switch, tun.Name))
	col := listen(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "1", "-ports", tun.Name, "-polling", "0", "-direction", "both")
	d.waitReady(t, lab, tun.Name)
	const k = 10
	lab.PingTunnel(t, &tun, k)
	dgs := col.waitDelivered(t, lab)

	proto, dport, encap := uint32(17), uint32(tun.Port), uint32(16)
	if tun.Kind != "vxlan" {
		proto, dport, encap = 47, 0, 4
		if tun.VNI != 0 {
			encap += 4
		}
	}
	ipHdr := uint32(20)
	if tun.IPv6 {
		ipHdr = 40
	}
	var ours []tunnelRecord
	requests, replies := 0, 0
	for _, dg := range dgs {
		for _, s := range dg.our.Samples {
			fs, ok := s.(*sflow.FlowSample)
			if !ok || fs.Source.Index != port {
				continue
			}
			var hdr *sflow.SampledHeader
			var recs []tunnelRecord
			tunnelSeen := false
			for i, rec := range fs.Records {
				switch v := rec.(type) {
				case *sflow.SampledHeader:
					hdr = v
				case *sflow.ExtendedIPv4TunnelIngress:
					recs = append(recs, v4Record(1024, v.Header))
				case *sflow.ExtendedIPv4TunnelEgress:
					recs = append(recs, v4Record(1023, v.Header))
				case *sflow.ExtendedIPv6TunnelIngress:
					recs = append(recs, v6Record(1026, v.Header))
				case *sflow.ExtendedIPv6TunnelEgress:
					recs = append(recs, v6Record(1025, v.Header))
				case *sflow.ExtendedVNIIngress:
					recs = append(recs, tunnelRecord{format: 1030, vni: v.VNI})
				case *sflow.ExtendedVNIEgress:
					recs = append(recs, tunnelRecord{format: 1029, vni: v.VNI})
				default:
					if tunnelSeen {
						t.Errorf("record %s (%d) after a tunnel record: tshark 4.0 would not reach it", rec.Name(), i)
					}
					continue
				}
				tunnelSeen = true
			}
			if hdr == nil {
				continue
			}
			typ, ok := icmpEcho(hdr.Header)
			if !ok {
				continue
			}
			ours = append(ours, recs...)
			// The outer header as on the wire.
			src, dst := tun.HostOuter, tun.SwitchOuter
			ipFormat, vniFormat := uint32(1024), uint32(1030)
			switch typ {
			case 8:
				requests++
				if fs.Input != sflow.IfIndex(port) {
					t.Errorf("echo request sampled with input %v, want the tunnel device %d", fs.Input, port)
				}
			case 0:
				replies++
				src, dst = dst, src
				ipFormat, vniFormat = 1023, 1029
				if fs.Output != sflow.IfIndex(port) {
					t.Errorf("echo reply sampled with output %v, want the tunnel device %d", fs.Output, port)
				}
			}
			if tun.IPv6 {
				ipFormat += 2
			}
			want := []tunnelRecord{{format: ipFormat, length: hdr.FrameLength - 4 + ipHdr + encap, proto: proto,
				src: src, dst: dst, dport: dport}}
			if tun.Kind == "vxlan" {
				want = append(want, tunnelRecord{format: vniFormat, vni: tun.VNI})
			}
			if fmt.Sprint(recs) != fmt.Sprint(want) {
				t.Errorf("ICMP type %d: tunnel records %v, want %v", typ, recs, want)
			}
		}
	}
	if requests != k || replies != k {
		t.Errorf("%d echo requests and %d replies sampled on the tunnel device, want %d each", requests, replies, k)
	}
	m, err := fetchMetrics(lab)
	if err != nil {
		t.Fatal(err)
	}
	ok, unknown := m.sumWith("sflowswitchd_tunnel_samples_total", `result="ok"`, ""), m.sumWith("sflowswitchd_tunnel_samples_total", `result="outer_unknown"`, "")
	if ok < 2*k || unknown != 0 {
		t.Errorf("sflowswitchd_tunnel_samples_total: ok %d (want at least %d), outer_unknown %d (want 0)", ok, 2*k, unknown)
	}

	// goflow2: the same records, from their raw bytes.
	var gf []tunnelRecord
	for _, dg := range dgs {
		for _, s := range dg.gf.Samples {
			fs, ok := s.(goflow.FlowSample)
			if !ok || fs.Header.SourceIdValue != port {
				continue
			}
			var recs []tunnelRecord
			echo := false
			for _, rec := range fs.Records {
				switch v := rec.Data.(type) {
				case goflow.SampledHeader:
					_, echo = icmpEcho(v.HeaderData)
				case goflow.RawRecord:
					r, err := decodeTunnelRaw(rec.Header.DataFormat, v.Data)
					if err != nil {
						t.Errorf("goflow2 raw record %d: %v", rec.Header.DataFormat, err)
						continue
					}
					recs = append(recs, r)
				}
			}
			if echo {
				gf = append(gf, recs...)
			}
		}
	}
	if fmt.Sprint(gf) != fmt.Sprint(ours) {
		t.Errorf("goflow2 reads tunnel records\n%v\nours\n%v", gf, ours)
	}

	// tshark reads every flow sample of the device (it does not know the
	// tunnel records, which come last).
	const fIdx = "sflow.flow_sample.index"
	nOurs := 0
	for _, dg := range dgs {
		for _, s := range dg.our.Samples {
			if fs, ok := s.(*sflow.FlowSample); ok && fs.Source.Index == port {
				nOurs++
			}
		}
	}
	nTS := 0
	for _, r := range tsharkFields(t, dgs, collectorPort, fIdx) {
		for _, v := range r[fIdx] {
			if v == fmt.Sprint(port) {
				nTS++
			}
		}
	}
	if nTS != nOurs {
		t.Errorf("tshark reads %d flow samples of the tunnel device, our decoder %d", nTS, nOurs)
	}
	t.Logf("%d echo requests, %d replies; e.g. %v", requests, replies, firstN(ours, 4))
}

func firstN[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func v4Record(format uint32, h sflow.SampledIPv4) tunnelRecord {
	return tunnelRecord{format: format, length: h.Length, proto: h.Protocol, src: h.SrcIP, dst: h.DstIP,
		sport: h.SrcPort, dport: h.DstPort, tos: h.TOS}
}

func v6Record(format uint32, h sflow.SampledIPv6) tunnelRecord {
	return tunnelRecord{format: format, length: h.Length, proto: h.Protocol, src: h.SrcIP, dst: h.DstIP,
		sport: h.SrcPort, dport: h.DstPort, tos: h.Priority}
}

// decodeTunnelRaw decodes a tunnel record's XDR bytes by the layouts of
// sflow_tunnels.txt (and hsflowd's sflow.h, sflowtool's readFlowSample_IPv4
// / _IPv6 / readExtendedVNI), independently of package sflow:
//
//	1023/1024: sampled_ipv4 { length, protocol, src_ip (4), dst_ip (4),
//	           src_port, dst_port, tcp_flags, tos }        32 bytes
//	1025/1026: sampled_ipv6 { length, protocol, src_ip (16), dst_ip (16),
//	           src_port, dst_port, tcp_flags, priority }   56 bytes
//	1029/1030: unsigned int vni                            4 bytes
func decodeTunnelRaw(format uint32, b []byte) (tunnelRecord, error) {
	u := func(off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }
	r := tunnelRecord{format: format}
	switch format {
	case 1023, 1024:
		if len(b) != 32 {
			return r, fmt.Errorf("%d bytes, want 32", len(b))
		}
		r.length, r.proto = u(0), u(4)
		r.src, r.dst = netip.AddrFrom4([4]byte(b[8:12])), netip.AddrFrom4([4]byte(b[12:16]))
		r.sport, r.dport, r.tos = u(16), u(20), u(28)
	case 1025, 1026:
		if len(b) != 56 {
			return r, fmt.Errorf("%d bytes, want 56", len(b))
		}
		r.length, r.proto = u(0), u(4)
		r.src, r.dst = netip.AddrFrom16([16]byte(b[8:24])), netip.AddrFrom16([16]byte(b[24:40]))
		r.sport, r.dport, r.tos = u(40), u(44), u(52)
	case 1029, 1030:
		if len(b) != 4 {
			return r, fmt.Errorf("%d bytes, want 4", len(b))
		}
		r.vni = u(0)
	default:
		return r, fmt.Errorf("not a tunnel record")
	}
	return r, nil
}

// icmpEcho is the ICMP type of an Ethernet frame carrying an IPv4 echo
// request (8) or reply (0).
func icmpEcho(h []byte) (uint8, bool) {
	if len(h) < 14+20+1 || h[12] != 0x08 || h[13] != 0x00 || h[14]>>4 != 4 || h[23] != 1 {
		return 0, false
	}
	typ := h[14+int(h[14]&0xf)*4]
	return typ, typ == 0 || typ == 8
}
