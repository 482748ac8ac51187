package sflow

import (
	"fmt"
	"net/netip"
)

// Flow record formats of the core switch structures
// (spec/sflow_version_5.txt, "Flow Data Types" and "Extended Flow Data").
var (
	FormatSampledHeader   = Format(0, 1)
	FormatSampledEthernet = Format(0, 2)
	FormatSampledIPv4     = Format(0, 3)
	FormatSampledIPv6     = Format(0, 4)
	FormatExtendedSwitch  = Format(0, 1001)
	FormatExtendedRouter  = Format(0, 1002)
	FormatExtendedGateway = Format(0, 1003)
)

func init() {
	registerFlow(FormatSampledHeader, "sampled_header", decodeSampledHeader)
	registerFlow(FormatSampledEthernet, "sampled_ethernet", decodeSampledEthernet)
	registerFlow(FormatSampledIPv4, "sampled_ipv4", decodeSampledIPv4)
	registerFlow(FormatSampledIPv6, "sampled_ipv6", decodeSampledIPv6)
	registerFlow(FormatExtendedSwitch, "extended_switch", decodeExtendedSwitch)
	registerFlow(FormatExtendedRouter, "extended_router", decodeExtendedRouter)
	registerFlow(FormatExtendedGateway, "extended_gateway", decodeExtendedGateway)
}

// HeaderProtocol is the spec's header_protocol enumeration: the format of
// the bytes in a sampled_header. The list may grow (spec "Packet Header
// Data"), so values outside these constants are carried unchanged.
type HeaderProtocol uint32

// header_protocol values (spec "enum header_protocol").
const (
	HeaderProtocolEthernet   HeaderProtocol = 1  // ETHERNET-ISO88023
	HeaderProtocolTokenBus   HeaderProtocol = 2  // ISO88024-TOKENBUS
	HeaderProtocolTokenRing  HeaderProtocol = 3  // ISO88025-TOKENRING
	HeaderProtocolFDDI       HeaderProtocol = 4  // FDDI
	HeaderProtocolFrameRelay HeaderProtocol = 5  // FRAME-RELAY
	HeaderProtocolX25        HeaderProtocol = 6  // X25
	HeaderProtocolPPP        HeaderProtocol = 7  // PPP
	HeaderProtocolSMDS       HeaderProtocol = 8  // SMDS
	HeaderProtocolAAL5       HeaderProtocol = 9  // AAL5
	HeaderProtocolAAL5IP     HeaderProtocol = 10 // AAL5-IP, e.g. Cisco AAL5 mux
	HeaderProtocolIPv4       HeaderProtocol = 11 // IPv4
	HeaderProtocolIPv6       HeaderProtocol = 12 // IPv6
	HeaderProtocolMPLS       HeaderProtocol = 13 // MPLS
	HeaderProtocolPOS        HeaderProtocol = 14 // POS (RFC 1662, 2615)
)

// SampledHeader is sampled_header (flow format 1): the leading bytes of
// the sampled packet.
type SampledHeader struct {
	// Protocol is the format of Header.
	Protocol HeaderProtocol `json:"protocol"`
	// FrameLength is the packet's original length; for a layer-2 protocol
	// the octets received on the wire including the FCS.
	FrameLength uint32 `json:"frame_length"`
	// Stripped is the number of octets removed before Header was taken
	// (at least 4 for an untagged 802.3 frame: the FCS).
	Stripped uint32 `json:"stripped"`
	// Header holds the header bytes. The spec puts no maximum on
	// header<> (sFlow v5 change log: "Remove limit on packet header
	// size"); the sampler truncates to sFlowFsMaximumHeaderSize, and the
	// encoder writes exactly what it is given.
	Header []byte `json:"header"`
}

// Format implements Record.
func (*SampledHeader) Format() DataFormat { return FormatSampledHeader }

// Name implements Record.
func (*SampledHeader) Name() string { return "sampled_header" }

// AppendXDR implements Record.
func (h *SampledHeader) AppendXDR(b []byte) []byte {
	b = appendUint32(b, uint32(h.Protocol))
	b = appendUint32(b, h.FrameLength)
	b = appendUint32(b, h.Stripped)
	return appendOpaque(b, h.Header, 0)
}

func decodeSampledHeader(r *reader) Record {
	h := &SampledHeader{}
	h.Protocol = HeaderProtocol(r.uint32())
	h.FrameLength = r.uint32()
	h.Stripped = r.uint32()
	h.Header = append([]byte(nil), r.opaque(0)...)
	return h
}

// SampledEthernet is sampled_ethernet (flow format 2): Ethernet frame
// data, for samplers that do not have the header bytes.
type SampledEthernet struct {
	// Length is the MAC packet length including the FCS, excluding
	// lower-layer encapsulations and framing bits.
	Length uint32  `json:"length"`
	SrcMAC [6]byte `json:"src_mac"`
	DstMAC [6]byte `json:"dst_mac"`
	// Type is the Ethernet packet type (EtherType).
	Type uint32 `json:"type"`
}

// Format implements Record.
func (*SampledEthernet) Format() DataFormat { return FormatSampledEthernet }

// Name implements Record.
func (*SampledEthernet) Name() string { return "sampled_ethernet" }

// AppendXDR implements Record.
func (e *SampledEthernet) AppendXDR(b []byte) []byte {
	b = appendUint32(b, e.Length)
	b = appendMAC(b, e.SrcMAC)
	b = appendMAC(b, e.DstMAC)
	return appendUint32(b, e.Type)
}

func decodeSampledEthernet(r *reader) Record {
	e := &SampledEthernet{}
	e.Length = r.uint32()
	e.SrcMAC = r.mac()
	e.DstMAC = r.mac()
	e.Type = r.uint32()
	return e
}

// SampledIPv4 is sampled_ipv4 (flow format 3). Unknown integers are 0 and
// an unknown (invalid) address encodes as 0.0.0.0 (spec "Enterprise = 0",
// unknown values).
type SampledIPv4 struct {
	// Length is the IP packet length excluding lower-layer encapsulations.
	Length uint32 `json:"length"`
	// Protocol is the IP protocol (TCP = 6, UDP = 17).
	Protocol uint32     `json:"protocol"`
	SrcIP    netip.Addr `json:"src_ip"`
	DstIP    netip.Addr `json:"dst_ip"`
	SrcPort  uint32     `json:"src_port"`
	DstPort  uint32     `json:"dst_port"`
	TCPFlags uint32     `json:"tcp_flags"`
	// TOS is the IP type of service byte.
	TOS uint32 `json:"tos"`
}

// Format implements Record.
func (*SampledIPv4) Format() DataFormat { return FormatSampledIPv4 }

// Name implements Record.
func (*SampledIPv4) Name() string { return "sampled_ipv4" }

// AppendXDR implements Record.
func (s *SampledIPv4) AppendXDR(b []byte) []byte {
	b = appendUint32(b, s.Length)
	b = appendUint32(b, s.Protocol)
	b = appendIPv4(b, s.SrcIP)
	b = appendIPv4(b, s.DstIP)
	b = appendUint32(b, s.SrcPort)
	b = appendUint32(b, s.DstPort)
	b = appendUint32(b, s.TCPFlags)
	return appendUint32(b, s.TOS)
}

func decodeSampledIPv4(r *reader) Record {
	s := &SampledIPv4{}
	s.Length = r.uint32()
	s.Protocol = r.uint32()
	s.SrcIP = r.ipv4()
	s.DstIP = r.ipv4()
	s.SrcPort = r.uint32()
	s.DstPort = r.uint32()
	s.TCPFlags = r.uint32()
	s.TOS = r.uint32()
	return s
}

// SampledIPv6 is sampled_ipv6 (flow format 4). Unknown integers are 0 and
// an unknown (invalid) address encodes as ::.
type SampledIPv6 struct {
	// Length is the IP packet length excluding lower-layer encapsulations.
	Length uint32 `json:"length"`
	// Protocol is the IPv6 next header (TCP = 6, UDP = 17).
	Protocol uint32     `json:"protocol"`
	SrcIP    netip.Addr `json:"src_ip"`
	DstIP    netip.Addr `json:"dst_ip"`
	SrcPort  uint32     `json:"src_port"`
	DstPort  uint32     `json:"dst_port"`
	TCPFlags uint32     `json:"tcp_flags"`
	// Priority is the IP priority (traffic class).
	Priority uint32 `json:"priority"`
}

// Format implements Record.
func (*SampledIPv6) Format() DataFormat { return FormatSampledIPv6 }

// Name implements Record.
func (*SampledIPv6) Name() string { return "sampled_ipv6" }

// AppendXDR implements Record.
func (s *SampledIPv6) AppendXDR(b []byte) []byte {
	b = appendUint32(b, s.Length)
	b = appendUint32(b, s.Protocol)
	b = appendIPv6(b, s.SrcIP)
	b = appendIPv6(b, s.DstIP)
	b = appendUint32(b, s.SrcPort)
	b = appendUint32(b, s.DstPort)
	b = appendUint32(b, s.TCPFlags)
	return appendUint32(b, s.Priority)
}

func decodeSampledIPv6(r *reader) Record {
	s := &SampledIPv6{}
	s.Length = r.uint32()
	s.Protocol = r.uint32()
	s.SrcIP = r.ipv6()
	s.DstIP = r.ipv6()
	s.SrcPort = r.uint32()
	s.DstPort = r.uint32()
	s.TCPFlags = r.uint32()
	s.Priority = r.uint32()
	return s
}

// ExtendedSwitch is extended_switch (flow format 1001): 802.1Q VLAN and
// 802.1p priority of the frame on ingress and egress. For untagged ports
// the port's VLAN and priority are reported (spec note on format 1001);
// 0 means unknown.
type ExtendedSwitch struct {
	SrcVLAN     uint32 `json:"src_vlan"`
	SrcPriority uint32 `json:"src_priority"`
	DstVLAN     uint32 `json:"dst_vlan"`
	DstPriority uint32 `json:"dst_priority"`
}

// Format implements Record.
func (*ExtendedSwitch) Format() DataFormat { return FormatExtendedSwitch }

// Name implements Record.
func (*ExtendedSwitch) Name() string { return "extended_switch" }

// AppendXDR implements Record.
func (s *ExtendedSwitch) AppendXDR(b []byte) []byte {
	b = appendUint32(b, s.SrcVLAN)
	b = appendUint32(b, s.SrcPriority)
	b = appendUint32(b, s.DstVLAN)
	return appendUint32(b, s.DstPriority)
}

func decodeExtendedSwitch(r *reader) Record {
	s := &ExtendedSwitch{}
	s.SrcVLAN = r.uint32()
	s.SrcPriority = r.uint32()
	s.DstVLAN = r.uint32()
	s.DstPriority = r.uint32()
	return s
}

// ExtendedRouter is extended_router (flow format 1002): the routing
// decision for the sampled packet. The layout is the spec's, hsflowd's
// sflow.h SFLExtended_router and sflowtool's readExtendedRouter: an
// address union (type 1 + 4 bytes, type 2 + 16 bytes) and two unsigned
// ints.
type ExtendedRouter struct {
	// NextHop is the route's next hop (ipForwardNextHop /
	// ipv6RouteNextHop): an IPv4 address is sent as IP_V4, any other
	// valid address (IPv4-mapped IPv6 included; Unmap it to send IP_V4)
	// as IP_V6, the zone dropped. The zero Addr encodes as the spec's
	// UNKNOWN address type (type 0, no address bytes), but independent
	// decoders do not accept it: sflowtool 6.11 abandons the whole
	// datagram ("unknown address type = 0") and goflow2 v2.2.6 rejects
	// it; hsflowd writes type 0 followed by 4 bytes. For a route without
	// a gateway (directly connected), send the unspecified address of the
	// packet's family (0.0.0.0 or ::) or no extended_router at all.
	NextHop netip.Addr `json:"nexthop"`
	// SrcMaskLen and DstMaskLen are the prefix lengths, in bits, of the
	// routes matching the source and the destination. The spec has no
	// "unknown" value for them: 0 is a /0 (default) route.
	SrcMaskLen uint32 `json:"src_mask_len"`
	DstMaskLen uint32 `json:"dst_mask_len"`
}

// Format implements Record.
func (*ExtendedRouter) Format() DataFormat { return FormatExtendedRouter }

// Name implements Record.
func (*ExtendedRouter) Name() string { return "extended_router" }

// AppendXDR implements Record.
func (e *ExtendedRouter) AppendXDR(b []byte) []byte {
	b = appendAddress(b, e.NextHop)
	b = appendUint32(b, e.SrcMaskLen)
	return appendUint32(b, e.DstMaskLen)
}

func decodeExtendedRouter(r *reader) Record {
	e := &ExtendedRouter{}
	e.NextHop = r.address()
	e.SrcMaskLen = r.uint32()
	e.DstMaskLen = r.uint32()
	return e
}

// ASPathSegmentType is the spec's as_path_segment_type.
type ASPathSegmentType uint32

// as_path_segment_type values (spec "enum as_path_segment_type").
const (
	ASSet      ASPathSegmentType = 1 // unordered set of ASs
	ASSequence ASPathSegmentType = 2 // ordered set of ASs
)

// ASPathSegment is one as_path_type union value: a segment type and its
// AS numbers. Both arms of the union are unsigned int<>, so the encoding
// is the type followed by the array.
type ASPathSegment struct {
	Type ASPathSegmentType `json:"type"`
	ASNs []uint32          `json:"asns"`
}

// ExtendedGateway is extended_gateway (flow format 1003): BGP routing
// information for the sampled packet's destination.
type ExtendedGateway struct {
	// NextHop is the border router to use for the destination network;
	// the zero Addr encodes as the UNKNOWN address type, which other
	// decoders reject (see ExtendedRouter.NextHop).
	NextHop netip.Addr `json:"nexthop"`
	// AS is the router's own AS number, SrcAS and SrcPeerAS those of the
	// source and its peer; 0 means unknown.
	AS        uint32          `json:"as"`
	SrcAS     uint32          `json:"src_as"`
	SrcPeerAS uint32          `json:"src_peer_as"`
	DstASPath []ASPathSegment `json:"dst_as_path"`
	// Communities are the BGP communities of the route.
	Communities []uint32 `json:"communities"`
	LocalPref   uint32   `json:"localpref"`
}

// Format implements Record.
func (*ExtendedGateway) Format() DataFormat { return FormatExtendedGateway }

// Name implements Record.
func (*ExtendedGateway) Name() string { return "extended_gateway" }

// AppendXDR implements Record.
func (g *ExtendedGateway) AppendXDR(b []byte) []byte {
	b = appendAddress(b, g.NextHop)
	b = appendUint32(b, g.AS)
	b = appendUint32(b, g.SrcAS)
	b = appendUint32(b, g.SrcPeerAS)
	b = appendUint32(b, uint32(len(g.DstASPath)))
	for i := range g.DstASPath {
		seg := &g.DstASPath[i]
		b = appendUint32(b, uint32(seg.Type))
		b = appendGatewayArray(b, seg.ASNs)
	}
	b = appendGatewayArray(b, g.Communities)
	return appendUint32(b, g.LocalPref)
}

// appendGatewayArray appends an XDR unsigned int<>: a count and the values.
func appendGatewayArray(b []byte, v []uint32) []byte {
	b = appendUint32(b, uint32(len(v)))
	for _, x := range v {
		b = appendUint32(b, x)
	}
	return b
}

// decodeGatewayArray reads an XDR unsigned int<>.
func decodeGatewayArray(r *reader) []uint32 {
	n := r.count(4)
	if r.err != nil || n == 0 {
		return nil
	}
	v := make([]uint32, n)
	for i := range v {
		v[i] = r.uint32()
	}
	return v
}

func decodeExtendedGateway(r *reader) Record {
	g := &ExtendedGateway{}
	g.NextHop = r.address()
	g.AS = r.uint32()
	g.SrcAS = r.uint32()
	g.SrcPeerAS = r.uint32()
	// Each segment takes at least its type and its count: 8 bytes.
	if n := r.count(8); n > 0 {
		g.DstASPath = make([]ASPathSegment, n)
		for i := range g.DstASPath {
			start := r.off
			t := ASPathSegmentType(r.uint32())
			if r.err == nil && t != ASSet && t != ASSequence {
				// The union as_path_type has no default arm: another
				// discriminant is not valid XDR for it.
				r.failAt(start, fmt.Errorf("%w: as_path_segment_type %d", ErrBadValue, t))
			}
			g.DstASPath[i] = ASPathSegment{Type: t, ASNs: decodeGatewayArray(r)}
		}
	}
	g.Communities = decodeGatewayArray(r)
	g.LocalPref = r.uint32()
	return g
}
