//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// gen.c: the frame generator of the benchmarks (bench/gen; the technique of
// xdp-project's xdp-trafficgen). The program is never attached to a device:
// user space runs it with BPF_PROG_RUN in live-frames mode
// (BPF_F_TEST_XDP_LIVE_FRAMES, Linux 5.18; Documentation/bpf/
// bpf_prog_run.rst), where every run turns one copy of the template frame
// (data_in) into a real xdp_frame, and an XDP_REDIRECT sends it out of a
// device like a driver's redirect does. Here that device is a veth in a lab
// host namespace: the frame crosses the veth and is received by its peer,
// the switch port, through the port's ordinary NAPI receive.
//
// Per run, gen_frame
//   1. picks the next frame length and the next flow (cycled, one step per
//      frame: the mix is exact over any whole number of cycles),
//   2. shrinks the template to that length (bpf_xdp_adjust_tail; the
//      kernel restores the frame's bounds before the next run on the page,
//      not its bytes, so every field that varies is written whole),
//   3. writes the IPv4 total length, the UDP length, the flow's UDP source
//      port and the IPv4 header checksum (UDP checksum 0: none, RFC 768),
//   4. redirects the frame into tx_port (one devmap entry: the veth).
// gen_xmit counts, at each flush of the devmap's bulk queue
// (tracepoint xdp:xdp_devmap_xmit), the frames the veth accepted and those
// it refused (its peer's ring full): the generator's exact count of frames
// sent, which equals the switch port's rx_packets.
//
// counters[cpu]: runs = redirected + bad; redirected = sent + dropped once
// the last batch is flushed (BPF_PROG_RUN flushes before it returns).

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>

char __license[] SEC("license") = "Dual BSD/GPL";

// MAX_SIZES is the longest frame-length cycle.
#define MAX_SIZES 64

// Set by the loader before the program is loaded (read-only to it).
// frame_len[0..size_count-1]: frame lengths without FCS, in the order sent;
// each <= the template's length and >= 60. flow_count: UDP source ports
// sport_base .. sport_base + flow_count - 1, one per frame in turn.
// target_ifindex, target_netns: the veth's ifindex and the inode of its
// network namespace, which gen_xmit counts (other devices are ignored).
volatile const __u32 size_count = 1;
volatile const __u32 frame_len[MAX_SIZES] = { 60 };
volatile const __u32 flow_count = 1;
volatile const __u16 sport_base = 10000;
volatile const __u32 target_ifindex = 0;
volatile const __u32 target_netns = 0;
// magic: the first 8 bytes of the template's UDP payload. The program is
// also attached to the veth it sends from (see gen_frame), where a frame
// without it is left alone.
volatile const __u64 magic = 0;

// gen_counters: one per CPU.
struct gen_counters {
	__u64 runs;       // program runs
	__u64 redirected; // frames handed to the redirect (XDP_REDIRECT)
	__u64 bad;        // frames that could not be shrunk (dropped: never)
	__u64 sent;       // frames the veth accepted (ndo_xdp_xmit)
	__u64 dropped;    // frames the veth refused (peer ring full)
	__u64 flushes;    // bulk-queue flushes to the veth
	__u64 errors;     // flushes that failed as a whole (err != 0)
	__u64 bytes;      // bytes of the redirected frames (without FCS)
};

// gen_cycle: where the cycles stand, shared by all CPUs (the sending
// thread may move between CPUs from one BPF_PROG_RUN call to the next; one
// thread sends at a time, so the cycles stay exact).
struct gen_cycle {
	__u32 size_idx; // next index into frame_len
	__u32 flow_idx; // next flow
};

// counters: per-CPU array, one entry.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_counters);
} counters SEC(".maps");

// cycle: array, one entry.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_cycle);
} cycle SEC(".maps");

// tx_port: devmap, one entry (key 0): the veth the frames leave through.
// Its ifindex is resolved in the updater's network namespace.
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} tx_port SEC(".maps");

// Kernel structures for gen_xmit, only the fields read, relocated by name
// at load time (CO-RE), so no vmlinux.h is needed.
struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct net_device {
	int ifindex;
	possible_net_t nd_net;
} __attribute__((preserve_access_index));

// ip_csum returns the IPv4 header checksum of the 20-byte header iph
// (RFC 791; the check field must be 0).
static __always_inline __u16 ip_csum(const struct iphdr *iph)
{
	const __u16 *w = (const __u16 *)iph;
	__u32 s = 0;

#pragma unroll
	for (int i = 0; i < (int)(sizeof(*iph) / 2); i++)
		s += w[i];
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)~s;
}

// gen_frame makes one frame per run. It is also attached (XDP, native) to
// the veth it sends from, only so that the kernel's XDP dispatcher holds
// it for good: BPF_PROG_RUN with a repeat count adds the program to the
// dispatcher and removes it again after the run, and the removal waits
// for an RCU grace period (tens of ms on a busy VM) unless another user
// holds it there. Frames the veth receives do not carry the magic and
// pass untouched, uncounted.
SEC("xdp")
int gen_frame(struct xdp_md *ctx)
{
	__u32 zero = 0, len, full, idx;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct gen_counters *c;
	struct gen_cycle *cy;
	struct ethhdr *eth;
	struct iphdr *iph;
	struct udphdr *udp;
	__u64 *m = data + sizeof(*eth) + sizeof(*iph) + sizeof(*udp);

	if ((void *)(m + 1) > data_end || *m != magic)
		return XDP_PASS;
	c = bpf_map_lookup_elem(&counters, &zero);
	cy = bpf_map_lookup_elem(&cycle, &zero);
	if (!c || !cy)
		return XDP_ABORTED;
	c->runs++;

	idx = cy->size_idx;
	if (idx >= MAX_SIZES) // bounds check for the verifier; never true
		idx = 0;
	len = frame_len[idx];
	cy->size_idx = idx + 1 < size_count ? idx + 1 : 0;

	full = ctx->data_end - ctx->data;
	if (len < full && bpf_xdp_adjust_tail(ctx, (int)len - (int)full)) {
		c->bad++;
		return XDP_DROP;
	}

	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	iph = (void *)(eth + 1);
	udp = (void *)(iph + 1);
	if ((void *)(udp + 1) > data_end) {
		c->bad++;
		return XDP_DROP;
	}
	len = data_end - data;

	iph->tot_len = bpf_htons(len - sizeof(*eth));
	iph->check = 0;
	iph->check = ip_csum(iph);
	udp->len = bpf_htons(len - sizeof(*eth) - sizeof(*iph));
	udp->source = bpf_htons(sport_base + cy->flow_idx);
	udp->check = 0;
	cy->flow_idx = cy->flow_idx + 1 < flow_count ? cy->flow_idx + 1 : 0;

	if (bpf_redirect_map(&tx_port, 0, 0) != XDP_REDIRECT) {
		c->bad++;
		return XDP_DROP;
	}
	c->redirected++;
	c->bytes += len;
	return XDP_REDIRECT;
}

// gen_xmit: at every flush of a devmap bulk queue, the frames the target
// device's ndo_xdp_xmit accepted (sent) and refused (drops).
SEC("tp_btf/xdp_devmap_xmit")
int BPF_PROG(gen_xmit, const struct net_device *from_dev,
	     const struct net_device *to_dev, int sent, int drops, int err)
{
	__u32 zero = 0;
	struct gen_counters *c;

	if (to_dev->ifindex != (int)target_ifindex ||
	    to_dev->nd_net.net->ns.inum != target_netns)
		return 0;
	c = bpf_map_lookup_elem(&counters, &zero);
	if (!c)
		return 0;
	if (sent > 0)
		c->sent += sent;
	if (drops > 0)
		c->dropped += drops;
	c->flushes++;
	if (err)
		c->errors++;
	return 0;
}
