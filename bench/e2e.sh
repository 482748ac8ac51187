#!/usr/bin/env bash
# e2e.sh — samples/s end to end on real frames: bench/gen's
# generator (an XDP program run by BPF_PROG_RUN in live-frames mode in host
# 1, redirecting into its veth) sends frames that switch port p1 receives
# through NAPI; the daemon samples p1 on each hook (TC ingress, XDP) at
# 1-in-1 and 1-in-10 (-sampling) and sends to a counting collector.
# Prints Markdown: the generator alone, then per hook and rate the frames/s sent, samples/s
# delivered, ring and agent loss (exact, per trial), the generator's and
# the daemon's CPU; with BENCH_OUT set (bench/run.sh sets it) also
# BENCH_OUT/e2e/results.json and the PNG plots. Results: bench/README.md,
# "Samples per second end to end". Extra arguments go to `bench/daemon
# e2e` (e.g. -perf DIR for a whole-machine profile, -rate 1.5M, -frame
# local, -napi threaded).
#
# Self-cleaning: the Go program removes its lab on exit and on
# SIGINT/TERM; this script removes its build dir.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "e2e.sh: must run as root" >&2; exit 1; }
rounds=${E2E_BENCH_ROUNDS:-3}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-e2e.XXXXXX")
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
go -C bench build -o "$tmp/daemonbench" ./daemon

args=(-bin "$tmp/sflowswitchd" -rounds "$rounds")
# With BENCH_OUT (bench/run.sh): results.json and the PNG plots there.
if [ -n "${BENCH_OUT:-}" ]; then
	args+=(-out "$BENCH_OUT/e2e")
fi
"$tmp/daemonbench" e2e "${args[@]}" "$@" &
child=$!
wait "$child"
child=""
