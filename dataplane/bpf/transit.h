// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// transit.h: sampled frames followed to where they leave the switch
// (extended_transit 1039, extended_queue 1040,
// extended_egress_queue 1036), on ports with PORT_F_TRANSIT, at TC only
// (a TC program has the frame's sk_buff, whose address follows the frame
// through the stack; an XDP frame has none yet).
//
// A sampled frame's record does not go to the ring at once: the sampled
// path (transit_track, sampler.h) parks it in transit_pending under the
// sk_buff's address, and the transit programs (transit.c) finish it when
// that sk_buff next shows up:
//
//   qdisc_enqueue       it entered a port's qdisc: the bytes queued ahead
//                       of it (SAMPLE_F_QUEUE, transit.depth);
//   net_dev_start_xmit  it left the qdisc for the driver: when, the port,
//                       the transmit queue (TRANSIT_SENT);
//   kfree_skb           dropped (TRANSIT_DROPPED);
//   consume_skb         delivered on this host, or replaced by a copy
//                       (TRANSIT_CONSUMED);
//
// and copy the record into the worker's ring. Nothing is lost: a record
// the ring cannot take stays parked (TRANSIT_DONE) and transit_sweep,
// which user space runs once a second, delivers it later, and also every
// record parked longer than the wait's bound (TRANSIT_STALE: the frame's
// end was not seen, e.g. an sk_buff freed by a path without a tracepoint).
// A frame that cannot be parked (the table full, or its address still
// parked) has its record delivered at once, without transit.
//
// Only sampled frames pay on the sampled path. The transit programs run
// for every frame the machine queues, sends or frees while transit is on:
// each first reads transit_parked, the number of parked records, and ends
// there when it is 0 (bench/README.md has the measured cost).

#ifndef SFLOWSWITCHD_TRANSIT_H
#define SFLOWSWITCHD_TRANSIT_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "sample_info.h"

// MAX_HEADER_BYTES: see sampler.h (the largest header copy).
#ifndef MAX_HEADER_BYTES
#define MAX_HEADER_BYTES 256
#endif

// TRANSIT_SLACK bounds every sampler's RECORD_SLACK; a parked record has
// the largest size class.
#define TRANSIT_SLACK 16
#define TRANSIT_REC_BYTES (sizeof(struct sample_meta) + MAX_HEADER_BYTES + TRANSIT_SLACK)

// States of a parked record (transit_entry.state), changed by
// compare-and-swap so that exactly one program delivers it.
#define TRANSIT_WAITING 0 // its frame has not been seen again
#define TRANSIT_CLAIMED 1 // a program is delivering it
#define TRANSIT_DONE 2    // finished, but the ring was full: transit_sweep delivers it

// TRANSIT_STALE_NS: how long a record waits for its frame.
#define TRANSIT_STALE_NS 1000000000ULL

// transit_entry: a parked record.
struct transit_entry {
	__u32 state;  // TRANSIT_WAITING, _CLAIMED, _DONE
	__u32 worker; // the owning worker's ring in `rings`
	__u8 rec[TRANSIT_REC_BYTES] __attribute__((aligned(8)));
};

// transit_pending: parked records keyed by their frame's sk_buff address.
// max_entries is set by the loader (1 when transit is off).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u64);
	__type(value, struct transit_entry);
} transit_pending SEC(".maps");

// transit_parked: [0] the number of parked records, kept with atomic adds
// (a frame's program reads it first and stops at 0).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} transit_parked SEC(".maps");

// transit_outcomes: per-CPU counts (struct transit_stats) of what became of parked records, for the
// metrics (dataplane.TransitStats).
struct transit_stats {
	__u64 parked;    // records parked
	__u64 unparked;  // records delivered at once: the table full or the address taken
	__u64 sent;      // ... finished TRANSIT_SENT
	__u64 dropped;   // ... TRANSIT_DROPPED
	__u64 consumed;  // ... TRANSIT_CONSUMED
	__u64 stale;     // ... TRANSIT_STALE
	__u64 deferred;  // finished while the ring was full: left to transit_sweep
	__u64 queued;    // records that saw a qdisc (SAMPLE_F_QUEUE)
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct transit_stats);
} transit_outcomes SEC(".maps");

// transit_stat returns this CPU's transit_outcomes (or 0).
static __always_inline struct transit_stats *transit_stat(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&transit_outcomes, &zero);
}

// transit_parked_add adds d to the number of parked records.
static __always_inline void transit_parked_add(__s64 d)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&transit_parked, &zero);

	if (n)
		__sync_fetch_and_add(n, d);
}

#endif // SFLOWSWITCHD_TRANSIT_H
