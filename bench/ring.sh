#!/usr/bin/env bash
# ring.sh — how much of a 1-in-1 burst of 20 000 samples a worker's ring
# absorbs, by ring size (-ring-bytes 1, 2, 4, 8 MiB): BenchmarkRingBurst
# (test/e2e/ringburst_bench_test.go) on an otherwise idle machine and
# beside a CPU-bound process (stress-ng --cpu 1), alternating, ROUNDS
# times. Root: it builds its own namespace lab and removes it. Results:
# bench/README.md, "Ring size — issue 18" (the default ring_bytes).
#
# Knobs: RING_BENCH_ROUNDS (default 2), RING_BENCH_BURSTS (bursts per ring
# size and round, default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "ring.sh: must run as root" >&2; exit 1; }
command -v stress-ng >/dev/null || { echo "ring.sh: stress-ng missing (scripts/install-deps.sh stress)" >&2; exit 1; }
rounds=${RING_BENCH_ROUNDS:-2}
bursts=${RING_BENCH_BURSTS:-10}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-ring.XXXXXX")
stress=""
cleanup() {
	if [ -n "$stress" ]; then
		kill -TERM "$stress" 2>/dev/null || true
		wait "$stress" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

go test -c -o "$tmp/e2e.test" ./test/e2e/
bench() { (cd test/e2e && "$tmp/e2e.test" -test.run '^$' -test.bench '^BenchmarkRingBurst$' -test.benchtime "${bursts}x" -test.timeout 20m); }

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $rounds rounds of $bursts bursts per ring size"
for ((r = 1; r <= rounds; r++)); do
	echo "## round $r: idle (load $(cut -d' ' -f1 /proc/loadavg))"
	bench | grep -E '^(Benchmark|FAIL|---)' | sed 's/^Benchmark/idle    Benchmark/'
	stress-ng --cpu 1 --quiet &
	stress=$!
	sleep 1
	echo "## round $r: beside stress-ng --cpu 1 (PID $stress; load $(cut -d' ' -f1 /proc/loadavg))"
	bench | grep -E '^(Benchmark|FAIL|---)' | sed 's/^Benchmark/stress  Benchmark/'
	kill -TERM "$stress"
	wait "$stress" 2>/dev/null || true
	stress=""
done
