#!/usr/bin/env bash
# drops.sh — dropped-packet notifications: the bridge's forwarding rate
# with the drop program attached against without it
# (BenchmarkDropsForwarding), and the real daemon under a flood of drops
# (BenchmarkDropsFlood), from bench/drops (its own namespace labs, removed
# by the tests' cleanups). Root. Results: bench/README.md,
# "Dropped-packet notifications".
#
# Knobs: DROPS_BENCH_N (iterations of each benchmark, default 4). Extra
# arguments go to the test binary (e.g. -test.v).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "drops.sh: must run as root" >&2; exit 1; }
n=${DROPS_BENCH_N:-4}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-drops.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
go -C bench test -c -o "$tmp/drops.test" ./drops/
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); ${n} iterations each"
(cd bench/drops && "$tmp/drops.test" -test.run '^$' -test.bench '^Benchmark(DropsForwarding|DropsFlood)$' -test.benchtime "${n}x" -test.timeout 20m "$@")
