#!/usr/bin/env bash
# provision.sh — sets up the sflowswitchd lab VM (Debian 12) and runs the lab
# once. Run by `vagrant up` as root; safe to run again (`vagrant provision`).
#
# Unlike CI, the VM needs internet access: Debian packages (apt), the Go
# toolchain (the official tarball from go.dev, checked against its published
# SHA-256), Go modules (proxy.golang.org) and the staticcheck linter.
#
# Environment (set by the Vagrantfile):
#   REPO         the repository inside the VM (default /srv/sflowswitchd)
#   LAB_SECONDS  how long `make lab` runs (default 30; 0 skips the lab run)
#   GO_VERSION   Go to install (default: the `go` line of go.mod)
set -euo pipefail

REPO=${REPO:-/srv/sflowswitchd}
LAB_SECONDS=${LAB_SECONDS:-30}
export DEBIAN_FRONTEND=noninteractive

[ "$(id -u)" = 0 ] || { echo "provision: must run as root" >&2; exit 1; }
[ -f "$REPO/go.mod" ] || { echo "provision: no repository at $REPO (synced folder missing?)" >&2; exit 1; }

echo "provision: base packages"
apt-get update -qq
apt-get install -y -qq --no-install-recommends ca-certificates curl git make tar >/dev/null

# Go: Debian 12 (and its backports) ship an older Go than go.mod asks for,
# so the official release tarball is installed into /usr/local/go.
if [ -z "${GO_VERSION:-}" ]; then
	GO_VERSION=$(awk '$1 == "go" { print $2; exit }' "$REPO/go.mod")
fi
[[ "$GO_VERSION" =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]] || { echo "provision: bad Go version '$GO_VERSION'" >&2; exit 1; }
arch=$(dpkg --print-architecture) # amd64, arm64: the same names Go uses
if [ "$(/usr/local/go/bin/go env GOVERSION 2>/dev/null || true)" != "go$GO_VERSION" ]; then
	echo "provision: installing Go $GO_VERSION ($arch)"
	tarball="go$GO_VERSION.linux-$arch.tar.gz"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	curl -fsSL -o "$tmp/$tarball" "https://dl.google.com/go/$tarball"
	want=$(curl -fsSL "https://dl.google.com/go/$tarball.sha256")
	echo "$want  $tmp/$tarball" | sha256sum -c --quiet - ||
		{ echo "provision: checksum mismatch for $tarball" >&2; exit 1; }
	rm -rf /usr/local/go
	tar -C /usr/local -xzf "$tmp/$tarball"
fi
cat >/etc/profile.d/go.sh <<'EOF'
export PATH=/usr/local/go/bin:$HOME/go/bin:$PATH
EOF
export PATH=/usr/local/go/bin:/root/go/bin:$PATH
go version

# The packages the build, tests and lab need (clang, llvm, libbpf-dev,
# bpftool, iproute2, netsniff-ng, snmpd, snmp, tshark, python3) and
# staticcheck: the same installer `make` uses.
"$REPO/scripts/install-deps.sh"

if [ "$LAB_SECONDS" != 0 ]; then
	echo "provision: make lab LAB_SECONDS=$LAB_SECONDS"
	make -C "$REPO" lab LAB_SECONDS="$LAB_SECONDS"
fi
echo "provision: done. vagrant ssh, then: sudo -i; cd $REPO; make lab (or make test)"
