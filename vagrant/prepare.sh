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
# The repository has two Go modules: the root and bench/ (bench/go.mod,
# which builds the root's packages through a replace directive). Patterns
# under ./bench go to the bench module, ./... to both.
root_pats=()
bench_pats=()
for p in "$@"; do
	case $p in
	./...) root_pats+=(./...) bench_pats+=(./...) ;;
	./bench) bench_pats+=(.) ;;
	./bench/*) bench_pats+=("./${p#./bench/}") ;;
	*) root_pats+=("$p") ;;
	esac
done
rm -rf "$dir/tests"
mkdir -p "$dir/tests" "$dir/bin"
: >"$dir/tests/list"
export GOFLAGS=-modcacherw CGO_ENABLED=0 GOCACHE=$dir/gocache GOMODCACHE=$dir/gomod GOTOOLCHAIN=local
hostmods=$(go env GOMODCACHE)
# build_module MODDIR PATTERN...: the module's modules (the VM has no
# network: its module cache is filled from this host's, the proxy as a
# fallback; not a vendor/ directory, which tests that scan the tree for
# our sources would read), a warm build cache, and the test binaries.
build_module() {
	local mod=$1 pkgdir imp
	shift
	[ $# -gt 0 ] || return 0
	cd "$dir/src/$mod"
	GOPROXY=file://$hostmods/cache/download,https://proxy.golang.org go mod download
	GOPROXY=off go build ./...
	GOPROXY=off go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}} {{.ImportPath}}{{end}}' "$@" |
		sed "s|^$dir/src/||" >"$dir/tests/list.$$"
	while read -r pkgdir imp; do
		GOPROXY=off go test -c -o "$dir/tests/${pkgdir//\//_}.test" "./${pkgdir#"$mod"/}"
		echo "$pkgdir $imp" >>"$dir/tests/list"
	done <"$dir/tests/list.$$"
	rm -f "$dir/tests/list.$$"
}
build_module . "${root_pats[@]}"
build_module bench "${bench_pats[@]}"
(cd "$dir/src" && GOPROXY=off go build -o "$dir/bin/test2json" cmd/test2json)
[ -s "$dir/tests/list" ] || { echo "prepare: no package with tests in $*" >&2; exit 1; }
echo "prepare: $(wc -l <"$dir/tests/list") test binaries ($*), src/, its modules and a warm Go build cache in $dir in $(($(date +%s) - t0)) s; $(go env GOVERSION) from $(go env GOROOT)"
