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
#   3. an ext4 file system image of that tree on a whole virtual disk (no
#      partition table) made bootable with EXTLINUX, which installs its boot
#      sector in the file system's first sector, so the BIOS boots it
#      directly: no boot loader from anywhere but Debian's syslinux;
#   4. box.img (qcow2), metadata.json and a Vagrantfile, packed into
#      sflowswitchd-bookworm64.box and added to vagrant as
#      sflowswitchd/bookworm64.
#
# Cached: the box is rebuilt only when this script changes (its SHA-256 is
# stored beside the box); a second run only checks that vagrant has it.
# Root only (debootstrap, a loop mount of the image while EXTLINUX installs).
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
for cmd in debootstrap qemu-img mkfs.ext4 extlinux vagrant; do
	command -v "$cmd" >/dev/null || { echo "box: $cmd missing (apt-get install debootstrap qemu-utils e2fsprogs extlinux vagrant)" >&2; exit 1; }
done
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
box=$cache/sflowswitchd-bookworm64.box
stamp=$(sha256sum "$here/build.sh" | cut -d' ' -f1)

if [ -f "$box" ] && [ "$(cat "$box.sha256" 2>/dev/null)" = "$stamp" ]; then
	echo "box: $box is up to date (cached)"
else
	start=$(date +%s)
	work=$cache/work
	rootfs=$work/rootfs mnt=$work/mnt
	mounted=""
	cleanup() {
		if [ -n "$mounted" ]; then umount "$mnt" || echo "box: could not unmount $mnt" >&2; fi
		for fs in dev/pts dev proc sys; do
			mountpoint -q "$rootfs/$fs" 2>/dev/null && umount -l "$rootfs/$fs"
		done
		return 0
	}
	trap cleanup EXIT
	rm -rf "$work"
	mkdir -p "$rootfs" "$mnt"

	pkgs=(
		linux-image-amd64 initramfs-tools systemd-sysv udev dbus kmod
		openssh-server sudo rsync ca-certificates procps less
		iproute2 iputils-ping ethtool util-linux
		make netsniff-ng nftables snmpd snmp tshark python3 bpftool
	)
	echo "box: debootstrap bookworm from $mirror"
	# tshark asks whether non-root users may capture: the default (no) is
	# taken by debootstrap's non-interactive configuration.
	debootstrap --variant=minbase --include="$(
		IFS=,
		echo "${pkgs[*]}"
	)" bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -20 "$work/debootstrap.log" >&2; exit 1; }

	echo "box: configuring"
	echo sflowlab >"$rootfs/etc/hostname"
	printf '127.0.0.1 localhost\n127.0.1.1 sflowlab\n' >"$rootfs/etc/hosts"
	printf '/dev/vda / ext4 defaults,errors=remount-ro 0 1\n' >"$rootfs/etc/fstab"
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
	chroot "$rootfs" useradd -m -s /bin/bash -U vagrant
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
	printf '[Service]\nExecStartPre=/usr/bin/ssh-keygen -A\n' >"$rootfs/etc/systemd/system/ssh.service.d/hostkeys.conf"
	: >"$rootfs/etc/machine-id"
	chroot "$rootfs" apt-get clean

	kernel=$(cd "$rootfs/boot" && ls vmlinuz-* | sort -V | tail -1)
	initrd=initrd.img-${kernel#vmlinuz-}
	mkdir -p "$rootfs/boot/extlinux"
	cat >"$rootfs/boot/extlinux/extlinux.conf" <<-EOF
		DEFAULT debian
		TIMEOUT 1
		LABEL debian
		  LINUX /boot/$kernel
		  INITRD /boot/$initrd
		  APPEND root=/dev/vda rw console=ttyS0 net.ifnames=0 quiet
	EOF

	echo "box: disk image (${disk_gb}G, ext4, EXTLINUX)"
	raw=$work/disk.raw
	truncate -s "${disk_gb}G" "$raw"
	# 64bit and metadata_csum off: EXTLINUX 6.04 reads ext4 without them.
	mkfs.ext4 -q -F -L root -O ^64bit,^metadata_csum -d "$rootfs" "$raw"
	mount -o loop "$raw" "$mnt"
	mounted=1
	extlinux --install "$mnt/boot/extlinux" >/dev/null
	umount "$mnt"
	mounted=""

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
	rm -rf "$work"
	vagrant box remove --force "$box_name" >/dev/null 2>&1 || true
	echo "box: built in $(($(date +%s) - start)) s: $box ($(du -h "$box" | cut -f1), kernel ${kernel#vmlinuz-})"
fi

if ! vagrant box list 2>/dev/null | grep -q "^$box_name "; then
	vagrant box add --force --name "$box_name" "$box"
fi
echo "box: vagrant has $box_name"
