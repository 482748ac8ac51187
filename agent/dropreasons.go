package agent

import "github.com/sflowswitchd/sflowswitchd/sflow"

// linuxDropReasons maps the kernel's drop reason names (enum
// skb_drop_reason without the SKB_DROP_REASON_ prefix) to sFlow
// drop_reason codes, as the host agent does (hsflowd
// src/Linux/dropPoints_rn.h; docs/spec/sflow_drops.md "How the host agent
// maps Linux reasons"). Three of hsflowd's names are not the spec's
// (tcp_ofo_merge, dest_net_unknown, ip6disabled); they are mapped here to
// the spec's tcp_ofomerge, dst_net_unknown and ipv6disabled. Names not in
// the table are reported as unknown (256), with the kernel's name in
// extended_linux_drop_reason.
var linuxDropReasons = map[string]string{
	"NOT_SPECIFIED":           "unknown",
	"NO_SOCKET":               "port_unreachable",
	"PKT_TOO_SMALL":           "pkt_too_small",
	"TCP_CSUM":                "tcp_parsing",
	"SOCKET_FILTER":           "socket_filter",
	"UDP_CSUM":                "udp_parsing",
	"NETFILTER_DROP":          "acl",
	"OTHERHOST":               "dst_host_unknown",
	"IP_CSUM":                 "ip_1_parsing",
	"IP_INHDR":                "ip_1_parsing",
	"IP_RPFILTER":             "reverse_path_forwarding",
	"UNICAST_IN_L2_MULTICAST": "uc_dip_over_mc_dmac",
	"XFRM_POLICY":             "xfrm_policy",
	"IP_NOPROTO":              "ip_noproto",
	"SOCKET_RCVBUFF":          "no_buffer_space",
	"PROTO_MEM":               "no_buffer_space",
	"TCP_MD5NOTFOUND":         "tcp_md5notfound",
	"TCP_MD5UNEXPECTED":       "tcp_md5unexpected",
	"TCP_MD5FAILURE":          "tcp_md5failure",
	"SOCKET_BACKLOG":          "no_buffer_space",
	"TCP_FLAGS":               "tcp_flags",
	"TCP_ZEROWINDOW":          "tcp_zerowindow",
	"TCP_OLD_DATA":            "tcp_old_data",
	"TCP_OVERWINDOW":          "tcp_overwindow",
	"TCP_OFOMERGE":            "tcp_ofomerge",
	"TCP_RFC7323_PAWS":        "tcp_rfc7323_paws",
	"TCP_INVALID_SEQUENCE":    "tcp_invalid_sequence",
	"TCP_RESET":               "tcp_reset",
	"TCP_INVALID_SYN":         "tcp_invalid_syn",
	"TCP_CLOSE":               "tcp_close",
	"TCP_FASTOPEN":            "tcp_fastopen",
	"TCP_OLD_ACK":             "tcp_old_ack",
	"TCP_TOO_OLD_ACK":         "tcp_too_old_ack",
	"TCP_ACK_UNSENT_DATA":     "tcp_ack_unsent_data",
	"TCP_OFO_QUEUE_PRUNE":     "tcp_ofo_queue_prune",
	"TCP_OFO_DROP":            "tcp_ofo_drop",
	"IP_OUTNOROUTES":          "dst_net_unknown",
	"BPF_CGROUP_EGRESS":       "bpf_cgroup_egress",
	"IPV6DISABLED":            "ipv6disabled",
	"NEIGH_CREATEFAIL":        "unresolved_neigh",
	"NEIGH_FAILED":            "unresolved_neigh",
	"NEIGH_QUEUEFULL":         "unresolved_neigh",
	"NEIGH_DEAD":              "unresolved_neigh",
	"TC_EGRESS":               "tc_egress",
	"QDISC_DROP":              "traffic_shaping",
	"CPU_BACKLOG":             "cpu_backlog",
	"XDP":                     "xdp",
	"TC_INGRESS":              "tc_ingress",
	"UNHANDLED_PROTO":         "unhandled_proto",
	"SKB_CSUM":                "skb_csum",
	"SKB_GSO_SEG":             "skb_gso_seg",
	"SKB_UCOPY_FAULT":         "skb_ucopy_fault",
	"DEV_HDR":                 "dev_hdr",
	"DEV_READY":               "dev_ready",
	"FULL_RING":               "no_buffer_space",
	"NOMEM":                   "no_buffer_space",
	"HDR_TRUNC":               "pkt_too_small",
	"TAP_FILTER":              "tap_filter",
	"TAP_TXFILTER":            "tap_txfilter",
	"ICMP_CSUM":               "icmp_parsing",
	"INVALID_PROTO":           "invalid_proto",
	"IP_INADDRERRORS":         "host_unreachable",
	"IP_INNOROUTES":           "net_unreachable",
	"PKT_TOO_BIG":             "pkt_too_big",
	"DUP_FRAG":                "dup_frag",
	"FRAG_REASM_TIMEOUT":      "frag_needed",
	"FRAG_TOO_FAR":            "frag_needed",
	"TCP_MINTTL":              "tcp_minttl",
	"IPV6_BAD_EXTHDR":         "ipv6_bad_exthdr",
	"IPV6_NDISC_FRAG":         "ipv6_ndisc_frag",
	"IPV6_NDISC_HOP_LIMIT":    "ipv6_ndisc_hop_limit",
	"IPV6_NDISC_BAD_CODE":     "ipv6_ndisc_bad_code",
	"IPV6_NDISC_BAD_OPTIONS":  "ipv6_ndisc_bad_options",
	"IPV6_NDISC_NS_OTHERHOST": "ipv6_ndisc_ns_otherhost",
}

// dropReasonCodes is linuxDropReasons resolved to codes once.
var dropReasonCodes = func() map[string]sflow.DropReason {
	m := make(map[string]sflow.DropReason, len(linuxDropReasons))
	for k, v := range linuxDropReasons {
		c, ok := sflow.DropReasonByName(v)
		if !ok {
			panic("agent: drop reason table names unknown sFlow reason " + v)
		}
		m[k] = c
	}
	return m
}()

// DropReasonCode returns the sFlow drop_reason of a kernel drop reason
// name: the host agent's mapping, or unknown (256).
func DropReasonCode(linuxName string) sflow.DropReason {
	if c, ok := dropReasonCodes[linuxName]; ok {
		return c
	}
	return sflow.DropUnknown
}
