#!/usr/bin/env bash
# test.sh — `make vagrant-test`: the test suite (every package's test
# binary, as `make test` runs them) inside a VM of each Debian release, one
# after the other, and a report per kernel. `make vagrant-fresh` (MODE=fresh):
# `.ci/run` on a fresh minimal Debian from a clean clone, with network.
#
# The VM is the box of `make vagrant-box RELEASE=...` (vagrant/.cache/
# RELEASE), booted directly with qemu, not through vagrant and libvirt:
#   qemu-system-x86_64 -kernel vmlinuz -initrd initrd.img (the box's own
#   Debian kernel) -drive box.img,snapshot=on (the box is never written),
#   two more disks: ext4 images of the build tree of prepare.sh
#   (snapshot=on) and of the Go toolchain (read-only), -virtfs (9p)
#   vagrant/.cache/run at the same path for the script and the results,
#   serial ports to files, no network (MODE=fresh: Go on 9p and qemu's
#   user networking, NAT in the qemu process), -no-reboot.
# At boot the box's sflowtest-run mounts the share and runs guest.sh
# (vm/guest.sh, copied here), whose output this script shows; the VM
# powers off at the end. Nothing is created on the host but files under
# vagrant/.cache and the qemu process: no daemon, bridge, tap device,
# address or firewall rule.
#
# Root (the share holds root-owned files the VM writes). Environment:
#   RELEASES      Debian releases to run, in order (default "bookworm trixie")
#   TEST_PKGS     Go package patterns (default ./...): only their binaries
#                 are built and run
#   TEST_RUN      regexp for -test.run (default: every test)
#   TEST_TIMEOUT  per package (default 30m as make test, 120m under tcg:
#                 test/e2e ran 1825 s in the 6.1 VM beside two other TCG
#                 VMs and was cut at 30m)
#   VM_CPUS, VM_MEM (MiB), VM_TIMEOUT (whole VM run, seconds; default 7200)
#   SFLOW_LAB_ACCEL  kvm or tcg (default: kvm when /dev/kvm works for
#                 Debian's kernels, i.e. exists and is not PVM; else tcg)
#   SFLOW_TEST_TIME_SCALE  the tests' time scale in the VM (default 20
#                 under tcg, 1 under kvm; internal/testutil)
#   VM_CMD        a bash command line run in the VM instead of the tests
#                 (in the source tree, with the tests' environment)
#   MODE          test (default), cmd (set by VM_CMD) or fresh
# Results: vagrant/.cache/run/out/RELEASE/ (per package: .json events,
# status; the console log), summarized by gotestsum.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cache=$here/.cache
run=$cache/run
tree=$run/tree
mode=${MODE:-test}
[ -z "${VM_CMD:-}" ] || [ "$mode" != test ] || mode=cmd
read -r -a releases <<<"${RELEASES:-bookworm trixie}"
read -r -a pkgs <<<"${TEST_PKGS:-./...}"
[ "$(id -u)" = 0 ] || { echo "vagrant-test: must run as root" >&2; exit 1; }
gotestsum=$(go env GOPATH)/bin/gotestsum
goroot=$(go env GOROOT)

if [ -n "${SFLOW_LAB_ACCEL:-}" ]; then
	accel=$SFLOW_LAB_ACCEL
elif [ -c /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ]; then
	accel=kvm
else
	# No hardware virtualization, or KVM is PVM (a paravirtualized KVM
	# that runs only kernels built as PVM guests, not Debian's).
	accel=tcg
fi
# Time bounds of the tests are scaled under emulation (internal/testutil,
# SFLOW_TEST_TIME_SCALE): a hot-plugged port was first sampled after 2.06 s
# there, 0.17 s on the host; packages ran 10-15 times slower.
case $accel in
kvm) cpu=host time_scale=${SFLOW_TEST_TIME_SCALE:-1} test_timeout=${TEST_TIMEOUT:-30m} ;;
tcg) cpu=max time_scale=${SFLOW_TEST_TIME_SCALE:-20} test_timeout=${TEST_TIMEOUT:-120m} ;;
*) echo "vagrant-test: SFLOW_LAB_ACCEL is kvm or tcg" >&2; exit 2 ;;
esac

for r in "${releases[@]}"; do
	box=$cache/$r
	[ "$mode" != fresh ] || box=$cache/$r-fresh
	[ -f "$box/box.img" ] || { echo "vagrant-test: no box in $box (make vagrant-box RELEASE=$r)" >&2; exit 1; }
done

echo "== host: $(uname -r), accelerator $accel; building what the VMs get"
mkdir -p "$run"
# ext4 images of what the VM reads, as virtio disks: the build tree
# (source, module cache, warm build cache, test binaries) and the Go
# toolchain, at the same paths as here. Over 9p every file the go command
# opens costs round trips that software emulation makes slow (a `go
# build` of the daemon took 100-160 s on the share, one test of four
# builds it); the share keeps only guest.sh, env and the results.
# make_image DIR IMAGE LABEL
make_image() {
	local size
	size=$(du -sm "$1" | cut -f1)
	rm -f "$2"
	truncate -s $((size * 3 / 2 + 1024))M "$2"
	mkfs.ext4 -q -F -L "$3" -d "$1" "$2"
}
if [ "$mode" != fresh ]; then
	"$here/prepare.sh" "$tree" "${pkgs[@]}"
	t0=$(date +%s)
	make_image "$tree" "$run/tree.img" sflowtree
	goimg=$cache/goroot-$(go env GOVERSION).img
	if [ ! -f "$goimg" ] || [ "$(cat "$goimg.src" 2>/dev/null)" != "$goroot" ]; then
		rm -f "$cache"/goroot-*.img "$cache"/goroot-*.img.src
		make_image "$goroot" "$goimg" sflowgo
		echo "$goroot" >"$goimg.src"
	fi
	echo "   disk images of the tree and of Go in $(($(date +%s) - t0)) s"
else
	rm -f "$run/repo.bundle"
	# A clean clone of this commit (HEAD; uncommitted changes are not in it).
	git -C "$root" bundle create "$run/repo.bundle" HEAD 2>/dev/null
	echo "   repo.bundle: $(git -C "$root" log --oneline -1 HEAD)"
fi
install -m 0755 "$here/vm/guest.sh" "$run/guest.sh"
test_run=${TEST_RUN:-}
vm_cmd=${VM_CMD:-}
{
	echo "MODE=$mode"
	echo "GOROOT_DIR=$goroot"
	echo "TREE=$tree"
	echo "TEST_RUN=${test_run@Q}"
	echo "TEST_TIMEOUT=$test_timeout"
	echo "SFLOW_TEST_TIME_SCALE=$time_scale"
	echo "VM_CMD=${vm_cmd@Q}"
} >"$run/env"

qemu_pid=""
stop_qemu() {
	if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
		kill -TERM "$qemu_pid" 2>/dev/null || true
		wait "$qemu_pid" 2>/dev/null || true
	fi
	qemu_pid=""
}
trap 'stop_qemu' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# run_vm RELEASE: boots the box, shows the guest's output, returns when
# the VM has powered off (or VM_TIMEOUT passed).
run_vm() {
	local r=$1 box=$cache/$1 log=$run/log/$1 t0 net
	if [ "$mode" = fresh ]; then
		box=$cache/$r-fresh
		log=$run/log/$r-fresh
	fi
	rm -rf "$log"
	mkdir -p "$log"
	net=(-nic none)
	[ "$mode" != fresh ] || net=(-nic user,model=virtio-net-pci)
	if [ "$mode" = fresh ]; then
		disks=(-virtfs "local,path=$goroot,mount_tag=sflowgo,security_model=none,readonly=on")
	else
		# snapshot=on: what the VM writes (build cache, test output) is
		# dropped at the end.
		disks=(-drive "file=$run/tree.img,if=virtio,format=raw,snapshot=on"
			-drive "file=$goimg,if=virtio,format=raw,readonly=on")
	fi
	echo "== $r: Debian $(cat "$box/version"), kernel $(cat "$box/kernel"): qemu ($accel, ${VM_CPUS:-2} CPUs, ${VM_MEM:-4096} MiB)"
	t0=$(date +%s)
	: >"$log/guest.log"
	timeout "${VM_TIMEOUT:-7200}" qemu-system-x86_64 -name "sflowtest-$r" -accel "$accel" -cpu "$cpu" \
		-smp "${VM_CPUS:-2}" -m "${VM_MEM:-4096}" -nodefaults -display none -no-reboot \
		-kernel "$box/vmlinuz" -initrd "$box/initrd.img" \
		-append "root=/dev/vda1 ro console=ttyS0 net.ifnames=0 panic=1 sflowtest.dir=$run" \
		-drive "file=$box/box.img,if=virtio,format=qcow2,snapshot=on" \
		-virtfs "local,path=$run,mount_tag=sflowtest,security_model=none" \
		-serial "file:$log/console.log" -serial "file:$log/guest.log" \
		"${disks[@]}" "${net[@]}" &
	qemu_pid=$!
	tail -n +1 -F --pid="$qemu_pid" "$log/guest.log" 2>/dev/null | sed -u 's/\r$//' || true
	local rc=0
	wait "$qemu_pid" || rc=$?
	qemu_pid=""
	vm_seconds=$(($(date +%s) - t0))
	echo "== $r: VM ran $vm_seconds s (qemu exit $rc); console: $log/console.log"
}

# skip_table EVENTS RELEASE KERNEL OK FAILED: the run of one kernel as
# Markdown: packages passed and failed, the VM's time, and every skipped
# test with its reason (the test's own output lines before "--- SKIP").
skip_table() {
	echo "$2, kernel $3, $(date -u '+%Y-%m-%d %H:%M UTC'): $4 packages passed, $(wc -w <<<"$5") failed${5:+ ($5)}; the VM ran $vm_seconds s (boot, every package, power-off)."
	echo
	echo "| package | skipped test | reason (the test's output) |"
	echo "|---|---|---|"
	jq -rs '
	  (map(select(.Test != null and .Action == "skip")) | map(.Package + " " + .Test)) as $skips
	  | reduce (.[] | select(.Test != null and .Action == "output")) as $e ({}; .[$e.Package + " " + $e.Test] += [$e.Output])
	  | . as $out | $skips[] | . as $k
	  | ($out[$k] // [] | map(select(test("^=== |^--- SKIP|^\\s*$") | not)) | map(sub("^\\s+"; "") | sub("\\n$"; "")) | join(" ")) as $why
	  | ($k | sub("^github.com/sflowswitchd/sflowswitchd/"; "") | split(" ")) as $pt
	  | "| `\($pt[0])` | `\($pt[1])` | \($why) |"' "$1"
}

vm_seconds=0
overall=0
summary=()
for r in "${releases[@]}"; do
	run_vm "$r"
	out=$run/out/$r
	[ "$mode" != fresh ] || out=$run/out/$r-fresh
	if [ ! -f "$out/done" ]; then
		echo "== $r: the run did not complete (no $out/done); last console lines:"
		tail -20 "$run/log/$r${out#"$run/out/$r"}/console.log" | tr -d '\r' || true
		summary+=("$r: INCOMPLETE")
		overall=1
		continue
	fi
	rc=$(cat "$out/done")
	[ "$rc" = 0 ] || overall=1
	if [ "$mode" = fresh ]; then
		summary+=("$r (fresh): .ci/run exit $rc; log $out/log")
		continue
	elif [ "$mode" = cmd ]; then
		summary+=("$r ($(cat "$cache/$r/kernel")): VM_CMD exit $rc; output $out/cmd.log")
		continue
	fi
	kernel=$(cat "$cache/$r/kernel")
	echo "== $r ($kernel): gotestsum's summary of the VM's events (skips with their reasons)"
	cat "$out"/*.json >"$run/out/$r.json"
	"$gotestsum" --format pkgname --raw-command -- cat "$run/out/$r.json" || true
	ok=$(grep -c '^ok' "$out/status" || true)
	failed=$({ grep '^FAIL' "$out/status" || true; } | awk '{print $2}' | xargs)
	skips=$(grep -c '"Action":"skip","Package":"[^"]*","Test"' "$run/out/$r.json" || true)
	summary+=("$r ($kernel): $ok packages ok, $(wc -w <<<"$failed") failed${failed:+ ($failed)}, $skips tests skipped; VM $vm_seconds s")
	skip_table "$run/out/$r.json" "$r" "$kernel" "$ok" "$failed" >"$run/out/$r.md"
	echo "== $r: results table (docs/reference/kernels.md): $run/out/$r.md"
done
echo "== vagrant-test ($mode) summary"
printf '   %s\n' "${summary[@]}"
exit "$overall"
