//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// fibgen.c: the FIB generation of the daemon's network namespace, for
// extended_router (bpf/route.h). Two fentry programs count every change of
// the namespace's forwarding tables as the kernel announces it to its FIB
// notifier chain, the one switchdev drivers mirror a FIB into hardware
// with (so every change that alters a lookup's answer is announced):
//
//   - call_fib_notifiers: IPv4 and IPv6 route entries added, replaced or
//     deleted (only the route in use for a prefix is announced), nexthops
//     going down or up with their link, FIB rules;
//   - call_nexthop_notifiers: nexthop objects (ip nexthop) changed.
//
// A sample records the generation before and after its bpf_fib_lookup
// calls; user space gives a sample the prefix lengths of its own copy of
// the routes only when that copy was read at the same generation, so a
// sample never names a route that was not in force when it was taken. The
// kernel announces a change right after making it, so a lookup in the
// microseconds in between sees the new route with the old generation.
//
// Cost: these run only when routes change, never per packet.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char __license[] SEC("license") = "Dual BSD/GPL";

// Kernel structures, only the fields used (CO-RE), as in drops.c.
struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

// netns_ino: the inode number of the daemon's network namespace, set at
// load. Changes elsewhere are not counted.
volatile const __u32 netns_ino = 0;

// fib_gens: [0] = the generation; the samplers' map (route.h), shared.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} fib_gens SEC(".maps");

static __always_inline int bump(struct net *net)
{
	__u32 zero = 0;
	__u64 *g;

	if (!net || net->ns.inum != netns_ino)
		return 0;
	g = bpf_map_lookup_elem(&fib_gens, &zero);
	if (g)
		__sync_fetch_and_add(g, 1);
	return 0;
}

// int call_fib_notifiers(struct net *net, enum fib_event_type event_type,
//                        struct fib_notifier_info *info)
SEC("fentry/call_fib_notifiers")
int BPF_PROG(fib_notified, struct net *net)
{
	return bump(net);
}

// static int call_nexthop_notifiers(struct net *net,
//                                   enum nexthop_event_type event_type,
//                                   struct nexthop *nh,
//                                   struct netlink_ext_ack *extack)
SEC("fentry/call_nexthop_notifiers")
int BPF_PROG(nexthop_notified, struct net *net)
{
	return bump(net);
}
