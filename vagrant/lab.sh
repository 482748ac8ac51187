#!/usr/bin/env bash
# lab.sh — `make vagrant-lab`: the lab VM on libvirt, from the box of
# `make vagrant-box RELEASE=...` and the package of `make deb` (both made
# by make first). Root. Steps, each shown on this terminal:
#   1. build on the host what the VM gets, in vagrant/.cache/vm (synced to
#      the same path in the VM): prepare.sh's tree (source, module cache,
#      warm build cache, test binaries) and the .deb; the host's Go
#      toolchain is synced to /usr/local/go in the VM; the box is added to
#      vagrant as sflowswitchd/RELEASE64 once per box build; KVM or,
#      without usable KVM, qemu's TCG;
#   2. libvirt (libvirt.sh): the running daemon, or one started in network
#      namespace sflowswitchd-vm;
#   3. vagrant up --provider=libvirt (boot time measured): provisioning
#      installs the .deb with apt;
#   4. vm/package.sh: the packaged daemon under systemd, seen by a
#      collector, and `systemctl stop` leaving no XDP program;
#   5. vm/tests.sh: the lab (test/lab/demo.sh) and the test binaries on the
#      VM's kernel;
#   6. vagrant destroy -f, also on failure or Ctrl-C, and the libvirt
#      daemon started in 2 is stopped; what libvirt still holds is listed
#      (the box's base volume stays in the pool for the next run:
#      `make vagrant-clean` removes it).
# Environment: RELEASE (default bookworm), LAB_SECONDS, TEST_PKGS (Go
# package patterns, default ./...), TEST_TIMEOUT (see vm/tests.sh),
# KEEP_VM=1 (do not destroy at the end; for debugging).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cache=$here/.cache
state_dir=$cache/state
release=${RELEASE:-bookworm}
box=$cache/$release
# shellcheck source=libvirt.sh
. "$here/libvirt.sh"
[ "$(id -u)" = 0 ] || { echo "vagrant-lab: must run as root" >&2; exit 1; }
[ -f "$box/box.img" ] || { echo "vagrant-lab: no box in $box (make vagrant-box RELEASE=$release)" >&2; exit 1; }

export VAGRANT_CWD=$here
export SFLOW_LAB_BOX=sflowswitchd/${release}64
export SFLOW_LAB_VM=$cache/vm
SFLOW_LAB_GOROOT=$(go env GOROOT)
export SFLOW_LAB_GOROOT

echo "== host: $(uname -r); building what the VM gets"
read -r -a pkgs <<<"${TEST_PKGS:-./...}"
"$here/prepare.sh" "$SFLOW_LAB_VM" "${pkgs[@]}"
rm -f "$SFLOW_LAB_VM"/*.deb
deb=$(ls -t "$root"/bin/sflowswitchd_*.deb 2>/dev/null | head -1)
[ -f "$deb" ] || { echo "vagrant-lab: no .deb in bin/ (make deb)" >&2; exit 1; }
cp "$deb" "$SFLOW_LAB_VM/"
echo "   $(basename "$deb")"

# The box for vagrant: box.img with metadata.json and a Vagrantfile in a
# tar (the .box format), added once per box build (the box's stamp).
if [ "$(cat "$box/vagrant-added" 2>/dev/null)" != "$(cat "$box/stamp")" ] ||
	! vagrant box list 2>/dev/null | grep -q "^$SFLOW_LAB_BOX "; then
	echo "== vagrant box add $SFLOW_LAB_BOX ($box/box.img)"
	printf '{"provider":"libvirt","format":"qcow2","virtual_size":%d}\n' \
		$(($(qemu-img info --output=json "$box/box.img" | sed -n 's/.*"virtual-size": \([0-9]*\).*/\1/p') >> 30)) >"$box/metadata.json"
	cat >"$box/Vagrantfile" <<-'EOF'
		Vagrant.configure("2") do |config|
		  config.vm.provider :libvirt do |lv|
		    lv.driver = "kvm"
		  end
		end
	EOF
	tar -C "$box" -cf "$box/box.box" metadata.json Vagrantfile box.img
	vagrant box add --force --name "$SFLOW_LAB_BOX" "$box/box.box"
	rm -f "$box/box.box"
	cp "$box/stamp" "$box/vagrant-added"
fi

# Hardware virtualization when the host has it; qemu's software emulation
# (TCG) otherwise: without /dev/kvm, or when KVM is PVM (kvm_pvm: a
# paravirtualized KVM that runs only kernels built as PVM guests, not
# Debian's).
if [ -n "${SFLOW_LAB_ACCEL:-}" ]; then
	:
elif [ ! -c /dev/kvm ] || [ -d /sys/module/kvm_pvm ]; then
	SFLOW_LAB_ACCEL=tcg
else
	SFLOW_LAB_ACCEL=kvm
fi
export SFLOW_LAB_ACCEL
echo "   accelerator: $SFLOW_LAB_ACCEL"

up=""
finish() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$up" ] && [ "${KEEP_VM:-0}" != 1 ]; then
		echo "== vagrant destroy"
		"${run_in[@]}" vagrant destroy -f || rc=1
	fi
	if [ "${KEEP_VM:-0}" != 1 ]; then
		echo "== what libvirt holds now"
		show_libvirt || true
		stop_libvirt
	fi
	echo "== vagrant-lab: exit status $rc"
	exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start_libvirt
echo "== vagrant up --provider=libvirt"
up=1
t0=$(date +%s)
"${run_in[@]}" vagrant up --provider=libvirt --no-provision
echo "== VM up (booted, SSH answering, folders synced) in $(($(date +%s) - t0)) s"
"${run_in[@]}" vagrant ssh -c 'uname -a; systemd-analyze || true'
"${run_in[@]}" vagrant provision

echo "== the packaged daemon (vm/package.sh)"
"${run_in[@]}" vagrant ssh -c 'sudo /srv/sflowswitchd/vagrant/vm/package.sh'

echo "== lab and tests (vm/tests.sh)"
"${run_in[@]}" vagrant ssh -c "sudo SFLOW_LAB_VM=$SFLOW_LAB_VM LAB_SECONDS=${LAB_SECONDS:-30} TEST_TIMEOUT=${TEST_TIMEOUT:-40m} /srv/sflowswitchd/vagrant/vm/tests.sh"
