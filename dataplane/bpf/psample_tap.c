//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// psample_tap.c: the psample samples of sflowswitchd's namespace, read in
// place. An fentry program on psample_sample_packet (net/psample/
// psample.c), the function every psample producer calls (act_sample, the
// switch drivers mlxsw, prestera, sparx5, Open vSwitch's psample action):
// it copies what the kernel's PSAMPLE_CMD_SAMPLE message would carry into
// a BPF ring buffer, which user space reads in place
// (dataplane/psample/tap.go), so that a sample costs the reader no
// netlink message (allocation, multicast, dequeue, copy, free) and no
// system call.
//
// Per call, cheapest test first:
//   1. network namespace: only groups of the daemon's namespace
//      (group->net, netns_ino, set at load) go on; the kernel multicasts
//      a sample to its group's namespace only, so this is what a netlink
//      reader there would receive;
//   2. reserve a record of the size class of the header bytes; a
//      reservation that fails (the ring is full) is counted per group
//      (group_lost, per CPU) and in lost_total: nothing is lost silently;
//   3. fill it: group, rate (and whether it is a probability: 6.11's
//      md->rate_as_probability, absent before), in/out ifindex, trunc
//      size, the frame's length (skb->len, PSAMPLE_ATTR_ORIGSIZE), the
//      skb's protocol, the queue fields the driver marked valid, and the
//      frame's first bytes: min(skb->len, trunc_size, MAX_HEADER_BYTES)
//      from skb->data, as the kernel's skb_copy_bits(skb, 0, ...) would.
//
// Header bytes. A tracing program can read only the skb's linear area
// (bpf_probe_read_kernel from skb->data): the bytes in page fragments
// need skb_copy_bits, which only bpf_skb_output offers, to a perf buffer
// (drops.c does so). psample's producers hand it linear frames (a switch
// driver builds the skb from the trapped bytes; act_sample sees a
// received frame, whose headers GRO and the drivers pull into the linear
// area); a frame whose wanted bytes are not all linear is delivered with
// the linear ones, marked TAP_F_SHORT, and counted in short_copies.
//
// Kernel structures are declared with only the fields used and relocated
// by name at load time (CO-RE) against the psample module's BTF (the
// loader searches the loaded modules' BTF), so the offsets of Linux 6.1
// and 6.12 (psample_metadata grew rate_as_probability and the user
// cookie in 6.11) are both right.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char __license[] SEC("license") = "Dual BSD/GPL";

// MAX_HEADER_BYTES is the largest header copy (agent.MaxHeaderBytes).
#define MAX_HEADER_BYTES 256

// tap_sample flags.
#define TAP_F_OUT_TC 1       // out_tc valid
#define TAP_F_OUT_TC_OCC 2   // out_tc_occ valid
#define TAP_F_LATENCY 4      // latency valid
#define TAP_F_PROBABILITY 8  // rate is a probability scaled to 0..U32_MAX
#define TAP_F_SHORT 16       // fewer header bytes than wanted were linear

// netns_ino is the inode number of the daemon's network namespace, set
// by the loader.
volatile const __u32 netns_ino = 0;


struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

struct psample_group {
	struct net *net;
	__u32 group_num;
} __attribute__((preserve_access_index));

struct psample_metadata {
	__u32 trunc_size;
	int in_ifindex;
	int out_ifindex;
	__u16 out_tc;
	__u64 out_tc_occ;
	__u64 latency;
	__u8 out_tc_valid : 1, out_tc_occ_valid : 1, latency_valid : 1, rate_as_probability : 1, unused : 4;
} __attribute__((preserve_access_index));

struct sk_buff {
	unsigned int len;
	unsigned int data_len;
	__be16 protocol;
	unsigned char *data;
} __attribute__((preserve_access_index));

// tap_sample is one ring record: the sample's fields, then header_len
// bytes of the frame (data[]; the record is reserved for the size class
// of header_len, bytes past it undefined). Little endian; its Go twin
// PsampleTapTapSample is generated (gen.go, -type tap_sample).
struct tap_sample {
	__u64 out_tc_occ;
	__u64 latency;
	__u32 group;
	__u32 rate;
	__u32 in_ifindex;
	__u32 out_ifindex;
	__u32 orig_size;
	__u32 trunc_size;
	__u16 out_tc;
	__u16 proto; // skb->protocol, host order
	__u16 flags; // TAP_F_*
	__u16 header_len;
	__u8 data[];
};

// Keeps tap_sample in the object's BTF for bpf2go (only pointers to it
// appear in the program).
const struct tap_sample *unused_tap_sample __attribute__((unused));

// tap_stats: per CPU, index 0. seen counts the calls in the namespace;
// seen == delivered + lost.
struct tap_stats {
	__u64 seen;
	__u64 delivered;
	__u64 lost;
	__u64 short_copies;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22); // set by the loader (TapConfig.RingBytes)
} samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tap_stats);
} stats SEC(".maps");

// lost_total: index 0 counts the failed reservations of all CPUs (an
// atomic add, on the failure path only). User space maps it
// (BPF_F_MMAPABLE) and reads it with no system call, and reads group_lost
// only when it changed.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} lost_total SEC(".maps");

// group_lost: psample group → failed reservations of its samples, per
// CPU; an entry is made at a group's first failure.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} group_lost SEC(".maps");

// count_lost counts a sample that found no room. A group that finds no
// entry (4096 groups already lost samples) still counts in lost_total
// and stats.lost, which user space charges as the reader's own loss.
static __always_inline void count_lost(struct tap_stats *st, __u32 group)
{
	__u64 one = 1, *n;
	__u32 zero = 0;

	st->lost++;
	n = bpf_map_lookup_elem(&lost_total, &zero);
	if (n)
		__sync_fetch_and_add(n, 1);
	n = bpf_map_lookup_elem(&group_lost, &group);
	if (n) {
		(*n)++;
		return;
	}
	bpf_map_update_elem(&group_lost, &group, &one, BPF_NOEXIST);
}

// fill writes the fields of a record (all but the header bytes).
static __always_inline void fill(struct tap_sample *r, __u32 group, struct sk_buff *skb, __u32 rate,
				 const struct psample_metadata *md, __u32 trunc, __u16 hl, __u16 flags)
{
	r->group = group;
	r->rate = rate;
	r->in_ifindex = BPF_CORE_READ(md, in_ifindex);
	r->out_ifindex = BPF_CORE_READ(md, out_ifindex);
	r->orig_size = BPF_CORE_READ(skb, len);
	r->trunc_size = trunc;
	r->proto = __builtin_bswap16(BPF_CORE_READ(skb, protocol));
	r->header_len = hl;
	if (BPF_CORE_READ_BITFIELD_PROBED(md, out_tc_valid)) {
		flags |= TAP_F_OUT_TC;
		r->out_tc = BPF_CORE_READ(md, out_tc);
	} else {
		r->out_tc = 0;
	}
	r->out_tc_occ = 0;
	if (BPF_CORE_READ_BITFIELD_PROBED(md, out_tc_occ_valid)) {
		flags |= TAP_F_OUT_TC_OCC;
		r->out_tc_occ = BPF_CORE_READ(md, out_tc_occ);
	}
	r->latency = 0;
	if (BPF_CORE_READ_BITFIELD_PROBED(md, latency_valid)) {
		flags |= TAP_F_LATENCY;
		r->latency = BPF_CORE_READ(md, latency);
	}
	// Linux 6.11: the rate may be a probability (tc sample's
	// TCA_SAMPLE_PROBABILITY, Open vSwitch's psample action).
	if (bpf_core_field_exists(md->rate_as_probability) && BPF_CORE_READ_BITFIELD_PROBED(md, rate_as_probability))
		flags |= TAP_F_PROBABILITY;
	r->flags = flags;
}

// EMIT reserves a record with room for SIZE header bytes and fills it.
// It copies SIZE bytes from skb->data, a constant size (the verifier
// bounds the copy by the reservation on every path; a size computed from
// hl loses that bound once the compiler merges the three tails): the hl
// (<= SIZE) bytes the record carries, and up to SIZE - hl bytes past
// them, which stay within the skb's head allocation (skb->data + hl is at
// most skb->tail, and skb_shared_info, larger than 256 bytes, follows
// skb->end) and which user space never reads (header_len). A copy that
// faults leaves no header bytes (header_len 0).
#define EMIT(SIZE)                                                                        \
	do {                                                                              \
		struct tap_sample *r = bpf_ringbuf_reserve(&samples, sizeof(*r) + (SIZE), 0); \
		if (!r) {                                                                 \
			count_lost(st, group);                                            \
			return 0;                                                         \
		}                                                                         \
		fill(r, group, skb, rate, md, trunc, hl, flags);                          \
		if (hl > 0 && bpf_probe_read_kernel(r->data, (SIZE), data))               \
			r->header_len = 0;                                                \
		bpf_ringbuf_submit(r, 0);                                                 \
		st->delivered++;                                                          \
		return 0;                                                                 \
	} while (0)

SEC("fentry/psample_sample_packet")
int BPF_PROG(psample_tap, struct psample_group *group_p, struct sk_buff *skb, __u32 rate,
	     const struct psample_metadata *md)
{
	__u32 zero = 0;
	struct tap_stats *st;
	__u32 group, trunc, len, linear, want;
	__u16 hl, flags = 0;
	void *data;

	if (BPF_CORE_READ(group_p, net, ns.inum) != netns_ino)
		return 0;
	st = bpf_map_lookup_elem(&stats, &zero);
	if (!st)
		return 0;
	st->seen++;
	group = BPF_CORE_READ(group_p, group_num);
	trunc = BPF_CORE_READ(md, trunc_size);
	len = BPF_CORE_READ(skb, len);
	linear = len - BPF_CORE_READ(skb, data_len);
	data = BPF_CORE_READ(skb, data);
	// The kernel copies min(skb->len, trunc_size) (act_sample sets
	// trunc_size to skb->len when the rule does not truncate).
	want = len < trunc ? len : trunc;
	if (want > MAX_HEADER_BYTES)
		want = MAX_HEADER_BYTES;
	if (linear < want) {
		flags |= TAP_F_SHORT;
		st->short_copies++;
		want = linear;
	}
	hl = want & 0x1ff;
	if (hl > MAX_HEADER_BYTES)
		hl = MAX_HEADER_BYTES;
	if (hl <= 64)
		EMIT(64);
	if (hl <= 128)
		EMIT(128);
	EMIT(256);
}
