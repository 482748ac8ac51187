#!/usr/bin/env bash
# prepare.sh DIR [PACKAGE...] — builds on the host what a lab VM runs, in
# DIR (which the VM sees at the same path: a 9p share for vagrant/test.sh,
# a vagrant rsync folder for vagrant/lab.sh):
#
#   DIR/src        the source as it is in this tree (no .git, bin/, caches)
#   DIR/gomod      its Go module cache (the VM has no network), filled from
#                  this host's module cache, the proxy as a fallback
#   DIR/gocache    a Go build cache warmed with `go build ./...` under the
#                  settings the VM uses (CGO_ENABLED=0, GOFLAGS=-modcacherw,
#                  same paths, same toolchain): the tests that `go build`
#                  the daemon in the VM only link
#   DIR/tests      one test binary per package with tests (`go test -c`;
#                  linking in a VM without hardware virtualization takes
#                  longer than the tests) and tests/list: "directory
#                  import-path" per package, in `go list` order
#   DIR/bin        test2json (the VM turns each binary's -test.v=test2json
#                  output into `go test -json` events, read by gotestsum)
#
# PACKAGE...: Go package patterns (default ./...): only their test
# binaries are built. The caches are kept between runs: only what changed
# compiles again.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
dir=${1:?usage: prepare.sh DIR [PACKAGE...]}
shift
[ $# -gt 0 ] || set -- ./...
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

t0=$(date +%s)
rsync -a --delete --exclude=/.git --exclude=/bin/ --exclude=/vagrant/.cache/ --exclude=/vagrant/.vagrant/ \
	--exclude='*.test' "$root/" "$dir/src/"
# The module cache of the VM, filled from this host's (not a vendor/
# directory: tests that scan the tree for our sources would read it).
(cd "$dir/src" && GOMODCACHE=$dir/gomod GOFLAGS=-modcacherw \
	GOPROXY=file://$(go env GOMODCACHE)/cache/download,https://proxy.golang.org go mod download)
rm -rf "$dir/tests"
mkdir -p "$dir/tests" "$dir/bin"
(
	cd "$dir/src"
	export GOFLAGS=-modcacherw CGO_ENABLED=0 GOCACHE=$dir/gocache GOMODCACHE=$dir/gomod GOPROXY=off GOTOOLCHAIN=local
	go build ./...
	go build -o "$dir/bin/test2json" cmd/test2json
	go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}} {{.ImportPath}}{{end}}' "$@" |
		sed "s|^$PWD/||; s|^$PWD |. |" >"$dir/tests/list"
	[ -s "$dir/tests/list" ] || { echo "prepare: no package with tests in $*" >&2; exit 1; }
	while read -r pkgdir _; do
		go test -c -o "$dir/tests/${pkgdir//\//_}.test" "./$pkgdir"
	done <"$dir/tests/list"
)
echo "prepare: $(wc -l <"$dir/tests/list") test binaries ($*), src/, its modules and a warm Go build cache in $dir in $(($(date +%s) - t0)) s; $(go env GOVERSION) from $(go env GOROOT)"
