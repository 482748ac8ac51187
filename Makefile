# sflowswitchd — build, generate, test, lab, bench.
# Every target that needs system packages installs them first (scripts/install-deps.sh).

GO        ?= go
BIN       := bin/sflowswitchd
GOBIN     := $(shell $(GO) env GOPATH)/bin
PKGS      := ./...
FUZZTIME  ?= 15s
# Integration tests create network namespaces and attach XDP programs: root only.
TESTFLAGS ?= -count=1 -timeout 30m

.PHONY: all build generate deps lint test test-unit fuzz bench lab clean deb vagrant-box

all: build

build:
	$(GO) build -o $(BIN) ./cmd/sflowswitchd

deps:
	./scripts/install-deps.sh

# Regenerates the XDP program's object and Go bindings (committed, so a plain
# `go build` needs no clang).
generate: deps
	$(GO) generate ./bpf/...

lint: deps
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GOBIN)/staticcheck $(PKGS)

# The README's test command: lint, every unit and integration test, and a
# short fuzz run of each decoder that takes untrusted input.
test: deps lint build
	$(GO) test $(TESTFLAGS) $(PKGS)
	$(MAKE) fuzz

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./sflow/
	@if [ -d snmpd ] && grep -q 'func FuzzDecodePDU' snmpd/*_test.go 2>/dev/null; then \
		$(GO) test -run '^$$' -fuzz '^FuzzDecodePDU$$' -fuzztime $(FUZZTIME) ./snmpd/; fi
	$(GO) test -run '^$$' -fuzz '^FuzzParseRT$$' -fuzztime $(FUZZTIME) ./agent/app/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./internal/hsflowdconf/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./internal/ethernet/

bench: deps build
	./bench/run.sh

lab: deps build
	./lab/demo.sh

# Debian package bin/sflowswitchd_VERSION_ARCH.deb (packaging/deb/).
deb:
	./packaging/deb/build.sh

# The lab VM (vagrant/README.md): a Debian 12 box built from Debian's
# packages, then the package, the lab and the integration tests on its 6.1
# kernel. Root; not part of `make test`.
vagrant-box:
	./vagrant/box/build.sh

clean:
	rm -rf bin
