#!/usr/bin/env bash
# clean.sh — `make vagrant-clean`: removes everything the lab VMs left.
# When vagrant and libvirt are installed (make vagrant-lab): the vagrant
# machine (domain and its disk volume), the boxes' base volumes in the
# libvirt pool, the networks vagrant-libvirt defined (vagrant-libvirt),
# the default storage pool if vagrant-libvirt created it, the boxes
# sflowswitchd/* from vagrant and, when libvirt.sh started one, the
# libvirt daemons and their network namespace. Always: the box cache
# (vagrant/.cache: every release's box and debootstrapped tree, the test
# VMs' share and results; make vagrant-test leaves nothing else). Root.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
state_dir=$here/.cache/state
# shellcheck source=libvirt.sh
. "$here/libvirt.sh"
[ "$(id -u)" = 0 ] || { echo "vagrant-clean: must run as root" >&2; exit 1; }
export VAGRANT_CWD=$here SFLOW_LAB_BOX=sflowswitchd/bookworm64 SFLOW_LAB_VM=$here/.cache/vm SFLOW_LAB_GOROOT=/nonexistent
v="virsh -c qemu:///system"

# remove_cache deletes vagrant/.cache: first whatever an interrupted box
# build left mounted in a debootstrapped tree, then the files, never
# crossing into another file system.
remove_cache() {
	local m
	for m in $(findmnt -rn -o TARGET | grep "^$here/.cache/" | sort -r); do
		umount -l "$m"
	done
	rm -rf --one-file-system "$here/.vagrant" "$here/.cache"
}

if ! command -v vagrant >/dev/null || ! command -v virsh >/dev/null || ! [ -x /usr/sbin/libvirtd ]; then
	echo "vagrant-clean: no vagrant/libvirt here (make vagrant-lab installs them): removing vagrant/.cache only"
	remove_cache
	echo "vagrant-clean: done"
	exit 0
fi
start_libvirt
"${run_in[@]}" vagrant destroy -f 2>/dev/null || true
for dom in $($v list --all --name | grep '^vagrant_' || true); do
	$v destroy "$dom" >/dev/null 2>&1 || true
	$v undefine "$dom" --remove-all-storage >/dev/null
	echo "removed domain $dom"
done
for pool in $($v pool-list --all --name); do
	for vol in $($v vol-list "$pool" | awk 'NR > 2 && NF { print $1 }' | grep -E '^(vagrant_|sflowswitchd-VAGRANTSLASH-)' || true); do
		$v vol-delete --pool "$pool" "$vol" >/dev/null
		echo "removed volume $pool/$vol"
	done
done
for net in vagrant-libvirt; do
	if $v net-info "$net" >/dev/null 2>&1; then
		$v net-destroy "$net" >/dev/null 2>&1 || true
		$v net-undefine "$net" >/dev/null
		echo "removed network $net"
	fi
done
# The "default" pool: removed only when empty and created by
# vagrant-libvirt (/var/lib/libvirt/images is libvirt's own directory).
if $v pool-info default >/dev/null 2>&1 && [ -z "$($v vol-list default | awk 'NR > 2 && NF')" ]; then
	$v pool-destroy default >/dev/null 2>&1 || true
	$v pool-undefine default >/dev/null
	echo "removed storage pool default"
fi
echo "libvirt now holds:"
show_libvirt
stop_libvirt
for b in $(vagrant box list 2>/dev/null | awk '$1 ~ /^sflowswitchd\// { print $1 }' | sort -u); do
	vagrant box remove --force --all "$b"
done
remove_cache
echo "vagrant-clean: done"
