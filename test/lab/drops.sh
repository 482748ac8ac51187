#!/usr/bin/env bash
# drops.sh — make the switch of a lab (lab.sh up PREFIX N, N >= 3) drop
# packets for three reasons, so that `make lab` shows dropped-packet
# notifications. Everything is created inside the lab's switch
# namespace and disappears with it (lab.sh down):
#
#   acl        an nftables rule (table bridge sflowswitchd_lab, prerouting)
#              drops and counts UDP to port 7777   -> NETFILTER_DROP (acl)
#   closed     br0 gets the switch's own address 198.18.0.1/24; UDP to a
#              closed port there is dropped          -> NO_SOCKET (port_unreachable)
#   shaping    p3 gets a tbf root qdisc (20 Mbit/s); the trafgen bursts
#              towards host 3 overflow its queue     -> QDISC_DROP (traffic_shaping)
#
# test/lab/traffic.sh sends the UDP for the first two. `drops.sh show PREFIX`
# prints the true counts (nft counter, qdisc drops) to compare with
# `sflowswitchd top` and the daemon's metrics.
set -euo pipefail

usage() {
	echo "usage: drops.sh setup|show PREFIX" >&2
	exit 2
}
[ $# -eq 2 ] || usage
readonly cmd=$1 prefix=$2
[[ "$prefix" =~ ^[A-Za-z][A-Za-z0-9_]{0,7}$ ]] || usage
readonly sw=$prefix-sw
[ -e "/run/netns/$sw" ] || { echo "drops.sh: no lab $prefix" >&2; exit 1; }

case $cmd in
setup)
	nsenter --net="/run/netns/$sw" -- nft -f - <<'NFT'
table bridge sflowswitchd_lab {
	chain pre {
		type filter hook prerouting priority 0; policy accept;
		udp dport 7777 counter drop
	}
}
NFT
	ip -n "$sw" addr replace 198.18.0.1/24 dev br0
	ip -n "$sw" link show p3 >/dev/null 2>&1 &&
		tc -n "$sw" qdisc replace dev p3 root tbf rate 20mbit burst 16kb limit 32kb
	;;
show)
	echo "acl (nft counter):     $(nsenter --net="/run/netns/$sw" -- nft list table bridge sflowswitchd_lab | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')"
	echo "shaping (p3 qdisc):    $(tc -n "$sw" -s qdisc show dev p3 | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1)"
	;;
*) usage ;;
esac
