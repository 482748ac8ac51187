#!/usr/bin/env bash
# build.sh — builds the Debian 12 (bookworm) vagrant-libvirt box of the lab
# VM from Debian's own packages only (`make vagrant-box`):
#
#   1. debootstrap bookworm from the Debian mirror into a directory, with
#      Debian 12's kernel (linux-image-amd64, 6.1) and the packages the lab
#      and the integration tests run inside the VM (iproute2, netsniff-ng,
#      nftables, snmpd, snmp, tshark, python3, bpftool ...). No Go: the
#      daemon and the test binaries are built on the host (vagrant/lab.sh);
#   2. the vagrant conventions: user vagrant with Vagrant's public insecure
#      key (replaced by a fresh key at the first `vagrant up`), password-less
#      sudo, sshd, DHCP on every Ethernet interface (systemd-networkd);
#   3. a virtual disk with one partition (MBR) holding an ext4 file system
#      of that tree (mkfs.ext4 -d, at the partition's offset: no loop
#      device, no mount) and GRUB for BIOS (Debian's grub-pc-bin on the
#      host): its modules and a fixed grub.cfg in /boot/grub, boot.img in
#      the MBR and core.img (grub-mkimage) in the gap before the partition.
#      (EXTLINUX was tried first: its real-mode thunks end in a KVM
#      emulation failure when the host is itself a VM.)
#   4. box.img (qcow2), metadata.json and a Vagrantfile, packed into
#      sflowswitchd-bookworm64.box and added to vagrant as
#      sflowswitchd/bookworm64.
#
# Cached: the box is rebuilt only when this script changes (its SHA-256 is
# stored beside the box); a second run only checks that vagrant has it.
# Root only (debootstrap, chroot). The debootstrapped tree is kept in
# vagrant/.cache/work between failed runs with the same package list.
#
# Environment: CACHE (default vagrant/.cache), MIRROR (default
# http://deb.debian.org/debian), DISK_GB (virtual disk size, default 8).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${CACHE:-$here/../.cache}
mirror=${MIRROR:-http://deb.debian.org/debian}
disk_gb=${DISK_GB:-8}
readonly box_name=sflowswitchd/bookworm64
[ "$(id -u)" = 0 ] || { echo "box: must run as root (debootstrap, loop mount)" >&2; exit 1; }
for cmd in debootstrap qemu-img mkfs.ext4 sfdisk grub-mkimage vagrant; do
	command -v "$cmd" >/dev/null || { echo "box: $cmd missing (apt-get install debootstrap qemu-utils e2fsprogs fdisk grub-pc-bin vagrant)" >&2; exit 1; }
done
[ -d /usr/lib/grub/i386-pc ] || { echo "box: GRUB for BIOS missing (apt-get install grub-pc-bin)" >&2; exit 1; }
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
box=$cache/sflowswitchd-bookworm64.box
stamp=$(sha256sum "$here/build.sh" | cut -d' ' -f1)

if [ -f "$box" ] && [ "$(cat "$box.sha256" 2>/dev/null)" = "$stamp" ]; then
	echo "box: $box is up to date (cached)"
else
	start=$(date +%s)
	work=$cache/work
	rootfs=$work/rootfs
	cleanup() {
		for fs in dev/pts dev proc sys; do
			mountpoint -q "$rootfs/$fs" 2>/dev/null && umount -l "$rootfs/$fs"
		done
		return 0
	}
	trap cleanup EXIT
	mkdir -p "$work"

	pkgs=(
		linux-image-amd64 initramfs-tools systemd-sysv udev dbus kmod
		openssh-server sudo rsync ca-certificates procps less
		iproute2 iputils-ping ethtool util-linux
		make netsniff-ng nftables snmpd snmp tshark python3 bpftool
	)
	pkgs_sum=$(echo "${pkgs[*]} $mirror" | sha256sum | cut -d' ' -f1)
	if [ "$(cat "$work/rootfs.ok" 2>/dev/null)" != "$pkgs_sum" ]; then
	rm -rf "$rootfs"
	mkdir -p "$rootfs"
	echo "box: debootstrap bookworm from $mirror"
	# tshark asks whether non-root users may capture: the default (no) is
	# taken by debootstrap's non-interactive configuration.
	debootstrap --variant=minbase --include="$(
		IFS=,
		echo "${pkgs[*]}"
	)" bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -20 "$work/debootstrap.log" >&2; exit 1; }
	echo "$pkgs_sum" >"$work/rootfs.ok"
	else
		echo "box: reusing the debootstrapped tree in $rootfs"
	fi

	echo "box: configuring"
	echo sflowlab >"$rootfs/etc/hostname"
	printf '127.0.0.1 localhost\n127.0.1.1 sflowlab\n' >"$rootfs/etc/hosts"
	printf '/dev/vda1 / ext4 defaults,errors=remount-ro 0 1\n' >"$rootfs/etc/fstab"
	printf 'deb %s bookworm main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' "$mirror" >"$rootfs/etc/apt/sources.list"
	cat >"$rootfs/etc/systemd/network/50-dhcp.network" <<-'EOF'
		[Match]
		Name=en* eth*

		[Network]
		DHCP=yes
	EOF
	chroot "$rootfs" systemctl enable systemd-networkd ssh >/dev/null 2>&1
	# snmpd is started by the tests themselves, on private ports.
	chroot "$rootfs" systemctl disable snmpd >/dev/null 2>&1 || true
	chroot "$rootfs" id vagrant >/dev/null 2>&1 || chroot "$rootfs" useradd -m -s /bin/bash -U vagrant
	echo 'vagrant:vagrant' | chroot "$rootfs" chpasswd
	echo 'root:vagrant' | chroot "$rootfs" chpasswd
	echo 'vagrant ALL=(ALL) NOPASSWD: ALL' >"$rootfs/etc/sudoers.d/vagrant"
	chmod 0440 "$rootfs/etc/sudoers.d/vagrant"
	install -d -m 0700 -o 1000 -g 1000 "$rootfs/home/vagrant/.ssh"
	# Vagrant's public insecure key, from the vagrant package on the host.
	key=$(ruby -e 'print Gem::Specification.find_by_name("vagrant").gem_dir' 2>/dev/null)/keys/vagrant.pub
	[ -f "$key" ] || key=$(find /usr/share -path '*vagrant*/keys/vagrant.pub' -print -quit)
	[ -f "$key" ] || { echo "box: vagrant's insecure public key not found" >&2; exit 1; }
	install -m 0600 -o 1000 -g 1000 "$key" "$rootfs/home/vagrant/.ssh/authorized_keys"
	printf 'UseDNS no\n' >"$rootfs/etc/ssh/sshd_config.d/vagrant.conf"
	# Host keys are made at first boot, not baked into the box.
	rm -f "$rootfs"/etc/ssh/ssh_host_*
	mkdir -p "$rootfs/etc/systemd/system/ssh.service.d"
	# Before Debian's own `sshd -t`, which fails without host keys.
	printf '[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n' >"$rootfs/etc/systemd/system/ssh.service.d/hostkeys.conf"
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
		menuentry "Debian 12 (${kernel#vmlinuz-})" {
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

	echo "box: packing"
	qemu-img convert -O qcow2 "$raw" "$work/box.img"
	rm -f "$raw"
	printf '{"provider":"libvirt","format":"qcow2","virtual_size":%d}\n' "$disk_gb" >"$work/metadata.json"
	cat >"$work/Vagrantfile" <<-'EOF'
		Vagrant.configure("2") do |config|
		  config.vm.provider :libvirt do |lv|
		    lv.driver = "kvm"
		  end
		end
	EOF
	tar -C "$work" -cf "$box.tmp" metadata.json Vagrantfile box.img
	mv "$box.tmp" "$box"
	echo "$stamp" >"$box.sha256"
	echo "$kernel" >"$box.kernel"
	rm -f "$work/disk.raw" "$work/box.img" "$work/core.img" # the tree stays for a rebuild
	vagrant box remove --force "$box_name" >/dev/null 2>&1 || true
	echo "box: built in $(($(date +%s) - start)) s: $box ($(du -h "$box" | cut -f1), kernel ${kernel#vmlinuz-})"
fi

if ! vagrant box list 2>/dev/null | grep -q "^$box_name "; then
	vagrant box add --force --name "$box_name" "$box"
fi
echo "box: vagrant has $box_name"
