#!/usr/bin/env bash
# demo.sh — what `make lab` runs after building bin/sflowswitchd:
#
#   1. test/lab/lab.sh up PREFIX 4: a switch namespace (bridge br0, ports p1..p4),
#      four host namespaces and a collector namespace; PREFIX is "lab" plus a
#      random suffix, so several demos can run side by side;
#   2. sflowswitchd in the switch namespace with its defaults, only the
#      collector address given (and metrics on 127.0.0.1:9116 inside the
#      namespace); its log goes to a file;
#   3. test/lab/drops.sh setup: the switch drops some of the traffic (nftables
#      rule, UDP to a closed port of its own address, a tbf-shaped port), and
#      test/lab/traffic.sh: mixed ICMP, UDP, TCP and trafgen bursts between the
#      hosts, plus the UDP the switch drops;
#   4. `sflowswitchd top` in the collector namespace, in the foreground: the
#      live view of what the collector receives;
#   5. after LAB_SECONDS (default 60) or Ctrl-C: every process it started is
#      stopped by PID, lab.sh down removes the lab, and it checks that no
#      namespace of the lab is left.
#
# Environment: LAB_SECONDS (default 60), SFLOWSWITCHD (the binary, default
# bin/sflowswitchd), LAB_INTERVAL (top's redraw interval, default 2s), and
# TRAFFIC_PPS / TRAFFIC_BURST / TRAFFIC_PERIOD (see test/lab/traffic.sh).
# Must run as root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
readonly seconds=${LAB_SECONDS:-60} interval=${LAB_INTERVAL:-2s}
bin=${SFLOWSWITCHD:-$root/bin/sflowswitchd}
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "demo.sh: LAB_SECONDS must be a positive integer" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "demo.sh: must run as root (it creates network namespaces)" >&2; exit 1; }
[ -x "$bin" ] || { echo "demo.sh: $bin not found; run make build (or make lab)" >&2; exit 1; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
"$bin" help 2>/dev/null | grep -q '^  top ' ||
	{ echo "demo.sh: $bin has no 'top' subcommand (rebuild it: make build)" >&2; exit 1; }

# A prefix no existing lab uses: "lab" + 4 hex digits (lab.sh allows 8).
prefix=""
for _ in 1 2 3 4 5 6 7 8; do
	p=$(printf 'lab%04x' $((RANDOM)))
	if ! compgen -G "/run/netns/$p-*" >/dev/null; then
		prefix=$p
		break
	fi
done
[ -n "$prefix" ] || { echo "demo.sh: no free lab prefix found" >&2; exit 1; }
readonly prefix sw=$prefix-sw col=$prefix-col

logdir=$(mktemp -d "${TMPDIR:-/tmp}/sflowswitchd-lab.XXXXXX")
daemon_log=$logdir/sflowswitchd.log
traffic_log=$logdir/traffic.log
daemon_pid="" traffic_pid="" top_pid="" lab_created=""

# stop PID NAME: SIGTERM our child PID, SIGKILL after 5 s, and reap it.
stop() {
	local pid=$1 name=$2 i
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "demo.sh: $name (PID $pid) did not stop on SIGTERM; sending SIGKILL" >&2
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

cleanup() {
	local rc=$? left
	trap - EXIT INT TERM
	trap '' INT TERM # a second Ctrl-C must not interrupt the cleanup
	stop "$top_pid" "sflowswitchd top" # prints its final summary
	echo
	echo "== stopping (daemon log: $daemon_log)"
	stop "$traffic_pid" "traffic.sh"
	stop "$daemon_pid" "sflowswitchd"
	if [ -n "$lab_created" ]; then
		"$here/lab.sh" down "$prefix" || rc=1
	fi
	# The namespaces lab.sh names (/run/netns/NAME), not a parse of `ip netns list`.
	left=$(cd /run/netns 2>/dev/null && ls -d -- "$prefix"-* 2>/dev/null | grep -E "^$prefix-(sw|col|h[0-9]+)\$" || true)
	if [ -n "$left" ]; then
		echo "demo.sh: ERROR: namespaces of lab $prefix remain:" $left >&2
		rc=1
	else
		echo "== lab $prefix removed: no namespace $prefix-* remains"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "== creating lab $prefix: switch $sw (br0, p1..p4), hosts $prefix-h1..h4, collector $col"
lab_created=1
"$here/lab.sh" up "$prefix" 4
echo "== the switch drops some traffic (test/lab/drops.sh): nftables rule (UDP 7777), UDP to a closed port of 198.18.0.1 (br0), tbf on p3"
"$here/drops.sh" setup "$prefix"

# The collector knows ports by ifIndex only: print the map once.
echo "   ports in $sw:" $(ip -n "$sw" -o link show | awk -F': ' '$2 != "lo" { sub(/@.*/, "", $2); printf "%s=ifIndex %s, ", $2, $1 }' | sed 's/, $//')

echo "== starting sflowswitchd in $sw (log: $daemon_log)"
nsenter --net="/run/netns/$sw" -- "$bin" -collector 198.19.255.2:6343 -metrics 127.0.0.1:9116 \
	>"$daemon_log" 2>&1 </dev/null &
daemon_pid=$!
sleep 2
if ! kill -0 "$daemon_pid" 2>/dev/null; then
	wait "$daemon_pid" || true
	daemon_pid=""
	echo "demo.sh: sflowswitchd exited at start; its log:" >&2
	cat "$daemon_log" >&2
	exit 1
fi
echo "   metrics: nsenter --net=/run/netns/$sw curl -s 127.0.0.1:9116/metrics"

echo "== traffic for ${seconds}s (log: $traffic_log)"
"$here/traffic.sh" "$prefix" "$seconds" >"$traffic_log" 2>&1 </dev/null &
traffic_pid=$!

echo "== sflowswitchd top in $col (Ctrl-C to stop early)"
echo "   The daemon samples each port at one sample per Mb/s of link speed: veth"
echo "   reports 10000 Mb/s, so 1-in-10000; the trafgen bursts make samples appear."
# top runs in the background and the script waits for it: `wait` returns at
# once when a trapped signal (Ctrl-C) arrives, and the cleanup stops top by
# PID; top prints its final summary when it gets SIGTERM. It also stops by
# itself a little after the traffic, so the last counters are in the summary.
nsenter --net="/run/netns/$col" -- "$bin" top -listen 198.19.255.2:6343 -interval "$interval" \
	-duration "$((seconds + 3))s" </dev/null &
top_pid=$!
wait "$top_pid" || true
top_pid=""

echo "== true drop counts (compare with DROPS in top and sflowswitchd_switch_dropped_packets_total):"
"$here/drops.sh" show "$prefix" | sed 's/^/   /'
if ! kill -0 "$daemon_pid" 2>/dev/null; then
	echo "demo.sh: sflowswitchd is no longer running; its log:" >&2
	tail -n 50 "$daemon_log" >&2
	exit 1
fi
