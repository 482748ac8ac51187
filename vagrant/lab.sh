#!/usr/bin/env bash
# lab.sh — `make vagrant-lab`: the lab VM on libvirt, from the box of
# `make vagrant-box` and the package of `make deb` (both made by make
# first). Root. Steps, each shown on this terminal:
#   1. build on the host what the VM gets, in vagrant/.cache/vm (synced to
#      the same path in the VM): the .deb, the source, its Go module cache
#      (the VM has no network) and a warm Go build cache; the
#      host's Go toolchain is synced to /usr/local/go in the VM; KVM or,
#      without usable KVM, qemu's TCG;
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
mkdir -p "$SFLOW_LAB_VM"
rm -f "$SFLOW_LAB_VM"/*.deb
deb=$(ls -t "$root"/bin/sflowswitchd_*.deb 2>/dev/null | head -1)
[ -f "$deb" ] || { echo "vagrant-lab: no .deb in bin/ (make deb)" >&2; exit 1; }
cp "$deb" "$SFLOW_LAB_VM/"
# The source as it is in this tree, its modules, and a Go build cache warmed here with the settings the VM uses (vm/tests.sh): the
# cache is kept between runs, so only what changed compiles again.
rsync -a --delete --exclude=/.git --exclude=/bin/ --exclude=/vagrant/.cache/ --exclude=/vagrant/.vagrant/ \
	"$root/" "$SFLOW_LAB_VM/src/"
# The module cache of the VM, filled from this host's (not a vendor/
# directory: tests that scan the tree for our sources would read it).
(cd "$SFLOW_LAB_VM/src" && GOMODCACHE=$SFLOW_LAB_VM/gomod GOFLAGS=-modcacherw \
	GOPROXY=file://$(go env GOMODCACHE)/cache/download,https://proxy.golang.org go mod download)
# The test binaries are built here too (go test -c, one per package, listed
# with their directories in tests/list): linking them in a VM without
# hardware virtualization would take longer than running them.
t0=$(date +%s)
rm -rf "$SFLOW_LAB_VM/tests"
mkdir -p "$SFLOW_LAB_VM/tests"
(
	cd "$SFLOW_LAB_VM/src"
	export GOFLAGS=-modcacherw CGO_ENABLED=0 GOCACHE=$SFLOW_LAB_VM/gocache GOMODCACHE=$SFLOW_LAB_VM/gomod GOPROXY=off
	go build -o /dev/null ./cmd/sflowswitchd
	go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' ./... | sed "s|^$PWD/||" >"$SFLOW_LAB_VM/tests/list"
	while read -r dir; do
		go test -c -o "$SFLOW_LAB_VM/tests/${dir//\//_}.test" "./$dir"
	done <"$SFLOW_LAB_VM/tests/list"
)
echo "   $(basename "$deb"); src/ and its modules; $(wc -l <"$SFLOW_LAB_VM/tests/list") test binaries and a warm Go build cache in $(($(date +%s) - t0)) s; Go $(go env GOVERSION) from $SFLOW_LAB_GOROOT"

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
t0=$(date +%s.%N)
"${run_in[@]}" vagrant up --provider=libvirt --no-provision
t1=$(date +%s.%N)
printf '== VM up (booted, SSH answering, folders synced) in %.1f s\n' "$(echo "$t1 - $t0" | bc)"
"${run_in[@]}" vagrant ssh -c 'uname -a; systemd-analyze || true'
"${run_in[@]}" vagrant provision

echo "== the packaged daemon (vm/package.sh)"
"${run_in[@]}" vagrant ssh -c 'sudo /srv/sflowswitchd/vagrant/vm/package.sh'

echo "== lab and tests (vm/tests.sh)"
"${run_in[@]}" vagrant ssh -c "sudo SFLOW_LAB_VM=$SFLOW_LAB_VM LAB_SECONDS=${LAB_SECONDS:-30} TEST_PKGS='${TEST_PKGS:-}' TEST_TIMEOUT=${TEST_TIMEOUT:-40m} /srv/sflowswitchd/vagrant/vm/tests.sh"
