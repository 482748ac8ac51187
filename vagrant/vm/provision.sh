#!/usr/bin/env bash
# vm/provision.sh — provisions the `make vagrant-lab` VM (run by vagrant as
# root): installs the sflowswitchd Debian package from $SFLOW_LAB_VM with apt, as
# an operator would. Everything else the lab and the tests need is in the
# box already (vagrant/box/build.sh), so the VM needs no network.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
debs=("${SFLOW_LAB_VM:?}"/sflowswitchd_*.deb)
[ -f "${debs[0]}" ] || { echo "provision: no sflowswitchd .deb in $SFLOW_LAB_VM" >&2; exit 1; }
echo "provision: apt-get install ${debs[0]}"
apt-get install -y "${debs[0]}"
dpkg -s sflowswitchd | grep -E '^(Package|Version|Status):'
echo "provision: sflowswitchd.service is $(systemctl is-enabled sflowswitchd || true), $(systemctl is-active sflowswitchd || true)"
