#!/usr/bin/env bash
# install-deps.sh [PROFILE...] — installs what a make target needs on
# Debian 12 or 13, only what is missing: Debian packages with apt-get, Go
# tools with `go install`. Safe to run repeatedly; prints what it installs.
#
# Profiles (each make target asks for its own; default: test):
#   build     Go at the version go.mod asks for (checked; see CONTRIBUTING.md)
#   generate  clang, llvm, libbpf headers, bpftool: `make generate`
#   test      everything a test of `make test` runs: iproute2 (ip, tc,
#             bridge), nsenter/setpriv, trafgen, nftables, snmpd and its
#             tools, tshark, python3, bpftool, sysctl, ethtool (psample's
#             offload check is compared with it), dnsmasq (the DNS
#             server of the DNS-SD tests), redis-server and redis-cli
#             (SONiC mode's tests), supervisor (the SONiC supervisor
#             entry's test), service(8) and unshare (SONiC's
#             "service hsflowd restart" run verbatim); staticcheck and
#             gotestsum
#   stress    stress-ng (`make stress-exact`)
#   lab       iproute2, nsenter, trafgen, nftables, python3 (`make lab`)
#   bench     the test profile plus perf, and the C toolchain of the
#             baselines (`make bench`)
#   deb       dpkg-dev, lintian, fakeroot, systemd-analyze (`make deb`: the
#             unit's exposure score)
#   vm        the box build and the test VMs (`make vagrant-box`,
#             `make vagrant-test`): debootstrap, qemu-img, sfdisk, GRUB for
#             BIOS, qemu-system-x86 (TCG or KVM, 9p shares, user
#             networking), rsync; gotestsum reads the VMs' results
#   vagrant   the vm profile plus what `make vagrant-lab` and `make
#             vagrant-clean` run: vagrant, vagrant-libvirt, libvirt's
#             daemons (libvirtd, virtlogd) and virsh, dnsmasq, ssh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
[ $# -gt 0 ] || set -- test

# Each entry: "command-or-path:package". A path (starting with /) is
# checked for existence; a command is looked up in PATH and /usr/sbin.
declare -A profile=(
	[build]=""
	[generate]="clang:clang llvm-strip:llvm /usr/include/bpf/bpf_helpers.h:libbpf-dev bpftool:bpftool"
	[test]="ip:iproute2 tc:iproute2 bridge:iproute2 nsenter:util-linux setpriv:util-linux
		trafgen:netsniff-ng nft:nftables snmpd:snmpd snmpget:snmp tshark:tshark python3:python3
		bpftool:bpftool sysctl:procps ethtool:ethtool dnsmasq:dnsmasq-base redis-server:redis-server
		redis-cli:redis-tools supervisord:supervisor service:init-system-helpers unshare:util-linux"
	[stress]="stress-ng:stress-ng"
	[lab]="ip:iproute2 nsenter:util-linux trafgen:netsniff-ng nft:nftables python3:python3"
	[bench]="perf:linux-perf clang:clang llvm-strip:llvm /usr/include/bpf/bpf_helpers.h:libbpf-dev"
	[deb]="dpkg-deb:dpkg lintian:lintian fakeroot:fakeroot systemd-analyze:systemd"
	[vm]="debootstrap:debootstrap qemu-img:qemu-utils mkfs.ext4:e2fsprogs sfdisk:fdisk
		grub-mkimage:grub-common /usr/lib/grub/i386-pc:grub-pc-bin
		qemu-system-x86_64:qemu-system-x86 rsync:rsync jq:jq"
	[vagrant]="vagrant:vagrant /usr/share/vagrant-plugins/plugins.d/vagrant-libvirt.json:vagrant-libvirt
		virsh:libvirt-clients libvirtd:libvirt-daemon-system virtlogd:libvirt-daemon-system
		dnsmasq:dnsmasq-base ssh:openssh-client"
)
# Go tools: profile -> "binary@module@version ..."
declare -A gotools=(
	[test]="staticcheck@honnef.co/go/tools/cmd/staticcheck@v0.8.2 gotestsum@gotest.tools/gotestsum@v1.13.0"
	[bench]="benchstat@golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"
	[vm]="gotestsum@gotest.tools/gotestsum@v1.13.0"
)
# bench runs the tests' tools too; vagrant-lab boots the vm profile's box.
declare -A includes=([bench]=test [vagrant]=vm)

have() {
	case $1 in
	/*) [ -e "$1" ] ;;
	*) command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ] ;;
	esac
}

# Go: the version go.mod asks for (go's toolchain line is the minimum).
check_go() {
	local want have_v
	want=$(awk '$1 == "go" { print $2; exit }' "$root/go.mod")
	if ! command -v go >/dev/null 2>&1; then
		echo "install-deps: Go $want is needed and not installed: see CONTRIBUTING.md, \"Go\"" >&2
		exit 1
	fi
	have_v=$(go env GOVERSION | sed 's/^go//')
	if [ "$(printf '%s\n%s\n' "$want" "$have_v" | sort -V | head -1)" != "$want" ]; then
		echo "install-deps: go.mod needs Go $want, this is $have_v: see CONTRIBUTING.md, \"Go\"" >&2
		exit 1
	fi
}

profiles=()
for p in "$@"; do
	[ -n "${profile[$p]+x}" ] || { echo "install-deps: unknown profile $p (build generate test stress lab bench deb vm vagrant)" >&2; exit 2; }
	profiles+=("$p")
	[ -z "${includes[$p]:-}" ] || profiles+=("${includes[$p]}")
done

check_go
missing=()
for p in "${profiles[@]}"; do
	for e in ${profile[$p]}; do
		have "${e%%:*}" || missing+=("${e##*:}")
	done
done
if [ ${#missing[@]} -gt 0 ]; then
	mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-deps: missing packages ${missing[*]}; run as root to install them" >&2
		exit 1
	fi
	echo "install-deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# tshark asks whether non-root users may capture; answer no.
	echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Debian snmpd package starts a system snmpd; tests start their own on
# private ports and sockets and never use it.

gobin=$(go env GOPATH)/bin
for p in "${profiles[@]}"; do
	for t in ${gotools[$p]:-}; do
		bin=${t%%@*}
		mod=${t#*@}
		if [ ! -x "$gobin/$bin" ]; then
			echo "install-deps: installing $bin ($mod)"
			GOFLAGS=-mod=mod go install "$mod"
		fi
	done
done
