#!/usr/bin/env bash
# build.sh — builds sflowswitchd-sonic_VERSION_ARCH.deb (`make deb-sonic`):
# sflowswitchd for SONiC's sflow container, in hsflowd's place
# (docs/guides/sonic.md). It Provides, Conflicts with and Replaces hsflowd.
#
# Contents: /usr/sbin/sflowswitchd, /etc/init.d/hsflowd (LSB script:
# service hsflowd start|stop|restart|status), the supervisor program
# /etc/supervisor/conf.d/hsflowd.conf, the configuration
# /etc/sflowswitchd/sonic.conf (conffile, deploy/sonic), the man page,
# README.md and the guide. No systemd unit: SONiC's containers run
# supervisord. Nothing is started at installation (sflowmgrd starts it);
# the init script is therefore not registered with update-rc.d. lintian's
# expected warnings: no systemd unit for the init script, the script not
# registered, a static Go binary.
#
# Environment: VERSION, GOARCH, OUT as packaging/deb/build.sh; LINTIAN=0 to
# skip lintian.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
go=${GO:-go}
arch=${GOARCH:-$($go env GOARCH)}
if [ -z "${VERSION:-}" ]; then
	VERSION=$(git describe --tags --match 'v[0-9]*' 2>/dev/null | sed 's/^v//; s/-/+/g') || true
	[ -n "$VERSION" ] || VERSION=0.1.0~git$(git log -1 --format=%cd --date=format:%Y%m%d).$(git rev-parse --short=7 HEAD)
fi
[[ "$VERSION" =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || { echo "deb-sonic: bad VERSION '$VERSION'" >&2; exit 1; }
out=${OUT:-$root/bin}
mkdir -p "$out"
deb=$out/sflowswitchd-sonic_${VERSION}_${arch}.deb

stage=$(mktemp -d "${TMPDIR:-/tmp}/sflowswitchd-sonic-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
pkg=$stage/pkg
doc=$pkg/usr/share/doc/sflowswitchd-sonic
install -d "$pkg/DEBIAN" "$pkg/usr/sbin" "$pkg/etc/init.d" "$pkg/etc/supervisor/conf.d" "$pkg/etc/sflowswitchd" \
	"$pkg/usr/share/man/man8" "$doc"

CGO_ENABLED=0 GOARCH=$arch $go build -buildmode=pie -trimpath -buildvcs=false \
	-ldflags "-s -w -X main.version=$VERSION" -o "$pkg/usr/sbin/sflowswitchd" ./cmd/sflowswitchd
install -m 0755 "$here/hsflowd.init" "$pkg/etc/init.d/hsflowd"
install -m 0644 "$here/supervisor-hsflowd.conf" "$pkg/etc/supervisor/conf.d/hsflowd.conf"
install -m 0644 deploy/sonic/sflowswitchd-sonic.conf "$pkg/etc/sflowswitchd/sonic.conf"
gzip -9n <"$root/packaging/deb/sflowswitchd.8" >"$pkg/usr/share/man/man8/sflowswitchd.8.gz"
install -m 0644 README.md docs/guides/sonic.md "$doc/"
install -m 0644 "$root/packaging/deb/copyright" "$doc/copyright"
{
	echo "sflowswitchd-sonic ($VERSION) unstable; urgency=medium"
	echo
	echo "  * Build of commit $(git rev-parse --short=12 HEAD)."
	echo
	echo " -- sflowswitchd maintainers <sflowswitchd@example.org>  $(git log -1 --format=%aD)"
} | gzip -9n >"$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz" "$pkg/usr/share/man/man8/sflowswitchd.8.gz"

printf '%s\n' /etc/sflowswitchd/sonic.conf /etc/init.d/hsflowd /etc/supervisor/conf.d/hsflowd.conf >"$pkg/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
sed -e "s/@VERSION@/$VERSION/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" "$here/control" >"$pkg/DEBIAN/control"
(cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$pkg/DEBIAN/md5sums"
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/conffiles" "$pkg/DEBIAN/md5sums"

dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
echo "$deb"

if [ "${LINTIAN:-1}" != 0 ]; then
	echo "lintian $(lintian --version | awk '{print $2}'): $(basename "$deb")"
	lintian --fail-on error "$deb"
fi
