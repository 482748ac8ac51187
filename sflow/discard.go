package sflow

import "strconv"

// FormatDiscardedPacket is the discarded_packet sample (enterprise 0,
// format 5; docs/spec/sflow_drops.md "The sample"). It has a single form:
// the data source is always written as two words (sflow_data_source_
// expanded) and the interfaces as plain ifIndex words.
var FormatDiscardedPacket = Format(0, 5)

// Flow records carried by discarded_packet samples (sflow_drops.md
// "Records used with it"). extended_egress_queue (1036), also used in flow
// samples, is in flow_transit.go.
var (
	FormatExtendedFunction        = Format(0, 1038)
	FormatExtendedLinuxDropReason = Format(0, 1042)
)

// MaxDropStringLen is the longest symbol or reason string the reference
// decoder accepts (sflow_drops.md: "the decoder caps symbol, trap and
// reason at 64 bytes"). The encoder truncates to it and the decoder
// rejects longer strings.
const MaxDropStringLen = 64

func init() {
	registerFlow(FormatExtendedFunction, "extended_function", decodeExtendedFunction)
	registerFlow(FormatExtendedLinuxDropReason, "extended_linux_drop_reason", decodeExtendedLinuxDropReason)
}

// DropReason is the drop_reason enumeration of a discarded_packet:
// 0-15 ICMP unreachable codes, 256 and up device reasons.
type DropReason uint32

// The drop reasons this project emits by name; every code of the spec
// has a name in dropReasonNames.
const (
	DropPortUnreachable DropReason = 3
	DropDstHostUnknown  DropReason = 7
	DropUnknown         DropReason = 256
	DropTTLExceeded     DropReason = 257
	DropACL             DropReason = 258
	DropNoBufferSpace   DropReason = 259
	DropTrafficShaping  DropReason = 261
	DropIPHeaderCorrupt DropReason = 275
	DropUnresolvedNeigh DropReason = 279
	DropIP1Parsing      DropReason = 313
	DropUDPParsing      DropReason = 316
	DropTCPParsing      DropReason = 317
)

// dropReasonNames lists the spec's names, ICMP codes first (index = code)
// and device reasons from 256 on (index = code-256), in sflow_drops.md
// "drop_reason codes" order.
var (
	dropReasonICMP = [...]string{"net_unreachable", "host_unreachable", "protocol_unreachable", "port_unreachable",
		"frag_needed", "src_route_failed", "dst_net_unknown", "dst_host_unknown", "src_host_isolated",
		"dst_net_prohibited", "dst_host_prohibited", "dst_net_tos_unreachable", "dst_host_tos_unreacheable",
		"comm_admin_prohibited", "host_precedence_violation", "precedence_cutoff"}
	dropReasonDevice = [...]string{"unknown", "ttl_exceeded", "acl", "no_buffer_space", "red", "traffic_shaping",
		"pkt_too_big", "src_mac_is_multicast", "vlan_tag_mismatch", "ingress_vlan_filter",
		"ingress_spanning_tree_filter", "port_list_is_empty", "port_loopback_filter", "blackhole_route", "non_ip",
		"uc_dip_over_mc_dmac", "dip_is_loopback_address", "sip_is_mc", "sip_is_loopback_address",
		"ip_header_corrupted", "ipv4_sip_is_limited_bc", "ipv6_mc_dip_reserved_scope",
		"ipv6_mc_dip_interface_local_scope", "unresolved_neigh", "mc_reverse_path_forwarding",
		"non_routable_packet", "decap_error", "overlay_smac_is_mc", "unknown_l2", "unknown_l3",
		"unknown_l3_exception", "unknown_buffer", "unknown_tunnel", "unknown_l4", "sip_is_unspecified",
		"mlag_port_isolation", "blackhole_arp_neigh", "src_mac_is_dmac", "dmac_is_reserved", "sip_is_class_e",
		"mc_dmac_mismatch", "sip_is_dip", "dip_is_local_network", "dip_is_link_local", "overlay_smac_is_dmac",
		"egress_vlan_filter", "uc_reverse_path_forwarding", "split_horizon", "locked_port", "dmac_filter",
		"blackhole_nexthop", "vxlan_parsing", "llc_snap_parsing", "vlan_parsing", "pppoe_ppp_parsing",
		"mpls_parsing", "arp_parsing", "ip_1_parsing", "ip_n_parsing", "gre_parsing", "udp_parsing",
		"tcp_parsing", "ipsec_parsing", "sctp_parsing", "dccp_parsing", "gtp_parsing", "esp_parsing",
		"unknown_parsing", "pkt_too_small", "unhandled_proto", "ipv6disabled", "invalid_proto", "ip_noproto",
		"skb_csum", "skb_ucopy_fault", "dev_ready", "dev_hdr", "dup_frag", "skb_gso_seg",
		"reverse_path_forwarding", "icmp_parsing", "tcp_md5notfound", "tcp_md5unexpected", "tcp_md5failure",
		"tcp_flags", "tcp_zerowindow", "tcp_old_data", "tcp_overwindow", "tcp_ofomerge", "tcp_rfc7323_paws",
		"tcp_invalid_sequence", "tcp_reset", "tcp_invalid_syn", "tcp_close", "tcp_fastopen", "tcp_old_ack",
		"tcp_too_old_ack", "tcp_ack_unsent_data", "tcp_ofo_queue_prune", "tcp_ofo_drop", "tcp_minttl",
		"ipv6_bad_exthdr", "ipv6_ndisc_frag", "ipv6_ndisc_hop_limit", "ipv6_ndisc_bad_code",
		"ipv6_ndisc_bad_options", "ipv6_ndisc_ns_otherhost", "tap_filter", "tap_txfilter", "tc_ingress",
		"tc_egress", "xdp", "cpu_backlog", "bpf_cgroup_egress", "xfrm_policy", "socket_filter", "bgp_flowspec"}
)

// String returns the spec's name of the reason, or its number for a code
// the spec does not define.
func (r DropReason) String() string {
	switch {
	case int(r) < len(dropReasonICMP):
		return dropReasonICMP[r]
	case r >= 256 && int(r-256) < len(dropReasonDevice):
		return dropReasonDevice[r-256]
	}
	return strconv.FormatUint(uint64(r), 10)
}

// DropReasonByName returns the code of a spec reason name.
func DropReasonByName(name string) (DropReason, bool) {
	for i, n := range dropReasonICMP {
		if n == name {
			return DropReason(i), true
		}
	}
	for i, n := range dropReasonDevice {
		if n == name {
			return DropReason(256 + i), true
		}
	}
	return 0, false
}

// DiscardedPacket is a discarded_packet sample (format 5): one dropped
// packet, where and why (sflow_drops.md "The sample").
type DiscardedPacket struct {
	// SequenceNumber is incremented for each discarded_packet of Source.
	SequenceNumber uint32
	// Source is the data source; the host agent uses 0:0 (the device).
	Source DataSource
	// Drops is the total number of notifications lost to the rate limit or
	// to lack of resources since the agent started.
	Drops uint32
	// Input is the ifIndex the packet was received on, 0 if unknown.
	Input uint32
	// Output is the ifIndex of the port for egress drops, 0 otherwise.
	Output uint32
	Reason DropReason
	// Records are flow records: sampled_header first, then extended_function,
	// extended_linux_drop_reason, extended_egress_queue and others.
	Records []Record
}

// SampleFormat implements Sample.
func (*DiscardedPacket) SampleFormat() DataFormat { return FormatDiscardedPacket }

func (s *DiscardedPacket) appendBody(b []byte) []byte {
	b = appendUint32(b, s.SequenceNumber)
	b = s.Source.appendXDR(b, true)
	b = appendUint32(b, s.Drops)
	b = appendUint32(b, s.Input)
	b = appendUint32(b, s.Output)
	b = appendUint32(b, uint32(s.Reason))
	return appendRecords(b, s.Records)
}

// decodeDiscardedPacket reads a discarded_packet body.
func decodeDiscardedPacket(r *reader) *DiscardedPacket {
	s := &DiscardedPacket{}
	s.SequenceNumber = r.uint32()
	s.Source = decodeDataSource(r, true)
	s.Drops = r.uint32()
	s.Input = r.uint32()
	s.Output = r.uint32()
	s.Reason = DropReason(r.uint32())
	s.Records = decodeRecords(r, flowRecords)
	return s
}

// ExtendedFunction is extended_function (flow format 1038): the software
// function that dropped the packet (the kernel symbol of the kfree_skb
// location).
type ExtendedFunction struct {
	// Symbol is at most MaxDropStringLen bytes on the wire.
	Symbol string `json:"symbol"`
}

// Format implements Record.
func (*ExtendedFunction) Format() DataFormat { return FormatExtendedFunction }

// Name implements Record.
func (*ExtendedFunction) Name() string { return "extended_function" }

// AppendXDR implements Record.
func (f *ExtendedFunction) AppendXDR(b []byte) []byte {
	return appendString(b, f.Symbol, MaxDropStringLen)
}

func decodeExtendedFunction(r *reader) Record {
	return &ExtendedFunction{Symbol: r.string(MaxDropStringLen)}
}

// ExtendedLinuxDropReason is extended_linux_drop_reason (flow format
// 1042): the kernel's drop reason name without the SKB_DROP_REASON_
// prefix, e.g. "NETFILTER_DROP".
type ExtendedLinuxDropReason struct {
	// Reason is at most MaxDropStringLen bytes on the wire.
	Reason string `json:"reason"`
}

// Format implements Record.
func (*ExtendedLinuxDropReason) Format() DataFormat { return FormatExtendedLinuxDropReason }

// Name implements Record.
func (*ExtendedLinuxDropReason) Name() string { return "extended_linux_drop_reason" }

// AppendXDR implements Record.
func (l *ExtendedLinuxDropReason) AppendXDR(b []byte) []byte {
	return appendString(b, l.Reason, MaxDropStringLen)
}

func decodeExtendedLinuxDropReason(r *reader) Record {
	return &ExtendedLinuxDropReason{Reason: r.string(MaxDropStringLen)}
}
