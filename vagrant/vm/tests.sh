#!/usr/bin/env bash
# vm/tests.sh — inside the lab VM, as root: the lab (what `make lab` runs
# after building, with the packaged binary) and the Go test suite (unit and
# integration: namespaces, XDP, AF_XDP, snmpd) on the VM's kernel.
#
# Go is the host's toolchain rsynced to /usr/local/go and the modules are
# vendored in /srv/vm/vendor (the VM has no network); the repository is
# copied to /root/sflowswitchd so the vendor directory can be added.
# Environment: LAB_SECONDS (default 30), TEST_PKGS (default ./...),
# TEST_TIMEOUT (default 40m).
set -euo pipefail
export PATH=/usr/local/go/bin:$PATH GOFLAGS=-mod=vendor GOTOOLCHAIN=local GOPROXY=off CI=1
src=/root/sflowswitchd
rm -rf "$src"
cp -a /srv/sflowswitchd "$src"
cp -a /srv/vm/vendor "$src/vendor"
cd "$src"
echo "== kernel $(uname -r), $(go version)"

echo "== make lab (lab/demo.sh with the packaged /usr/sbin/sflowswitchd, ${LAB_SECONDS:-30} s)"
LAB_SECONDS=${LAB_SECONDS:-30} SFLOWSWITCHD=/usr/sbin/sflowswitchd LAB_INTERVAL=10s ./lab/demo.sh

echo "== go test ${TEST_PKGS:-./...}"
start=$(date +%s)
rc=0
# shellcheck disable=SC2086
go test -count=1 -timeout "${TEST_TIMEOUT:-40m}" ${TEST_PKGS:-./...} || rc=$?
echo "== go test exit status $rc after $(($(date +%s) - start)) s on $(uname -r)"
exit "$rc"
