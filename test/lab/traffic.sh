#!/usr/bin/env bash
# traffic.sh — bounded mixed traffic between the hosts of a lab made by
# lab.sh, each sender and receiver inside its own host namespace:
#
#   UDP   100/s to port 7777 of host 2 and 100/s to a closed port of the
#         switch's own address 198.18.0.1, both dropped by the switch when
#         test/lab/drops.sh set it up (dropped-packet notifications)
#
#   ICMP  every host pings the next one (5 per second)
#   TCP   the last host serves HTTP (python3 -m http.server, port 8080); every
#         other host fetches a 256 KiB file from it in a loop
#   UDP   every host sends 1000 datagrams/s of 200 bytes to the next host on
#         port 5000+I (a python3 sink there reads them)
#   UDP   bursts from host 1 (and host 2 when there are 3 hosts or more) with
#         trafgen: TRAFFIC_PPS packets/s (default 200000) for TRAFFIC_BURST
#         seconds (default 5) out of every TRAFFIC_PERIOD (default 10), as a
#         round robin of 64, 512 and 1400-byte frames to ports 7001..7003.
#         The bursts make samples show up within seconds even at the 1-in-10000
#         rate the daemon picks for 10 Gb/s veth ports.
#
# Everything stops after SECONDS, or at SIGINT/SIGTERM: every process this
# script starts is tracked by its PID and killed at the end. IPv4 only (the
# lab disables IPv6). Nothing runs outside the lab's host namespaces, apart
# from this script itself.
set -euo pipefail

usage() {
	echo "usage: traffic.sh PREFIX SECONDS   (lab PREFIX made by lab.sh up, >= 2 hosts)" >&2
	exit 2
}

[ $# -eq 2 ] || usage
readonly prefix=$1 seconds=$2
[[ "$prefix" =~ ^[A-Za-z][A-Za-z0-9_]{0,7}$ ]] || usage
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || usage
readonly pps=${TRAFFIC_PPS:-200000} burst=${TRAFFIC_BURST:-5} period=${TRAFFIC_PERIOD:-10}
[[ "$pps" =~ ^[0-9]+$ && "$burst" =~ ^[1-9][0-9]*$ && "$period" =~ ^[1-9][0-9]*$ ]] ||
	{ echo "traffic.sh: TRAFFIC_PPS, TRAFFIC_BURST, TRAFFIC_PERIOD must be integers" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "traffic.sh: must run as root" >&2; exit 1; }

# Host indices of the lab, in order.
mapfile -t hosts < <(ip netns list 2>/dev/null | sed -n "s/^$prefix-h\([0-9][0-9]*\)\( .*\)\{0,1\}\$/\1/p" | sort -n)
[ "${#hosts[@]}" -ge 2 ] || { echo "traffic.sh: lab $prefix has fewer than 2 hosts" >&2; exit 1; }
nhosts=${#hosts[@]}

ip_of() { echo "198.18.0.$((10 + $1))"; }
# mac_of I: the host MAC lab.sh gives host I (02:00:00:00:HH:LL, HHLL the
# decimal digits of 10+I).
mac_of() { printf '02:00:00:00:%02d:%02d' $(((10 + $1) / 100)) $(((10 + $1) % 100)); }
# start_in I CMD...: start CMD in the background in host I's namespace, in
# a session (and process group) of its own whose ID is CMD's PID, and add
# the PID to pids. setsid and nsenter both exec, so the PID is CMD's own;
# the process group also holds the workers some tools fork (trafgen), and
# Ctrl-C on the terminal reaches only this script, which stops them all.
start_in() {
	local i=$1
	shift
	setsid nsenter --net="/run/netns/$prefix-h$i" -- "$@" &
	last_pid=$!
	pids+=("$last_pid")
}

# stop_pid PID: terminate our child PID (and its process group when
# start_in made one) and reap it.
stop_pid() {
	kill -TERM -- "-$1" 2>/dev/null || kill -TERM "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# The interpreter itself, not a wrapper (pyenv shims fork): the PID that
# is tracked must be the process doing the work.
py=$(python3 -c 'import sys; print(sys.executable)')

pids=()
work=$(mktemp -d "${TMPDIR:-/tmp}/sflowlab-traffic.XXXXXX")

stop_all() {
	local pid
	trap - EXIT INT TERM
	for pid in "${pids[@]}"; do
		stop_pid "$pid"
	done
	rm -rf "$work"
}
trap 'stop_all' EXIT
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM

# The python3 helper for the UDP and HTTP flows; each mode ends by itself
# at its deadline.
cat >"$work/flows.py" <<'EOF'
import http.client, select, socket, sys, time, urllib.request

mode, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
args = sys.argv[3:]

if mode == "udp-send":  # DST PORT PPS SIZE
    dst, port, pps, size = args[0], int(args[1]), float(args[2]), int(args[3])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload, tick = b"s" * size, 0.01
    per_tick = max(1, int(pps * tick))
    nxt = time.monotonic()
    while time.monotonic() < deadline:
        for _ in range(per_tick):
            try:
                s.sendto(payload, (dst, port))
            except OSError:
                pass
        nxt += tick
        time.sleep(max(0.0, nxt - time.monotonic()))
elif mode == "udp-sink":  # ADDR PORT...
    socks = []
    for port in args[1:]:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((args[0], int(port)))
        socks.append(s)
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select(socks, [], [], min(left, 0.5))
        for s in ready:
            s.recv(65536)
elif mode == "http-get":  # URL
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(args[0], timeout=2) as r:
                r.read()
        except (OSError, http.client.HTTPException):
            time.sleep(0.2)
        time.sleep(0.02)
else:
    sys.exit("unknown mode " + mode)
EOF
head -c 262144 /dev/zero | tr '\0' 'x' >"$work/file.bin"

first=${hosts[0]}
last=${hosts[$((nhosts - 1))]}

# ICMP and UDP: host I -> the next host (round robin).
for ((k = 0; k < nhosts; k++)); do
	i=${hosts[$k]}
	j=${hosts[$(((k + 1) % nhosts))]}
	start_in "$i" ping -q -i 0.2 -w "$seconds" "$(ip_of "$j")" >/dev/null 2>&1
	# The sink of host j receives from host i on port 5000+i.
	start_in "$j" "$py" "$work/flows.py" udp-sink "$seconds" "$(ip_of "$j")" $((5000 + i))
done
sleep 0.3 # sinks bound before the senders start
for ((k = 0; k < nhosts; k++)); do
	i=${hosts[$k]}
	j=${hosts[$(((k + 1) % nhosts))]}
	start_in "$i" "$py" "$work/flows.py" udp-send "$seconds" "$(ip_of "$j")" $((5000 + i)) 1000 200
done

# Drops (test/lab/drops.sh setup makes the switch drop these): 100/s UDP from the
# first host to port 7777 of the next one (nftables rule), and 100/s to a
# closed port of the switch's own address 198.18.0.1.
start_in "$first" "$py" "$work/flows.py" udp-send "$seconds" "$(ip_of "${hosts[1]}")" 7777 100 100
start_in "$first" "$py" "$work/flows.py" udp-send "$seconds" 198.18.0.1 9 100 100

# TCP: HTTP server on the last host, clients on every other one.
start_in "$last" "$py" -m http.server 8080 --bind "$(ip_of "$last")" --directory "$work" >/dev/null 2>&1
sleep 0.5
for ((k = 0; k < nhosts - 1; k++)); do
	start_in "${hosts[$k]}" "$py" "$work/flows.py" http-get "$seconds" "http://$(ip_of "$last"):8080/file.bin"
done

# trafgen configuration for a burst from host $1 to host $2: three UDP
# frames (64, 512 and 1400 bytes on the wire without FCS) sent round robin.
trafgen_conf() {
	local s=$1 d=$2 n pad
	for n in 1 2 3; do
		case $n in
		1) pad=18 ;;   # 14 + 20 + 8 + 18 = 60 (64 with FCS)
		2) pad=466 ;;  # 508 (512 with FCS)
		3) pad=1354 ;; # 1396 (1400 with FCS)
		esac
		echo "{ eth(da=$(mac_of "$d"), sa=$(mac_of "$s")), ipv4(saddr=$(ip_of "$s"), daddr=$(ip_of "$d"), ttl=64), udp(sport=$((40000 + n)), dport=$((7000 + n))), fill(0x54, $pad) }"
	done
}

# burst_loop S D: bursts from host S to host D until the deadline. It runs
# in a subshell, which kills its trafgen or sleep when it is terminated
# (both run in the background so that the trap runs at once).
burst_loop() {
	local s=$1 d=$2 end=$((SECONDS + seconds)) child="" left n pause
	trafgen_conf "$s" "$d" >"$work/burst-$s.cfg"
	trap 'if [ -n "$child" ]; then stop_pid "$child"; fi; exit 0' TERM INT
	while ((SECONDS < end)); do
		left=$((end - SECONDS))
		n=$((pps * (left < burst ? left : burst)))
		((n > 0)) || break # trafgen --num 0 would never stop
		start_in "$s" trafgen --dev eth0 --conf "$work/burst-$s.cfg" --num "$n" --rate "${pps}pps" \
			--cpus 1 --no-sock-mem --notouch-irq --no-cpu-stats >/dev/null 2>&1
		child=$last_pid
		wait "$child" || true
		left=$((end - SECONDS))
		pause=$((period - burst))
		((pause < left)) || pause=$left
		((pause > 0)) || continue
		sleep "$pause" &
		child=$!
		wait "$child" || true
	done
	child=""
}
if ((pps > 0)); then
	burst_loop "$first" "${hosts[1]}" &
	pids+=($!)
	if ((nhosts >= 3)); then
		burst_loop "${hosts[1]}" "${hosts[2]}" &
		pids+=($!)
	fi
fi

echo "traffic.sh: ${#pids[@]} processes in lab $prefix for ${seconds}s (bursts: ${pps} pps for ${burst}s every ${period}s)"
sleep "$seconds" &
pids+=($!)
wait $!
