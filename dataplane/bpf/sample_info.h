// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// sample_info.h: what a sample record carries beyond the frame's bytes
// (struct sample_meta, sampler.h), each block filled on the sampled path
// only, never for an unsampled frame:
//
//   SAMPLE_F_EGRESS     the frame was sampled leaving the port (the TC
//                       egress sampler): sample_meta.ifindex is the output
//                       port, in_ifindex the port it came in on;
//   SAMPLE_F_ROUTE      route.dst_*: the kernel's FIB answer for the
//                       frame's destination at sample time
//                       (bpf_fib_lookup, route.h);
//   SAMPLE_F_SRC_ROUTE  route.src_*: the same for its source (the route
//                       back), whose prefix length is extended_router's
//                       src_mask_len;
//   SAMPLE_F_FIB_GEN    route.gen is the FIB generation both lookups saw
//                       (the kernel's fib_seq of the namespace, fib_seq.h,
//                       bumped on every FIB change there): user space takes the
//                       prefix lengths from its route table only when that
//                       table is of the same generation;
//   SAMPLE_F_POOL_SUM   sample_meta.pool is the port's pool in the
//                       sampled direction summed over every CPU, read at
//                       this frame (port_pool_sum, sampler.h); without the
//                       flag (a program older than the flag, adopted
//                       records in a ring) it is the sampling CPU's alone;
//   SAMPLE_F_TRANSIT    the record waited for its frame to leave (transit.h)
//                       and transit says how that ended; it reaches the
//                       ring when the frame left, not when it was sampled;
//   SAMPLE_F_QUEUE      transit.depth: the frame went through the port's
//                       qdisc, which held that many bytes ahead of it;
//   SAMPLE_F_TUNNEL     tunnel.*: the tunnel metadata the kernel attached
//                       to the frame on a tunnel device (port_config.kind
//                       VXLAN or GRE, TC samplers only): at ingress what the
//                       device removed (decapsulation, collect_md), at
//                       egress what it is told to add (a route's encap,
//                       tc tunnel_key, bpf_skb_set_tunnel_key); read with
//                       bpf_skb_get_tunnel_key (tunnel.h);
//   SAMPLE_F_TUNNEL_PORT the port is a tunnel device (port_config.kind):
//                       with or without SAMPLE_F_TUNNEL, user space looks
//                       for its tunnel records (a fixed tunnel's are in
//                       the device's configuration);
//
// User space reads these through the record's generated Go type
// (bpf.SamplerSampleMeta, dataplane/ring.go).

#ifndef SFLOWSWITCHD_SAMPLE_INFO_H
#define SFLOWSWITCHD_SAMPLE_INFO_H

#include <linux/types.h>

#define SAMPLE_F_EGRESS (1U << 0)
#define SAMPLE_F_ROUTE (1U << 1)
#define SAMPLE_F_SRC_ROUTE (1U << 2)
#define SAMPLE_F_FIB_GEN (1U << 3)
#define SAMPLE_F_POOL_SUM (1U << 4)
#define SAMPLE_F_TRANSIT (1U << 5)
#define SAMPLE_F_QUEUE (1U << 6)
#define SAMPLE_F_TUNNEL (1U << 7)
#define SAMPLE_F_TUNNEL_PORT (1U << 8)

// sample_route: bpf_fib_lookup's answers for the sampled packet, taken in
// the sampled path (route.h). An address is 4 bytes (IPv4, the rest zero)
// or 16 (IPv6), network order.
struct sample_route {
	__u8 family;  // AF_INET or AF_INET6: the packet's
	__u8 dst_ret; // bpf_fib_lookup's return for the destination (BPF_FIB_LKUP_RET_*)
	__u8 src_ret; // ... for the source
	__u8 _pad;
	__u32 gen;        // FIB generation before and after both lookups (SAMPLE_F_FIB_GEN)
	__u32 dst_oif;    // output port of the route to the destination
	__u32 src_oif;    // output port of the route to the source
	__u8 dst_via[16]; // its gateway, or the destination itself when directly connected
	__u8 src_via[16]; // the gateway toward the source, or the source itself
};

// sample_tunnel: the outer header of a tunnel device's frame, as the
// kernel's tunnel metadata (struct ip_tunnel_info's key) holds it
// (SAMPLE_F_TUNNEL, tunnel.h). src and dst are the outer header's source
// and destination whichever the direction: the kernel keeps them so
// (key.u.ipv4.src is the outer source on receive and on send), and
// bpf_skb_get_tunnel_key returns key.src as "remote" and key.dst as
// "local" in both directions. Addresses in network order, an IPv4 one in
// the first 4 bytes.
struct sample_tunnel {
	__u8 family; // AF_INET or AF_INET6: the outer header's
	__u8 tos;    // outer TOS / traffic class
	__u8 ttl;    // outer TTL / hop limit
	__u8 _pad;
	__u32 id;     // tunnel id: the VXLAN VNI, the GRE key
	__u8 src[16]; // outer source
	__u8 dst[16]; // outer destination
};

// sample_transit: how the frame of a sample whose record waited for it
// (SAMPLE_F_TRANSIT, transit.h) went on: left through a port (its transmit
// queue, and when it was handed to the driver: after the port's qdisc),
// dropped, delivered on this host, or not seen again.
struct sample_transit {
	__u64 done_ns;     // when the wait ended (bpf_ktime_get_ns)
	__u32 status;      // TRANSIT_SENT, _DROPPED, _CONSUMED, _STALE
	__u32 out_ifindex; // TRANSIT_SENT: the port it left through
	__u32 queue;       // TRANSIT_SENT: its transmit queue (skb->queue_mapping)
	__u32 depth;       // SAMPLE_F_QUEUE: bytes queued in the port's qdisc ahead of it
};

// How a transit wait ended (sample_transit.status).
#define TRANSIT_SENT 1     // handed to the port's driver (net_dev_start_xmit)
#define TRANSIT_DROPPED 2  // freed as dropped (kfree_skb)
#define TRANSIT_CONSUMED 3 // freed as consumed: delivered on this host, or copied on (consume_skb)
#define TRANSIT_STALE 4    // not seen again within the wait's bound (transit_sweep)

// sample_meta: the fixed part of a ring buffer record; `data` holds
// header_len bytes of the frame (the record is sized by a size class, so
// bytes after header_len are undefined). User space reads it through its
// generated Go twin, bpf.SamplerSampleMeta (dataplane/bpf/gen.go, dataplane/ring.go).
// What the kernel knew about the frame beyond its bytes (direction, input
// port, route) follows the pool, each block valid only when
// its SAMPLE_F_* flag is set (sample_info.h).
struct sample_meta {
	__u32 ifindex;      // the sampled port (ingress: input, egress: output)
	__u32 frame_len;    // full frame length (all fragments)
	__u32 rx_queue;     // RX queue index (ingress)
	__u32 cpu;          // CPU that took the sample
	__u64 timestamp_ns; // bpf_ktime_get_ns (CLOCK_MONOTONIC)
	__u32 header_len;   // valid bytes in data
	__u32 sample_rate;  // kernel rate the sample was taken at (mask + 1)
	__u64 pool;         // the port's pool in this direction at this frame, every CPU's (SAMPLE_F_POOL_SUM)
	__u32 flags;        // SAMPLE_F_*
	__u32 in_ifindex;   // egress: the port the frame came in on (skb_iif), 0 = made here
	struct sample_route route;
	struct sample_transit transit;
	struct sample_tunnel tunnel; // SAMPLE_F_TUNNEL
	__u8 data[];
};

#endif // SFLOWSWITCHD_SAMPLE_INFO_H
