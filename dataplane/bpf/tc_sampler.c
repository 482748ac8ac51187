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
// records. What TC does its own way (the frame's length and RX queue from
// the skb, the header copy that puts the VLAN tag back, the verdicts, the
// tunnel and queue extras) is in tc_hooks.h, which the egress sampler
// (tc_egress.c) shares. A sampled frame is copied into the owning
// worker's ring; the frame itself is never modified. Only inline delivery:
// monitor mode redirects frames into AF_XDP sockets, which only XDP can.
//
// Every program returns TC_ACT_UNSPEC: the sampler never decides a frame's
// fate. For TCX that is TCX_NEXT (the next TCX program, then the clsact
// qdisc); for a direct-action cls_bpf filter it is "no verdict", so the
// next filter of the chain classifies the frame as if the sampler were
// not there.

#include "tc_hooks.h"

char __license[] SEC("license") = "Dual BSD/GPL";

// tc_sampler: one instance per port sampled at TC ingress (PORT_IMM
// constants, patched by the loader as for xdp_sampler), the per-packet
// path (port_frame, sampler.h).
SEC("tc")
int tc_sampler(struct __sk_buff *skb)
{
	return port_frame(skb);
}

// tc_take_sample: the sampled path of every TC port (take_handed,
// sampler.h), loaded once.
SEC("tc")
int tc_take_sample(struct __sk_buff *skb)
{
	return take_handed(skb);
}
