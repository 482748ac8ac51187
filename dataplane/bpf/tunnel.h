// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// tunnel.h: the outer header of a sampled frame on a tunnel device
// (port_config.kind PORT_KIND_VXLAN or PORT_KIND_GRE), for the sFlow
// tunnel records (sflow_tunnels.txt: extended_ipv4/ipv6_tunnel_egress and
// _ingress, extended_vni_egress and _ingress). Read on the sampled path
// only (sampler.h emit_sample), never for an unsampled frame.
//
// A tunnel device in collect_md ("external") mode works from tunnel
// metadata on the skb (struct ip_tunnel_info, a metadata dst): at ingress
// the device attached the outer header it removed (vxlan_rcv,
// udp_tun_rx_dst; ip_tunnel_rcv), at egress the sender attached the one
// the device is to add (a route's "encap ip", tc tunnel_key set,
// bpf_skb_set_tunnel_key). bpf_skb_get_tunnel_key (Linux 4.3; local
// address 5.19) copies it: the outer addresses, TOS, TTL and the tunnel id
// (VNI, GRE key). It returns key.u.ipv4.src as "remote" and key.dst as
// "local" whichever the direction, and the kernel keeps src as the outer
// source both ways: so "remote" is the outer source and "local" the outer
// destination here, at ingress and at egress.
//
// A device with a fixed VNI and remote has no metadata on the skb: the
// helper finds none (-EINVAL) and the record carries no SAMPLE_F_TUNNEL;
// user space then takes the tunnel from the device's configuration and,
// for a learned remote, its FDB (dataplane/forwarding, tunnel.go). The
// outer UDP ports are not in the helper's key: user space adds the
// device's port.
//
// XDP programs cannot call the helper: the XDP sampler (sampler.c)
// reports no tunnel (the loader puts tunnel devices on TC, hook.go).

#ifndef SFLOWSWITCHD_TUNNEL_H
#define SFLOWSWITCHD_TUNNEL_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>
#include "sample_info.h"

#define TUNNEL_AF_INET 2
#define TUNNEL_AF_INET6 10

// TUNNEL_KEY_V4_SIZE: struct bpf_tunnel_key up to local_ipv4, the size
// kernels before 5.19 (no local address) accept; 5.19 and later accept
// the whole struct. Which one is decided at load (CO-RE: whether the
// kernel's struct bpf_tunnel_key has local_ipv4), so that a frame without
// metadata costs one helper call, not a second try.
#define TUNNEL_KEY_V4_SIZE __builtin_offsetof(struct bpf_tunnel_key, local_ipv4)

// sample_tunnel_key fills m->tunnel from the skb's tunnel metadata and
// sets SAMPLE_F_TUNNEL; without metadata it leaves the record as it is.
// IPv4 first; -EPROTO says the metadata is IPv6 (ip_tunnel_info_af).
// Kept out of line: one copy for the three size classes.
static __noinline void sample_tunnel_key(struct __sk_buff *skb,
					 struct sample_meta *m)
{
	struct bpf_tunnel_key k = {};
	long ret;

	if (bpf_core_field_exists(k.local_ipv4))
		ret = bpf_skb_get_tunnel_key(skb, &k, sizeof(k), 0);
	else
		ret = bpf_skb_get_tunnel_key(skb, &k, TUNNEL_KEY_V4_SIZE, 0);
	if (ret == 0) {
		__u32 src = bpf_htonl(k.remote_ipv4), dst = bpf_htonl(k.local_ipv4);

		__builtin_memset(m->tunnel.src, 0, 16);
		__builtin_memset(m->tunnel.dst, 0, 16);
		__builtin_memcpy(m->tunnel.src, &src, 4);
		__builtin_memcpy(m->tunnel.dst, &dst, 4);
		m->tunnel.family = TUNNEL_AF_INET;
	} else if (ret == -71 /* EPROTO: IPv6 metadata */) {
		if (bpf_core_field_exists(k.local_ipv6))
			ret = bpf_skb_get_tunnel_key(skb, &k, sizeof(k), BPF_F_TUNINFO_IPV6);
		else
			ret = bpf_skb_get_tunnel_key(skb, &k, TUNNEL_KEY_V4_SIZE, BPF_F_TUNINFO_IPV6);
		if (ret != 0)
			return;
		// IPv6 addresses come as the kernel holds them: network order.
		__builtin_memcpy(m->tunnel.src, k.remote_ipv6, 16);
		__builtin_memcpy(m->tunnel.dst, k.local_ipv6, 16);
		m->tunnel.family = TUNNEL_AF_INET6;
	} else {
		return; // no metadata: a fixed tunnel, user space knows it
	}
	m->tunnel.tos = k.tunnel_tos;
	m->tunnel.ttl = k.tunnel_ttl;
	m->tunnel._pad = 0;
	m->tunnel.id = k.tunnel_id;
	m->flags |= SAMPLE_F_TUNNEL;
}

#endif // SFLOWSWITCHD_TUNNEL_H
