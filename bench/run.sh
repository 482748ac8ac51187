#!/usr/bin/env bash
# Runs the project's benchmarks and writes raw results under bench/results/.
# `make bench` calls it as root (the dataplane benchmarks attach XDP programs
# inside network namespaces they create). Figures are recorded by hand in
# bench/README.md with the command that produced them; these machines are
# shared and noisy, so compare ratios measured in one run and quote medians.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
count=${BENCH_COUNT:-5}

echo "== Go micro-benchmarks (count=$count) -> $out/go.txt"
go test -run '^$' -bench . -benchmem -count "$count" \
	./sflow/ ./agent/ ./internal/apm/ ./dataplane/forwarding/ | tee "$out/go.txt"

for script in bench/*.sh; do
	[ "$script" = bench/run.sh ] && continue
	name=$(basename "$script" .sh)
	echo "== $name -> $out/$name.txt"
	bash "$script" | tee "$out/$name.txt"
done
echo "results in $out"
