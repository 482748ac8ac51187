// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// ring.h: the workers' ring buffers, shared by every program that writes
// sample records (the samplers, sampler.h; the transit programs,
// transit.c), and when a record wakes the ring's reader.

#ifndef SFLOWSWITCHD_RING_H
#define SFLOWSWITCHD_RING_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

// wakeup_bytes: a sample is submitted without waking the reader
// (BPF_RB_NO_WAKEUP) unless it makes the ring's unread data cross a
// multiple of this many bytes (wake_flag); meanwhile the reader sleeps
// until its worker's one-second tick. At low sample rates this saves a
// reader wake-up (several context switches) per sample; at high rates the
// reader is woken in batches. 0 wakes the reader for every sample. Set by
// the loader.
volatile const __u64 wakeup_bytes = 0;

// rings: one BPF ring buffer per worker (inline mode), indexed by
// port_config.worker. Outer and inner sizes are set by the loader.
struct ring_template {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct ring_template);
} rings SEC(".maps");

// ring_idle: per worker (the index into `rings`), nonzero while the
// worker's reader sleeps past its one-second tick because it had nothing
// to do (no sample, no datagram to flush): the next record into that ring
// wakes it at once, however few bytes the ring holds (ring_wake_idle).
// Set by the reader (a map update) before it sleeps, cleared by whichever
// program wakes it. Sized to the workers by the loader.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} ring_idle SEC(".maps");

// ring_wake_idle wakes worker's reader if it sleeps idle. Call it after a
// record went into ring (bpf_ringbuf_submit or _output). The order makes
// the hand-off safe without a lock: the reader sets its flag (a system
// call, then a full fence) and only then looks at the ring's producer
// position; submit and output end with an xchg on the record's header (a
// full barrier) before this load of the flag. So either the reader sees
// the record and does not sleep, or this program sees the flag. The
// wake-up itself is a discarded 8-byte record with BPF_RB_FORCE_WAKEUP
// (a reader skips discarded records); a failed reservation means the
// ring is full, and then the reader is not idle.
static __always_inline void ring_wake_idle(void *ring, __u32 worker)
{
	__u32 *idle = bpf_map_lookup_elem(&ring_idle, &worker);
	void *w;

	if (!idle || !*idle)
		return;
	*idle = 0;
	w = bpf_ringbuf_reserve(ring, 8, 0);
	if (w)
		bpf_ringbuf_discard(w, BPF_RB_FORCE_WAKEUP);
}

// wake_flag tells bpf_ringbuf_submit whether to wake the ring's reader
// for a record of size bytes just reserved (bpf_ringbuf_reserve already
// counts it in the ring's unread data). The reader is woken each time the
// unread data crosses a multiple of wakeup_bytes, not for every record
// above the mark: a reader that is behind (awake, draining) would
// otherwise take a forced wake-up (an irq_work) per sample, which made the
// sampled path cost ~500 ns at 1 in 1. Nothing is lost by waking less: the
// reader drains the ring before it waits again, so a sleeping reader
// found it empty and the next crossing wakes it; should two CPUs' records
// race over the same multiple (each seeing the other's), the next
// multiple, or the worker's one-second tick, wakes it.
static __always_inline __u64 wake_flag(void *ring, __u64 size)
{
	__u64 avail, rec;

	if (wakeup_bytes == 0)
		return BPF_RB_FORCE_WAKEUP;
	// A record takes its 8-byte header plus its size rounded up to 8.
	rec = BPF_RINGBUF_HDR_SZ + ((size + 7) & ~7ULL);
	avail = bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA);
	if (avail < rec)
		return BPF_RB_FORCE_WAKEUP; // never expected: be safe
	if (avail / wakeup_bytes != (avail - rec) / wakeup_bytes)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

// wake_flag_output is wake_flag for bpf_ringbuf_output, which counts the
// record in the unread data only as it copies it: the crossing is judged
// from the data before it.
static __always_inline __u64 wake_flag_output(void *ring, __u64 size)
{
	__u64 avail, rec;

	if (wakeup_bytes == 0)
		return BPF_RB_FORCE_WAKEUP;
	rec = BPF_RINGBUF_HDR_SZ + ((size + 7) & ~7ULL);
	avail = bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA);
	if ((avail + rec) / wakeup_bytes != avail / wakeup_bytes)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

#endif // SFLOWSWITCHD_RING_H
