#!/usr/bin/env bash
# build.sh — builds sflowswitchd_VERSION_ARCH.deb with dpkg-deb (`make deb`).
#
# Contents: /usr/sbin/sflowswitchd (static, stripped), the systemd unit of
# packaging/ (CAP_BPF CAP_NET_ADMIN CAP_PERFMON CAP_NET_RAW only), the example
# configuration as the conffile /etc/sflowswitchd/sflowswitchd.conf, the MIB
# modules of mib/modules/ in /usr/share/sflowswitchd/mibs, the man page
# sflowswitchd(8), README.md and the manual under docs/ (guides, reference),
# and the license in copyright (DEP-5). The package does not
# enable or start the service (see postinst).
#
# Environment: VERSION (default: git describe, else 0.1.0~gitDATE.HASH),
# GOARCH (default: the host's), OUT (output directory, default bin/),
# LINTIAN=0 to skip the lintian check (which fails the build on any error).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
go=${GO:-go}
arch=${GOARCH:-$($go env GOARCH)} # amd64, arm64: Debian uses the same names
if [ -z "${VERSION:-}" ]; then
	VERSION=$(git describe --tags --match 'v[0-9]*' 2>/dev/null | sed 's/^v//; s/-/+/g') || true
	[ -n "$VERSION" ] || VERSION=0.1.0~git$(git log -1 --format=%cd --date=format:%Y%m%d).$(git rev-parse --short=7 HEAD)
fi
[[ "$VERSION" =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || { echo "deb: bad VERSION '$VERSION'" >&2; exit 1; }
out=${OUT:-$root/bin}
mkdir -p "$out"
deb=$out/sflowswitchd_${VERSION}_${arch}.deb

stage=$(mktemp -d "${TMPDIR:-/tmp}/sflowswitchd-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
pkg=$stage/pkg
doc=$pkg/usr/share/doc/sflowswitchd
install -d "$pkg/DEBIAN" "$pkg/usr/sbin" "$pkg/lib/systemd/system" "$pkg/etc/sflowswitchd" \
	"$pkg/usr/share/sflowswitchd/mibs" "$pkg/usr/share/man/man8" "$doc/examples"

# No cgo (no shared library needed), position-independent (hardening; a
# PIE is also what lintian expects of a Go binary built outside the Debian
# Go team's toolchain), reproducible paths, stripped, version in
# sFlowVersion.
CGO_ENABLED=0 GOARCH=$arch $go build -buildmode=pie -trimpath -buildvcs=false \
	-ldflags "-s -w -X main.version=$VERSION -X main.commit=$(git rev-parse --short=12 HEAD)" -o "$pkg/usr/sbin/sflowswitchd" ./cmd/sflowswitchd
install -m 0644 packaging/sflowswitchd.service "$pkg/lib/systemd/system/"
install -m 0644 packaging/sflowswitchd.conf.example "$pkg/etc/sflowswitchd/sflowswitchd.conf"
install -m 0644 packaging/sflowswitchd.conf.example "$doc/examples/"
install -m 0644 mib/modules/*.txt "$pkg/usr/share/sflowswitchd/mibs/"
gzip -9n <"$here/sflowswitchd.8" >"$pkg/usr/share/man/man8/sflowswitchd.8.gz"
# The operator's manual, where the README's relative links (docs/...)
# lead from /usr/share/doc/sflowswitchd/README.md (the specs, docs/spec/,
# are left to the web).
install -m 0644 README.md "$doc/"
for d in docs docs/guides docs/reference; do
	install -d "$doc/$d"
	install -m 0644 "$d"/*.md "$doc/$d/"
done
# Every document the README links to should be in the package: a link
# that leads nowhere is said (a document still to come is not fatal).
for f in $(grep -o '](docs/[^)#]*' README.md | sed 's/^](//' | grep -v '/$' | sort -u); do
	[ -f "$doc/$f" ] || echo "deb: WARNING: README.md links to $f, which the package lacks (not in the tree)" >&2
done
install -m 0644 "$here/copyright" "$doc/copyright"
install -d "$pkg/usr/share/lintian/overrides"
install -m 0644 "$here/lintian-overrides" "$pkg/usr/share/lintian/overrides/sflowswitchd"
# A native package's changelog: one entry for this build.
{
	echo "sflowswitchd ($VERSION) unstable; urgency=medium"
	echo
	echo "  * Build of commit $(git rev-parse --short=12 HEAD)."
	echo
	echo " -- sflowswitchd maintainers <sflowswitchd@example.org>  $(git log -1 --format=%aD)"
} | gzip -9n >"$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz" "$pkg/usr/share/man/man8/sflowswitchd.8.gz"

install -m 0755 "$here/postinst" "$here/prerm" "$here/postrm" "$pkg/DEBIAN/"
echo /etc/sflowswitchd/sflowswitchd.conf >"$pkg/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
sed -e "s/@VERSION@/$VERSION/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" "$here/control" >"$pkg/DEBIAN/control"
(cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$pkg/DEBIAN/md5sums"
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/conffiles" "$pkg/DEBIAN/md5sums"

dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
echo "$deb"

# The unit's exposure as systemd-analyze scores it (offline: the unit
# file alone, no running manager): recorded with every build, and a unit
# loosened past maxExposure fails it (docs/OPERATIONS.md "Privileges":
# 5.0 MEDIUM before the tightening, 2.8 OK after).
maxExposure=3.0
exposure=$(systemd-analyze security --offline=yes "$pkg/lib/systemd/system/sflowswitchd.service" 2>&1 |
	sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\) .*/\1/p')
[ -n "$exposure" ] || { echo "deb: systemd-analyze security gave no score (install-deps.sh deb)" >&2; exit 1; }
echo "systemd-analyze security --offline=yes sflowswitchd.service: exposure $exposure (at most $maxExposure)"
awk -v e="$exposure" -v m="$maxExposure" 'BEGIN { exit !(e <= m) }' ||
	{ echo "deb: the unit's exposure $exposure is above $maxExposure" >&2; exit 1; }

# lintian judges the package as Debian would; any error fails the build.
# Warnings and informational tags are printed, not fatal; there is none
# (the static Go binary's one is overridden with its reason:
# lintian-overrides).
if [ "${LINTIAN:-1}" != 0 ]; then
	echo "lintian $(lintian --version | awk '{print $2}'): $(basename "$deb")"
	lintian --fail-on error "$deb"
fi
