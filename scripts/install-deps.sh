#!/usr/bin/env bash
# Installs what building, testing and the lab need on Debian 12, only when
# missing: Debian packages with apt-get and the Go linter with `go install`.
# Safe to run repeatedly; prints what it installs.
set -euo pipefail

# command -> Debian package that provides it
declare -A need=(
	[clang]=clang
	[llvm-strip]=llvm
	[bpftool]=bpftool
	[ip]=iproute2
	[nsenter]=util-linux
	[trafgen]=netsniff-ng
	[snmpd]=snmpd
	[snmpget]=snmp
	[tshark]=tshark
	[python3]=python3
	[perf]=linux-perf # bench/xdp.sh -parts profile only
)
missing=()
for cmd in "${!need[@]}"; do
	if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ]; then
		missing+=("${need[$cmd]}")
	fi
done
# libbpf headers are needed by `make generate` only, but cheap to have.
[ -f /usr/include/bpf/bpf_helpers.h ] || missing+=(libbpf-dev)

if [ ${#missing[@]} -gt 0 ]; then
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
if [ ! -x "$gobin/staticcheck" ]; then
	echo "install-deps: installing staticcheck"
	GOFLAGS=-mod=mod go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi
