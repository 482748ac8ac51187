// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// fib_seq.h: the FIB generation of a network namespace, read from the
// kernel itself: net->ipv4.fib_seq + net->ipv6.fib6_sernum. The kernel
// bumps fib_seq under RTNL on every IPv4 change it announces to its FIB
// notifier chain (call_fib4_notifiers: routes added, replaced or deleted,
// next hops going down or up with their link), the chain switchdev
// drivers mirror a FIB into hardware with, and takes a new fib6_sernum on
// every change of an IPv6 routing table. Both only move forward (sernum
// wraps after 2^31 changes), so their sum changes with every route
// change. Changes of FIB rules (ip rule) are not counted: a sample routed
// by a rule to another table is caught by user space's check that its
// copy's match has the kernel's next hop (dataplane/forwarding).
//
// Read through the kfunc bpf_cast_to_kern_ctx (Linux 6.2): the program's
// context as the kernel's sk_buff (TC) or xdp_buff (XDP), then the
// device's namespace (CO-RE: only the fields used are declared, found by
// name in the kernel's BTF). Without the kfunc (weak) the generation is
// unknown and a sample carries none (no SAMPLE_F_FIB_GEN): user space
// then gives it no extended_router.

#ifndef SFLOWSWITCHD_FIB_SEQ_H
#define SFLOWSWITCHD_FIB_SEQ_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct net;

struct netns_ipv4___fs {
	unsigned int fib_seq;
} __attribute__((preserve_access_index));

// fib6_sernum (atomic_t) takes a new value on every change of any IPv6
// routing table (fib6_update_sernum, fib6_new_sernum).
struct netns_ipv6___fs {
	struct {
		int counter;
	} __attribute__((preserve_access_index)) fib6_sernum;
} __attribute__((preserve_access_index));

struct net___fs {
	struct netns_ipv4___fs ipv4;
	struct netns_ipv6___fs ipv6;
} __attribute__((preserve_access_index));

// possible_net_t is a typedef of an anonymous struct in the kernel: the
// member is declared the same way here.
struct net_device___fs {
	struct {
		struct net___fs *net;
	} __attribute__((preserve_access_index)) nd_net;
} __attribute__((preserve_access_index));

struct sk_buff___fs {
	struct net_device___fs *dev;
} __attribute__((preserve_access_index));

struct xdp_rxq_info___fs {
	struct net_device___fs *dev;
} __attribute__((preserve_access_index));

struct xdp_buff___fs {
	struct xdp_rxq_info___fs *rxq;
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *) __ksym __weak;

// bpf_ksym_exists (libbpf 1.2's bpf_helpers.h) for older headers: a weak
// kfunc the kernel lacks resolves to 0 and its calls are removed.
#ifndef bpf_ksym_exists
#define bpf_ksym_exists(sym) (!!(sym))
#endif

// dev_fib_seq returns the FIB generation of dev's namespace, and 1 in *ok
// (0 without a device).
static __always_inline __u32 dev_fib_seq(struct net_device___fs *dev, int *ok)
{
	struct net___fs *net;

	*ok = 0;
	if (!dev)
		return 0;
	net = dev->nd_net.net;
	if (!net)
		return 0;
	*ok = 1;
	return net->ipv4.fib_seq + (__u32)net->ipv6.fib6_sernum.counter;
}

// skb_fib_seq is dev_fib_seq of a TC program's skb.
static __always_inline __u32 skb_fib_seq(struct __sk_buff *ctx, int *ok)
{
	struct sk_buff___fs *skb;

	*ok = 0;
	if (!bpf_ksym_exists(bpf_cast_to_kern_ctx))
		return 0;
	skb = bpf_cast_to_kern_ctx(ctx);
	return dev_fib_seq(skb->dev, ok);
}

// xdp_fib_seq is dev_fib_seq of an XDP program's receiving device.
static __always_inline __u32 xdp_fib_seq(struct xdp_md *ctx, int *ok)
{
	struct xdp_buff___fs *x;

	*ok = 0;
	if (!bpf_ksym_exists(bpf_cast_to_kern_ctx))
		return 0;
	x = bpf_cast_to_kern_ctx(ctx);
	if (!x->rxq)
		return 0;
	return dev_fib_seq(x->rxq->dev, ok);
}

#endif // SFLOWSWITCHD_FIB_SEQ_H
