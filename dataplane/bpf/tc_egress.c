//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// tc_egress.c: the packet sampler at the TC egress hook, for ports sampled
// in the egress direction (sflow.DirectionEgress, -direction egress or
// both). One program, attached two ways as the ingress sampler is
// (dataplane/tc.go, dataplane/clsact.go):
//
//   - Linux >= 6.6: a TCX link at the head of the port's TCX egress chain;
//   - before 6.6: a cls_bpf filter in direct-action mode at priority 1,
//     handle 0x73666c77, on the egress side of the port's clsact qdisc.
//
// TC egress runs in __dev_queue_xmit for every frame the kernel sends
// through the port, bridged, routed or made on this host, before the
// port's qdisc (so a frame the qdisc drops is counted too) and before the
// transmit queue is chosen. The skb's data starts at the Ethernet header,
// as at TC ingress, and a VLAN tag the driver will insert is in skb
// metadata: the hooks of tc_hooks.h put it back, so the sampled header is
// the frame as it leaves.
//
// The same paths as every sampler (sampler.h: port_frame, take_sample),
// on counters of its own: the loader gives this object its own `counters`
// array (the egress pools, at the port's slot), `sample_hands` and
// `take_progs`, and shares the port configs, rings and FIB generation
// with the ingress samplers. A port sampled both ways thus has two exact
// pools, one per direction, each frame counted once in each direction it
// crosses the port. Records carry SAMPLE_F_EGRESS and the port the frame
// came in on (skb_iif, ctx_in_ifindex): the agent reports the port as the
// flow sample's output and that port as its input.
//
// Returns TC_ACT_UNSPEC: it never decides a frame's fate.

#define SAMPLER_EGRESS 1

#include "tc_hooks.h"

char __license[] SEC("license") = "Dual BSD/GPL";

// tc_out_sampler: one instance per port sampled at TC egress (PORT_IMM
// constants, patched by the loader), the per-packet path (port_frame,
// sampler.h). The name fits the kernel's 15 characters, so stale filters
// are recognised by it (dataplane.removeStaleTC).
SEC("tc")
int tc_out_sampler(struct __sk_buff *skb)
{
	return port_frame(skb);
}

// tc_out_take: the sampled path of every port sampled at egress
// (take_handed, sampler.h), loaded once.
SEC("tc")
int tc_out_take(struct __sk_buff *skb)
{
	return take_handed(skb);
}
