//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// transit.c: the programs that finish a parked sample record (transit.h)
// when its frame shows up again, and the sweep that delivers what they
// could not. Loaded and attached by dataplane (transit.go) when transit
// is on; they share transit_pending, transit_parked, transit_outcomes and the
// rings with the samplers (the loader hands them the samplers' maps).
//
//   transit_enqueue  tp_btf/qdisc_enqueue: a port's qdisc took the frame;
//                    the bytes it held before (SAMPLE_F_QUEUE)
//   transit_xmit     tp_btf/net_dev_start_xmit: the frame leaves for the
//                    driver (TRANSIT_SENT)
//   transit_drop     tp_btf/kfree_skb (TRANSIT_DROPPED)
//   transit_consume  tp_btf/consume_skb (TRANSIT_CONSUMED)
//   transit_sweep    run by user space once a second (BPF_PROG_TEST_RUN):
//                    records finished while the ring was full, and those
//                    parked longer than TRANSIT_STALE_NS (TRANSIT_STALE)
//
// The four tracepoint programs run for every frame the machine queues,
// sends or frees while they are attached: each reads transit_parked first
// and returns at once when no record is parked.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "ring.h"
#include "transit.h"

char __license[] SEC("license") = "Dual BSD/GPL";

// Only the kernel fields read here (CO-RE: found by name in the kernel's
// BTF).
struct net_device {
	int ifindex;
} __attribute__((preserve_access_index));

struct sk_buff {
	unsigned int len;
	__u16 queue_mapping;
} __attribute__((preserve_access_index));

struct gnet_stats_queue {
	__u32 backlog;
} __attribute__((preserve_access_index));

struct Qdisc {
	struct gnet_stats_queue qstats;
} __attribute__((preserve_access_index));

struct netdev_queue;

// parked returns whether any record is parked: the whole cost of a frame
// while none is.
static __always_inline int parked(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&transit_parked, &zero);

	return n && *n;
}

// claim takes e from state from for delivery (TRANSIT_CLAIMED): exactly
// one program wins.
static __always_inline int claim(struct transit_entry *e, __u32 from)
{
	return __sync_val_compare_and_swap(&e->state, from, TRANSIT_CLAIMED) == from;
}

// deliver copies the claimed record e (key) into its worker's ring and
// forgets it; should the ring be full, it leaves it finished
// (TRANSIT_DONE) for transit_sweep. Returns 1 when delivered.
static __always_inline int deliver(struct transit_entry *e, __u64 key)
{
	__u32 worker = e->worker;
	void *ring = bpf_map_lookup_elem(&rings, &worker);

	if (ring && bpf_ringbuf_output(ring, e->rec, TRANSIT_REC_BYTES,
				       wake_flag_output(ring, TRANSIT_REC_BYTES)) == 0) {
		ring_wake_idle(ring, worker);
		if (bpf_map_delete_elem(&transit_pending, &key) == 0)
			transit_parked_add(-1);
		return 1;
	}
	e->state = TRANSIT_DONE;
	return 0;
}

// finish ends the wait of the frame skb, if its record is parked, with
// status (TRANSIT_*); queue and out_ifindex for TRANSIT_SENT.
static __always_inline void finish(void *skb, __u32 status, __u32 queue,
				   __u32 out_ifindex)
{
	__u64 key = (__u64)skb;
	struct transit_entry *e;
	struct transit_stats *st;
	struct sample_meta *m;

	if (!parked())
		return;
	e = bpf_map_lookup_elem(&transit_pending, &key);
	if (!e || !claim(e, TRANSIT_WAITING))
		return;
	m = (struct sample_meta *)e->rec;
	m->transit.done_ns = bpf_ktime_get_ns();
	m->transit.status = status;
	m->transit.queue = queue;
	m->transit.out_ifindex = out_ifindex;
	st = transit_stat();
	if (!st) {
		deliver(e, key);
		return;
	}
	if (status == TRANSIT_SENT)
		st->sent++;
	else if (status == TRANSIT_DROPPED)
		st->dropped++;
	else
		st->consumed++;
	if (!deliver(e, key))
		st->deferred++;
}

SEC("tp_btf/qdisc_enqueue")
int BPF_PROG(transit_enqueue, struct Qdisc *q, struct netdev_queue *txq,
	     struct sk_buff *skb)
{
	__u64 key = (__u64)skb;
	struct transit_entry *e;
	struct transit_stats *st;
	struct sample_meta *m;
	__u32 backlog, len;

	if (!parked())
		return 0;
	e = bpf_map_lookup_elem(&transit_pending, &key);
	if (!e || e->state != TRANSIT_WAITING)
		return 0;
	// The tracepoint follows a successful enqueue: the backlog counts
	// the frame itself (its length as the qdisc counts it, about
	// skb->len; "within one packet").
	backlog = q->qstats.backlog;
	len = skb->len;
	m = (struct sample_meta *)e->rec;
	m->transit.depth = backlog > len ? backlog - len : 0;
	if (!(m->flags & SAMPLE_F_QUEUE)) {
		m->flags |= SAMPLE_F_QUEUE;
		st = transit_stat();
		if (st)
			st->queued++;
	}
	return 0;
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(transit_xmit, struct sk_buff *skb, struct net_device *dev)
{
	finish(skb, TRANSIT_SENT, skb->queue_mapping, dev->ifindex);
	return 0;
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(transit_drop, struct sk_buff *skb)
{
	finish(skb, TRANSIT_DROPPED, 0, 0);
	return 0;
}

SEC("tp_btf/consume_skb")
int BPF_PROG(transit_consume, struct sk_buff *skb)
{
	finish(skb, TRANSIT_CONSUMED, 0, 0);
	return 0;
}

// sweep_ctx: what transit_sweep's callback needs.
struct sweep_ctx {
	__u64 now;
	__u32 left; // records still parked after the sweep
};

// sweep_one delivers e if it is finished (TRANSIT_DONE) or has waited
// longer than TRANSIT_STALE_NS (then TRANSIT_STALE).
static long sweep_one(void *map, __u64 *key, struct transit_entry *e,
		      struct sweep_ctx *sc)
{
	struct sample_meta *m = (struct sample_meta *)e->rec;
	struct transit_stats *st;

	if (claim(e, TRANSIT_DONE)) {
		if (!deliver(e, *key))
			sc->left++;
		return 0;
	}
	if (sc->now - m->timestamp_ns < TRANSIT_STALE_NS || !claim(e, TRANSIT_WAITING)) {
		sc->left++;
		return 0;
	}
	m->transit.done_ns = sc->now;
	m->transit.status = TRANSIT_STALE;
	st = transit_stat();
	if (st)
		st->stale++;
	if (!deliver(e, *key))
		sc->left++;
	return 0;
}

// transit_sweep: run by user space (dataplane, once a second while records
// are parked) through BPF_PROG_TEST_RUN on any frame. Returns the number
// of records still parked.
SEC("tc")
int transit_sweep(struct __sk_buff *skb)
{
	struct sweep_ctx sc = {.now = bpf_ktime_get_ns()};

	bpf_for_each_map_elem(&transit_pending, sweep_one, &sc, 0);
	return sc.left;
}
