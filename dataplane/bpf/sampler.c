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

// What the shared paths of sampler.h need to know about XDP.
#define SAMPLER_CTX struct xdp_md
#define SAMPLER_PASS XDP_PASS
#define RECORD_SLACK 0 // the header is copied as the frame holds it

#include "sampler.h"

char __license[] SEC("license") = "Dual BSD/GPL";

// xsks: AF_XDP sockets (monitor mode), key = port_config.xsk_base + RX
// queue. max_entries is set by the loader.
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

// ctx_skb_addr (hook of sampler.h): an XDP frame has no sk_buff yet, so
// it is never followed to where it leaves (transit.h).
static __always_inline __u64 ctx_skb_addr(struct xdp_md *ctx)
{
	return 0;
}

// ---- The per-packet path: port_frame (sampler.h) and its hook ----

// ctx_unsampled (hook of sampler.h): an unsampled frame of a monitor port
// is dropped (the port carries a copy of traffic), of an inline port
// passed. The mode is the port's program's own constant (PORT_IMM).
static __always_inline int ctx_unsampled(void)
{
	return PORT_IMM(PORT_IMM_MODE) == MODE_MONITOR ? XDP_DROP : XDP_PASS;
}

// xdp_sampler: one instance per sampled port (PORT_IMM constants), the
// per-packet path (port_frame, sampler.h). A frame whose skip has run out
// goes on to xdp_take_sample.
SEC("xdp.frags")
int xdp_sampler(struct xdp_md *ctx)
{
	return port_frame(ctx);
}

// ---- The sampled path: take_handed (sampler.h) and its hooks ----

// ctx_frame_len (hook of sampler.h): the frame's length, all fragments.
static __always_inline __u32 ctx_frame_len(struct xdp_md *ctx)
{
	return bpf_xdp_get_buff_len(ctx);
}

// ctx_rx_queue (hook of sampler.h): the RX queue the frame arrived on.
static __always_inline __u32 ctx_rx_queue(struct xdp_md *ctx)
{
	return ctx->rx_queue_index;
}

// ctx_in_ifindex (hook of sampler.h): XDP samples at ingress only.
static __always_inline __u32 ctx_in_ifindex(struct xdp_md *ctx)
{
	return 0;
}

// ctx_tunnel (hook of sampler.h): an XDP program cannot read the skb's
// tunnel metadata (bpf_skb_get_tunnel_key is for TC); on a tunnel device
// (generic XDP, after decapsulation) the sample carries no SAMPLE_F_TUNNEL
// and user space gives it the device's own tunnel where that is fixed
// (tunnel.h). The loader puts tunnel devices on TC (dataplane/hook.go).
static __always_inline void ctx_tunnel(struct xdp_md *ctx, struct sample_meta *m)
{
}

// ctx_fib_seq (hook of route.h): the FIB generation of the receiving
// device's namespace (fib_seq.h).
static __always_inline __u32 ctx_fib_seq(struct xdp_md *ctx, int *ok)
{
	return xdp_fib_seq(ctx, ok);
}

// ctx_copy_header (hook of sampler.h) copies the first n bytes of the
// frame into data, 1 <= n <= cls. The frame at XDP is as it was received.
static __always_inline __u32 ctx_copy_header(struct xdp_md *ctx, __u8 *data,
					     __u32 n, const __u32 cls)
{
	// For 1 <= n <= cls (a power of two) the mask leaves n itself. The
	// barrier hides the range from clang, so the mask is kept and the
	// verifier sees 1 <= len <= cls on the very register passed (the
	// caller's checks may be applied by clang to a copy).
	barrier_var(n);
	n = ((n - 1) & (cls - 1)) + 1;
	if (bpf_xdp_load_bytes(ctx, 0, data, n) < 0)
		return 0;
	return n;
}

// ctx_monitor (hook of sampler.h): a monitor port's sampled frame is
// redirected into the AF_XDP socket of its RX queue; any other frame of
// the port is dropped (the port carries a copy of traffic). A failed
// redirect (no socket at that key) is a counted drop. Frames the kernel
// accepts here but the socket cannot queue (RX ring full) are counted by
// the socket (XDP_STATISTICS rx_dropped / rx_ring_full).
static __always_inline int ctx_monitor(struct xdp_md *ctx,
				       struct port_counters *c,
				       struct port_config *cfg, int sampled)
{
	__u32 key;

	if (!sampled)
		return XDP_DROP;
	key = cfg->xsk_base + ctx->rx_queue_index;
	if (bpf_redirect_map(&xsks, key, XDP_DROP) != XDP_REDIRECT) {
		c->drops++;
		return XDP_DROP;
	}
	return XDP_REDIRECT;
}

// xdp_take_sample: the sampled path of every port (take_handed,
// sampler.h), loaded once and installed in take_progs.
SEC("xdp.frags")
int xdp_take_sample(struct xdp_md *ctx)
{
	return take_handed(ctx);
}

// ---- Benchmark baselines ----

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

// ---- Types for user space ----

// sample_meta_type is never called, so never loaded: its parameter puts
// struct sample_meta (sampler.h) into the object's BTF, from which bpf2go
// generates the record's Go type (bpf.SamplerSampleMeta, dataplane/bpf/gen.go -type
// sample_meta) that dataplane/ring.go decodes with. (A global variable of
// the type would do the same but adds a map, or a variable, to the object.)
__attribute__((unused)) int sample_meta_type(struct sample_meta *m)
{
	return 0;
}
