# sflowswitchd — build, generate, test, lab, bench.
# Every target that needs system packages installs them first, only its own
# (scripts/install-deps.sh PROFILE).

GO        ?= go
BIN       := bin/sflowswitchd
GOBIN     := $(shell $(GO) env GOPATH)/bin
PKGS      := ./...
FUZZTIME  ?= 15s
# Integration tests create network namespaces and attach XDP programs: root only.
TESTFLAGS ?= -count=1 -timeout 30m

.PHONY: all build generate deps lint test fuzz bench lab clean deb vagrant-box vagrant-lab vagrant-clean soak stress-exact

all: build

build:
	$(GO) build -o $(BIN) ./cmd/sflowswitchd

DEPS      := ./scripts/install-deps.sh

deps:
	$(DEPS) test

# Regenerates the XDP program's object and Go bindings (committed, so a plain
# `go build` needs no clang).
generate:
	$(DEPS) generate
	$(GO) generate ./bpf/...

# bench/ is a Go module of its own (its plotting libraries stay out of the
# daemon's go.mod; it builds the repository's code through a replace
# directive): lint and test run in both modules.
lint: deps
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GOBIN)/staticcheck $(PKGS)
	cd bench && $(GO) vet $(PKGS) && $(GOBIN)/staticcheck $(PKGS)

# The README's test command: lint, a short fuzz run of each decoder that
# takes untrusted input, then every unit and integration test. Under CI
# (.ci/run sets CI=1) a test may skip only for a kernel feature the probe
# reports missing (testkit/testskip); the run ends with gotestsum's list
# of the tests skipped, each with its reason. The events are kept in
# bin/test.json (bench/'s module: bin/test-bench.json).
test: deps lint build fuzz
	@mkdir -p bin
	$(GOBIN)/gotestsum --format pkgname --jsonfile bin/test.json -- $(TESTFLAGS) $(PKGS)
	cd bench && $(GOBIN)/gotestsum --format pkgname --jsonfile ../bin/test-bench.json -- $(TESTFLAGS) $(PKGS)

# Every fuzz target of an input that comes from outside the daemon: the
# sFlow decoder, the decode tool's pcap reader and JSON rendering, AgentX
# PDUs, the application JSON API and its rtmetric/rtflow messages,
# hsflowd.conf, the TOML config and the Ethernet/VLAN walker of sampled
# headers. test/policy fails when a
# Fuzz function exists that is not listed here.
FUZZ_TARGETS := \
	./sflow:FuzzDecode \
	./cmd/sflowswitchd/internal/decode:FuzzPcapReader \
	./cmd/sflowswitchd/internal/decode:FuzzRender \
	./snmpd:FuzzDecodePDU \
	./apps/app:FuzzParseJSON \
	./apps/app:FuzzParseRT \
	./config/hsflowdconf:FuzzParse \
	./config:FuzzParse \
	./internal/ethernet:FuzzParse

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t#*:}; \
		echo "fuzz $$pkg $$fn ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

bench: build
	$(DEPS) bench stress
	./bench/run.sh

# The fault and soak suite at full length (docs/OPERATIONS.md): every fault
# of test/e2e/faults_test.go FAULT_ROUNDS times, a SOAK_DURATION soak with
# SNMP SETs and reloads, a FLOOD_DURATION 1-in-1 flood on every port. It
# writes the table of faults tried to FAULT_REPORT. Root; not part of
# `make test`, which runs each fault once and the soak and flood for seconds.
SOAK_DURATION  ?= 30m
FLOOD_DURATION ?= 3m
FAULT_ROUNDS   ?= 5
FAULT_REPORT   ?= $(CURDIR)/bin/faults.md
soak: deps build
	@mkdir -p $(dir $(FAULT_REPORT))
	@printf '| Fault | What the test did | Observed | Time to recover | Peak RSS | Samples lost | Of them reported |\n|---|---|---|---|---|---|---|\n' >$(FAULT_REPORT)
	SOAK_DURATION=$(SOAK_DURATION) FLOOD_DURATION=$(FLOOD_DURATION) FAULT_ROUNDS=$(FAULT_ROUNDS) FAULT_REPORT=$(FAULT_REPORT) \
		$(GO) test -count=1 -timeout 0 -v -run '^(TestFault|TestSoak$$|TestFloodEveryPort$$|TestLeastPrivilege$$)' ./test/e2e/
	@echo "fault table: $(FAULT_REPORT)"

# The exact-count tests (sampling, pools, rings, monitor ports, counters,
# floods, faults, scale) STRESS_RUNS times in a row beside a CPU-bound
# process (stress-ng --cpu STRESS_CPUS), pass or fail per run
# (scripts/stress-exact.sh; docs/OPERATIONS.md, "Exact counts under
# load"). Root; not part of `make test` (about 4 minutes per run here).
STRESS_RUNS ?= 20
STRESS_CPUS ?= 1
stress-exact: deps
	$(DEPS) stress
	RUNS=$(STRESS_RUNS) STRESS_CPUS=$(STRESS_CPUS) ./scripts/stress-exact.sh

lab: build
	$(DEPS) lab
	./lab/demo.sh

# Debian package bin/sflowswitchd_VERSION_ARCH.deb (packaging/deb/).
deb:
	$(DEPS) deb
	./packaging/deb/build.sh

# The lab VM (vagrant/README.md): a Debian 12 box built from Debian's
# packages, then the package, the lab and the integration tests on its 6.1
# kernel. Root; not part of `make test`.
vagrant-box:
	$(DEPS) vm
	./vagrant/box/build.sh

vagrant-lab: vagrant-box deb
	./vagrant/lab.sh

vagrant-clean:
	$(DEPS) vm
	./vagrant/clean.sh

clean:
	rm -rf bin
