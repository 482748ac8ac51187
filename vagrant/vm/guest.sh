#!/bin/bash
# vm/guest.sh — runs inside a test VM of vagrant/test.sh, as root, started
# at boot by the box's sflowtest-run from the host's 9p share DIR (this
# file is DIR/guest.sh; DIR has the same path as on the host). Its output
# goes to the VM's second serial port, which the host shows. DIR/env says
# what to do (written by test.sh):
#
# MODE=test: every test binary of TREE/tests/list (vagrant/prepare.sh),
#   one package after the other, each in its package's directory of
#   TREE/src as `go test` runs it, with CI=1, through test2json: the events
#   of package P go to DIR/out/RELEASE/P.json, a line "ok|FAIL dir seconds"
#   to DIR/out/RELEASE/status. TREE (the build tree) and the host's Go
#   toolchain (for the tests that `go build` the daemon) are ext4 disks
#   labelled sflowtree and sflowgo, mounted at their host paths so that
#   the build cache made there stays valid. TEST_RUN, TEST_TIMEOUT as `go
#   test -run/-timeout`.
#
# MODE=cmd: VM_CMD (a bash command line) in TREE/src with the environment
#   of MODE=test (Go, CI=1, $TREE/tests/DIR.test the test binaries, DIR
#   the package directory with / as _): to look at something in a VM by
#   hand (`make vagrant-test VM_CMD='...'`).
#
# MODE=fresh: the fresh-machine run (`make vagrant-fresh`): a minimal
#   Debian with network through qemu's user networking; Go copied in from
#   the share to /usr/local/go; git and make from Debian (the README's
#   prerequisites); a clean clone of DIR/repo.bundle; then `.ci/run` (CI=1
#   make test), which installs everything else itself. Its output and
#   bin/test.json go to DIR/out/RELEASE-fresh.
#
# DIR/out/.../done holds the exit status when the run is complete; the VM
# powers off when this script ends.
set -u
dir=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=/dev/null
. "$dir/env"
release=$(. /etc/os-release && echo "$VERSION_CODENAME")
export HOME=/root CI=1 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export SFLOW_TEST_TIME_SCALE TREE
echo "== VM: Debian $(cat /etc/debian_version) ($release), kernel $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ {print int($2/1024) " MiB"}' /proc/meminfo); booted in $(cut -d' ' -f1 /proc/uptime) s"

# go_env mounts the host's Go toolchain and sets what the tests' `go
# build` needs to find the warm build cache of prepare.sh.
go_env() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ -e /dev/disk/by-label/sflowtree ] && [ -e /dev/disk/by-label/sflowgo ] && break
		sleep 0.2
	done
	mkdir -p "$TREE" "$GOROOT_DIR"
	mount LABEL=sflowtree "$TREE" || return 1
	mount -o ro LABEL=sflowgo "$GOROOT_DIR" || return 1
	export PATH=$GOROOT_DIR/bin:$PATH GOFLAGS=-modcacherw GOTOOLCHAIN=local GOPROXY=off CGO_ENABLED=0 \
		GOCACHE=$TREE/gocache GOMODCACHE=$TREE/gomod
}

run_cmd() {
	local out=$dir/out/$release
	rm -rf "$out"
	mkdir -p "$out"
	go_env || return 1
	echo "== VM_CMD: $VM_CMD"
	(cd "$TREE/src" && bash -c "$VM_CMD") </dev/null 2>&1 | tee "$out/cmd.log"
	return "${PIPESTATUS[0]}"
}

run_tests() {
	local out=$dir/out/$release
	rm -rf "$out"
	mkdir -p "$out"
	go_env || return 1
	echo "== tests: $(wc -l <"$TREE/tests/list") packages, CI=1, ${TEST_RUN:+-run '$TEST_RUN', }timeout ${TEST_TIMEOUT} per package; $(go version)"
	local start pkgdir imp name t0 rc failed=0 n=0
	start=$(date +%s)
	while read -r pkgdir imp; do
		name=${pkgdir//\//_}
		t0=$(date +%s)
		rc=0
		(
			cd "$TREE/src/$pkgdir" &&
				"$TREE/bin/test2json" -t -p "$imp" "$TREE/tests/$name.test" -test.v=test2json -test.paniconexit0 \
					-test.count=1 -test.timeout="$TEST_TIMEOUT" ${TEST_RUN:+-test.run="$TEST_RUN"}
		) >"$out/$name.json" 2>"$out/$name.stderr" </dev/null || rc=$?
		n=$((n + 1))
		if [ "$rc" = 0 ]; then
			printf 'ok  \t%-28s %5ds\n' "$pkgdir" $(($(date +%s) - t0)) | tee -a "$out/status"
		else
			failed=$((failed + 1))
			printf 'FAIL\t%-28s %5ds (exit %d)\n' "$pkgdir" $(($(date +%s) - t0)) "$rc" | tee -a "$out/status"
		fi
	done <"$TREE/tests/list"
	echo "== tests on $(uname -r): $((n - failed)) packages ok, $failed failed, in $(($(date +%s) - start)) s"
	sync
	[ "$failed" = 0 ]
}

run_fresh() {
	local out=$dir/out/$release-fresh rc
	rm -rf "$out"
	mkdir -p "$out"
	echo "== fresh machine: installed packages $(dpkg-query -W | wc -l); go, git, make: $(command -v go git make || true)"
	# systemd-networkd got an address by DHCP from qemu's user network;
	# its DNS server is 10.0.2.3 (no resolver daemon in a minimal Debian).
	echo "nameserver 10.0.2.3" >/etc/resolv.conf
	local i
	for ((i = 0; i < 60; i++)); do
		getent hosts deb.debian.org >/dev/null && break
		sleep 1
	done
	ip -br addr 2>/dev/null || true
	(
		set -ex
		# Go "installed": the host's release of go.mod's version, copied.
		mkdir -p /mnt/go
		mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288,ro sflowgo /mnt/go
		cp -a /mnt/go /usr/local/go
		umount /mnt/go
		export PATH=/usr/local/go/bin:$PATH
		go version
		# The README's prerequisites besides Go.
		apt-get update -q
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends git make
		git clone "$dir/repo.bundle" /root/sflowswitchd
		cd /root/sflowswitchd
		git log --oneline -1
		time .ci/run
	) 2>&1 | tee "$out/log"
	rc=${PIPESTATUS[0]}
	cp /root/sflowswitchd/bin/test.json "$out/test.json" 2>/dev/null || true
	dpkg-query -W >"$out/packages"
	sync
	return "$rc"
}

rc=0
case ${MODE:-test} in
test) run_tests || rc=$? ;;
cmd) run_cmd || rc=$? ;;
fresh) run_fresh || rc=$? ;;
*) echo "guest: unknown MODE $MODE"; rc=2 ;;
esac
out=$dir/out/$release
[ "${MODE:-test}" != fresh ] || out=$out-fresh
mkdir -p "$out"
echo "$rc" >"$out/done"
sync
echo "== guest: exit status $rc; powering off"
exit "$rc"
