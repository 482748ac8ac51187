//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// sampler.c: the XDP packet sampler of sflowswitchd (docs/ARCHITECTURE.md,
// "Packet sampling"; sflow_version_5.txt section 4, flow_sample.sample_pool and
// flow_sample.drops).
//
// For every frame received on a configured port the program
//   1. counts it into the port's sample_pool,
//   2. counts down this CPU's skip: frames to pass before the next sample
//      (sflow_version_5.txt section 4 and Appendix B: "a new skip value is
//      only required every time a sample is taken"). The skip is drawn from
//      the geometric distribution of mean 2^k - 1 when a sample is taken, so
//      the sampled frames are exactly those of an independent 1-in-2^k coin
//      per frame, while an unsampled frame costs a decrement and a compare,
//   3. for a sampled frame:
//      inline mode:  copies metadata + the first header bytes into the
//                    owning worker's BPF ring buffer and returns XDP_PASS
//                    (the frame itself is never modified or taken);
//      monitor mode: redirects the frame into the AF_XDP socket of its RX
//                    queue; unsampled frames are dropped (the port carries a
//                    copy of traffic: mirror/SPAN/TAP).
//   Every sampled frame that cannot be delivered (ring full, no socket)
//   is counted in the port's drops counter: nothing is lost silently.
//
// Ports without configuration (or mode OFF) get XDP_PASS untouched and are
// not counted.

#include "sampler.h"

char __license[] SEC("license") = "Dual BSD/GPL";

// take_progs: [0] = xdp_take_sample, installed by the loader.
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} take_progs SEC(".maps");

// xsks: AF_XDP sockets (monitor mode), key = port_config.xsk_base + RX
// queue. max_entries is set by the loader.
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

// emit_sample reserves a record of constant size (the verifier requires a
// constant reservation size, hence the size classes) in ring, fills the
// metadata and copies min(frame length, header_bytes, cls) bytes.
static __always_inline void emit_sample(struct xdp_md *ctx, void *ring,
					struct port_counters *c, __u32 ifindex,
					__u32 cpu, __u32 header_bytes, __u32 rate,
					const __u32 cls)
{
	struct sample_meta *m;
	__u32 frame_len, n;

	m = bpf_ringbuf_reserve(ring, sizeof(*m) + cls, 0);
	if (!m) {
		c->drops++; // ring full: counted, never silent
		return;
	}
	frame_len = bpf_xdp_get_buff_len(ctx);
	n = frame_len < header_bytes ? frame_len : header_bytes;
	if (n > cls)
		n = cls;
	if (n > 0) {
		// For 1 <= n <= cls (a power of two) this is n itself. The
		// barrier hides the range from clang, so the mask is kept and the
		// verifier sees 1 <= len <= cls on the very register passed (the
		// `if` checks above may be applied by clang to a copy).
		barrier_var(n);
		n = ((n - 1) & (cls - 1)) + 1;
		if (bpf_xdp_load_bytes(ctx, 0, m->data, n) < 0)
			n = 0;
	}

	m->ifindex = ifindex;
	m->frame_len = frame_len;
	m->rx_queue = ctx->rx_queue_index;
	m->cpu = cpu;
	m->timestamp_ns = bpf_ktime_get_ns();
	m->header_len = n;
	// The rate travels with the sample: a worker sub-samples each sample
	// against the rate it was really taken at, even while user space is
	// changing the port's configuration.
	m->sample_rate = rate;
	// The pool at this frame, on this CPU: the worker adds the other CPUs'
	// pools as their own latest samples reported them, so each flow sample
	// carries the port's pool at its sampling moment (agent/pool.go).
	m->pool = c->pool;
	bpf_ringbuf_submit(m, wake_flag(ring, sizeof(*m) + cls));
}

// sample_inline delivers a sampled frame to the owning worker's ring.
static __always_inline void sample_inline(struct xdp_md *ctx,
					  struct port_counters *c,
					  __u32 ifindex, __u32 cpu,
					  __u32 worker, __u32 header_bytes,
					  __u32 rate)
{
	void *ring = bpf_map_lookup_elem(&rings, &worker);

	if (!ring) {
		c->drops++; // no ring for this worker: counted
		return;
	}
	if (header_bytes <= 64)
		emit_sample(ctx, ring, c, ifindex, cpu, header_bytes, rate, 64);
	else if (header_bytes <= 128)
		emit_sample(ctx, ring, c, ifindex, cpu, header_bytes, rate, 128);
	else
		emit_sample(ctx, ring, c, ifindex, cpu, header_bytes, rate,
			    MAX_HEADER_BYTES);
}

// sample_monitor redirects a sampled frame into the AF_XDP socket of its RX
// queue. A failed redirect (no socket at that key) is a counted drop.
// Frames the kernel accepts here but the socket cannot queue (RX ring full)
// are counted by the socket (XDP_STATISTICS rx_dropped / rx_ring_full).
static __always_inline int sample_monitor(struct xdp_md *ctx,
					  struct port_counters *c,
					  __u32 xsk_base)
{
	__u32 key = xsk_base + ctx->rx_queue_index;
	long ret = bpf_redirect_map(&xsks, key, XDP_DROP);

	if (ret != XDP_REDIRECT) {
		c->drops++;
		return XDP_DROP;
	}
	return XDP_REDIRECT;
}

// take_sample is the path of a frame whose CPU's skip has run out (or was
// never drawn): it samples the frame, or (first frame after attach) draws
// the first skip, then draws the next skip (decide). Kept out of line so
// the per-packet path stays short. The port's config is read here only.
static __noinline int take_sample(struct xdp_md *ctx, struct port_counters *c,
				  __u32 ifindex, __u32 cpu)
{
	struct port_config *cfg = 0;
	__u32 rate = 0;

	switch (decide(c, ifindex, &cfg, &rate)) {
	case DECIDE_SAMPLE:
		break;
	case DECIDE_FIRST:
		if (cfg && cfg->mode == MODE_MONITOR)
			return XDP_DROP;
		return XDP_PASS;
	default:
		return XDP_PASS; // being configured or detached: no sample
	}
	if (!cfg)
		return XDP_PASS;
	if (cfg->mode == MODE_MONITOR)
		return sample_monitor(ctx, c, cfg->xsk_base);
	sample_inline(ctx, c, ifindex, cpu, cfg->worker, cfg->header_bytes,
		      rate);
	return XDP_PASS;
}

// xdp_sampler: one instance per sampled port (PORT_IMM constants). The
// per-packet path: this CPU's counter line of the port, pool + 1, skip - 1.
// A frame whose skip has run out goes on to xdp_take_sample (tail call);
// if that is missing the frame passes unsampled and the next frame tries
// again.
SEC("xdp.frags")
int xdp_sampler(struct xdp_md *ctx)
{
	__u32 cpu = bpf_get_smp_processor_id(), zero = 0;
	__u32 idx = (__u32)PORT_IMM(PORT_IMM_COUNTER_BASE) + cpu;
	struct port_counters *c = bpf_map_lookup_elem(&counters, &idx);
	struct sample_hand *h;

	if (!c)
		return XDP_PASS;
	c->pool++;
	if (c->skip) {
		c->skip--;
		return PORT_IMM(PORT_IMM_MODE) == MODE_MONITOR ? XDP_DROP : XDP_PASS;
	}
	h = bpf_map_lookup_elem(&sample_hands, &zero);
	if (!h)
		return XDP_PASS;
	h->ifindex = (__u32)PORT_IMM(PORT_IMM_IFINDEX);
	h->idx = idx;
	bpf_tail_call(ctx, &take_progs, 0);
	return XDP_PASS;
}

// xdp_take_sample: the sampled path of every port, loaded once and reached
// by tail call from a port's xdp_sampler on the same CPU (the hand-over in
// sample_hands is this CPU's, and XDP runs to completion per CPU).
SEC("xdp.frags")
int xdp_take_sample(struct xdp_md *ctx)
{
	__u32 zero = 0, idx;
	struct sample_hand *h = bpf_map_lookup_elem(&sample_hands, &zero);
	struct port_counters *c;

	if (!h)
		return XDP_PASS;
	idx = h->idx;
	c = bpf_map_lookup_elem(&counters, &idx);
	if (!c)
		return XDP_PASS;
	return take_sample(ctx, c, h->ifindex, bpf_get_smp_processor_id());
}

// xdp_floor does only what no sampler keeping an exact per-CPU pool and a
// skip countdown can avoid: find this CPU's counter line (slot 0: no
// per-port constant at all), count the frame and count the skip down. A benchmark baseline (the floor
// of the unsampled path); never attached by the daemon.
SEC("xdp.frags")
int xdp_floor(struct xdp_md *ctx)
{
	__u32 idx = bpf_get_smp_processor_id();
	struct port_counters *c = bpf_map_lookup_elem(&counters, &idx);

	if (!c)
		return XDP_PASS;
	c->pool++;
	if (c->skip) {
		c->skip--;
		return XDP_PASS;
	}
	c->skip = ~0ULL >> 1;
	return XDP_PASS;
}

// xdp_pass does nothing: the baseline for benchmarks.
SEC("xdp.frags")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}
