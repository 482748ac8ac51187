//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// tcsample.c: a benchmark baseline, written for sflowswitchd, that samples
// the way the host agent's eBPF module does (hsflowd mod_epcap and its
// sample.bpf.c, read for this purpose; no code taken): a TCX program on
// the port's ingress and egress that, for every packet,
//   1. looks the port's rate up in a HASH map keyed by skb->ifindex,
//   2. takes a random 1-in-N decision with bpf_get_prandom_u32() % N,
//   3. for a sampled packet reserves a fixed-size event in one BPF ring
//      buffer (64 KiB), copies up to 256 header bytes and submits it with
//      the ring's default adaptive wake-up.
// There is no per-packet pool and no count of events the ring could not
// take: the technique cannot know what it lost, and user space estimates
// sample_pool as samples x N.

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "Dual BSD/GPL";

// TCX_NEXT (include/uapi/linux/pkt_cls.h since 6.6): continue with the
// next program / the stack. Older UAPI headers lack it.
#ifndef TCX_NEXT
#define TCX_NEXT -1
#endif

#define MAX_PORTS 128
#define MAX_HDR 256
#define RING_BYTES (1 << 16)

// event: one sample, packed as the host agent's packet_event_t.
struct event {
	__u64 timestamp;
	__u32 ifindex;
	__u32 sampling_rate;
	__u32 ingress_ifindex;
	__u32 routed_ifindex;
	__u32 pkt_len;
	__u8 direction;
	__u8 hdr[MAX_HDR];
} __attribute__((packed));

// events: the one ring buffer all ports share.
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RING_BYTES);
} events SEC(".maps");

// sampling: ifindex -> N (0 = off).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} sampling SEC(".maps");

// routing: [0] != 0 asks for a FIB lookup of sampled ingress packets; the
// benchmark leaves it 0 (read per sample, as the host agent does).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} routing SEC(".maps");

static __always_inline void sample(struct __sk_buff *skb, __u8 direction)
{
	__u32 key = skb->ifindex, zero = 0, len, n;
	__u32 *rate = bpf_map_lookup_elem(&sampling, &key);
	__u32 *route;
	struct event *e;

	if (!rate || (*rate > 0 && bpf_get_prandom_u32() % *rate != 0))
		return;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return; // ring full: lost, and nobody counts it
	route = bpf_map_lookup_elem(&routing, &zero);
	e->timestamp = bpf_ktime_get_ns();
	e->ifindex = skb->ifindex;
	e->sampling_rate = *rate;
	e->ingress_ifindex = skb->ingress_ifindex;
	e->routed_ifindex = 0;
	(void)route; // routing off in the benchmark
	len = skb->len;
	e->pkt_len = len;
	e->direction = direction;
	n = len < MAX_HDR ? len : MAX_HDR;
	if (n == 0) {
		bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
		return;
	}
	// Bounds the verifier can see: Linux 6.1's does not narrow n on the
	// n != 0 branch and refuses a possibly zero-sized copy into the event
	// ("invalid access to memory ... size=0"). Here n - 1 is in
	// [0, MAX_HDR - 1], so the mask changes nothing; barrier_var keeps
	// the compiler from dropping it for that reason.
	barrier_var(n);
	n = ((n - 1) & (MAX_HDR - 1)) + 1;
	if (bpf_skb_load_bytes(skb, 0, e->hdr, n) < 0) {
		bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
		return;
	}
	bpf_ringbuf_submit(e, 0);
}

SEC("tcx/ingress")
int tc_ingress(struct __sk_buff *skb)
{
	sample(skb, 0);
	return TCX_NEXT;
}

SEC("tcx/egress")
int tc_egress(struct __sk_buff *skb)
{
	sample(skb, 1);
	return TCX_NEXT;
}
