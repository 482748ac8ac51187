//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// fibgen.c: user space's reading of the FIB generation (fib_seq.h), the
// one the samplers record around their bpf_fib_lookup calls (route.h).
// fib_gen_read is never attached: user space runs it (BPF_PROG_TEST_RUN)
// on a thread in the daemon's network namespace, where the kernel gives
// it an skb on that namespace's loopback device, and reads the generation
// from its result (dataplane/fibgen.go). One system call per reading: for
// refreshes of the route table, never per sample.

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include "fib_seq.h"

char __license[] SEC("license") = "Dual BSD/GPL";

// fib_gen_read returns the generation + 1 (0: unknown).
SEC("tc")
int fib_gen_read(struct __sk_buff *ctx)
{
	int ok;
	__u32 g = skb_fib_seq(ctx, &ok);

	return ok ? g + 1 : 0;
}
