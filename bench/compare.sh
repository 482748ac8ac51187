#!/usr/bin/env bash
# compare.sh — techniques side by side: no program, a do-nothing
# XDP program, a packet socket with a classic BPF random filter
# (bench/baselines/pcapsample), a TCX eBPF sampler with a ring buffer
# (bench/baselines/tcsample) and sflowswitchd, on the same namespace lab,
# alternating within each round. Prints the Markdown table; with BENCH_OUT
# set (bench/run.sh sets it) also writes BENCH_OUT/compare/results.md,
# results.json and the PNG plots. Results: bench/README.md, "Forwarding
# next to the other techniques" and "CPU per million packets". Extra arguments go to `bench/daemon compare`.
#
# Self-cleaning: the Go program removes its lab on exit and on SIGINT/TERM;
# bpf_stats are enabled through a file descriptor the kernel drops with
# the process.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "compare.sh: must run as root" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-compare.XXXXXX")
child=""
cleanup() {
	if [ -n "$child" ]; then
		kill -TERM "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

go build -o "$tmp/sflowswitchd" ./cmd/sflowswitchd
go -C bench build -o "$tmp/pcapsample" ./baselines/pcapsample
go -C bench build -o "$tmp/tcsample" ./baselines/tcsample
go -C bench build -o "$tmp/daemonbench" ./daemon

args=(-bin "$tmp/sflowswitchd" -pcap "$tmp/pcapsample" -tc "$tmp/tcsample")
if [ -n "${BENCH_OUT:-}" ]; then
	args+=(-out "$BENCH_OUT/compare")
fi
"$tmp/daemonbench" compare "${args[@]}" "$@" &
child=$!
wait "$child"
child=""
