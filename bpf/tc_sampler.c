//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// tc_sampler.c: the packet sampler at the TC ingress hook, for ports where
// XDP costs more than it saves (dataplane.HookTC). One program, attached
// two ways (dataplane/tc.go, dataplane/clsact.go):
//
//   - Linux >= 6.6: a TCX link at the head of the port's TCX ingress chain;
//     it dies with the daemon.
//   - before 6.6 (no TCX): a cls_bpf filter in direct-action mode at
//     priority 1, handle 0x73666c77, protocol all, on the port's clsact
//     qdisc (an operator's clsact or ingress qdisc is used as it is, a
//     clsact qdisc is created only where there is none). Priority 1 is
//     the head of chain 0, so the filter sees every frame before any other
//     filter can drop it. A filter outlives a killed daemon; the next
//     start removes it (dataplane.removeStaleTC).
//
// Either way the program runs once per frame at ingress with the MAC
// header pushed (skb->data at the Ethernet header), so the samples are the
// same.
//
// Why TC rather than XDP on some ports:
//
//   - veth and other devices whose XDP receive needs an skb first: the
//     kernel copies every frame into a page with XDP_PACKET_HEADROOM before
//     an XDP program can see it (veth: skb_pp_cow_data; generic XDP:
//     pskb_expand_head), and on veth attaching XDP moves receive onto the
//     device's NAPI ring. At TC ingress the skb exists already: no copy.
//   - drivers without native XDP, where generic XDP pays the same copy.
//
// It is the XDP sampler's twin (sampler.c; shared code in sampler.h): the
// same counters (one pool, skip and samples per port and CPU), the same
// geometric skip drawn only per sample (sflow_version_5.txt Appendix B),
// the same ring records. A sampled frame is copied into the owning
// worker's ring; the frame itself is never modified. Only inline delivery:
// monitor mode redirects frames into AF_XDP sockets, which only XDP can.
//
// Every program returns TC_ACT_UNSPEC: the sampler never decides a frame's
// fate. For TCX that is TCX_NEXT (the next TCX program, then the clsact
// qdisc); for a direct-action cls_bpf filter it is "no verdict", so the
// next filter of the chain classifies the frame as if the sampler were
// not there.

#include "sampler.h"
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>

char __license[] SEC("license") = "Dual BSD/GPL";

// take_progs_tc: [0] = tc_take_sample, installed by the loader (a tail
// call needs a program array of the caller's program type).
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} take_progs_tc SEC(".maps");

// VLAN_HDR_LEN is the 802.1Q tag's size; ETH_ADDRS_LEN the two MACs before it.
#define VLAN_HDR_LEN 4
#define ETH_ADDRS_LEN 12

// TAG_SLACK: a TC record has room for cls + TAG_SLACK header bytes, so that
// a VLAN tag put back into the header (copy_header) never makes a copy of
// up to cls bytes overrun it. The reader takes header_len bytes whatever
// the record size (dataplane/ring.go).
#define TAG_SLACK 16

// copy_header copies the first n bytes of the frame as it was on the wire
// into data (1 <= n <= cls, cls a power of two >= 64; data has room for
// cls + TAG_SLACK bytes). By TC ingress the kernel has moved an
// 802.1Q/802.1ad tag out of the frame into skb metadata (skb_vlan_untag,
// or the NIC's VLAN offload); it is put back between the MAC addresses,
// so the sampled header (sFlow sampled_header) is the frame as received,
// as the XDP sampler sees it. Returns the bytes copied, 0 on failure.
static __always_inline __u32 copy_header(struct __sk_buff *skb, __u8 *data,
					 __u32 n, const __u32 cls)
{
	__u32 rest;

	if (!skb->vlan_present) {
		// For 1 <= n <= cls the mask leaves n unchanged; the barrier
		// keeps clang from applying it to a copy (as in sampler.c).
		barrier_var(n);
		n = ((n - 1) & (cls - 1)) + 1;
		if (bpf_skb_load_bytes(skb, 0, data, n) < 0)
			return 0;
		return n;
	}
	if (bpf_skb_load_bytes(skb, 0, data, ETH_ADDRS_LEN) < 0)
		return 0;
	*(__u16 *)(data + ETH_ADDRS_LEN) = (__u16)skb->vlan_proto; // network order
	*(__u16 *)(data + ETH_ADDRS_LEN + 2) = bpf_htons((__u16)skb->vlan_tci);
	if (n <= ETH_ADDRS_LEN + VLAN_HDR_LEN)
		return n;
	// 1 <= rest <= cls - 16: the mask keeps it, and shows the verifier
	// rest <= cls, which fits at data + 16 thanks to TAG_SLACK.
	rest = n - (ETH_ADDRS_LEN + VLAN_HDR_LEN);
	barrier_var(rest);
	rest = ((rest - 1) & (cls - 1)) + 1;
	if (bpf_skb_load_bytes(skb, ETH_ADDRS_LEN, data + ETH_ADDRS_LEN + VLAN_HDR_LEN, rest) < 0)
		return ETH_ADDRS_LEN + VLAN_HDR_LEN;
	return ETH_ADDRS_LEN + VLAN_HDR_LEN + rest;
}

// emit_sample_skb is emit_sample (sampler.c) for an skb: reserves a record
// of constant size (size class cls, plus TAG_SLACK) in ring and fills it.
static __always_inline void emit_sample_skb(struct __sk_buff *skb, void *ring,
					    struct port_counters *c,
					    __u32 ifindex, __u32 cpu,
					    __u32 header_bytes, __u32 rate,
					    const __u32 cls)
{
	struct sample_meta *m;
	__u32 frame_len, n, q;

	m = bpf_ringbuf_reserve(ring, sizeof(*m) + cls + TAG_SLACK, 0);
	if (!m) {
		c->drops++; // ring full: counted, never silent
		return;
	}
	frame_len = skb->len;
	if (skb->vlan_present)
		frame_len += VLAN_HDR_LEN;
	n = frame_len < header_bytes ? frame_len : header_bytes;
	if (n > cls)
		n = cls;
	if (n > 0)
		n = copy_header(skb, m->data, n, cls);

	// A received skb records its RX queue as queue_mapping = queue + 1
	// (skb_record_rx_queue); 0 means not recorded.
	q = skb->queue_mapping;
	m->ifindex = ifindex;
	m->frame_len = frame_len;
	m->rx_queue = q ? q - 1 : 0;
	m->cpu = cpu;
	m->timestamp_ns = bpf_ktime_get_ns();
	m->header_len = n;
	m->sample_rate = rate;
	m->pool = c->pool;
	bpf_ringbuf_submit(m, wake_flag(ring, sizeof(*m) + cls + TAG_SLACK));
}

// take_sample_skb is take_sample (sampler.c) for an skb, inline delivery
// only (the loader refuses monitor mode on a TC port).
static __noinline int take_sample_skb(struct __sk_buff *skb,
				      struct port_counters *c, __u32 ifindex,
				      __u32 cpu)
{
	struct port_config *cfg = 0;
	__u32 rate = 0, worker, hdr;
	void *ring;

	if (decide(c, ifindex, &cfg, &rate) != DECIDE_SAMPLE || !cfg)
		return 0;
	worker = cfg->worker;
	hdr = cfg->header_bytes;
	ring = bpf_map_lookup_elem(&rings, &worker);
	if (!ring) {
		c->drops++; // no ring for this worker: counted
		return 0;
	}
	if (hdr <= 64)
		emit_sample_skb(skb, ring, c, ifindex, cpu, hdr, rate, 64);
	else if (hdr <= 128)
		emit_sample_skb(skb, ring, c, ifindex, cpu, hdr, rate, 128);
	else
		emit_sample_skb(skb, ring, c, ifindex, cpu, hdr, rate,
				MAX_HEADER_BYTES);
	return 0;
}

// tc_sampler: one instance per port sampled at TC ingress (PORT_IMM
// constants, patched by the loader as for xdp_sampler). Per frame: this
// CPU's counter line of the port, pool + 1, skip - 1; a frame whose skip
// has run out goes on to tc_take_sample (tail call).
SEC("tc")
int tc_sampler(struct __sk_buff *skb)
{
	__u32 cpu = bpf_get_smp_processor_id(), zero = 0;
	__u32 idx = (__u32)PORT_IMM(PORT_IMM_COUNTER_BASE) + cpu;
	struct port_counters *c = bpf_map_lookup_elem(&counters, &idx);
	struct sample_hand *h;

	if (!c)
		return TC_ACT_UNSPEC;
	c->pool++;
	if (c->skip) {
		c->skip--;
		return TC_ACT_UNSPEC;
	}
	h = bpf_map_lookup_elem(&sample_hands, &zero);
	if (!h)
		return TC_ACT_UNSPEC;
	h->ifindex = (__u32)PORT_IMM(PORT_IMM_IFINDEX);
	h->idx = idx;
	bpf_tail_call(skb, &take_progs_tc, 0);
	return TC_ACT_UNSPEC;
}

// tc_take_sample: the sampled path of every TC port, loaded once and
// reached by tail call from a port's tc_sampler on the same CPU.
SEC("tc")
int tc_take_sample(struct __sk_buff *skb)
{
	__u32 zero = 0, idx;
	struct sample_hand *h = bpf_map_lookup_elem(&sample_hands, &zero);
	struct port_counters *c;

	if (!h)
		return TC_ACT_UNSPEC;
	idx = h->idx;
	c = bpf_map_lookup_elem(&counters, &idx);
	if (!c)
		return TC_ACT_UNSPEC;
	take_sample_skb(skb, c, h->ifindex, bpf_get_smp_processor_id());
	return TC_ACT_UNSPEC;
}
