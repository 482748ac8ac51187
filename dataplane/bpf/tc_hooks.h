// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// tc_hooks.h: what the TC samplers (tc_sampler.c at ingress, tc_egress.c
// at egress) do their own way, as the hooks sampler.h's shared paths call:
// the frame's length and header copy from the skb (the VLAN tag the
// kernel keeps in skb metadata put back), its queue, its input port at
// egress, the verdicts, the FIB generation. The program that
// includes this header says its direction first (SAMPLER_EGRESS).

#ifndef SFLOWSWITCHD_TC_HOOKS_H
#define SFLOWSWITCHD_TC_HOOKS_H

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
#include "tunnel.h"

// VLAN_HDR_LEN is the 802.1Q tag's size; ETH_ADDRS_LEN the two MACs before it.
#define VLAN_HDR_LEN 4
#define ETH_ADDRS_LEN 12

// ctx_unsampled (hook of sampler.h): the sampler never decides a frame's
// fate.
static __always_inline int ctx_unsampled(void)
{
	return TC_ACT_UNSPEC;
}

// ctx_frame_len (hook of sampler.h): the frame's length on the wire, its
// VLAN tag included (see ctx_copy_header).
static __always_inline __u32 ctx_frame_len(struct __sk_buff *skb)
{
	return skb->vlan_present ? skb->len + VLAN_HDR_LEN : skb->len;
}

// ctx_rx_queue (hook of sampler.h): a received skb records its RX queue
// as queue_mapping = queue + 1 (skb_record_rx_queue); 0 means not
// recorded. At egress the transmit queue is not chosen yet (TC egress runs
// before netdev_core_pick_tx): 0.
static __always_inline __u32 ctx_rx_queue(struct __sk_buff *skb)
{
	__u32 q = skb->queue_mapping;

	if (SAMPLER_EGRESS)
		return 0;
	return q ? q - 1 : 0;
}

// ctx_in_ifindex (hook of sampler.h): at egress, the port the frame came
// in on, as the skb records it (skb_iif: set at every receive, kept
// through bridging, routing and tunnel decapsulation; 0 for a frame made
// on this host). Nothing at ingress, where the port is the input.
static __always_inline __u32 ctx_in_ifindex(struct __sk_buff *skb)
{
	return SAMPLER_EGRESS ? skb->ingress_ifindex : 0;
}

// ctx_tunnel (hook of sampler.h): the skb's tunnel metadata, both
// directions (tunnel.h).
static __always_inline void ctx_tunnel(struct __sk_buff *skb, struct sample_meta *m)
{
	sample_tunnel_key(skb, m);
}

// ctx_skb_addr (hook of sampler.h): the kernel's sk_buff of the frame
// (bpf_cast_to_kern_ctx, Linux 6.2), as a number: the key of a parked
// record (transit.h). 0 without the kfunc.
static __always_inline __u64 ctx_skb_addr(struct __sk_buff *ctx)
{
	if (!bpf_ksym_exists(bpf_cast_to_kern_ctx))
		return 0;
	return (__u64)bpf_cast_to_kern_ctx(ctx);
}

// ctx_fib_seq (hook of route.h): the FIB generation of the skb's
// device's namespace (fib_seq.h).
static __always_inline __u32 ctx_fib_seq(struct __sk_buff *skb, int *ok)
{
	return skb_fib_seq(skb, ok);
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

#endif // SFLOWSWITCHD_TC_HOOKS_H
