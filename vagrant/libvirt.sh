# libvirt.sh — sourced by lab.sh and clean.sh: a libvirt daemon for the lab
# VM.
#
# When a libvirt daemon already answers on qemu:///system (a desktop or
# server with libvirtd under systemd), it is used as it is, and vagrant
# runs in the root network namespace: libvirt then creates its bridge there
# (see vagrant/README.md, "What libvirt creates").
#
# Otherwise (this project's development machine: no systemd, no libvirtd)
# virtlogd and libvirtd are started inside a network namespace of their own,
# $LAB_NETNS (default sflowswitchd-vm), and vagrant runs inside it too: the
# VM's bridge, tap device, dnsmasq and NAT rules are all in that namespace,
# none in the root one. stop_libvirt stops exactly the daemons started here,
# by the PIDs they wrote.

LAB_NETNS=${LAB_NETNS:-sflowswitchd-vm}
state_dir=${state_dir:?}
run_in=() # prefix for commands that must run beside libvirt's network

start_libvirt() {
	mkdir -p "$state_dir"
	if [ ! -f "$state_dir/libvirtd.pid" ] && virsh -c qemu:///system version >/dev/null 2>&1; then
		echo "libvirt: using the running libvirt daemon (root network namespace)"
		return 0
	fi
	if [ ! -e "/run/netns/$LAB_NETNS" ]; then
		ip netns add "$LAB_NETNS"
		ip -n "$LAB_NETNS" link set lo up
	fi
	run_in=(ip netns exec "$LAB_NETNS")
	if ! { [ -f "$state_dir/libvirtd.pid" ] && kill -0 "$(cat "$state_dir/libvirtd.pid")" 2>/dev/null; }; then
		"${run_in[@]}" /usr/sbin/virtlogd --daemon --pid-file "$state_dir/virtlogd.pid"
		"${run_in[@]}" /usr/sbin/libvirtd --daemon --pid-file "$state_dir/libvirtd.pid"
		local i
		for ((i = 0; i < 50; i++)); do
			virsh -c qemu:///system version >/dev/null 2>&1 && break
			sleep 0.2
		done
		echo "libvirt: started virtlogd (pid $(cat "$state_dir/virtlogd.pid")) and libvirtd (pid $(cat "$state_dir/libvirtd.pid")) in network namespace $LAB_NETNS"
	fi
	virsh -c qemu:///system version >/dev/null || { echo "libvirt: libvirtd does not answer" >&2; return 1; }
}

# stop_libvirt stops the daemons start_libvirt started (by PID) and removes
# their network namespace; a libvirt daemon found running is left alone.
stop_libvirt() {
	local d pid i
	for d in libvirtd virtlogd; do
		[ -f "$state_dir/$d.pid" ] || continue
		pid=$(cat "$state_dir/$d.pid")
		if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$d" ]; then
			kill -TERM "$pid"
			for ((i = 0; i < 100; i++)); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
		fi
		rm -f "$state_dir/$d.pid"
	done
	if [ -e "/run/netns/$LAB_NETNS" ]; then
		ip netns del "$LAB_NETNS"
	fi
}

# show_libvirt lists what libvirt holds: domains, networks, volumes.
show_libvirt() {
	local pool
	virsh -c qemu:///system list --all --name | sed '/^$/d; s/^/  domain: /'
	virsh -c qemu:///system net-list --all --name | sed '/^$/d; s/^/  network: /'
	for pool in $(virsh -c qemu:///system pool-list --all --name); do
		echo "  pool: $pool"
		virsh -c qemu:///system vol-list "$pool" 2>/dev/null | awk 'NR > 2 && NF { print "    volume: " $1 }'
	done
}
