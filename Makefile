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

.PHONY: all build generate reference deps lint test fuzz bench lab clean deb deb-sonic vagrant-box vagrant-test vagrant-fresh vagrant-upgrade vagrant-lab vagrant-clean soak hostile stress-exact

all: build

build:
	$(GO) build -o $(BIN) ./cmd/sflowswitchd

DEPS      := ./scripts/install-deps.sh

deps:
	$(DEPS) test

# Regenerates the XDP programs' objects and Go bindings (committed, so a plain
# `go build` needs no clang): the daemon's (dataplane/bpf/) and the benchmarks' frame
# generator (bench/gen).
generate:
	$(DEPS) generate
	$(GO) generate ./dataplane/bpf/...
	cd bench && $(GO) generate ./gen/...

# Regenerates the references generated from the code (docs/reference/
# flags.md, config.md, metrics.md); `make test` fails while they differ.
reference:
	$(GO) test -count=1 ./cmd/sflowswitchd ./test/policy -run TestReference -update

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
# reports missing (internal/testkit/testskip); the run ends with gotestsum's list
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
	./internal/agentx:FuzzDecodePDU \
	./apps/app:FuzzParseJSON \
	./apps/app:FuzzParseRT \
	./config/hsflowdconf:FuzzParse \
	./config:FuzzParse \
	./config/dnssd:FuzzParseTXT \
	./internal/ethernet:FuzzParse \
	./dataplane/psample:FuzzParseMessage

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t#*:}; \
		echo "fuzz $$pkg $$fn ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

# Every benchmark, about 30 minutes, as root on a quiet machine: raw
# results in bench/results/<UTC time>/, then the results page
# bench/README.md and its plots bench/figures/ written from them
# (BENCH_PAGE=0: the page in the results directory only). Knobs: bench/run.sh.
bench: build
	$(DEPS) bench stress
	./bench/run.sh

# The fault and soak suite at full length (results: test/e2e/README.md): every fault
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

# The hostile suite at full size (docs/reference/bounds.md; results: test/e2e/README.md): every
# input path an attacker with local access or a broken configuration
# tool can reach, tried against the real daemon in namespace labs
# (test/e2e/hostile_*_test.go) with its bound as an assertion, at the
# sizes of the defects' reproductions (19,000 idle connections, 2,000
# aborted scrapes, 50,000 garbage datagrams, 1000 ports, ...), and the
# unit-level bounds (the TOML decoder's input, the state file at its cap,
# the listener, the scrape log, the upgrade's state: snmp.json's rows,
# its read and write, the pin directory). It writes the table of cases, bounds and
# measured peaks to HOSTILE_REPORT. Root; `make test` runs the short form
# (about 90 s; 2 minutes at load 15).
HOSTILE_REPORT ?= $(CURDIR)/bin/hostile.md
hostile: deps build
	@mkdir -p $(dir $(HOSTILE_REPORT))
	@printf '| Case | Bound (asserted) | Measured peak |\n|---|---|---|\n' >$(HOSTILE_REPORT)
	HOSTILE_REPORT=$(HOSTILE_REPORT) $(GO) test -count=1 -v -run 'Hostile|TestCheckTOMLShape|TestStateFileBounded|TestAbortedScrapesLogRateLimited|TestSlowBodiesDoNotHoldScrapes|TestIdleConnectionsBounded|TestOverCapRefusedAtOnce|TestMemoryBudgetLimits|TestMIBRowCost|TestBatchBytesBounded' \
		./config/ ./apps/app/ ./internal/prom/ ./internal/listener/ ./daemon/ ./agent/sender/ \
		./mib/ ./daemon/internal/handover/ ./dataplane/
	HOSTILE_FULL=1 HOSTILE_REPORT=$(HOSTILE_REPORT) $(GO) test -count=1 -timeout 60m -v -run '^TestHostile' ./test/e2e/
	@echo "hostile table: $(HOSTILE_REPORT)"

# The exact-count tests (sampling, pools, rings, monitor ports, counters,
# floods, faults, scale) STRESS_RUNS times in a row beside a CPU-bound
# process (stress-ng --cpu STRESS_CPUS), pass or fail per run
# (scripts/stress-exact.sh; test/e2e/README.md, "Exact counts under
# load"). Root; not part of `make test` (about 4 minutes per run here).
STRESS_RUNS ?= 20
STRESS_CPUS ?= 1
stress-exact: deps
	$(DEPS) stress
	RUNS=$(STRESS_RUNS) STRESS_CPUS=$(STRESS_CPUS) ./scripts/stress-exact.sh

lab: build
	$(DEPS) lab
	./test/lab/demo.sh

# Debian package bin/sflowswitchd_VERSION_ARCH.deb (packaging/deb/).
deb:
	$(DEPS) deb
	./packaging/deb/build.sh

# The SONiC variant bin/sflowswitchd-sonic_VERSION_ARCH.deb (packaging/sonic/):
# Provides, Conflicts with and Replaces hsflowd (docs/guides/sonic.md).
deb-sonic:
	$(DEPS) deb
	./packaging/sonic/build.sh

# The lab VMs (vagrant/README.md): Debian boxes built from Debian's
# packages, one per release (RELEASE: bookworm = Debian 12, kernel 6.1;
# trixie = Debian 13, kernel 6.12). Root; not part of `make test`.
#   vagrant-box    the box of RELEASE (cached per release)
#   vagrant-test   every package's tests in a VM of each of RELEASES, one
#                  after the other (qemu, 9p; TEST_PKGS, TEST_RUN pick a
#                  subset), and a report per kernel
#   vagrant-fresh  .ci/run on a fresh minimal Debian RELEASE from a clean
#                  clone, with network (qemu's user networking)
#   vagrant-upgrade  the package's maintainer scripts under dpkg and systemd
#                  in a VM of RELEASE: install, upgrade in place under
#                  traffic, SIGKILL and restart, removal (vm/upgrade.sh)
#   vagrant-lab    the package, the lab and the tests in a VM of RELEASE
#                  booted by vagrant on libvirt
#   vagrant-clean  removes every box, VM, volume and cache they left
RELEASE  ?= bookworm
RELEASES ?= bookworm trixie

vagrant-box:
	$(DEPS) vm
	./vagrant/box/build.sh $(RELEASE)

# VM_CMD reaches test.sh as typed, through the environment: make neither
# expands it (`$TREE` stays the VM's variable, not make's `$T` + "REE") nor
# puts it between quotes it may itself contain.
vagrant-test: export SFLOW_VM_CMD = $(value VM_CMD)
vagrant-test:
	$(DEPS) vm
	@set -e; for r in $(RELEASES); do ./vagrant/box/build.sh $$r; done
	RELEASES="$(RELEASES)" TEST_PKGS="$(TEST_PKGS)" TEST_RUN="$(TEST_RUN)" VM_CMD="$$SFLOW_VM_CMD" ./vagrant/test.sh

vagrant-fresh:
	$(DEPS) vm
	FLAVOR=fresh ./vagrant/box/build.sh $(RELEASE)
	MODE=fresh RELEASES="$(RELEASE)" ./vagrant/test.sh

UPGRADE_DEBS = $(CURDIR)/vagrant/.cache/run/debs
vagrant-upgrade:
	$(DEPS) vm
	$(DEPS) deb
	./vagrant/box/build.sh $(RELEASE)
	rm -rf $(UPGRADE_DEBS)
	VERSION=0.1.0~vm1 LINTIAN=0 OUT=$(UPGRADE_DEBS) ./packaging/deb/build.sh
	VERSION=0.1.0~vm2 LINTIAN=0 OUT=$(UPGRADE_DEBS) ./packaging/deb/build.sh
	RELEASES="$(RELEASE)" TEST_PKGS=./config VM_CMD="bash vagrant/vm/upgrade.sh $$(ls $(UPGRADE_DEBS)/*vm1*.deb) $$(ls $(UPGRADE_DEBS)/*vm2*.deb)" ./vagrant/test.sh

vagrant-lab: deb
	$(DEPS) vagrant
	./vagrant/box/build.sh $(RELEASE)
	RELEASE=$(RELEASE) ./vagrant/lab.sh

vagrant-clean:
	./vagrant/clean.sh

clean:
	rm -rf bin
