package sflow

// Tunnel flow records (sFlow Tunnel Structures, sflow.org/sflow_tunnels.txt,
// November 2012; numbers in the sflow.org structure registry,
// sflow.org/developers/structures.php). A tunnel end point describes the
// outer header it removed from the sampled packet on ingress
// (decapsulation) or added to it on egress (encapsulation); the
// sampled_header record keeps describing the packet as the data source saw
// it. hsflowd's sflow.h (github.com/sflow/host-sflow, src/sflow/sflow.h)
// declares the IP tunnel records as a SFLSampled_ipv4 / SFLSampled_ipv6
// "header" and the VNI records as one uint32, and sflow_receiver.c encodes
// them with the sampled_ipv4 / sampled_ipv6 encoder; sflowtool
// (github.com/sflow/sflowtool, src/sflowtool.c) reads them with
// readFlowSample_IPv4 / readFlowSample_IPv6 and readExtendedVNI. Neither
// adds anything around the embedded structure.
var (
	FormatExtendedIPv4TunnelEgress  = Format(0, 1023)
	FormatExtendedIPv4TunnelIngress = Format(0, 1024)
	FormatExtendedIPv6TunnelEgress  = Format(0, 1025)
	FormatExtendedIPv6TunnelIngress = Format(0, 1026)
	FormatExtendedVNIEgress         = Format(0, 1029)
	FormatExtendedVNIIngress        = Format(0, 1030)
)

func init() {
	registerFlow(FormatExtendedIPv4TunnelEgress, "extended_ipv4_tunnel_egress", decodeExtendedIPv4TunnelEgress)
	registerFlow(FormatExtendedIPv4TunnelIngress, "extended_ipv4_tunnel_ingress", decodeExtendedIPv4TunnelIngress)
	registerFlow(FormatExtendedIPv6TunnelEgress, "extended_ipv6_tunnel_egress", decodeExtendedIPv6TunnelEgress)
	registerFlow(FormatExtendedIPv6TunnelIngress, "extended_ipv6_tunnel_ingress", decodeExtendedIPv6TunnelIngress)
	registerFlow(FormatExtendedVNIEgress, "extended_vni_egress", decodeExtendedVNIEgress)
	registerFlow(FormatExtendedVNIIngress, "extended_vni_ingress", decodeExtendedVNIIngress)
}

// ExtendedIPv4TunnelEgress is extended_ipv4_tunnel_egress (flow format
// 1023): the outer IPv4 header the device added on egress (encapsulation).
// Header holds the outer header's fields as a sampled_ipv4: its length,
// protocol (17 for VXLAN, 47 for GRE), addresses, the outer UDP ports (0
// when the protocol has none) and TOS.
type ExtendedIPv4TunnelEgress struct {
	Header SampledIPv4 `json:"header"`
}

// Format implements Record.
func (*ExtendedIPv4TunnelEgress) Format() DataFormat { return FormatExtendedIPv4TunnelEgress }

// Name implements Record.
func (*ExtendedIPv4TunnelEgress) Name() string { return "extended_ipv4_tunnel_egress" }

// AppendXDR implements Record.
func (t *ExtendedIPv4TunnelEgress) AppendXDR(b []byte) []byte { return t.Header.AppendXDR(b) }

func decodeExtendedIPv4TunnelEgress(r *reader) Record {
	return &ExtendedIPv4TunnelEgress{Header: *decodeSampledIPv4(r).(*SampledIPv4)}
}

// ExtendedIPv4TunnelIngress is extended_ipv4_tunnel_ingress (flow format
// 1024): the outer IPv4 header the device removed on ingress
// (decapsulation), as a sampled_ipv4 (see ExtendedIPv4TunnelEgress).
type ExtendedIPv4TunnelIngress struct {
	Header SampledIPv4 `json:"header"`
}

// Format implements Record.
func (*ExtendedIPv4TunnelIngress) Format() DataFormat { return FormatExtendedIPv4TunnelIngress }

// Name implements Record.
func (*ExtendedIPv4TunnelIngress) Name() string { return "extended_ipv4_tunnel_ingress" }

// AppendXDR implements Record.
func (t *ExtendedIPv4TunnelIngress) AppendXDR(b []byte) []byte { return t.Header.AppendXDR(b) }

func decodeExtendedIPv4TunnelIngress(r *reader) Record {
	return &ExtendedIPv4TunnelIngress{Header: *decodeSampledIPv4(r).(*SampledIPv4)}
}

// ExtendedIPv6TunnelEgress is extended_ipv6_tunnel_egress (flow format
// 1025): the outer IPv6 header the device added on egress, as a
// sampled_ipv6 (length, next header, addresses, outer ports, priority).
type ExtendedIPv6TunnelEgress struct {
	Header SampledIPv6 `json:"header"`
}

// Format implements Record.
func (*ExtendedIPv6TunnelEgress) Format() DataFormat { return FormatExtendedIPv6TunnelEgress }

// Name implements Record.
func (*ExtendedIPv6TunnelEgress) Name() string { return "extended_ipv6_tunnel_egress" }

// AppendXDR implements Record.
func (t *ExtendedIPv6TunnelEgress) AppendXDR(b []byte) []byte { return t.Header.AppendXDR(b) }

func decodeExtendedIPv6TunnelEgress(r *reader) Record {
	return &ExtendedIPv6TunnelEgress{Header: *decodeSampledIPv6(r).(*SampledIPv6)}
}

// ExtendedIPv6TunnelIngress is extended_ipv6_tunnel_ingress (flow format
// 1026): the outer IPv6 header the device removed on ingress, as a
// sampled_ipv6.
type ExtendedIPv6TunnelIngress struct {
	Header SampledIPv6 `json:"header"`
}

// Format implements Record.
func (*ExtendedIPv6TunnelIngress) Format() DataFormat { return FormatExtendedIPv6TunnelIngress }

// Name implements Record.
func (*ExtendedIPv6TunnelIngress) Name() string { return "extended_ipv6_tunnel_ingress" }

// AppendXDR implements Record.
func (t *ExtendedIPv6TunnelIngress) AppendXDR(b []byte) []byte { return t.Header.AppendXDR(b) }

func decodeExtendedIPv6TunnelIngress(r *reader) Record {
	return &ExtendedIPv6TunnelIngress{Header: *decodeSampledIPv6(r).(*SampledIPv6)}
}

// ExtendedVNIEgress is extended_vni_egress (flow format 1029): the virtual
// network identifier of the tunnel the packet leaves by, e.g. the VXLAN
// VNI (24 bits, carried in an unsigned int).
type ExtendedVNIEgress struct {
	VNI uint32 `json:"vni"`
}

// Format implements Record.
func (*ExtendedVNIEgress) Format() DataFormat { return FormatExtendedVNIEgress }

// Name implements Record.
func (*ExtendedVNIEgress) Name() string { return "extended_vni_egress" }

// AppendXDR implements Record.
func (v *ExtendedVNIEgress) AppendXDR(b []byte) []byte { return appendUint32(b, v.VNI) }

func decodeExtendedVNIEgress(r *reader) Record { return &ExtendedVNIEgress{VNI: r.uint32()} }

// ExtendedVNIIngress is extended_vni_ingress (flow format 1030): the
// virtual network identifier of the tunnel the packet arrived by.
type ExtendedVNIIngress struct {
	VNI uint32 `json:"vni"`
}

// Format implements Record.
func (*ExtendedVNIIngress) Format() DataFormat { return FormatExtendedVNIIngress }

// Name implements Record.
func (*ExtendedVNIIngress) Name() string { return "extended_vni_ingress" }

// AppendXDR implements Record.
func (v *ExtendedVNIIngress) AppendXDR(b []byte) []byte { return appendUint32(b, v.VNI) }

func decodeExtendedVNIIngress(r *reader) Record { return &ExtendedVNIIngress{VNI: r.uint32()} }
