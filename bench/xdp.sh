#!/usr/bin/env bash
# xdp.sh — dataplane (XDP) benchmarks: per-packet cost of the XDP
# sampler from the kernel's BPF run-time statistics, bridge forwarding rate
# with and without the sampler, and samples/s into user space (ring buffer
# and AF_XDP). Parts (-parts, default frames,testrun,delivery): frames
# (live frames, bpf_stats), testrun (BPF_PROG_TEST_RUN), delivery
# (samples/s), profile (live frames with bpf_stats off, cost from `perf
# record -a -g` samples; needs perf, Debian package linux-perf; not in the
# default set). Builds and runs bench/xdp (its own module: go -C bench) as root in
# a namespace lab of its own; prints Markdown. Results: bench/README.md,
# "Per-packet cost".
#
# Self-cleaning: the lab (test/lab/lab.sh down PREFIX) is removed and
# kernel.bpf_stats_enabled is put back to its previous value on every exit,
# including errors and Ctrl-C. (The Go program enables the stats with
# BPF_ENABLE_STATS, which the kernel drops when the process ends; the sysctl
# restore guards against anything else having changed it.)
#
# Extra arguments are passed to the program, e.g.
#   bench/xdp.sh -rounds 3 -parts frames
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "xdp.sh: must run as root" >&2; exit 1; }

prefix="xb$(printf '%06x' $(($$ & 0xffffff)))"
prev_stats=$(sysctl -n kernel.bpf_stats_enabled)
bin=$(mktemp -d)
cleanup() {
	test/lab/lab.sh down "$prefix" >/dev/null 2>&1 || true
	sysctl -q -w kernel.bpf_stats_enabled="$prev_stats" || true
	rm -rf "$bin"
}
child=""
trap cleanup EXIT
# On INT/TERM stop the benchmark (it kills its trafgen and removes the lab
# itself), wait for it, then clean up as on any exit.
trap 'if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null || true; wait "$child" || true; fi; exit 130' INT TERM

# Built first, so the lab and timings do not include compilation.
go -C bench build -o "$bin/xdpbench" ./xdp
# In the background so the trap runs at once on a signal (bash defers traps
# while a foreground child runs).
"$bin/xdpbench" -prefix "$prefix" "$@" &
child=$!
wait "$child"
