// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// route.h: the kernel's routing decision for a sampled packet, asked on the
// sampled path only (sampler.h emit_sample), never for an unsampled frame:
// bpf_fib_lookup (XDP and TC, Linux 4.18) with the packet's addresses,
// protocol, ports and TOS, as the kernel routes it (FIB rules included):
//
//   - toward the destination, from the port the packet came in on: the
//     output port and the gateway (or the destination itself for a
//     directly connected route) of the route in force at that moment;
//   - toward the source: the route back, whose prefix length is
//     extended_router's src_mask_len.
//
// bpf_fib_lookup does not tell the prefix length of the route it matched;
// user space takes it from its copy of the routing table
// (dataplane/forwarding), and only when that copy is of the FIB
// generation both lookups saw (the kernel's fib_seq of the namespace,
// fib_seq.h, unchanged across them) and agrees with these answers, so that a sample
// never names a route that was not in force when it was taken.

#ifndef SFLOWSWITCHD_ROUTE_H
#define SFLOWSWITCHD_ROUTE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "sample_info.h"
#include "fib_seq.h"

#define ROUTE_AF_INET 2
#define ROUTE_AF_INET6 10
#define ROUTE_IPPROTO_TCP 6
#define ROUTE_IPPROTO_UDP 17

// ROUTE_PARSE_BYTES: the part of the copied header the parser reads: an
// Ethernet header, two VLAN tags and an IPv6 header fit (62 bytes); every
// size class holds at least 64.
#define ROUTE_PARSE_BYTES 64

// ctx_fib_seq (hook of each program, fib_seq.h) returns the FIB
// generation of the namespace of the frame's device and sets *ok, or
// leaves *ok 0 when it cannot be read.
static __always_inline __u32 ctx_fib_seq(SAMPLER_CTX *ctx, int *ok);

static __always_inline __u16 route_be16(const __u8 *p)
{
	return ((__u16)p[0] << 8) | p[1];
}

// route_found reports whether bpf_fib_lookup's return means a route with
// a next hop matched: SUCCESS, or NO_NEIGH (the route and its gateway are
// known, the neighbour entry is not; both set ifindex and the address).
static __always_inline int route_found(long ret)
{
	return ret == BPF_FIB_LKUP_RET_SUCCESS || ret == BPF_FIB_LKUP_RET_NO_NEIGH;
}

// sample_route fills m->route from the packet in m->data (its first
// header_len bytes, as sampled: Ethernet, up to two VLAN tags, IPv4 or
// IPv6), looked up as received on iif (flags 0: the ingress view, FIB
// rules and forwarding settings of iif apply) or, for a packet made here
// (iif 0), as sent through port (BPF_FIB_LOOKUP_OUTPUT). A non-IP frame
// gets nothing. Kept out of line: one copy for the three size classes.
static __noinline void sample_route(SAMPLER_CTX *ctx, struct sample_meta *m,
				    __u32 port, __u32 iif)
{
	struct bpf_fib_lookup p = {};
	const __u8 *d = m->data, *ip;
	__u32 n = m->header_len, off = 12, flags = 0;
	__u16 proto;
	__u32 g1, g2;
	int ok1, ok2;
	long ret;

	if (n > ROUTE_PARSE_BYTES)
		n = ROUTE_PARSE_BYTES;
	if (n < 14)
		return;
	proto = route_be16(d + 12);
	if (proto == 0x8100 || proto == 0x88a8 || proto == 0x9100) {
		if (n < 18)
			return;
		proto = route_be16(d + 16);
		off = 16;
		if (proto == 0x8100 || proto == 0x88a8 || proto == 0x9100) {
			if (n < 22)
				return;
			proto = route_be16(d + 20);
			off = 20;
		}
	}
	off += 2;
	if (iif == 0) {
		iif = port;
		flags = BPF_FIB_LOOKUP_OUTPUT;
	}
	p.ifindex = iif;
	if (proto == 0x0800) {
		if (off + 20 > n)
			return;
		ip = d + off;
		if ((ip[0] >> 4) != 4)
			return;
		p.family = ROUTE_AF_INET;
		p.tos = ip[1];
		p.l4_protocol = ip[9];
		__builtin_memcpy(&p.ipv4_src, ip + 12, 4);
		__builtin_memcpy(&p.ipv4_dst, ip + 16, 4);
		// Ports for FIB rules and multipath hashing on L4: only when the
		// IPv4 header has no options and the ports were copied.
		if ((ip[0] & 0xf) == 5 && off + 24 <= n &&
		    (p.l4_protocol == ROUTE_IPPROTO_TCP || p.l4_protocol == ROUTE_IPPROTO_UDP)) {
			__builtin_memcpy(&p.sport, ip + 20, 2);
			__builtin_memcpy(&p.dport, ip + 22, 2);
		}
	} else if (proto == 0x86dd) {
		if (off + 40 > n)
			return;
		ip = d + off;
		if ((ip[0] >> 4) != 6)
			return;
		p.family = ROUTE_AF_INET6;
		// flowinfo: traffic class and flow label, the first word without
		// the version (ip6_flowinfo).
		__builtin_memcpy(&p.flowinfo, ip, 4);
		p.flowinfo &= bpf_htonl(0x0fffffff);
		p.l4_protocol = ip[6];
		__builtin_memcpy(p.ipv6_src, ip + 8, 16);
		__builtin_memcpy(p.ipv6_dst, ip + 24, 16);
	} else {
		return;
	}

	m->route.family = p.family;
	g1 = ctx_fib_seq(ctx, &ok1);

	// Toward the destination. tot_len 0: no MTU check (the frame went
	// through: only the route matters).
	ret = bpf_fib_lookup(ctx, &p, sizeof(p), flags);
	m->route.dst_ret = ret < 0 ? 0xff : (__u8)ret;
	if (route_found(ret)) {
		m->route.dst_oif = p.ifindex;
		if (p.family == ROUTE_AF_INET) {
			__builtin_memset(m->route.dst_via, 0, 16);
			__builtin_memcpy(m->route.dst_via, &p.ipv4_dst, 4);
		} else {
			__builtin_memcpy(m->route.dst_via, p.ipv6_dst, 16);
		}
		m->flags |= SAMPLE_F_ROUTE;
	}

	// Toward the source: the same packet's source as destination, from
	// the same port (the route a reply takes).
	__builtin_memset(&p, 0, sizeof(p));
	p.ifindex = iif;
	p.family = m->route.family;
	if (p.family == ROUTE_AF_INET) {
		ip = d + off;
		p.tos = ip[1];
		__builtin_memcpy(&p.ipv4_dst, ip + 12, 4);
		__builtin_memcpy(&p.ipv4_src, ip + 16, 4);
	} else {
		ip = d + off;
		__builtin_memcpy(p.ipv6_dst, ip + 8, 16);
		__builtin_memcpy(p.ipv6_src, ip + 24, 16);
	}
	ret = bpf_fib_lookup(ctx, &p, sizeof(p), flags);
	m->route.src_ret = ret < 0 ? 0xff : (__u8)ret;
	if (route_found(ret)) {
		m->route.src_oif = p.ifindex;
		if (p.family == ROUTE_AF_INET) {
			__builtin_memset(m->route.src_via, 0, 16);
			__builtin_memcpy(m->route.src_via, &p.ipv4_dst, 4);
		} else {
			__builtin_memcpy(m->route.src_via, p.ipv6_dst, 16);
		}
		m->flags |= SAMPLE_F_SRC_ROUTE;
	}

	// The generation both lookups saw: unchanged across them.
	g2 = ctx_fib_seq(ctx, &ok2);
	if (ok1 && ok2 && g1 == g2) {
		m->route.gen = g1;
		m->flags |= SAMPLE_F_FIB_GEN;
	}
}

#endif // SFLOWSWITCHD_ROUTE_H
