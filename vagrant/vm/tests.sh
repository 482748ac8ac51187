#!/usr/bin/env bash
# vm/tests.sh — inside the lab VM, as root: the lab (what `make lab` runs
# after building, with the packaged binary) and the Go test suite (unit and
# integration: namespaces, XDP, AF_XDP, snmpd) on the VM's kernel.
#
# $SFLOW_LAB_VM/src is the repository and $SFLOW_LAB_VM/gomod its Go module
# cache (the VM has no network), $SFLOW_LAB_VM/tests the test binaries lab.sh built on the
# host (go test -c) and $SFLOW_LAB_VM/gocache the build cache it warmed
# with the same paths and settings, for the tests that `go build` the
# daemon; Go is the host's toolchain, rsynced to /usr/local/go. Each test
# binary runs in its package's directory, as `go test` runs it.
# Environment: SFLOW_LAB_VM, LAB_SECONDS (default 30), TEST_TIMEOUT (per
# package, default 20m). The packages are those lab.sh built binaries for
# (its TEST_PKGS).
set -euo pipefail
vm=${SFLOW_LAB_VM:?}
export PATH=/usr/local/go/bin:$PATH GOFLAGS=-modcacherw GOTOOLCHAIN=local GOPROXY=off CGO_ENABLED=0 \
	GOCACHE=$vm/gocache GOMODCACHE=$vm/gomod CI=1
cd "$vm/src"
echo "== kernel $(uname -r), $(go version)"

echo "== make lab (test/lab/demo.sh with the packaged /usr/sbin/sflowswitchd, ${LAB_SECONDS:-30} s)"
LAB_SECONDS=${LAB_SECONDS:-30} SFLOWSWITCHD=/usr/sbin/sflowswitchd LAB_INTERVAL=10s ./test/lab/demo.sh

echo "== tests ($(uname -r))"
start=$(date +%s)
failed=()
n=0
while read -r dir _; do
	n=$((n + 1))
	bin=$vm/tests/${dir//\//_}.test
	t0=$(date +%s)
	rc=0
	(cd "$dir" && "$bin" </dev/null -test.count=1 -test.timeout "${TEST_TIMEOUT:-20m}") >/tmp/test.out 2>&1 || rc=$?
	if [ "$rc" = 0 ]; then
		printf 'ok  \t%-28s %4ds\n' "$dir" $(($(date +%s) - t0))
	else
		tail -40 /tmp/test.out
		printf 'FAIL\t%-28s %4ds (exit %d)\n' "$dir" $(($(date +%s) - t0)) "$rc"
		failed+=("$dir")
	fi
done <"$vm/tests/list"
echo "== tests: $((n - ${#failed[@]})) packages ok, ${#failed[@]} failed (${failed[*]:-none}) in $(($(date +%s) - start)) s on $(uname -r)"
[ ${#failed[@]} = 0 ]
