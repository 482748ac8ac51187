#!/usr/bin/env bash
# build.sh [RELEASE] — builds the disk image of a lab VM from Debian's own
# packages only (`make vagrant-box RELEASE=...`). RELEASE is a Debian
# release: bookworm (Debian 12, kernel 6.1) or trixie (Debian 13, kernel
# 6.12); default bookworm.
#
#   1. debootstrap RELEASE from the Debian mirror into a directory, with
#      the release's kernel (linux-image-amd64) and, for the lab box, the
#      packages the lab and the tests run inside the VM (iproute2,
#      netsniff-ng, nftables, snmpd, snmp, tshark, python3, bpftool ...: the
#      `test` profile of scripts/install-deps.sh). No Go: the daemon and the
#      test binaries are built on the host (vagrant/prepare.sh). FLAVOR=fresh
#      makes instead a minimal Debian (debootstrap's minbase, the kernel,
#      systemd, DHCP), the "fresh machine" of `make vagrant-fresh`;
#   2. the vagrant conventions: user vagrant with Vagrant's public insecure
#      key (box/vagrant.pub; vagrant replaces it with a fresh key at the
#      first `vagrant up`), password-less sudo, sshd, DHCP on every Ethernet
#      interface (systemd-networkd); and the test runner of `make
#      vagrant-test` (box/sflowtest-run): at boot, when the kernel command
#      line has sflowtest.dir=DIR, it mounts the host's 9p share at DIR,
#      runs DIR/guest.sh with its output on the second serial port and
#      powers the VM off; without it (vagrant) it does nothing;
#   3. a virtual disk with one partition (MBR) holding an ext4 file system
#      of that tree (mkfs.ext4 -d, at the partition's offset: no loop
#      device, no mount) and GRUB for BIOS (Debian's grub-pc-bin on the
#      host): its modules and a fixed grub.cfg in /boot/grub, boot.img in
#      the MBR and core.img (grub-mkimage) in the gap before the partition;
#   4. in vagrant/.cache/RELEASE (or RELEASE-fresh): box.img (qcow2, what
#      vagrant-libvirt boots through GRUB), vmlinuz and initrd.img (what
#      `make vagrant-test` boots directly with qemu), kernel (its release)
#      and stamp.
#
# Cached per release and flavor: rebuilt only when this script, the runner
# or the key change (their SHA-256 with the release is the stamp). The
# debootstrapped tree is kept in DIR/work between failed runs with the
# same package list. Root only (debootstrap, chroot).
#
# Environment: RELEASE, FLAVOR (lab, default; or fresh), CACHE (default
# vagrant/.cache), MIRROR (default http://deb.debian.org/debian), DISK_GB
# (virtual disk size, default 8).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
release=${1:-${RELEASE:-bookworm}}
flavor=${FLAVOR:-lab}
mirror=${MIRROR:-http://deb.debian.org/debian}
disk_gb=${DISK_GB:-8}
case $release in
bookworm) version=12 ;;
trixie) version=13 ;;
*) echo "box: unknown release $release (bookworm or trixie)" >&2; exit 2 ;;
esac
case $flavor in
lab) dir_name=$release ;;
fresh) dir_name=$release-fresh ;;
*) echo "box: unknown flavor $flavor (lab or fresh)" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "box: must run as root (debootstrap, chroot)" >&2; exit 1; }
for cmd in debootstrap qemu-img mkfs.ext4 sfdisk grub-mkimage; do
	command -v "$cmd" >/dev/null || { echo "box: $cmd missing (scripts/install-deps.sh vm)" >&2; exit 1; }
done
[ -d /usr/lib/grub/i386-pc ] || { echo "box: GRUB for BIOS missing (scripts/install-deps.sh vm)" >&2; exit 1; }
cache=${CACHE:-$here/../.cache}
mkdir -p "$cache/$dir_name"
out=$(cd "$cache/$dir_name" && pwd)
stamp=$(cat "$here/build.sh" "$here/sflowtest-run" "$here/vagrant.pub" | sha256sum | cut -d' ' -f1)
stamp="$stamp $release $flavor $mirror $disk_gb"

if [ -f "$out/box.img" ] && [ "$(cat "$out/stamp" 2>/dev/null)" = "$stamp" ]; then
	echo "box: $out/box.img is up to date (Debian $version $release, $flavor, kernel $(cat "$out/kernel"))"
	exit 0
fi
start=$(date +%s)
work=$out/work
rootfs=$work/rootfs
mkdir -p "$work"
# debootstrap mounts /proc and /sys in the tree (and may bind /dev): never
# leave them mounted, also on failure.
cleanup() {
	local m
	for m in $(findmnt -rn -o TARGET | grep "^$rootfs/" | sort -r); do
		umount -l "$m" || true
	done
}
trap cleanup EXIT

base=(linux-image-amd64 initramfs-tools systemd-sysv udev dbus kmod ca-certificates)
case $flavor in
lab)
	pkgs=("${base[@]}"
		openssh-server sudo rsync procps less iputils-ping ethtool
		iproute2 util-linux make netsniff-ng nftables snmpd snmp tshark python3 bpftool
		redis-server redis-tools)
	variant=minbase
	;;
fresh)
	# What a fresh machine has and no more: no make, git, compilers or
	# test tools (install-deps.sh and the README's prerequisites add
	# them). sudo and sshd keep the image usable with vagrant.
	pkgs=("${base[@]}" openssh-server sudo)
	variant=minbase
	;;
esac
pkgs_sum=$(echo "${pkgs[*]} $variant $release $mirror" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$work/rootfs.ok" 2>/dev/null)" != "$pkgs_sum" ]; then
	rm -rf "$rootfs"
	mkdir -p "$rootfs"
	echo "box: debootstrap $release (Debian $version, $flavor) from $mirror"
	# tshark asks whether non-root users may capture: the default (no) is
	# taken by debootstrap's non-interactive configuration.
	debootstrap --variant="$variant" --include="$(
		IFS=,
		echo "${pkgs[*]}"
	)" "$release" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -20 "$work/debootstrap.log" >&2; exit 1; }
	echo "$pkgs_sum" >"$work/rootfs.ok"
else
	echo "box: reusing the debootstrapped tree in $rootfs"
fi

echo "box: configuring"
echo sflowlab >"$rootfs/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 sflowlab\n' >"$rootfs/etc/hosts"
printf '/dev/vda1 / ext4 defaults,errors=remount-ro 0 1\n' >"$rootfs/etc/fstab"
printf 'deb %s %s main\ndeb http://deb.debian.org/debian-security %s-security main\n' \
	"$mirror" "$release" "$release" >"$rootfs/etc/apt/sources.list"
cat >"$rootfs/etc/systemd/network/50-dhcp.network" <<-'EOF'
	[Match]
	Name=en* eth*

	[Network]
	DHCP=yes
EOF
chroot "$rootfs" systemctl enable systemd-networkd ssh >/dev/null 2>&1
# snmpd is started by the tests themselves, on private ports.
[ "$flavor" != lab ] || chroot "$rootfs" systemctl disable snmpd >/dev/null 2>&1 || true
# redis-server likewise: SONiC mode's tests start their own (testkit/redistest).
[ "$flavor" != lab ] || chroot "$rootfs" systemctl disable redis-server >/dev/null 2>&1 || true
chroot "$rootfs" id vagrant >/dev/null 2>&1 || chroot "$rootfs" useradd -m -s /bin/bash -U vagrant
echo 'vagrant:vagrant' | chroot "$rootfs" chpasswd
echo 'root:vagrant' | chroot "$rootfs" chpasswd
echo 'vagrant ALL=(ALL) NOPASSWD: ALL' >"$rootfs/etc/sudoers.d/vagrant"
chmod 0440 "$rootfs/etc/sudoers.d/vagrant"
install -d -m 0700 -o 1000 -g 1000 "$rootfs/home/vagrant/.ssh"
# Vagrant's public insecure key (keys/vagrant.pub of Vagrant, the same
# file as in Debian's vagrant package).
install -m 0600 -o 1000 -g 1000 "$here/vagrant.pub" "$rootfs/home/vagrant/.ssh/authorized_keys"
printf 'UseDNS no\n' >"$rootfs/etc/ssh/sshd_config.d/vagrant.conf"
# Host keys are made at first boot, not baked into the box.
rm -f "$rootfs"/etc/ssh/ssh_host_*
mkdir -p "$rootfs/etc/systemd/system/ssh.service.d"
# Before Debian's own `sshd -t`, which fails without host keys.
printf '[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n' >"$rootfs/etc/systemd/system/ssh.service.d/hostkeys.conf"
# The test runner of `make vagrant-test` (inactive without sflowtest.dir=
# on the kernel command line).
install -m 0755 "$here/sflowtest-run" "$rootfs/usr/local/sbin/sflowtest-run"
cat >"$rootfs/etc/systemd/system/sflowtest.service" <<-'EOF'
	[Unit]
	Description=sflowswitchd test run from the host's 9p share (make vagrant-test), then power off
	ConditionKernelCommandLine=sflowtest.dir
	After=multi-user.target

	[Service]
	Type=oneshot
	ExecStart=/usr/local/sbin/sflowtest-run
	ExecStopPost=/bin/systemctl poweroff --no-block
	StandardOutput=tty
	StandardError=inherit
	TTYPath=/dev/ttyS1
	TimeoutStartSec=infinity

	[Install]
	WantedBy=multi-user.target
EOF
chroot "$rootfs" systemctl enable sflowtest.service >/dev/null 2>&1
: >"$rootfs/etc/machine-id"
chroot "$rootfs" apt-get clean

kernel=$(cd "$rootfs/boot" && ls vmlinuz-* | sort -V | tail -1)
initrd=initrd.img-${kernel#vmlinuz-}
echo "box: disk image (${disk_gb}G, MBR, ext4, GRUB)"
grubdir=/usr/lib/grub/i386-pc
mkdir -p "$rootfs/boot/grub/i386-pc"
cp "$grubdir"/*.mod "$grubdir"/*.lst "$rootfs/boot/grub/i386-pc/"
cat >"$rootfs/boot/grub/grub.cfg" <<-EOF
	set timeout=0
	menuentry "Debian $version (${kernel#vmlinuz-})" {
	  linux /boot/$kernel root=/dev/vda1 ro console=ttyS0 net.ifnames=0 quiet
	  initrd /boot/$initrd
	}
EOF
raw=$work/disk.raw
rm -f "$raw"
truncate -s "${disk_gb}G" "$raw"
printf 'label: dos\nstart=2048, type=83, bootable\n' | sfdisk -q "$raw"
# The file system starts at the partition (sector 2048) and fills it.
mkfs.ext4 -q -F -L root -E offset=$((2048 * 512)) -d "$rootfs" "$raw" $((disk_gb * 1024 * 1024 - 1024))k
# core.img finds its modules and grub.cfg on partition 1; boot.img (the
# first 440 bytes of the MBR, the partition table stays) loads core.img
# from sector 1.
grub-mkimage -O i386-pc -o "$work/core.img" -p '(hd0,msdos1)/boot/grub' biosdisk part_msdos ext2
[ "$(stat -c %s "$work/core.img")" -lt $((2047 * 512)) ] || { echo "box: core.img too large" >&2; exit 1; }
dd if="$grubdir/boot.img" of="$raw" bs=440 count=1 conv=notrunc status=none
dd if="$work/core.img" of="$raw" bs=512 seek=1 conv=notrunc status=none

echo "box: qcow2"
qemu-img convert -O qcow2 "$raw" "$out/box.img.tmp"
mv "$out/box.img.tmp" "$out/box.img"
cp "$rootfs/boot/$kernel" "$out/vmlinuz"
cp "$rootfs/boot/$initrd" "$out/initrd.img"
echo "${kernel#vmlinuz-}" >"$out/kernel"
echo "$version" >"$out/version"
echo "$stamp" >"$out/stamp"
rm -f "$raw" "$work/core.img" # the tree stays for a rebuild
echo "box: built in $(($(date +%s) - start)) s: $out/box.img ($(du -h "$out/box.img" | cut -f1), Debian $version $release, kernel ${kernel#vmlinuz-})"
