#!/usr/bin/env bash
# lab.sh — network-namespace lab for sflowswitchd (integration tests,
# benchmarks, `make lab`, the Vagrant VM).
#
# Topology for `lab.sh up PREFIX N` (its Go side: internal/testkit/netlab):
#
#   PREFIX-h1  eth0 198.18.0.11/24 ──veth── p1 ┐
#   PREFIX-h2  eth0 198.18.0.12/24 ──veth── p2 ├ br0  (PREFIX-sw)
#   ...                                        ┘
#   PREFIX-sw  mgmt0 198.19.255.1/30 ──veth── eth0 198.19.255.2/30 PREFIX-col
#
# - br0: Linux bridge, up, STP off, default ageing, no address.
# - Host I: eth0 MAC 02:00:00:00:HH:LL where HHLL are the decimal digits of
#   10+I (host 1 -> 02:00:00:00:00:11, host 105 -> 02:00:00:00:01:15), so
#   the MAC "reads" like the last address octet. Switch port pI has
#   02:00:00:01:HH:LL. mgmt0 02:00:00:fe:00:01, collector eth0 02:00:00:fe:00:02.
# - IPv6 is disabled in every lab namespace (no ND/RA/MLD noise), lo is up.
# - Every host has permanent neighbour entries for every other host, and the
#   management pair for each other, so the lab sends no ARP on its own:
#   counter tests can count frames exactly.
# - Links are created directly inside their namespaces; nothing is ever
#   added to the namespace this script runs in.
#
# Only namespaces named exactly PREFIX-sw, PREFIX-col and PREFIX-h<digits>
# belong to a lab, so concurrent labs with different prefixes never touch
# each other.
set -eu

readonly MAX_PORTS=244 # host address 198.18.0.(10+I) must stay <= .254

usage() {
	cat <<'EOF'
usage: lab.sh COMMAND [ARGS]

  up PREFIX NPORTS   create namespaces PREFIX-sw (bridge br0, ports p1..pN,
                     mgmt0 198.19.255.1/30), PREFIX-h1..PREFIX-hN (eth0
                     198.18.0.(10+I)/24) and PREFIX-col (eth0 198.19.255.2/30)
  down PREFIX        remove everything of lab PREFIX (idempotent, never fails
                     because parts are missing)
  addport PREFIX I   hot-plug switch port pI and host namespace PREFIX-hI
  delport PREFIX I   remove switch port pI and host namespace PREFIX-hI
  status PREFIX      show the lab's namespaces, links and addresses
  scale PREFIX N [FIRST_IFINDEX]
                     a scale lab: PREFIX-sw (br0, mgmt0) and PREFIX-col as
                     for up, plus N veth pairs sI (in PREFIX-sw, up, no
                     bridge) <-> qI (in PREFIX-peer, up), created in one
                     batch; with FIRST_IFINDEX, sI gets ifindex
                     FIRST_IFINDEX+I-1. N: 1..65535.

PREFIX: 1-8 characters [A-Za-z0-9_], starting with a letter (interface names
are limited to 15 characters; namespaces are named PREFIX-sw, PREFIX-hI,
PREFIX-col). NPORTS and I: 1..244. Must run as root.

Examples:
  test/lab/lab.sh up demo 3
  nsenter --net=/run/netns/demo-h1 ping -c1 198.18.0.12
  test/lab/lab.sh down demo
EOF
}

die() {
	echo "lab.sh: $*" >&2
	exit 1
}

check_prefix() {
	[[ "$1" =~ ^[A-Za-z][A-Za-z0-9_]{0,7}$ ]] ||
		die "bad PREFIX '$1': want 1-8 characters [A-Za-z0-9_] starting with a letter"
}

check_port() {
	[[ "$1" =~ ^[1-9][0-9]{0,2}$ ]] && (("$1" <= MAX_PORTS)) ||
		die "bad port number '$1': want 1..$MAX_PORTS"
}

# nsx NS CMD...: run CMD in the network namespace NS. nsenter (unlike
# `ip netns exec`) does not remount /sys, so pinned BPF objects stay visible.
nsx() {
	local ns=$1
	shift
	nsenter --net="/run/netns/$ns" -- "$@"
}

# two_digits N: the decimal digits of N (< 10000) as two MAC octets "HH:LL".
two_digits() {
	printf '%02d:%02d' $(($1 / 100)) $(($1 % 100))
}

host_mac() { echo "02:00:00:00:$(two_digits $((10 + $1)))"; }
port_mac() { echo "02:00:00:01:$(two_digits $((10 + $1)))"; }
host_ip() { echo "198.18.0.$((10 + $1))"; }

# lab_namespaces PREFIX: every existing namespace that belongs to lab PREFIX.
lab_namespaces() {
	local p=$1 name
	# `ip netns list` prints "NAME" or "NAME (id: N)".
	ip netns list 2>/dev/null | while read -r name _; do
		if [[ "$name" == "$p-sw" || "$name" == "$p-col" || "$name" == "$p-peer" || "$name" =~ ^"$p"-h[0-9]+$ ]]; then
			echo "$name"
		fi
	done
}

ns_exists() { [ -e "/run/netns/$1" ]; }

# new_ns NAME: create a namespace with lo up and IPv6 disabled by default
# (set before any link is created, so every later link inherits it).
new_ns() {
	local ns=$1
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	if [ -d /proc/sys/net/ipv6 ]; then
		nsx "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 \
			net.ipv6.conf.default.disable_ipv6=1 >/dev/null
	fi
}

# remove_ns NAME: delete every link in NAME (so nothing lingers if a process
# still holds the namespace open), then the namespace itself. Never fails.
remove_ns() {
	local ns=$1 links link
	ns_exists "$ns" || return 0
	links=$(ip -n "$ns" -o link show 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); if ($2 != "lo") print $2 }')
	# Links are deleted one by one (synchronously) in small labs. A scale
	# lab's thousands of veths go with the namespace: the kernel then
	# unregisters them in one batch (one RCU grace period, not one per
	# link: 1000 veths take ~20 s one by one).
	if [ "$(echo "$links" | wc -l)" -le 64 ]; then
		for link in $links; do
			ip -n "$ns" link del "$link" 2>/dev/null || true
		done
	fi
	ip netns del "$ns" 2>/dev/null || true
}

# host_indices PREFIX: port numbers of the lab's existing hosts.
host_indices() {
	lab_namespaces "$1" | sed -n "s/^$1-h\([0-9]*\)\$/\1/p" | sort -n
}

# wait_active NS [DEV...]: wait until the veth links DEV (default: every
# veth of NS) are operationally up with their qdisc attached. Until the
# kernel's link watcher has run for a new link (a work item that needs the
# RTNL lock, so it runs late while other namespaces are being dismantled),
# the link transmits through noop_qdisc, which drops every frame
# (QDISC_DROP): a test that sends right after `ip link set up` would lose
# its first frames.
wait_active() {
	local ns=$1 i pending
	shift
	for ((i = 0; i < 600; i++)); do
		if [ $# -gt 0 ]; then
			pending=$(for dev in "$@"; do ip -n "$ns" -o link show dev "$dev"; done | grep -v 'state UP' || true)
		else
			pending=$(ip -n "$ns" -o link show type veth | grep -v 'state UP' || true)
		fi
		pending=$pending$(ip -n "$ns" -o link show type veth | grep ' qdisc noop ' || true)
		[ -z "$pending" ] && return 0
		sleep 0.05
	done
	die "links of $ns not up after 30 s: $pending"
}

# plug PREFIX I: create host namespace PREFIX-hI and switch port pI.
plug() {
	local p=$1 i=$2 sw="$1-sw" h="$1-h$2" j
	ns_exists "$sw" || die "lab $p does not exist (no namespace $sw)"
	ns_exists "$h" && die "host namespace $h already exists"
	new_ns "$h"
	ip link add "p$i" netns "$sw" address "$(port_mac "$i")" type veth \
		peer name eth0 netns "$h" address "$(host_mac "$i")"
	ip -n "$sw" link set "p$i" master br0
	ip -n "$sw" link set "p$i" up
	ip -n "$h" addr add "$(host_ip "$i")/24" dev eth0
	ip -n "$h" link set eth0 up
	wait_active "$sw" "p$i"
	wait_active "$h" eth0
	for j in $(host_indices "$p"); do
		[ "$j" = "$i" ] && continue
		ip -n "$h" neigh replace "$(host_ip "$j")" lladdr "$(host_mac "$j")" dev eth0 nud permanent
		ip -n "$p-h$j" neigh replace "$(host_ip "$i")" lladdr "$(host_mac "$i")" dev eth0 nud permanent
	done
}

# unplug PREFIX I: remove port pI, host PREFIX-hI and its neighbour entries.
unplug() {
	local p=$1 i=$2 j
	ip -n "$p-sw" link del "p$i" 2>/dev/null || true
	remove_ns "$p-h$i"
	for j in $(host_indices "$p"); do
		ip -n "$p-h$j" neigh del "$(host_ip "$i")" dev eth0 2>/dev/null || true
	done
}

cmd_down() {
	local p=$1 ns
	for ns in $(lab_namespaces "$p"); do
		remove_ns "$ns"
	done
}

cmd_up() {
	local p=$1 n=$2 i sw="$1-sw" col="$1-col"
	if [ -n "$(lab_namespaces "$p")" ]; then
		die "lab $p already exists (run: lab.sh down $p)"
	fi
	# Remove whatever was built if any step fails.
	trap 'rc=$?; if [ "$rc" -ne 0 ]; then cmd_down "'"$p"'"; fi' EXIT

	make_core "$p"
	for ((i = 1; i <= n; i++)); do
		plug "$p" "$i"
	done
	trap - EXIT
}

# make_core creates PREFIX-sw (br0, mgmt0) and PREFIX-col.
make_core() {
	local p=$1 sw="$1-sw" col="$1-col"
	new_ns "$sw"
	ip -n "$sw" link add br0 address 02:00:00:fd:00:01 type bridge stp_state 0
	ip -n "$sw" link set br0 up

	new_ns "$col"
	ip link add mgmt0 netns "$sw" address 02:00:00:fe:00:01 type veth \
		peer name eth0 netns "$col" address 02:00:00:fe:00:02
	ip -n "$sw" addr add 198.19.255.1/30 dev mgmt0
	ip -n "$col" addr add 198.19.255.2/30 dev eth0
	ip -n "$sw" link set mgmt0 up
	ip -n "$col" link set eth0 up
	wait_active "$sw" mgmt0
	wait_active "$col" eth0
	ip -n "$sw" neigh replace 198.19.255.2 lladdr 02:00:00:fe:00:02 dev mgmt0 nud permanent
	ip -n "$col" neigh replace 198.19.255.1 lladdr 02:00:00:fe:00:01 dev eth0 nud permanent
}

cmd_scale() {
	local p=$1 n=$2 first=${3:-} i
	if [ -n "$(lab_namespaces "$p")" ]; then
		die "lab $p already exists (run: lab.sh down $p)"
	fi
	trap 'rc=$?; if [ "$rc" -ne 0 ]; then cmd_down "'"$p"'"; fi' EXIT
	make_core "$p"
	new_ns "$p-peer"
	for ((i = 1; i <= n; i++)); do
		if [ -n "$first" ]; then
			echo "link add s$i index $((first + i - 1)) type veth peer name q$i netns $p-peer"
		else
			echo "link add s$i type veth peer name q$i netns $p-peer"
		fi
		echo "link set s$i up"
	done | ip -n "$p-sw" -batch -
	for ((i = 1; i <= n; i++)); do
		echo "link set q$i up"
	done | ip -n "$p-peer" -batch -
	wait_active "$p-sw"
	wait_active "$p-peer"
	trap - EXIT
}

cmd_status() {
	local p=$1 ns
	for ns in $(lab_namespaces "$p"); do
		echo "== $ns"
		ip -n "$ns" -br addr show
	done
}

main() {
	[ $# -ge 1 ] || {
		usage >&2
		exit 2
	}
	local cmd=$1
	shift
	case "$cmd" in
	-h | --help | help)
		usage
		return 0
		;;
	up | down | addport | delport | status | scale) ;;
	*)
		usage >&2
		exit 2
		;;
	esac
	[ "$(id -u)" = 0 ] || die "must run as root"
	case "$cmd" in
	up)
		[ $# -eq 2 ] || die "usage: lab.sh up PREFIX NPORTS"
		check_prefix "$1"
		check_port "$2"
		cmd_up "$1" "$2"
		;;
	down)
		[ $# -eq 1 ] || die "usage: lab.sh down PREFIX"
		check_prefix "$1"
		cmd_down "$1"
		;;
	addport)
		[ $# -eq 2 ] || die "usage: lab.sh addport PREFIX I"
		check_prefix "$1"
		check_port "$2"
		ns_exists "$1-sw" || die "lab $1 does not exist (no namespace $1-sw)"
		ns_exists "$1-h$2" && die "host namespace $1-h$2 already exists"
		# Remove the half-plugged port if any step fails.
		trap 'rc=$?; if [ "$rc" -ne 0 ]; then unplug "'"$1"'" "'"$2"'"; fi' EXIT
		plug "$1" "$2"
		trap - EXIT
		;;
	delport)
		[ $# -eq 2 ] || die "usage: lab.sh delport PREFIX I"
		check_prefix "$1"
		check_port "$2"
		unplug "$1" "$2"
		;;
	status)
		[ $# -eq 1 ] || die "usage: lab.sh status PREFIX"
		check_prefix "$1"
		cmd_status "$1"
		;;
	scale)
		[ $# -eq 2 ] || [ $# -eq 3 ] || die "usage: lab.sh scale PREFIX N [FIRST_IFINDEX]"
		check_prefix "$1"
		[[ "$2" =~ ^[1-9][0-9]{0,4}$ ]] && (("$2" <= 65535)) || die "bad N '$2': want 1..65535"
		if [ $# -eq 3 ]; then
			[[ "$3" =~ ^[1-9][0-9]{0,9}$ ]] && (("$3" + "$2" - 1 <= 2147483647)) || die "bad FIRST_IFINDEX '$3'"
		fi
		cmd_scale "$@"
		;;
	esac
}

main "$@"
