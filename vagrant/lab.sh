#!/usr/bin/env bash
# lab.sh — `make vagrant-lab`: the lab VM on libvirt, from the box of
# `make vagrant-box` and the package of `make deb` (both made by make
# first). Root. Steps, each shown on this terminal:
#   1. build on the host what the VM gets: vendored Go modules (the VM has
#      no network) beside the .deb in vagrant/.cache/vm; the host's Go
#      toolchain is synced to /usr/local/go in the VM;
#   2. libvirt (libvirt.sh): the running daemon, or one started in network
#      namespace sflowswitchd-vm;
#   3. vagrant up --provider=libvirt (boot time measured): provisioning
#      installs the .deb with apt;
#   4. vm/package.sh: the packaged daemon under systemd, seen by a
#      collector, and `systemctl stop` leaving no XDP program;
#   5. vm/tests.sh: the lab (lab/demo.sh) and `go test ./...` on the VM's
#      kernel;
#   6. vagrant destroy -f, also on failure or Ctrl-C, and the libvirt
#      daemon started in 2 is stopped; what libvirt still holds is listed
#      (the box's base volume stays in the pool for the next run:
#      `make vagrant-clean` removes it).
# Environment: LAB_SECONDS, TEST_PKGS, TEST_TIMEOUT (see vm/tests.sh),
# KEEP_VM=1 (do not destroy at the end; for debugging).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cache=$here/.cache
state_dir=$cache/state
# shellcheck source=libvirt.sh
. "$here/libvirt.sh"
[ "$(id -u)" = 0 ] || { echo "vagrant-lab: must run as root" >&2; exit 1; }

export VAGRANT_CWD=$here
export SFLOW_LAB_BOX=sflowswitchd/bookworm64
export SFLOW_LAB_VM=$cache/vm
SFLOW_LAB_GOROOT=$(go env GOROOT)
export SFLOW_LAB_GOROOT

echo "== host: $(uname -r); building what the VM gets"
rm -rf "$SFLOW_LAB_VM"
mkdir -p "$SFLOW_LAB_VM"
debs=("$root"/bin/sflowswitchd_*.deb)
[ -f "${debs[-1]}" ] || { echo "vagrant-lab: no .deb in bin/ (make deb)" >&2; exit 1; }
deb=$(ls -t "$root"/bin/sflowswitchd_*.deb | head -1)
cp "$deb" "$SFLOW_LAB_VM/"
(cd "$root" && go mod vendor -o "$SFLOW_LAB_VM/vendor")
echo "   $(basename "$deb"), vendor/ ($(du -sh "$SFLOW_LAB_VM/vendor" | cut -f1)), Go $(go env GOVERSION) from $SFLOW_LAB_GOROOT"

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
t0=$(date +%s.%N)
"${run_in[@]}" vagrant up --provider=libvirt --no-provision
t1=$(date +%s.%N)
printf '== VM up (booted, SSH answering, folders synced) in %.1f s\n' "$(echo "$t1 - $t0" | bc)"
"${run_in[@]}" vagrant ssh -c 'uname -a; systemd-analyze || true'
"${run_in[@]}" vagrant provision

echo "== the packaged daemon (vm/package.sh)"
"${run_in[@]}" vagrant ssh -c 'sudo /srv/sflowswitchd/vagrant/vm/package.sh'

echo "== lab and tests (vm/tests.sh)"
"${run_in[@]}" vagrant ssh -c "sudo LAB_SECONDS=${LAB_SECONDS:-30} TEST_PKGS='${TEST_PKGS:-./...}' TEST_TIMEOUT=${TEST_TIMEOUT:-40m} /srv/sflowswitchd/vagrant/vm/tests.sh"
