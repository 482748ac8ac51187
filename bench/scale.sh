#!/usr/bin/env bash
# scale.sh — the daemon with 1000 sampled ports: start-up time,
# RSS, the XDP program's per-frame cost with 1 and 1000 ports configured,
# and a full GETBULK walk of the SFLOW-MIB through a real snmpd. Runs
# BenchmarkScale (test/e2e/scale_bench_test.go) as root; it builds its own
# scale labs (test/lab/lab.sh scale, veth pairs in namespaces) and removes them.
# Results: bench/README.md, "Scale to 1000 ports".
#
# Extra arguments go to `go test`, e.g. bench/scale.sh -benchtime 1x
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "scale.sh: must run as root" >&2; exit 1; }
go test -count=1 -run '^$' -bench '^BenchmarkScale$' -benchtime 3x -timeout 20m "$@" ./test/e2e/
