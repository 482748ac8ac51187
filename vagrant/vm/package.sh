#!/usr/bin/env bash
# vm/package.sh — inside the lab VM, as root: the packaged daemon under
# systemd, as an operator runs it.
#   1. a port to sample: veth sw1 in the VM, its peer in namespace h1;
#   2. /etc/sflowswitchd/sflowswitchd.conf: sample sw1 only, send to a
#      collector on 127.0.0.1:6343, metrics on 127.0.0.1:9116, no snmpd;
#   3. systemctl start; traffic from h1; `sflowswitchd top` as the
#      collector shows what it receives; the kernel feature metrics;
#   4. systemctl stop; no XDP program is left on sw1 nor loaded at all.
# Exit status non-zero when a check fails.
set -euo pipefail
fail() { echo "package: FAIL: $*" >&2; exit 1; }

echo "== kernel: $(uname -r)"
ip netns add h1
ip link add sw1 type veth peer name h1 netns h1
ip addr add 198.18.14.1/24 dev sw1
ip link set sw1 up
ip -n h1 addr add 198.18.14.2/24 dev h1
ip -n h1 link set h1 up
ip -n h1 link set lo up

cat >/etc/sflowswitchd/sflowswitchd.conf <<'CONF'
ports = ["sw1"]
sampling = 10
polling = 5
metrics = "127.0.0.1:9116"
agentx = "off"
[[collector]]
address = "127.0.0.1:6343"
CONF
systemctl start sflowswitchd
sleep 2
systemctl --no-pager status sflowswitchd | head -12
grep -E 'Cap(Eff|Bnd)' /proc/"$(systemctl show -P MainPID sflowswitchd)"/status

echo "== traffic from h1 and the collector's view (sflowswitchd top, 20 s)"
ip netns exec h1 ping -q -i 0.01 -c 1500 198.18.14.1 >/dev/null &
ping_pid=$!
sflowswitchd top -listen 127.0.0.1:6343 -duration 20s -once | tee /tmp/top.out
wait "$ping_pid" || true
grep -q 'sw1\|ifindex' /tmp/top.out || fail "the collector saw no sample of sw1"

echo "== metrics"
curl_metrics() { python3 -c 'import urllib.request;print(urllib.request.urlopen("http://127.0.0.1:9116/metrics").read().decode())'; }
curl_metrics | grep -E '^sflowswitchd_(kernel_feature|port_sample_pool_total|flow_samples_total|datagrams_sent_total)' | tee /tmp/metrics.out
grep -q 'sflowswitchd_kernel_feature{.*} 0' /tmp/metrics.out && echo "package: some kernel features are unavailable (see the log)"
echo "== daemon log"
journalctl -u sflowswitchd --no-pager -o cat | head -20

echo "== systemctl stop"
bpftool net show dev sw1
systemctl stop sflowswitchd
systemctl is-active sflowswitchd || true
left=$(bpftool net show dev sw1 | grep -c 'sw1(' || true)
loaded=$(bpftool prog show | grep -c xdp_sampler || true)
ip -d link show sw1 | grep -q ' xdp' && fail "sw1 still has an XDP program"
echo "after stop: XDP on sw1: $left, xdp_sampler programs loaded: $loaded"
[ "$left" = 0 ] && [ "$loaded" = 0 ] || fail "XDP program left behind"
ip link del sw1
ip netns del h1
echo "package: OK"
