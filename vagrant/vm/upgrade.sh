#!/usr/bin/env bash
# vm/upgrade.sh — inside a test VM (`make vagrant-upgrade`), as root: the
# package's own maintainer scripts under dpkg and systemd, through an
# upgrade in place, a crash and a removal, with a collector watching.
#
#   upgrade.sh DEB_OLD DEB_NEW
#
#   1. a port to sample: veth sw1 in the VM, its peer in namespace h1, no
#      IPv6 on either, permanent neighbours (no ARP: only the test's
#      frames cross sw1);
#   2. dpkg -i DEB_OLD; the packaged configuration with its pin_dir, sw1
#      only, sampling 1, a collector on 127.0.0.1:6343; systemctl start;
#   3. steady traffic from h1 (ping, 200 frames/s); the datagrams captured
#      on lo (dumpcap), read afterwards by our decoder (sflowswitchd decode
#      -pcap) and by tshark (the independent decoder);
#   4. dpkg -i DEB_NEW while the traffic runs: postinst hands over by
#      SIGUSR2. Checked: the same MainPID, no systemd restart, the journal's
#      "upgrade in place completed" from the old version to the new;
#   5. kill -9 the daemon: systemd's Restart= starts it again, and it
#      adopts the pinned samplers ("adopted" in the journal);
#   6. the traffic stops; then, from the datagrams (both decoders): the
#      flow samples' sequence numbers of sw1 contiguous from 1 across the
#      upgrade, at most one gap at the crash (samples the killed daemon
#      had numbered but not sent: sFlow's sign of samples lost, reported
#      with its size); every sample's pool above the previous one;
#      the last pool = sw1's rx_packets (the frames of both gaps
#      included); samples + drops = pool (sampling 1);
#   7. systemctl reload with a refused file fails, the daemon keeps its
#      settings; with the good file it reloads; a second daemon is refused
#      with the running one's PID; sflowswitchd show and hsflowd.auto show
#      what is in force;
#   8. systemctl enable, dpkg -P: prerm stops the daemon and runs -cleanup
#      (nothing left pinned, no program on sw1), postrm removes the
#      enablement link and the state directory.
# All under the package's unit as shipped (its sandbox: system call
# filter, address families, private /dev, read-only /proc/sys and /sys
# but the BPF file system...): besides sampling, the upgrade and the
# restart, drop notifications (UDP to a closed port of sw1's address:
# discarded_packet samples, before the upgrade, after it and after the
# restart) and the SFLOW-MIB through the system's snmpd over AgentX (an
# SNMP GET of sFlowVersion at the same three moments) are checked, and
# the unit's exposure score is printed (systemd-analyze security).
# Exit status non-zero when a check fails.
set -euo pipefail
old=$1 new=$2
fail() {
	echo "upgrade: FAIL: $*" >&2
	journalctl -u sflowswitchd --no-pager -o cat | tail -40 | cut -c1-2000 >&2 || true
	exit 1
}
pin=/sys/fs/bpf/sflowswitchd
work=$(mktemp -d)
cleanup() {
	[ -z "${paranoid0:-}" ] || sysctl -qw kernel.perf_event_paranoid="$paranoid0" || true
	[ -z "${ping_pid:-}" ] || kill "$ping_pid" 2>/dev/null || true
	[ -z "${dec_pid:-}" ] || kill "$dec_pid" 2>/dev/null || true
	[ -z "${cap_pid:-}" ] || kill "$cap_pid" 2>/dev/null || true
	ip link del sw1 2>/dev/null || true
	ip netns del h1 2>/dev/null || true
}
trap cleanup EXIT

echo "== kernel $(uname -r); packages $(basename "$old") -> $(basename "$new")"
ip netns add h1
ip link add sw1 type veth peer name h1 netns h1
sysctl -qw net.ipv6.conf.sw1.disable_ipv6=1
ip netns exec h1 sysctl -qw net.ipv6.conf.h1.disable_ipv6=1
ip addr add 198.18.14.1/24 dev sw1
ip link set sw1 up
ip -n h1 addr add 198.18.14.2/24 dev h1
ip -n h1 link set h1 up
# Permanent neighbours: no ARP crosses sw1 (a neighbour probe of h1's,
# seconds after the pings stop, arrived after rx_packets was read and
# before the capture ended: a sample, and a pool, one frame above it).
ip -n h1 neigh replace 198.18.14.1 lladdr "$(cat /sys/class/net/sw1/address)" dev h1 nud permanent
ip neigh replace 198.18.14.2 lladdr "$(ip netns exec h1 cat /sys/class/net/h1/address)" dev sw1 nud permanent
rx0=$(cat /sys/class/net/sw1/statistics/rx_packets)

echo "== dpkg -i $(basename "$old")"
dpkg -i "$old" >"$work/dpkg-old.log" 2>&1 || { cat "$work/dpkg-old.log"; fail "dpkg -i old"; }
# The packaged configuration keeps its pin_dir (a crash or an upgrade
# leaves no gap); only ports, rate and collector are the test's.
conf=/etc/sflowswitchd/sflowswitchd.conf
grep -q "^pin_dir *= *\"$pin\"" "$conf" || fail "the packaged $conf does not set pin_dir = \"$pin\""
sed -i -e '/^ports *=/d; /^sampling *=/d; /^polling *=/d; /^agentx *=/d; /^metrics *=/d; /^drops *=/d' "$conf"
python3 - "$conf" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
# Drop the example collectors: every [[collector]] table to the next table.
s = re.sub(r'(?ms)^\[\[collector\]\].*?(?=^\[|\Z)', '', s)
head = 'ports = ["sw1"]\nsampling = 1\npolling = 5\nagentx = "unix:/var/agentx/master"\nmetrics = "127.0.0.1:9116"\ndrops = "on"\n'
open(p, 'w').write(head + s + '\n[[collector]]\naddress = "127.0.0.1:6343"\n')
PY

# The system's snmpd, an AgentX master on its default socket, answering
# SNMP on 127.0.0.1:161 (the daemon's AgentX registration is checked by
# a GET through it).
cat >/etc/snmp/snmpd.conf <<'SNMPD'
agentAddress udp:127.0.0.1:161
master agentx
agentXSocket unix:/var/agentx/master
rocommunity public 127.0.0.1
SNMPD
systemctl restart snmpd
snmp_check() { # $1: when
	local v
	for _ in $(seq 1 60); do
		v=$(snmpget -v2c -c public -Oqv -t 2 -r 1 127.0.0.1 1.3.6.1.4.1.14706.1.1.1.0 2>/dev/null) || v=
		case "$v" in *sflowswitchd*) echo "AgentX $1: sFlowVersion = $v"; return 0 ;; esac
		sleep 1
	done
	fail "AgentX $1: no sFlowVersion through snmpd (got '$v')"
}
# Drop notifications: UDP datagrams from h1 to a closed port of sw1's
# address are dropped by the kernel (no socket); each becomes a
# discarded_packet sample (drops_limit a second). Counted afterwards in
# the capture, per phase.
drops_burst() { # $1: the phase's port (its datagrams name it)
	ip netns exec h1 python3 -c 'import socket,sys
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)
for i in range(20): s.sendto(b"ho-drop",("198.18.14.1",int(sys.argv[1])))' "$1"
}

# The datagrams are captured on lo (dumpcap, a 64 MiB buffer; its drops
# are checked) and both decoders read the same capture afterwards: a
# decoder listening on the socket fell behind under emulation, and the
# socket dropped datagrams the agent had sent. A listener drains the
# socket meanwhile (a closed port would refuse the datagrams).
# The agent sends runs of equal datagrams as one UDP GSO message; on lo a
# capture would see the unsegmented message (one frame of ~32 KB, several
# datagrams): with UDP segmentation off on the VM's lo the kernel cuts it
# before the capture sees it.
ethtool -K lo tx-udp-segmentation off
sflowswitchd decode -listen 127.0.0.1:6343 >/dev/null 2>"$work/decode.err" &
dec_pid=$!
dumpcap -q -i lo -B 64 -f 'udp dst port 6343' -w "$work/cap.pcapng" 2>"$work/dumpcap.err" &
cap_pid=$!
sleep 3
# Debian's kernels default to kernel.perf_event_paranoid=3, at which
# Debian 12's 6.1 refuses the drop notifications' perf events to
# CAP_PERFMON alone (docs/reference/kernels.md): set as the
# documentation tells the operator to, and restored at the end.
paranoid0=$(sysctl -n kernel.perf_event_paranoid)
sysctl -qw kernel.perf_event_paranoid=2
echo "== the unit: $(systemd-analyze security sflowswitchd.service 2>/dev/null | tail -1)"
systemctl start sflowswitchd || fail "systemctl start"
pid0=$(systemctl show -P MainPID sflowswitchd)
[ "$pid0" != 0 ] || fail "not started"
echo "daemon $pid0: $(journalctl -u sflowswitchd --no-pager -o cat | grep -c .) log lines"
grep -E 'Seccomp:|NoNewPrivs|CapEff' /proc/"$pid0"/status

# The pool counts from the moment the sampler is on sw1, a moment after
# systemctl start returns (the first run's pool fell 277 frames, 1.4 s of
# pings, short of rx_packets counted from before): traffic starts once the
# metrics list sw1, and rx_packets is counted from there.
for _ in $(seq 1 120); do
	python3 -c 'import urllib.request,sys; sys.exit(0 if b"port=\"sw1\"" in urllib.request.urlopen("http://127.0.0.1:9116/metrics").read() else 1)' 2>/dev/null && break
	sleep 0.5
done
rx0=$(cat /sys/class/net/sw1/statistics/rx_packets)
echo "== traffic: ping from h1, 200/s"
ip netns exec h1 ping -q -i 0.005 198.18.14.1 >/dev/null &
ping_pid=$!
sleep 5
snmp_check "before the upgrade"
drops_burst 9001
sleep 2

echo "== dpkg -i $(basename "$new") (postinst: SIGUSR2)"
restarts0=$(systemctl show -P NRestarts sflowswitchd)
dpkg -i "$new" 2>&1 | tee "$work/dpkg-new.log"
for _ in $(seq 1 60); do
	journalctl -u sflowswitchd --no-pager -o cat | grep -q 'upgrade in place completed' && break
	sleep 1
done
journalctl -u sflowswitchd --no-pager -o cat | grep 'upgrade in place' || true
journalctl -u sflowswitchd --no-pager -o cat | grep -q 'upgrade in place completed' || fail "no 'upgrade in place completed' in the journal"
pid1=$(systemctl show -P MainPID sflowswitchd)
[ "$pid1" = "$pid0" ] || fail "MainPID $pid0 -> $pid1: not an upgrade in place"
[ "$(systemctl show -P NRestarts sflowswitchd)" = "$restarts0" ] || fail "systemd restarted the service"
new_ver=$(dpkg-query -W -f '${Version}' sflowswitchd)
journalctl -u sflowswitchd --no-pager -o cat | grep 'upgrade in place completed' | grep -q -- "$new_ver" ||
	fail "the completed upgrade does not name the new version $new_ver"
echo "upgrade in place: PID $pid1 kept, now $new_ver"
sleep 5
snmp_check "after the upgrade"
drops_burst 9002
sleep 2

echo "== kill -9 $pid1; systemd restarts it (Restart=on-failure)"
# The moment of the kill: a gap in the sample sequence numbers is allowed
# only after the datagrams sent before it (samples the killed daemon had
# numbered but not yet sent; persist's design: the numbers show what was
# lost).
sleep 1.5
mark=$(date +%s.%N)
kill -9 "$pid1"
for _ in $(seq 1 60); do
	pid2=$(systemctl show -P MainPID sflowswitchd)
	[ "$pid2" != 0 ] && [ "$pid2" != "$pid1" ] && systemctl is-active --quiet sflowswitchd && break
	sleep 1
done
[ "$pid2" != 0 ] && [ "$pid2" != "$pid1" ] || fail "not restarted after SIGKILL"
journalctl -u sflowswitchd --no-pager -o cat | grep -i 'adopt' | tail -3 || true
journalctl _PID="$pid2" --no-pager -o cat | grep -q "samplers taken over from the previous program" || fail "the restarted daemon did not adopt the pinned samplers"
sleep 5
snmp_check "after the restart"
drops_burst 9003
sleep 2
# Each program of the run (the first, the upgraded one, the restarted
# one) turned drop notifications on under the unit.
n=$(journalctl -u sflowswitchd --no-pager -o cat | grep -c 'drop notifications on' || true)
[ "$n" -ge 3 ] || fail "drop notifications on in $n of the 3 programs: $(journalctl -u sflowswitchd --no-pager -o cat | grep 'drop notifications' | tail -3)"
journalctl -u sflowswitchd --no-pager -o cat | grep -iE 'seccomp|bad system call|read-only file system' && fail "refused by the unit's sandbox (above)"

echo "== systemctl reload: a refused file fails it; one instance; sflowswitchd show"
cp "$conf" "$work/conf.good"
{ echo 'samplng = 5'; cat "$work/conf.good"; } >"$conf"
if systemctl reload sflowswitchd 2>"$work/reload.err"; then fail "systemctl reload succeeded with a refused file"; fi
journalctl -u sflowswitchd --no-pager -o cat | grep -q 'unknown setting "samplng" (did you mean "sampling"?)' ||
	fail "the refused reload's reason is not in the journal"
[ "$(systemctl show -P MainPID sflowswitchd)" = "$pid2" ] || fail "the refused reload restarted the daemon"
cp "$work/conf.good" "$conf"
systemctl reload sflowswitchd || fail "systemctl reload of the good file failed"
for _ in $(seq 1 30); do
	journalctl _PID="$pid2" --no-pager -o cat | grep -q 'configuration reloaded' && break
	sleep 1
done
journalctl _PID="$pid2" --no-pager -o cat | grep 'configuration reloaded' || fail "the good reload was not applied"
if timeout 20 sflowswitchd -config "$conf" -state-dir "$work" -pin-dir off >"$work/second.log" 2>&1; then
	fail "a second daemon started beside the running one"
fi
grep -q "another sflowswitchd runs in this network namespace: PID $pid2" "$work/second.log" ||
	fail "the second daemon's refusal does not name PID $pid2: $(cat "$work/second.log")"
sflowswitchd show | tee "$work/show.out"
grep -q "pid $pid2," "$work/show.out" && grep -Eq '^  sw1 +[0-9]+ +1 +1 +ingress' "$work/show.out" || fail "sflowswitchd show does not show sw1 at 1 in 1"
grep -q '^sampling=1$' /var/lib/sflowswitchd/hsflowd.auto || fail "hsflowd.auto: $(cat /var/lib/sflowswitchd/hsflowd.auto)"
sflowswitchd -version

echo "== traffic stops"
kill "$ping_pid"
wait "$ping_pid" 2>/dev/null || true
ping_pid=
sleep 3
rx=$(($(cat /sys/class/net/sw1/statistics/rx_packets) - rx0))
# Wait for the last samples (the workers' one-second tick) to arrive.
sleep 3
kill -INT "$cap_pid"
wait "$cap_pid" 2>/dev/null || true
kill "$dec_pid"
wait "$dec_pid" 2>/dev/null || true
dec_pid= cap_pid=
rx_end=$(($(cat /sys/class/net/sw1/statistics/rx_packets) - rx0))
echo "sw1 rx_packets since the test began: $rx (and $rx_end once the capture ended)"
[ "$rx_end" = "$rx" ] || fail "frames crossed sw1 after the traffic stopped: rx_packets $rx, then $rx_end"
cat "$work/dumpcap.err"
# "Packets received/dropped on interface 'lo': R/D (...)"
dropped=$(sed -n "s|.*received/dropped on interface '[^']*': [0-9]*/\([0-9]*\).*|\1|p" "$work/dumpcap.err")
[ "${dropped:-0}" = 0 ] || fail "the capture dropped $dropped datagrams"
# Our decoder, on the capture: one JSON line per datagram, with the time
# it was captured (the kill's mark is compared with it).
tshark -r "$work/cap.pcapng" -T fields -e frame.time_epoch >"$work/times.txt"
sflowswitchd decode -pcap "$work/cap.pcapng" >"$work/decoded.json" 2>"$work/decode.err" || fail "decode: $(head -3 "$work/decode.err")"

echo "== the samples of sw1, by our decoder and by tshark"
ifindex=$(cat /sys/class/net/sw1/ifindex)
tshark -r "$work/cap.pcapng" -T fields -E separator=';' -e sflow.flow_sample.source_id_index \
	-e sflow.flow_sample.sequence_number -e sflow.flow_sample.sample_pool -e sflow.flow_sample.dropped_packets \
	-e sflow.flow_sample.index >"$work/tshark.txt" 2>"$work/tshark-read.err" || fail "tshark: $(cat "$work/tshark-read.err")"
python3 - "$work/decoded.json" "$work/tshark.txt" "$ifindex" "$rx" "$mark" "$work/times.txt" <<'PY'
import json, sys
dec, tsh, ifindex, rx, mark = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
times = [float(x) for x in open(sys.argv[6]).read().split()]
ours = []
seq_at_mark = None
for n, line in enumerate(open(dec)):
    if seq_at_mark is None and n < len(times) and times[n] > mark:
        seq_at_mark = max([s for s, _, _ in ours], default=0)
    d = json.loads(line)
    for s in d.get("samples", []):
        if s.get("type") not in ("flow_sample", "expanded_flow_sample"):
            continue
        src = s.get("source_id") or {}
        idx = src.get("index", s.get("source_id_index"))
        if idx != ifindex:
            continue
        ours.append((s["sequence_number"], s["sample_pool"], s["drops"]))
theirs = []
for line in open(tsh):
    f = [x.split(",") for x in line.rstrip("\n").split(";")]
    # expanded samples fill .index, compact ones .source_id_index
    idxs = f[4] if f[4] != [""] else f[0]
    for i, idx in enumerate(idxs):
        if idx and int(idx) == ifindex:
            theirs.append((int(f[1][i]), int(f[2][i]), int(f[3][i])))
# Drop notifications: discarded_packet samples of the three bursts
# (UDP to ports 9001, 9002, 9003 of sw1's address), by our decoder.
discarded = {9001: 0, 9002: 0, 9003: 0}
for line in open(dec):
    for s in json.loads(line).get("samples", []):
        if s.get("type") != "discarded_packet":
            continue
        text = json.dumps(s).lower()
        for port in discarded:
            # the sampled header's bytes (hex): the UDP header's
            # destination port and length (8 + 7 bytes of "ho-drop")
            if ("%04x000f" % port) in text:
                discarded[port] += 1
print("discarded_packet samples per burst (UDP to closed ports 9001 before the upgrade, 9002 after it, 9003 after the restart): %s" % discarded)
fails = []
for port, n in discarded.items():
    if n == 0:
        fails.append("no discarded_packet sample of the burst to port %d" % port)
if not ours:
    fails.append("no flow sample of ifindex %d" % ifindex)
if sorted(ours) != sorted(theirs):
    fails.append("our decoder and tshark differ: %d vs %d samples" % (len(ours), len(theirs)))
ours.sort()
seqs = [s for s, _, _ in ours]
gaps = [(a, b) for a, b in zip(seqs, seqs[1:]) if b != a + 1]
# Contiguous across the upgrade; one gap allowed at the crash, after the
# samples received before the kill.
crash = [(a, b) for a, b in gaps if seq_at_mark is not None and a >= seq_at_mark]
if len(gaps) > len(crash) or len(crash) > 1:
    fails.append("sequence numbers not contiguous: gaps %s (samples before the kill: up to %s)" % (gaps[:5], seq_at_mark))
lost = sum(b - a - 1 for a, b in crash)
print("sequence numbers: contiguous across the upgrade; at the crash %s" %
      ("%d numbered by the killed daemon and never sent (gap %d..%d)" % (lost, crash[0][0], crash[0][1]) if crash else "no gap"))
if seqs and seqs[0] != 1:
    fails.append("first sequence number %d, not 1" % seqs[0])
pools = [p for _, p, _ in ours]
back = [(a, b) for a, b in zip(pools, pools[1:]) if b <= a]
if back:
    fails.append("pools not increasing: %s" % back[:5])
last_seq, last_pool, last_drops = ours[-1] if ours else (0, 0, 0)
print("samples %d (seq 1..%d), last pool %d, drops %d, sw1 rx_packets %d; tshark read the same %d samples"
      % (len(ours), last_seq, last_pool, last_drops, rx, len(theirs)))
if last_pool != rx:
    fails.append("last pool %d != sw1 rx_packets %d" % (last_pool, rx))
# At sampling 1 every frame is numbered or dropped: the numbers (those
# lost at the crash included) plus the drops are the pool.
if last_seq + last_drops != last_pool:
    fails.append("samples %d + drops %d != pool %d at sampling 1" % (last_seq, last_drops, last_pool))
for f in fails:
    print("upgrade: FAIL:", f)
sys.exit(1 if fails else 0)
PY

echo "== systemctl enable, then dpkg -P sflowswitchd (prerm: stop, -cleanup; postrm: purge)"
systemctl enable sflowswitchd 2>&1
[ -L /etc/systemd/system/multi-user.target.wants/sflowswitchd.service ] || fail "systemctl enable made no link"
dpkg -P sflowswitchd >"$work/dpkg-r.log" 2>&1 || { cat "$work/dpkg-r.log"; fail "dpkg -P"; }
[ -e /etc/systemd/system/multi-user.target.wants/sflowswitchd.service ] || [ -L /etc/systemd/system/multi-user.target.wants/sflowswitchd.service ] &&
	fail "the purge left the enablement link"
[ -e /var/lib/sflowswitchd ] && fail "the purge left /var/lib/sflowswitchd"
systemctl is-active --quiet sflowswitchd && fail "still active after removal"
[ -z "$(ls -A "$pin" 2>/dev/null)" ] || fail "left pinned: $(ls "$pin")"
ip -d link show sw1 | grep -q ' xdp' && fail "sw1 still has an XDP program"
[ "$(bpftool prog show 2>/dev/null | grep -c 'sampler' || true)" = 0 ] || fail "sampler programs still loaded"
echo "upgrade: OK"
