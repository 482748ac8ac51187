//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// drops.c: dropped-packet notifications of sflowswitchd
// (docs/spec/sflow_drops.md). Attached to the BTF-typed skb:kfree_skb
// tracepoint, which carries the skb, the drop location and the
// enum skb_drop_reason (Linux >= 5.17).
//
// For every freed skb, cheapest test first:
//   1. reason: only real drops (not SKB_DROP_REASON_NOT_DROPPED_YET = 0,
//      not SKB_CONSUMED, whose value the loader takes from the running
//      kernel's BTF) go on;
//   2. network namespace: only drops in the daemon's namespace go on
//      (drop_config.netns_ino; the namespace of skb->dev, or of the socket
//      when the skb has no device; an skb with neither cannot be placed
//      and is ignored). A busy machine drops a lot elsewhere: nothing else
//      is done for those;
//   3. count the drop exactly, per reason and per port, per CPU;
//   4. rate limit: a budget of drop_config.limit notifications per second
//      (one shared budget, taken with an atomic add; the host agent's
//      dropmon limit); a drop over the budget is counted as suppressed and
//      nothing is copied;
//   5. write the ingress and egress ifindex, location, reason and the
//      frame's first header_bytes bytes (from the MAC header, linear or
//      paged: see "Header bytes" below) to the perf buffer; a write that
//      fails (buffer full) is counted.
// notified + suppressed + ring_full == drops, per CPU and in total.
//
// Header bytes. A frame's bytes are not all in the skb's linear area: a
// packet socket's TX ring (trafgen) sends the Ethernet header linear and
// the rest in page fragments; TCP puts its payload in fragments; GRO and
// IP reassembly chain skbs in frag_list. Reading only head..tail (as this
// program once did) cut a bridged frame dropped in an nftables
// forward chain at 34 bytes: Ethernet + the IPv4 header nftables had
// pulled, no UDP header. So the bytes are copied in two parts:
//   - the headers in front of skb->data (the MAC header and any header
//     already pulled, e.g. IPv4 at the UDP socket lookup): always in the
//     linear area, read with bpf_probe_read_kernel into the record;
//   - from skb->data on: by the kernel's skb_copy_bits (skb_header_pointer),
//     which walks the linear part, the page fragments and frag_list, through
//     bpf_skb_output. That helper exists for BTF tracing programs
//     (tp_btf, fentry) since Linux 5.5, below the oldest kernel we support
//     (5.18); it writes to a perf event array (one buffer per CPU), not to a
//     BPF ring buffer, so the notifications go there.
// Reading the fragments ourselves (skb_shinfo, frags[i], page -> virtual
// address) was the alternative: it needs the direct map's base
// (page_offset_base, vmemmap_base: architecture-specific, randomised), the
// fragment layout that changed in 6.x (bio_vec, then netmem), and a walk of
// frag_list; skb_copy_bits is the kernel's own, kept correct by it.
// bpf_skb_output fails (-ENOSPC) when this CPU's buffer is full (the perf
// buffer also counts that as a lost record for its reader); the program
// counts every failure in ring_full, so nothing is lost silently. The
// reader is woken through a small BPF ring buffer (doorbell, below), so
// that a notification costs a wake-up only when the reader waits, as with
// a ring buffer alone.
//
// Cost: only notified drops (at most drop_config.limit per second) reach
// the copy; a drop over the budget or in another namespace pays nothing
// for it.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>

char __license[] SEC("license") = "Dual BSD/GPL";

// MAX_HEADER_BYTES is the largest header copy (sFlowEsMaximumHeaderSize
// upper bound we support).
#define MAX_HEADER_BYTES 256

// The kernel's "not a drop" reasons (include/net/dropreason-core.h).
#define SKB_DROP_REASON_NOT_DROPPED_YET 0

// consumed_reason is SKB_CONSUMED of the running kernel's enum
// skb_drop_reason, set by the loader from the kernel's BTF: 1 since Linux
// 6.3, where consumed packets may pass through kfree_skb_reason. Older
// kernels have no such value (1 is SKB_DROP_REASON_NOT_SPECIFIED there, a
// real drop: bridge-family nftables drops on 6.1 carry it); the loader
// then sets 0xffffffff, which no reason equals.
volatile const __u32 consumed_reason = 1;

// Header protocol of the copied bytes (sflow header_protocol values).
#define HDR_NONE 0
#define HDR_ETHERNET 1
#define HDR_IPV4 11
#define HDR_IPV6 12

// skb->mac_header / network_header value meaning "not set" ((u16)~0U).
#define HEADER_UNSET 0xffff

// Kernel structures, only the fields used, relocated by name at load time
// (CO-RE: preserve_access_index), so no vmlinux.h is needed.
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

struct sock_common {
	possible_net_t skc_net;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));

struct sk_buff {
	struct net_device *dev;
	struct sock *sk;
	unsigned int len;
	unsigned int data_len;
	__u16 queue_mapping;
	int skb_iif;
	__be16 protocol;
	__u16 network_header;
	__u16 mac_header;
	unsigned int tail;
	unsigned char *head;
	unsigned char *data;
} __attribute__((preserve_access_index));

// drop_config: written by user space (index 0), read for every drop.
struct drop_config {
	__u32 netns_ino;    // inode number of the daemon's network namespace
	__u32 limit;        // notifications per second; 0 = count only
	__u32 header_bytes; // bytes copied from the MAC header, 0..256
	__u32 _pad;
};

// drop_stats: one CPU's totals (index 0 of a per-CPU array).
struct drop_stats {
	__u64 drops;       // drops in our namespace (all reasons, all ports)
	__u64 notified;    // notifications written to the perf buffer
	__u64 suppressed;  // notifications over the per-second budget
	__u64 ring_full;   // notifications lost: the perf buffer was full
	__u64 uncounted;   // drops missing from the reason/port maps (map full)
};

// budget: the shared per-second notification budget.
struct budget {
	__u64 second; // bpf_ktime_get_ns() / 1e9 of the current window
	__u64 used;   // notifications taken in that window
};

// drop_event: a notification. The perf record is its first
// DROP_EVENT_FIXED + head_len bytes, followed directly by the
// header_len - head_len bytes bpf_skb_output copies from skb->data on: the
// header bytes are contiguous from data[0] in the record. User space
// reads the fixed fields through the generated Go twin, bpf.DropsDropEvent
// (dataplane/bpf/gen.go, dataplane/drops/drops.go).
struct drop_event {
	__u64 location;     // kfree_skb call site (kernel text address)
	__u64 timestamp_ns; // bpf_ktime_get_ns (CLOCK_MONOTONIC)
	__u32 reason;       // enum skb_drop_reason
	__u32 in_ifindex;   // port the packet came in on, 0 if none (local)
	__u32 out_ifindex;  // port of an egress drop, 0 otherwise
	__u32 frame_len;    // length of the packet from the copied header's start
	__u16 header_len;   // header bytes in the record (data[] and after it)
	__u16 header_proto; // HDR_* of data
	__u16 queue;        // skb->queue_mapping (meaningful for egress drops)
	__u16 cpu;          // CPU that saw the drop
	__u16 head_len;     // bytes of data[]: the headers in front of skb->data
	__u16 _pad;
	__u32 paged_len;    // skb->data_len: packet bytes outside the linear area
	__u8 data[MAX_HEADER_BYTES];
};

// DROP_EVENT_FIXED is the size of drop_event's fields before data.
#define DROP_EVENT_FIXED 48

// config: struct drop_config at index 0.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct drop_config);
} config SEC(".maps");

// stats: struct drop_stats per CPU at index 0.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct drop_stats);
} stats SEC(".maps");

// MAX_CORE_REASONS bounds the reasons counted in an array: the core
// reasons (SKB_DROP_REASON_MAX is 128 on 6.18). Subsystem reasons carry
// their subsystem in the high 16 bits and go to the hash below.
#define MAX_CORE_REASONS 1024

// reason_drops: enum skb_drop_reason (< MAX_CORE_REASONS) -> drops, per
// CPU. An array: its lookup is inlined by the verifier (no hashing).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_CORE_REASONS);
	__type(key, __u32);
	__type(value, __u64);
} reason_drops SEC(".maps");

// reason_drops_ext: other reasons (subsystem reasons) -> drops, per CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} reason_drops_ext SEC(".maps");

// port_drops: ifindex of the port a drop is charged to (the egress port
// of an egress drop, else the ingress port; 0 for locally made packets)
// -> drops, per CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u64);
} port_drops SEC(".maps");

// budget: struct budget at index 0, shared by all CPUs.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct budget);
} drop_budget SEC(".maps");

// events: perf event array, one buffer per CPU (opened by the reader),
// receiving the notifications (bpf_skb_output writes only to this type).
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} events SEC(".maps");

// doorbell: a BPF ring buffer (one page, size set by the loader) that
// carries no data, only wake-ups: one byte per notification written to
// events. The perf buffers are opened without per-record wake-ups (their
// watermark is nearly their size), because perf wakes its reader with an
// irq_work (a self-interrupt, several microseconds in a VM) for every
// record, waiting reader or not. A ring buffer wakes only when its reader
// has caught up (bpf_ringbuf_output without flags), i.e. when it waits:
// the reader sleeps on the doorbell and, woken, takes everything the perf
// buffers hold. The notification is written before its doorbell, so the
// reader never misses one; a doorbell that does not fit (the reader has
// not emptied the doorbell ring, so it is not asleep) is not needed.
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} doorbell SEC(".maps");

// scratch: this CPU's drop_event being built (304 bytes: too large for
// the 512-byte stack next to the rest). A tp_btf program does not nest on
// a CPU (the trampoline skips a recursive run), so one per CPU suffices.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct drop_event);
} scratch SEC(".maps");

// skb_netns returns the inode number of the skb's network namespace: its
// device's, else its socket's; 0 when it has neither.
//
// Kernel memory is read by plain dereferences: in a tp_btf program the
// verifier knows the BTF type of each pointer and turns the loads into
// fault-safe direct loads (no bpf_probe_read_kernel helper call per field,
// several times cheaper); the field offsets are CO-RE relocated.
static __always_inline __u32 skb_netns(struct sk_buff *skb)
{
	struct net_device *dev = skb->dev;
	if (dev)
		return dev->nd_net.net->ns.inum;
	struct sock *sk = skb->sk;
	if (sk)
		return sk->__sk_common.skc_net.net->ns.inum;
	return 0;
}

// count_key adds one to key's per-CPU counter in a per-CPU hash; it
// returns 0, or -1 when the key could not be added (map full).
static __always_inline int count_key(void *map, __u32 key)
{
	__u64 *v = bpf_map_lookup_elem(map, &key);
	if (!v) {
		__u64 zero = 0;
		// Another CPU may add the key at the same time: EEXIST is fine.
		bpf_map_update_elem(map, &key, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(map, &key);
		if (!v)
			return -1;
	}
	*v += 1; // per-CPU value: this CPU is the only writer
	return 0;
}

// take_budget takes one notification from this second's budget.
static __always_inline int take_budget(__u32 limit)
{
	__u32 zero = 0;
	struct budget *b = bpf_map_lookup_elem(&drop_budget, &zero);
	if (!b || limit == 0)
		return 0;
	__u64 second = bpf_ktime_get_ns() / 1000000000ULL;
	// Budget spent in this second: suppressed without writing the shared
	// line (during a flood, CPUs only read it).
	if (b->second == second && b->used >= limit)
		return 0;
	if (b->second != second) {
		// New window. Two CPUs may both reset it at the turn of a second,
		// letting a few more than limit through in that second; the count
		// of notifications stays exact either way.
		b->second = second;
		b->used = 0;
	}
	return __sync_fetch_and_add(&b->used, 1) < limit;
}

// clamp_header limits a byte count (a 64-bit variable, so that the
// compiler makes no zero-extended copy of it) to MAX_HEADER_BYTES in one
// instruction on its own register: the verifier then knows the bound of
// the very register later passed as a helper's size.
#define clamp_header(VAR)                                                   \
	asm volatile("if %0 <= %[max] goto +1; %0 = %[max]"                  \
		     : "+r"(VAR)                                                \
		     : [max] "i"(MAX_HEADER_BYTES))

// copy_header fills e's header fields and the headers in front of
// skb->data into e->data; it returns how many bytes bpf_skb_output must
// copy from skb->data on. The header starts at the MAC header when it is
// set, else at the network header, else nothing is copied.
static __always_inline __u64 copy_header(struct drop_event *e, struct sk_buff *skb, __u32 want)
{
	unsigned char *head = skb->head;
	unsigned char *data = skb->data;
	__u32 len = skb->len;
	__u16 mac = skb->mac_header;
	__u16 nh = skb->network_header;
	__u32 data_off = data - head;
	__u32 start;

	e->header_proto = HDR_NONE;
	e->header_len = 0;
	e->head_len = 0;
	e->frame_len = len;
	e->paged_len = skb->data_len;
	if (mac != HEADER_UNSET && mac <= data_off) {
		start = mac;
		e->header_proto = HDR_ETHERNET;
	} else if (nh != HEADER_UNSET && nh <= data_off) {
		__be16 proto = skb->protocol;
		start = nh;
		if (proto == bpf_htons(0x0800))
			e->header_proto = HDR_IPV4;
		else if (proto == bpf_htons(0x86DD))
			e->header_proto = HDR_IPV6;
		else
			return 0;
	} else {
		return 0;
	}
	// The frame from start: the headers in front of data, then skb->len.
	e->frame_len = len + (data_off - start);
	__u64 n = want;
	if (n > e->frame_len)
		n = e->frame_len;
	clamp_header(n);
	// In front of data: linear, between head and data.
	__u64 head_n = data_off - start;
	if (head_n > n)
		head_n = n;
	clamp_header(head_n);
	if (head_n > 0 && bpf_probe_read_kernel(e->data, head_n, head + start) != 0)
		return 0;
	e->head_len = head_n;
	e->header_len = n;
	// From data on (n - head_n <= skb->len, as n <= frame_len).
	return n - head_n;
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(kfree_skb_drops, struct sk_buff *skb, void *location, unsigned int reason)
{
	if (reason == SKB_DROP_REASON_NOT_DROPPED_YET || reason == consumed_reason)
		return 0;
	__u32 zero = 0;
	struct drop_config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg || cfg->netns_ino == 0 || skb_netns(skb) != cfg->netns_ino)
		return 0;

	struct drop_stats *st = bpf_map_lookup_elem(&stats, &zero);
	if (!st)
		return 0;
	st->drops++;

	// Ports: a drop on a device other than the one the packet came in on
	// (or of a locally made packet, skb_iif 0) is an egress drop.
	struct net_device *dev = skb->dev;
	__u32 dev_ifindex = dev ? dev->ifindex : 0;
	__u32 iif = skb->skb_iif;
	__u32 in = iif, out = 0;
	if (dev_ifindex != 0 && dev_ifindex != iif)
		out = dev_ifindex;
	int missed = 0;
	if (reason < MAX_CORE_REASONS) {
		__u64 *v = bpf_map_lookup_elem(&reason_drops, &reason);
		if (v)
			*v += 1;
		else
			missed = -1;
	} else {
		missed = count_key(&reason_drops_ext, reason);
	}
	missed |= count_key(&port_drops, out ? out : in);
	if (missed)
		st->uncounted++;

	if (!take_budget(cfg->limit)) {
		st->suppressed++;
		return 0;
	}
	struct drop_event *e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e) {
		st->ring_full++;
		return 0;
	}
	e->location = (__u64)location;
	e->timestamp_ns = bpf_ktime_get_ns();
	e->reason = reason;
	e->in_ifindex = in;
	e->out_ifindex = out;
	e->queue = skb->queue_mapping;
	e->cpu = bpf_get_smp_processor_id();
	__u64 from_skb = copy_header(e, skb, cfg->header_bytes);
	__u64 head_n = e->head_len;
	clamp_header(head_n); // no-op: copy_header bounded it; for the verifier
	// The record: the fixed fields and head_n bytes of data[] from e,
	// then from_skb bytes from skb->data on, copied by the kernel.
	if (bpf_skb_output(skb, &events, BPF_F_CURRENT_CPU | (from_skb << 32), e, DROP_EVENT_FIXED + head_n) != 0) {
		st->ring_full++;
		return 0;
	}
	st->notified++;
	__u8 ring = 1;
	bpf_ringbuf_output(&doorbell, &ring, sizeof(ring), 0);
	return 0;
}
