#!/usr/bin/env bash
# egress.sh — the per-packet cost of the samplers with egress
# sampling, extended_router's FIB lookups and transit (extended_transit,
# extended_queue) enabled, against a base revision (default: main), in one run.
#
# Builds the dataplane package's test binary of the working tree and of
# BASE (extracted with git archive into a temporary directory, never a
# worktree), then runs, alternating the two binaries every round
# (ROUNDS rounds, default 9), the BPF_PROG_TEST_RUN benchmarks both have:
#   BenchmarkXDPPass              the do-nothing XDP program (baseline)
#   BenchmarkXDPSamplerUnsampled  a port's sampler, frame not sampled
#   BenchmarkXDPSamplerRate1      every frame sampled (the sampled path:
#                                 here with two bpf_fib_lookup calls and the
#                                 FIB generation read twice)
#   BenchmarkTCPass               a do-nothing SchedCLS program (baseline)
#   BenchmarkTCEgressUnsampled    a port's egress sampler, frame not sampled
# and, in the working tree only (BASE may not have them; a benchmark BASE
# lacks is reported for the tree alone):
#   BenchmarkTCSamplerRate1       every frame sampled at TC ingress, plain port
#   BenchmarkTCSamplerRate1Tunnel the same port configured as a VXLAN device
#                                 (the tunnel block of the sampled path)
# Each reports the kernel's own mean ns per run (kernel-ns/pkt). Prints,
# per benchmark and revision, the median and range over the rounds, and
# the median of the per-round differences (tree - base).
#
# Usage: bench/egress.sh [BASE] (as root; ROUNDS and N=runs per benchmark
# in the environment). Self-cleaning: the namespace labs are the test
# binaries' own (removed by their cleanups); the temporary directory is
# removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "egress.sh: must run as root" >&2; exit 1; }
base=${1:-main}
rounds=${ROUNDS:-9}
n=${N:-2000000}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-egress.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/base"
git archive "$base" | tar -x -C "$tmp/base"
echo "# base $base $(git rev-parse --short "$base"), tree $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'), $(date -u +%FT%TZ), $(uname -r), rounds $rounds, $n runs each"
go test -c -buildvcs=false -o "$tmp/tree.test" ./dataplane/
(cd "$tmp/base" && go test -c -buildvcs=false -o "$tmp/base.test" ./dataplane/)

both='^Benchmark(XDPPass|XDPSamplerUnsampled|XDPSamplerRate1|TCPass|TCEgressUnsampled)$'
tree_only='^Benchmark(TCSamplerRate1|TCSamplerRate1Tunnel)$'
run() { # rev pattern
	(cd dataplane && "$tmp/$1.test" -test.run '^$' -test.bench "$2" -test.benchtime "${n}x" 2>/dev/null) |
		awk -v rev="$1" '/^Benchmark/ { for (i = 1; i <= NF; i++) if ($i == "kernel-ns/pkt") { sub(/-[0-9]+$/, "", $1); print rev, $1, $(i-1) } }'
}
for r in $(seq 1 "$rounds"); do
	# Alternate which revision goes first.
	if [ $((r % 2)) = 1 ]; then order="tree base"; else order="base tree"; fi
	for rev in $order; do
		run "$rev" "$both" | sed "s/^/$r /"
	done
	run tree "$tree_only" | sed "s/^/$r /"
done >"$tmp/results"

awk '
# $1 round, $2 revision, $3 benchmark, $4 kernel ns per run
{ v[$2 SUBSEP $3 SUBSEP $1] = $4; benches[$3] = 1; rounds[$1] = 1 }
function sort(a, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
}
function median(a, n) { return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
END {
	print ""
	print "| benchmark | base ns (median [min–max]) | tree ns (median [min–max]) | tree − base, per round (median [min–max]) |"
	print "|---|---|---|---|"
	for (b in benches) {
		line = "| " b
		for (ri = 0; ri < 2; ri++) {
			rev = ri ? "tree" : "base"
			k = 0
			for (r in rounds) if ((rev SUBSEP b SUBSEP r) in v) a[++k] = v[rev SUBSEP b SUBSEP r]
			if (k == 0) { line = line " | —"; continue }
			sort(a, k)
			line = line sprintf(" | %.0f [%.0f–%.0f]", median(a, k), a[1], a[k])
		}
		k = 0
		for (r in rounds) if ((("tree" SUBSEP b SUBSEP r) in v) && (("base" SUBSEP b SUBSEP r) in v)) d[++k] = v["tree" SUBSEP b SUBSEP r] - v["base" SUBSEP b SUBSEP r]
		if (k) { sort(d, k); line = line sprintf(" | %+.0f [%+.0f – %+.0f]", median(d, k), d[1], d[k]) } else line = line " | —"
		print line " |"
	}
}' "$tmp/results"
