#!/usr/bin/env bash
# daemon.sh — sflowswitchd daemon benchmarks (bench/README.md, sections
# 3 "CPU per million packets", 4 "Samples per second end to end" and 5 "Idle"). Run as root (bench/run.sh, `make bench`): the Go program in
# bench/daemon builds its own namespace lab with test/lab/lab.sh and removes it
# at the end, also on SIGINT/SIGTERM; this script removes its build dir.
#
#   1. cpu:    whole-daemon CPU (utime+stime) and RSS while the 4-port lab
#              forwards at trafgen's maximum rate, at 1-in-1000 and 1-in-10.
#   2. live:   samples/s end to end (XDP ring -> workers -> UDP -> collector)
#              with BPF_PROG_RUN live frames at sampling rate 1, drops
#              counted, for max_datagram_size 1400 and 9000, plus a CPU
#              profile of the workers.
#   3. encode: the workers alone (samples from memory): CPU per flow sample.
#   4. idle:   the daemon sampling 4 ports with no traffic: CPU and context
#              switches per second (idle means asleep).
#
# Knobs: DAEMON_BENCH_ROUNDS (default 5), DAEMON_BENCH_WINDOW (default 10s).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "daemon.sh: must run as root" >&2; exit 1; }
rounds=${DAEMON_BENCH_ROUNDS:-5}
window=${DAEMON_BENCH_WINDOW:-10s}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-daemon.XXXXXX")
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

# run CMD...: run CMD in the background (so that a signal reaches the trap
# at once, which stops CMD by its PID) and wait for it.
run() {
	"$@" &
	child=$!
	wait "$child"
	child=""
}

go build -o "$tmp/sflowswitchd" ./cmd/sflowswitchd
go -C bench build -o "$tmp/daemonbench" ./daemon

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "## 1. daemon CPU and memory under forwarding load"
run "$tmp/daemonbench" cpu -bin "$tmp/sflowswitchd" -sampling 1000,10 -rounds "$rounds" -window "$window"

echo "## 2. samples/s end to end (live frames, sampling 1)"
run "$tmp/daemonbench" live -rounds 3 -duration "$window" -max-datagram 1400 -cpuprofile "$tmp/live.prof"
echo "# worker CPU profile (cumulative, worker goroutines only):"
go tool pprof -top -cum -nodecount=25 -focus='agent\.\(\*worker\)\.run' "$tmp/live.prof" 2>/dev/null | sed -n '/flat%/,$p'
run "$tmp/daemonbench" live -rounds 3 -duration "$window" -max-datagram 9000

echo "## 3. worker cost per flow sample (samples from memory, loopback sink)"
run "$tmp/daemonbench" encode -rounds 3 -duration 5s -max-datagram 1400,9000

echo "## 4. idle daemon (4 ports sampled, no traffic)"
run "$tmp/daemonbench" idle -bin "$tmp/sflowswitchd" -rounds 3 -window "$window"
