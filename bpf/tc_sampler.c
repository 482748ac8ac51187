//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// tc_sampler.c: the packet sampler at the TC ingress hook, for ports where
// XDP costs more than it saves (dataplane.HookTC). One program, attached
// two ways (dataplane/tc.go, dataplane/clsact.go):
//
//   - Linux >= 6.6: a TCX link at the head of the port's TCX ingress chain;
//     it dies with the daemon.
//   - before 6.6 (no TCX): a cls_bpf filter in direct-action mode at
//     priority 1, handle 0x73666c77, protocol all, on the port's clsact
//     qdisc (an operator's clsact or ingress qdisc is used as it is, a
//     clsact qdisc is created only where there is none). Priority 1 is
//     the head of chain 0, so the filter sees every frame before any other
//     filter can drop it. A filter outlives a killed daemon; the next
//     start removes it (dataplane.removeStaleTC).
//
// Either way the program runs once per frame at ingress with the MAC
// header pushed (skb->data at the Ethernet header), so the samples are the
// same.
//
// Why TC rather than XDP on some ports:
//
//   - veth and other devices whose XDP receive needs an skb first: the
//     kernel copies every frame into a page with XDP_PACKET_HEADROOM before
//     an XDP program can see it (veth: skb_pp_cow_data; generic XDP:
//     pskb_expand_head), and on veth attaching XDP moves receive onto the
//     device's NAPI ring. At TC ingress the skb exists already: no copy.
//   - drivers without native XDP, where generic XDP pays the same copy.
//
// It is the XDP sampler's twin: both run the paths written once in
// sampler.h (port_frame, take_sample, take_handed) on the same counters
// (one pool, skip and samples per port and CPU), the same geometric skip
// drawn only per sample (sflow_version_5.txt Appendix B) and the same ring
// records. This file holds only what TC does its own way: the hooks (the
// frame's length and RX queue from the skb, the header copy that puts the
// VLAN tag back, the verdicts). A sampled frame is copied into the owning
// worker's ring; the frame itself is never modified. Only inline delivery:
// monitor mode redirects frames into AF_XDP sockets, which only XDP can.
//
// Every program returns TC_ACT_UNSPEC: the sampler never decides a frame's
// fate. For TCX that is TCX_NEXT (the next TCX program, then the clsact
// qdisc); for a direct-action cls_bpf filter it is "no verdict", so the
// next filter of the chain classifies the frame as if the sampler were
// not there.

// TAG_SLACK: a TC record has room for cls + TAG_SLACK header bytes, so that
// a VLAN tag put back into the header (ctx_copy_header) never makes a copy
// of up to cls bytes overrun it. The reader takes header_len bytes whatever
// the record size (dataplane/ring.go).
#define TAG_SLACK 16

// What the shared paths of sampler.h need to know about TC.
#define SAMPLER_CTX struct __sk_buff
#define SAMPLER_PASS TC_ACT_UNSPEC
#define RECORD_SLACK TAG_SLACK

#include <linux/pkt_cls.h>
#include "sampler.h"
#include <bpf/bpf_endian.h>

char __license[] SEC("license") = "Dual BSD/GPL";

// VLAN_HDR_LEN is the 802.1Q tag's size; ETH_ADDRS_LEN the two MACs before it.
#define VLAN_HDR_LEN 4
#define ETH_ADDRS_LEN 12

// ---- The per-packet path: port_frame (sampler.h) and its hook ----

// ctx_unsampled (hook of sampler.h): the sampler never decides a frame's
// fate.
static __always_inline int ctx_unsampled(void)
{
	return TC_ACT_UNSPEC;
}

// tc_sampler: one instance per port sampled at TC ingress (PORT_IMM
// constants, patched by the loader as for xdp_sampler), the per-packet
// path (port_frame, sampler.h).
SEC("tc")
int tc_sampler(struct __sk_buff *skb)
{
	return port_frame(skb);
}

// ---- The sampled path: take_handed (sampler.h) and its hooks ----

// ctx_frame_len (hook of sampler.h): the frame's length on the wire, its
// VLAN tag included (see ctx_copy_header).
static __always_inline __u32 ctx_frame_len(struct __sk_buff *skb)
{
	return skb->vlan_present ? skb->len + VLAN_HDR_LEN : skb->len;
}

// ctx_rx_queue (hook of sampler.h): a received skb records its RX queue
// as queue_mapping = queue + 1 (skb_record_rx_queue); 0 means not
// recorded.
static __always_inline __u32 ctx_rx_queue(struct __sk_buff *skb)
{
	__u32 q = skb->queue_mapping;

	return q ? q - 1 : 0;
}

// ctx_copy_header (hook of sampler.h) copies the first n bytes of the
// frame as it was on the wire into data (1 <= n <= cls; data has room for
// cls + TAG_SLACK bytes). By TC ingress the kernel has moved an
// 802.1Q/802.1ad tag out of the frame into skb metadata (skb_vlan_untag,
// or the NIC's VLAN offload); it is put back between the MAC addresses,
// so the sampled header (sFlow sampled_header) is the frame as received,
// as the XDP sampler sees it.
static __always_inline __u32 ctx_copy_header(struct __sk_buff *skb,
					     __u8 *data, __u32 n,
					     const __u32 cls)
{
	__u32 rest;

	if (!skb->vlan_present) {
		// For 1 <= n <= cls the mask leaves n unchanged; the barrier
		// keeps clang from applying it to a copy (as in sampler.c).
		barrier_var(n);
		n = ((n - 1) & (cls - 1)) + 1;
		if (bpf_skb_load_bytes(skb, 0, data, n) < 0)
			return 0;
		return n;
	}
	if (bpf_skb_load_bytes(skb, 0, data, ETH_ADDRS_LEN) < 0)
		return 0;
	*(__u16 *)(data + ETH_ADDRS_LEN) = (__u16)skb->vlan_proto; // network order
	*(__u16 *)(data + ETH_ADDRS_LEN + 2) = bpf_htons((__u16)skb->vlan_tci);
	if (n <= ETH_ADDRS_LEN + VLAN_HDR_LEN)
		return n;
	// 1 <= rest <= cls - 16: the mask keeps it, and shows the verifier
	// rest <= cls, which fits at data + 16 thanks to TAG_SLACK.
	rest = n - (ETH_ADDRS_LEN + VLAN_HDR_LEN);
	barrier_var(rest);
	rest = ((rest - 1) & (cls - 1)) + 1;
	if (bpf_skb_load_bytes(skb, ETH_ADDRS_LEN, data + ETH_ADDRS_LEN + VLAN_HDR_LEN, rest) < 0)
		return ETH_ADDRS_LEN + VLAN_HDR_LEN;
	return ETH_ADDRS_LEN + VLAN_HDR_LEN + rest;
}

// ctx_monitor (hook of sampler.h): monitor mode redirects frames into
// AF_XDP sockets, which only XDP can; the loader moves a port to XDP
// before it writes a monitor config (dataplane.UpdatePort), so a TC
// program never sees one. Should it, a sampled frame is a counted drop
// and the frame goes on untouched.
static __always_inline int ctx_monitor(struct __sk_buff *skb,
				       struct port_counters *c,
				       struct port_config *cfg, int sampled)
{
	if (sampled)
		c->drops++;
	return TC_ACT_UNSPEC;
}

// tc_take_sample: the sampled path of every TC port (take_handed,
// sampler.h), loaded once.
SEC("tc")
int tc_take_sample(struct __sk_buff *skb)
{
	return take_handed(skb);
}
