// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// sampler.h: what the two packet samplers share: the XDP sampler
// (sampler.c) and the TC sampler (tc_sampler.c) count into the same
// counters, read the same port configs and write the same ring records,
// so a port's pool, skip and samples mean the same whichever hook runs
// it. Each object declares these maps; the loader (dataplane) creates
// them once, with the XDP object, and hands them to the TC object.
//
// The two programs' paths are written once, here, at the end: the
// per-frame path of a port's program (port_frame), the sampled path
// (take_sample: decide, then the record into the owning worker's ring)
// and the body of the sampled-path program (take_handed). What differs
// between XDP and TC stays in the program that includes this header,
// which first says
//
//   SAMPLER_CTX   its context type (struct xdp_md, struct __sk_buff)
//   SAMPLER_PASS  its verdict for a frame it lets through (XDP_PASS,
//                 TC_ACT_UNSPEC)
//   RECORD_SLACK  bytes a record has beyond its size class (TC: room for
//                 a VLAN tag put back into the header)
//
// and then defines the hooks declared below ("Hooks"): the frame's length,
// its RX queue, how its first bytes are copied, the verdict for an
// unsampled frame, and what monitor mode does with a frame.

#ifndef SFLOWSWITCHD_SAMPLER_H
#define SFLOWSWITCHD_SAMPLER_H

#if !defined(SAMPLER_CTX) || !defined(SAMPLER_PASS) || !defined(RECORD_SLACK)
#error "define SAMPLER_CTX, SAMPLER_PASS and RECORD_SLACK before including sampler.h"
#endif

// SAMPLER_EGRESS: 1 in the egress sampler (tc_egress.c), whose records
// carry SAMPLE_F_EGRESS; 0 (ingress) unless the program says so.
#ifndef SAMPLER_EGRESS
#define SAMPLER_EGRESS 0
#endif

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

// MAX_IFINDEX bounds the per-port config array, which is indexed directly by
// the ingress ifindex. An ARRAY (not a HASH) is used because the verifier
// inlines ARRAY lookups into a bounds check plus pointer arithmetic (no
// helper call, no hashing): the cheapest possible lookup for the per-packet
// path. 65536 entries x 24 bytes = 1.5 MiB. Ports with a larger ifindex (the
// kernel's ifindex is any positive 32-bit value) are configured in the hash
// map port_configs_high instead: only their frames pay for hashing.
#define MAX_IFINDEX 65536

// MAX_HEADER_BYTES is the largest header copy (sFlowFsMaximumHeaderSize
// upper bound we support).
#define MAX_HEADER_BYTES 256

// Port modes (port_config.mode). Keep in sync with dataplane.Mode.
#define MODE_OFF 0
#define MODE_INLINE 1
#define MODE_MONITOR 2

// Port kinds (port_config.kind): whether the port is a tunnel device.
// Keep in sync with dataplane.PortKind. Written by user space; read on
// the sampled path only (fill_sample: ctx_tunnel, tunnel.h).
#define PORT_KIND_PLAIN 0
#define PORT_KIND_VXLAN 1 // a VXLAN device: frames decapsulated or to be encapsulated
#define PORT_KIND_GRE 2   // an Ethernet-over-GRE device (gretap, ip6gretap)

// Port flags (port_config.flags). Keep in sync with dataplane (portFlag*).
#define PORT_F_TRANSIT (1U << 0) // follow sampled frames to where they leave (transit.h; TC only)

// port_config: per-port sampling configuration, written by user space.
// The same entry serves both directions of a port: the ingress program
// (xdp_sampler or tc_sampler) and the egress program (tc_egress_sampler)
// are attached per direction, each with its own counters.
struct port_config {
	__u32 sample_mask;  // rate 2^k -> 2^k-1; rate 1 -> 0 (sample everything)
	__u32 mode;         // MODE_OFF, MODE_INLINE or MODE_MONITOR
	__u32 header_bytes; // bytes of the frame copied into a sample, 1..256
	__u32 worker;       // index of the owning worker's ring in `rings`
	__u32 slot;         // counter slot of the port in `counters`
	__u32 xsk_base;     // key of RX queue 0 of this port in `xsks`
	__u32 kind;         // PORT_KIND_*
	__u32 flags;        // PORT_F_*
	// skip_scale = round(2^SKIP_SCALE_SHIFT / -log2(1 - 2^-k)), 0 for rate
	// 1: turns -log2(U), U uniform in (0,1], into a geometric skip
	// (draw_skip). Computed by user space (dataplane.skipScale).
	__u64 skip_scale;
};

// SKIP_SCALE_SHIFT: fixed-point fraction bits of port_config.skip_scale.
#define SKIP_SCALE_SHIFT 12

// port_counters: one CPU's counters of one port, padded to a 64-byte cache
// line so two CPUs never write the same line (no false sharing).
struct port_counters {
	__u64 pool;    // frames seen by the sampler (sFlow sample_pool)
	__u64 samples; // frames selected by the random test
	__u64 drops;   // selected frames that could not be delivered
	__u64 skip;    // frames this CPU still passes before its next sample
	__u32 rate;    // rate the current skip was drawn at; 0 = not drawn yet
	__u32 _pad0;
	__u64 _pad[3];
};

#include "sample_info.h"
#include "ring.h"
#include "transit.h"

// Per-port constants: every attached port runs its own instance of
// xdp_sampler, loaded with these set (dataplane.AttachPort). The per-packet
// path then needs neither the ingress ifindex (three dependent loads:
// xdp_buff -> rxq -> dev -> ifindex) nor the port's config entry: it goes
// from the CPU number straight to the port's counter line. The config map
// is read only when a sample is taken.
//
// The two constants of the per-packet path are 64-bit immediates in the
// instructions themselves (PORT_IMM), which the loader patches per port
// (dataplane.patchImm): a read-only global would still cost a load from
// the program's .rodata map on every frame.
#define PORT_IMM_COUNTER_BASE 0x5f5f5eb1c0b4a5e1ULL // -> slot * cpu_slots
#define PORT_IMM_MODE 0x5f5f5eb1c0b4a5e2ULL         // -> MODE_INLINE or MODE_MONITOR
#define PORT_IMM_IFINDEX 0x5f5f5eb1c0b4a5e3ULL      // -> the port's ifindex

#define PORT_IMM(magic)                                            \
	({                                                         \
		__u64 __v;                                         \
		asm volatile("%[v] = %[m] ll" : [v] "=r"(__v) : [m] "i"(magic)); \
		__v;                                               \
	})

// sample_hands: per-CPU hand-over from a port's program (xdp_sampler,
// tc_sampler) to the sampled-path program (xdp_take_sample,
// tc_take_sample), which the port's program tail-calls for a frame whose
// skip has run out. Keeping the sampled path in one program loaded once
// keeps each port's own program a few instructions long: loading (and
// verifying) it per port costs little (a start-up with 1000 ports).
struct sample_hand {
	__u32 ifindex; // the port
	__u32 idx;     // its counter line of this CPU in `counters`
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sample_hand);
} sample_hands SEC(".maps");

// take_progs: [0] = the object's sampled-path program (xdp_take_sample,
// tc_take_sample), installed by the loader; port_frame tail-calls it.
// Not shared between the objects: a tail call needs a program array of
// the caller's program type.
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} take_progs SEC(".maps");

// cpu_slots is the number of possible CPUs (set by the loader before load;
// constant to the verifier). Counter index = slot * cpu_slots + cpu.
volatile const __u32 cpu_slots = 1;


// port_configs: struct port_config keyed by ingress ifindex.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_IFINDEX);
	__type(key, __u32);
	__type(value, struct port_config);
} port_configs SEC(".maps");

// port_configs_high: struct port_config keyed by ingress ifindex, for ports
// whose ifindex is >= MAX_IFINDEX. max_entries is set by the loader (the
// number of port slots).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct port_config);
} port_configs_high SEC(".maps");

// counters: struct port_counters at index slot * cpu_slots + cpu.
//
// Why plain (non-atomic) increments are correct: an XDP program runs with
// migration disabled and XDP processing on one CPU is serialized (NAPI /
// softirq, or netif_receive_skb for generic XDP), so each element has
// exactly one writer: the CPU that owns it. No cross-CPU atomics, no shared
// cache lines. BPF_F_MMAPABLE lets user space map the array and read the
// counters with plain aligned 64-bit loads, without a syscall. max_entries
// is set by the loader to MaxPorts * cpu_slots.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct port_counters);
} counters SEC(".maps");


#include "route.h"

// neg_log2_q16 returns -log2(U) in Q16 fixed point for U = (r + 1) / 2^32,
// uniform in (0, 1] when r is uniform in 0..2^32-1: the result is in
// [0, 32 << 16]. Integer part from the most significant bit, 16 fraction
// bits by repeated squaring of the mantissa (each square doubles the
// logarithm; a result >= 2 gives a 1 bit). Per sample only.
static __always_inline __u64 neg_log2_q16(__u32 r)
{
	__u64 x = (__u64)r + 1, y = x, m;
	__u32 n = 0, frac = 0;

	if (y >> 32) { n += 32; y >>= 32; }
	if (y >> 16) { n += 16; y >>= 16; }
	if (y >> 8) { n += 8; y >>= 8; }
	if (y >> 4) { n += 4; y >>= 4; }
	if (y >> 2) { n += 2; y >>= 2; }
	if (y >> 1) { n += 1; }
	// mantissa in Q31: [2^31, 2^32) stands for [1, 2)
	m = n <= 31 ? x << (31 - n) : x >> (n - 31);
#pragma unroll
	for (int i = 0; i < 16; i++) {
		m = (m * m) >> 31; // [1, 4) in Q31
		frac <<= 1;
		if (m >> 32) {
			m >>= 1;
			frac |= 1;
		}
	}
	return ((__u64)32 << 16) - (((__u64)n << 16) | frac);
}

// draw_skip returns a geometric random number of frames to pass before the
// next sample, P(skip = g) = (1-p)^g p with p = 2^-k: floor(ln U / ln(1-p))
// for U uniform in (0, 1] (inversion; the discrete geometric is exactly the
// floor of an exponential), computed as -log2(U) * scale with scale =
// 1 / -log2(1-p) in fixed point. Rate 1 (scale 0) always gives 0. The
// largest skip, -log2(2^-32) * scale, is about 22 times the mean: the tail
// cut is e^-22. bpf_get_prandom_u32 is called only here, once per sample.
static __always_inline __u64 draw_skip(__u64 scale)
{
	if (!scale)
		return 0;
	return (neg_log2_q16(bpf_get_prandom_u32()) * scale) >>
	       (16 + SKIP_SCALE_SHIFT);
}

// lookup_high returns the config of a port whose ifindex is >= MAX_IFINDEX.
// It is a separate BPF function (noinline) on purpose: with both lookups in
// one function clang merges them into one call on a map pointer chosen at
// run time, which the verifier cannot inline, and the array lookup of every
// other port becomes a helper call (measured: +18 ns per unsampled frame).
static __noinline struct port_config *lookup_high(__u32 ifindex)
{
	return bpf_map_lookup_elem(&port_configs_high, &ifindex);
}

// Outcomes of decide for a frame whose CPU's skip has run out.
#define DECIDE_NO_CONFIG 0 // no config, or mode off: the port is being set up or torn down
#define DECIDE_FIRST 1     // first frame since the slot was zeroed: only the first skip was drawn
#define DECIDE_SAMPLE 2    // take this frame as a sample

// decide is the common part of both samplers' sampled path, for a frame
// whose CPU's skip has run out (or was never drawn): it reads the port's
// config (*cfgp), draws the next skip at the port's current rate and, for
// DECIDE_SAMPLE, counts the sample and sets *rate to the rate the frame
// was selected at (the rate of the skip that just ran out; it travels in
// the record, so the worker sub-samples against it even while user space
// is changing the port's rate).
static __always_inline int decide(struct port_counters *c, __u32 ifindex,
				  struct port_config **cfgp, __u32 *rate)
{
	__u32 prev = c->rate, mode;
	struct port_config *cfg;
	__u64 skip;

	if (ifindex < MAX_IFINDEX)
		cfg = bpf_map_lookup_elem(&port_configs, &ifindex);
	else
		cfg = lookup_high(ifindex);
	if (!cfg)
		return DECIDE_NO_CONFIG;
	mode = cfg->mode;
	if (mode != MODE_INLINE && mode != MODE_MONITOR)
		return DECIDE_NO_CONFIG;
	*cfgp = cfg;

	c->rate = cfg->sample_mask + 1;
	skip = draw_skip(cfg->skip_scale);
	if (!prev && skip) {
		// First frame of this CPU since the slot was zeroed: it is the
		// first trial of the first skip.
		c->skip = skip - 1;
		return DECIDE_FIRST;
	}
	c->skip = skip;
	*rate = prev ? prev : c->rate;
	c->samples++;
	return DECIDE_SAMPLE;
}

// Hooks: each program defines these (static __always_inline), for its
// context; the paths below call them.

// ctx_frame_len returns the frame's full length as it was on the wire
// (all fragments).
static __always_inline __u32 ctx_frame_len(SAMPLER_CTX *ctx);

// ctx_rx_queue returns the RX queue the frame arrived on.
static __always_inline __u32 ctx_rx_queue(SAMPLER_CTX *ctx);

// ctx_copy_header copies the frame's first n bytes, as they were on the
// wire, into data (1 <= n <= cls, cls a power of two >= 64; data has room
// for cls + RECORD_SLACK bytes). Returns the bytes copied, 0 on failure.
static __always_inline __u32 ctx_copy_header(SAMPLER_CTX *ctx, __u8 *data,
					     __u32 n, const __u32 cls);

// ctx_unsampled returns the verdict for a frame that is not sampled.
static __always_inline int ctx_unsampled(void);

// ctx_skb_addr returns the address of the frame's sk_buff (transit.h), 0
// where there is none (XDP) or the kernel cannot tell (no
// bpf_cast_to_kern_ctx, before 6.2).
static __always_inline __u64 ctx_skb_addr(SAMPLER_CTX *ctx);

// ctx_in_ifindex returns the port the frame came in on, for an egress
// sample (skb_iif; 0 for a frame made here), 0 at ingress.
static __always_inline __u32 ctx_in_ifindex(SAMPLER_CTX *ctx);


// ctx_tunnel fills m->tunnel (and sets SAMPLE_F_TUNNEL) from the tunnel
// metadata the kernel attached to the frame, where the program can read
// it (TC: tunnel.h); called on the sampled path of a tunnel device's
// frame only (port_config.kind).
static __always_inline void ctx_tunnel(SAMPLER_CTX *ctx, struct sample_meta *m);

// ctx_monitor returns the verdict for a frame of a monitor-mode port whose
// skip ran out: sampled (a sample counted by decide) or not (only the
// first skip was drawn).
static __always_inline int ctx_monitor(SAMPLER_CTX *ctx,
				       struct port_counters *c,
				       struct port_config *cfg, int sampled);

// port_frame is the per-packet path of a port's program (xdp_sampler,
// tc_sampler; one instance per port, PORT_IMM constants): this CPU's
// counter line of the port, pool + 1, skip - 1, and the verdict
// ctx_unsampled. A frame whose skip has run out is handed over (this CPU's
// sample_hands) to the sampled-path program in take_progs (tail call).
// Should that be missing, the frame gets SAMPLER_PASS unsampled and the
// next frame tries again.
static __always_inline int port_frame(SAMPLER_CTX *ctx)
{
	__u32 cpu = bpf_get_smp_processor_id(), zero = 0;
	__u32 idx = (__u32)PORT_IMM(PORT_IMM_COUNTER_BASE) + cpu;
	struct port_counters *c = bpf_map_lookup_elem(&counters, &idx);
	struct sample_hand *h;

	if (!c)
		return SAMPLER_PASS;
	c->pool++;
	if (c->skip) {
		c->skip--;
		return ctx_unsampled();
	}
	h = bpf_map_lookup_elem(&sample_hands, &zero);
	if (!h)
		return SAMPLER_PASS;
	h->ifindex = (__u32)PORT_IMM(PORT_IMM_IFINDEX);
	h->idx = idx;
	bpf_tail_call(ctx, &take_progs, 0);
	return SAMPLER_PASS;
}

// MAX_POOL_SUM_CPUS bounds port_pool_sum's loop for the verifier. With
// more possible CPUs than this the sum is not taken and a sample carries
// its CPU's pool alone (no SAMPLE_F_POOL_SUM).
#define MAX_POOL_SUM_CPUS 1024

// port_pool_sum returns the port's pool in this direction at this frame:
// every CPU's count (the counter lines base .. base + cpu_slots - 1), read
// now, while this CPU holds the sampled frame (sFlow v5 section 4,
// flow_sample.sample_pool: "total number of packets that could have been
// sampled"). The other CPUs' counts are read with plain loads while their
// owners may be adding to them: each read is one of the values the count
// went through, so the sum is the pool at a moment within this read.
// Only the sampled path pays: cpu_slots cache-line reads per sample, none
// per unsampled frame. Returns 0 where the sum cannot be taken.
static __always_inline __u64 port_pool_sum(__u32 base)
{
	__u64 sum = 0;
	__u32 i, idx;
	struct port_counters *o;

	if (cpu_slots > MAX_POOL_SUM_CPUS)
		return 0;
	for (i = 0; i < MAX_POOL_SUM_CPUS; i++) {
		if (i >= cpu_slots)
			break;
		idx = base + i;
		o = bpf_map_lookup_elem(&counters, &idx);
		if (!o)
			return 0;
		sum += *(volatile __u64 *)&o->pool;
	}
	return sum;
}

// fill_sample fills a record m of size class cls: the metadata, and
// min(frame length, header_bytes, cls) bytes of the frame
// (ctx_copy_header), then what the kernel knows about the frame
// (sample_info.h): its direction and input port, its route (route.h).
static __always_inline void fill_sample(SAMPLER_CTX *ctx, struct sample_meta *m,
					struct port_counters *c, __u32 ifindex,
					__u32 cpu, __u32 base,
					struct port_config *cfg, __u32 rate,
					const __u32 cls)
{
	__u32 header_bytes = cfg->header_bytes;
	__u32 len, n;

	len = ctx_frame_len(ctx);
	n = len < header_bytes ? len : header_bytes;
	if (n > cls)
		n = cls;
	if (n > 0)
		n = ctx_copy_header(ctx, m->data, n, cls);

	m->ifindex = ifindex;
	m->frame_len = len;
	m->rx_queue = ctx_rx_queue(ctx);
	m->cpu = cpu;
	m->timestamp_ns = bpf_ktime_get_ns();
	m->header_len = n;
	// The rate travels with the sample: a worker sub-samples each sample
	// against the rate it was really taken at, even while user space is
	// changing the port's configuration.
	m->sample_rate = rate;
	// The port's pool at this frame: every CPU's count (port_pool_sum).
	// Should the sum be unavailable, this CPU's count alone, to which the
	// worker adds the other CPUs' as their own latest samples reported
	// them (agent/pool.go).
	m->flags = SAMPLER_EGRESS ? SAMPLE_F_EGRESS : 0;
	m->pool = port_pool_sum(base);
	if (m->pool)
		m->flags |= SAMPLE_F_POOL_SUM;
	else
		m->pool = c->pool;
	m->in_ifindex = ctx_in_ifindex(ctx);
	sample_route(ctx, m, ifindex, SAMPLER_EGRESS ? m->in_ifindex : ifindex);
	// A tunnel device's frame: the outer header the kernel removed or
	// will add (tunnel.h). The kind is read here, on the sampled path
	// only: an unsampled frame never looks at it.
	if (cfg->kind != PORT_KIND_PLAIN) {
		m->flags |= SAMPLE_F_TUNNEL_PORT;
		ctx_tunnel(ctx, m);
	}
}

// emit_sample reserves a record of constant size (the verifier requires a
// constant reservation size, hence the size classes cls) in ring, fills
// it (fill_sample) and submits it.
static __always_inline void emit_sample(SAMPLER_CTX *ctx, void *ring,
					struct port_counters *c, __u32 ifindex,
					__u32 cpu, __u32 base,
					struct port_config *cfg, __u32 rate,
					const __u32 cls)
{
	const __u64 size = sizeof(struct sample_meta) + cls + RECORD_SLACK;
	struct sample_meta *m;

	m = bpf_ringbuf_reserve(ring, size, 0);
	if (!m) {
		c->drops++; // ring full: counted, never silent
		return;
	}
	fill_sample(ctx, m, c, ifindex, cpu, base, cfg, rate, cls);
	bpf_ringbuf_submit(m, wake_flag(ring, size));
}

// transit_scratch: per-CPU room to build a record that is to be parked
// (transit_track), since a map update copies from memory of the program.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct transit_entry);
} transit_scratch SEC(".maps");

// transit_track parks a sampled frame's record until the frame leaves
// (transit.h), for a port with PORT_F_TRANSIT at TC (ctx_skb_addr gives
// the frame's sk_buff): the record is built in this CPU's scratch, in the
// largest size class, and copied into transit_pending. Should it not be
// parked (the table full, its address still parked, no sk_buff), it goes
// to the ring at once, without transit. Returns 0 when the frame is not
// to be followed (the caller emits it as usual).
static __always_inline int transit_track(SAMPLER_CTX *ctx, void *ring,
					 struct port_counters *c, __u32 ifindex,
					 __u32 cpu, __u32 base,
					 struct port_config *cfg, __u32 rate)
{
	__u32 zero = 0;
	struct transit_entry *e;
	struct transit_stats *st;
	struct sample_meta *m;
	__u64 key;

	if (!(cfg->flags & PORT_F_TRANSIT))
		return 0;
	key = ctx_skb_addr(ctx);
	if (!key)
		return 0;
	e = bpf_map_lookup_elem(&transit_scratch, &zero);
	if (!e)
		return 0;
	m = (struct sample_meta *)e->rec;
	fill_sample(ctx, m, c, ifindex, cpu, base, cfg, rate, MAX_HEADER_BYTES);
	m->flags |= SAMPLE_F_TRANSIT;
	m->transit.status = 0;
	m->transit.depth = 0;
	e->state = TRANSIT_WAITING;
	e->worker = cfg->worker;
	st = transit_stat();
	// Counted before it is visible, so that a program finishing it at
	// once never takes the count below zero.
	transit_parked_add(1);
	if (bpf_map_update_elem(&transit_pending, &key, e, BPF_NOEXIST) == 0) {
		if (st)
			st->parked++;
		return 1;
	}
	transit_parked_add(-1);
	if (st)
		st->unparked++;
	m->flags &= ~SAMPLE_F_TRANSIT;
	if (bpf_ringbuf_output(ring, m, TRANSIT_REC_BYTES,
			       wake_flag_output(ring, TRANSIT_REC_BYTES)) < 0)
		c->drops++; // ring full: counted, never silent
	return 1;
}

// sample_inline delivers a sampled frame to the owning worker's ring, in
// the smallest size class that holds the port's header_bytes, or parks
// it until the frame leaves (transit_track).
static __always_inline void sample_inline(SAMPLER_CTX *ctx,
					  struct port_counters *c,
					  __u32 ifindex, __u32 cpu, __u32 base,
					  struct port_config *cfg, __u32 rate)
{
	__u32 worker = cfg->worker, header_bytes = cfg->header_bytes;
	void *ring = bpf_map_lookup_elem(&rings, &worker);

	if (!ring) {
		c->drops++; // no ring for this worker: counted
		return;
	}
	if (transit_track(ctx, ring, c, ifindex, cpu, base, cfg, rate))
		goto wake;
	if (header_bytes <= 64)
		emit_sample(ctx, ring, c, ifindex, cpu, base, cfg, rate, 64);
	else if (header_bytes <= 128)
		emit_sample(ctx, ring, c, ifindex, cpu, base, cfg, rate, 128);
	else
		emit_sample(ctx, ring, c, ifindex, cpu, base, cfg, rate,
			    MAX_HEADER_BYTES);
wake:
	ring_wake_idle(ring, worker);
}

// take_sample is the path of a frame whose CPU's skip has run out (or was
// never drawn): it samples the frame, or (first frame after attach) draws
// the first skip, then draws the next skip (decide). Kept out of line so
// the per-packet path stays short. The port's config is read here only.
static __noinline int take_sample(SAMPLER_CTX *ctx, struct port_counters *c,
				  __u32 ifindex, __u32 cpu, __u32 base)
{
	struct port_config *cfg = 0;
	__u32 rate = 0;
	int d = decide(c, ifindex, &cfg, &rate);

	if (d == DECIDE_NO_CONFIG || !cfg)
		return SAMPLER_PASS; // being configured or detached: no sample
	if (cfg->mode == MODE_MONITOR)
		return ctx_monitor(ctx, c, cfg, d == DECIDE_SAMPLE);
	if (d == DECIDE_SAMPLE)
		sample_inline(ctx, c, ifindex, cpu, base, cfg, rate);
	return SAMPLER_PASS;
}

// take_handed is the body of the sampled-path program (xdp_take_sample,
// tc_take_sample), loaded once and reached by tail call from a port's
// program on the same CPU: the hand-over in sample_hands is this CPU's,
// and the program runs to completion on it.
static __always_inline int take_handed(SAMPLER_CTX *ctx)
{
	__u32 zero = 0, idx, cpu = bpf_get_smp_processor_id();
	struct sample_hand *h = bpf_map_lookup_elem(&sample_hands, &zero);
	struct port_counters *c;

	if (!h)
		return SAMPLER_PASS;
	idx = h->idx;
	c = bpf_map_lookup_elem(&counters, &idx);
	if (!c || idx < cpu)
		return SAMPLER_PASS;
	// idx is the port's counter line of this CPU: slot * cpu_slots + cpu
	// (port_frame), so the port's lines start at idx - cpu.
	return take_sample(ctx, c, h->ifindex, cpu, idx - cpu);
}

#endif // SFLOWSWITCHD_SAMPLER_H
