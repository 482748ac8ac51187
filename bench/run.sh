#!/usr/bin/env bash
# Runs the project's benchmarks and writes raw results under bench/results/.
# `make bench` calls it as root (the dataplane benchmarks attach XDP programs
# inside network namespaces they create). Figures are recorded by hand in
# bench/README.md (today's results page) with the command that produced
# them; these machines are shared and noisy, so compare ratios measured in
# one run and quote medians.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
count=${BENCH_COUNT:-6}
# The whole run takes about 25 minutes: short benchmark times, fewer rounds
# than the scripts' defaults (override with the variables below).
benchtime=${BENCH_TIME:-100ms}
export BENCH_OUT="$out"
export DAEMON_BENCH_ROUNDS=${DAEMON_BENCH_ROUNDS:-3}
export DAEMON_BENCH_WINDOW=${DAEMON_BENCH_WINDOW:-5s}
export RING_BENCH_ROUNDS=${RING_BENCH_ROUNDS:-1}
xdp_args=${XDP_BENCH_ARGS:--rounds 9 -rate-rounds 2 -parts frames,testrun,delivery,tc,profile -profile-trial 5s}
# The side-by-side comparison runs on bench/gen's frames: rates
# trafgen cannot offer on 2 cores. COMPARE_BENCH_ARGS="-traffic trafgen"
# for the packet-socket source.
compare_args=${COMPARE_BENCH_ARGS:--traffic gen}

echo "== Go micro-benchmarks (count=$count, benchtime=$benchtime; benchstat-friendly) -> $out/go.txt"
{
	go test -run '^$' -bench . -benchmem -count "$count" -benchtime "$benchtime" \
		./sflow/ ./agent/... ./apps/app/ ./apps/httpsflow/ ./apps/apm/ ./dataplane/ ./dataplane/forwarding/
	# AgentX PDU encode/decode only (the package's other benchmarks go through a real snmpd).
	go test -run '^$' -bench PDU -benchmem -count "$count" -benchtime "$benchtime" ./internal/agentx/
	# The benchmarks' frame generator (bench/gen): frames/s and its
	# thread's CPU per frame, into an XDP drop on the switch port.
	go -C bench test -run '^$' -bench Send -benchtime 2000000x -count "$count" ./gen/
} | tee "$out/go.txt"

for script in bench/*.sh; do
	[ "$script" = bench/run.sh ] && continue
	name=$(basename "$script" .sh)
	echo "== $name -> $out/$name.txt"
	extra=()
	# shellcheck disable=SC2206 # word splitting of the argument list is wanted
	[ "$name" = xdp ] && extra=($xdp_args)
	# shellcheck disable=SC2206
	[ "$name" = compare ] && extra=($compare_args)
	bash "$script" "${extra[@]}" | tee "$out/$name.txt"
done
echo "results in $out"
