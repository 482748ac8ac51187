#!/usr/bin/env bash
# stress-exact.sh — the exact-count tests, RUNS times in a row (default 20),
# beside a CPU-bound process (stress-ng --cpu STRESS_CPUS, default 1), as
# `make stress-exact` does. Prints PASS or FAIL per run and package with its
# duration, and a summary; exits non-zero if any run failed. Root (the
# tests build network namespace labs). Not part of `make test`.
#
# The exact-count tests are the ones that count every frame, sample,
# notification or datagram: sampling, pools, rings, monitor ports,
# counters, drop notifications, applications, floods, faults, scale
# (test/e2e/README.md, "Exact counts under load"). A burst may overflow a
# worker's ring on a loaded machine; these tests must then account for
# every lost sample exactly, not fail.
#
# Knobs: RUNS (20), STRESS_CPUS (1), KEEP_LOGS=1 keeps every run's log
# (failed runs' logs are always kept), OUT (log directory, default a new
# bin/stress-exact.TIMESTAMP).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

runs=${RUNS:-20}
cpus=${STRESS_CPUS:-1}
out=${OUT:-$root/bin/stress-exact.$(date -u +%Y%m%dT%H%M%SZ)}

die() { echo "stress-exact: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (network namespaces, BPF)"
command -v stress-ng >/dev/null || die "stress-ng missing: run scripts/install-deps.sh"
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "RUNS=$runs: want a positive integer"

# Package (directory) -> the tests of it that count exactly (-run regexp).
# Every test that counts frames, samples, notifications or datagrams
# exactly (or within a binomial's 4 standard deviations, which a silent
# loss would break); the packages' other tests (exit, idle CPU, port
# selection, configuration, SNMP, feature probes, unit tests without a
# lab) count nothing a CPU-bound neighbour could take away.
pkgs=(dataplane dataplane/reader dataplane/drops dataplane/afxdp source bench/daemon bench/baselines test/e2e)
declare -A tests=(
	[dataplane]='^(TestPoolExact|TestSamplingStatistics|TestRingBatchesInOrderUnderLoad|TestRingFullDropsCounted|TestRingReadNoAlloc|TestAttachAndSampleFields|TestTCSampleFields|TestHookAuto|TestLargeIfIndex|TestUpdatePortMode|TestForwardingUntouched|TestMonitorAFXDP|TestMonitorDeliversIntact|TestMonitorNothingLostSilently|TestMonitorRate16|TestSource.*)$'
	[dataplane/reader]='^(TestSource.*|TestSocketDrops)$'
	[dataplane/drops]='^(TestDrop.*|TestConsumedReason)$'
	[dataplane/afxdp]='^(TestReceive|TestDropAccounting)$'
	[source]='.'
	[bench/daemon]='.'
	[bench/baselines]='.'
	[test/e2e]='^(TestSampling|TestCounters|TestTwoCollectors|TestDrops|TestFaultCollectorUnreachable|TestFaultSIGKILLUnderLoad|TestFaultPorts|TestDaemonMonitorPort|TestPortSlotsExhausted|TestLeastPrivilege|TestReload|TestHotplug|TestHsflowdConf|TestHsflowdJSONExample|TestHsflowdRTMetrics|TestApplications|TestScalePorts|TestSoak|TestFloodEveryPort)$'
)

mkdir -p "$out/bin"
stress=""
cleanup() {
	if [ -n "$stress" ]; then
		kill -TERM "$stress" 2>/dev/null || true
		wait "$stress" 2>/dev/null || true
	fi
	rm -rf "$out/bin"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Test binaries built once (each run is then go test -count=1's equivalent),
# each in its module (bench/ is a module of its own).
for p in "${pkgs[@]}"; do
	if [[ "$p" == bench/* ]]; then
		(cd bench && go test -c -o "$out/bin/${p//\//_}.test" "./${p#bench/}")
	else
		go test -c -o "$out/bin/${p//\//_}.test" "./$p"
	fi
done

stress-ng --cpu "$cpus" --quiet &
stress=$!
sleep 1
kill -0 "$stress" 2>/dev/null || die "stress-ng --cpu $cpus did not start"
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); stress-ng --cpu $cpus (PID $stress); $runs runs; logs in $out"

t0=$SECONDS
passed=0
for ((i = 1; i <= runs; i++)); do
	ok=1
	line="run $i/$runs:"
	for p in "${pkgs[@]}"; do
		log="$out/run$i-${p//\//_}.log"
		s=$SECONDS
		# From the package's directory, as go test runs it (relative paths
		# to test/lab/lab.sh and testdata).
		if (cd "$root/$p" && "$out/bin/${p//\//_}.test" -test.count=1 -test.timeout 20m -test.v -test.run "${tests[$p]}") >"$log" 2>&1; then
			line+=" $p PASS ($((SECONDS - s)) s)"
			[ "${KEEP_LOGS:-0}" = 1 ] || rm -f "$log"
		else
			ok=0
			line+=" $p FAIL ($((SECONDS - s)) s: $(grep -E -- '^\s*--- FAIL' "$log" | sed -E 's/^\s*--- FAIL: ([^ ]+).*/\1/' | tr '\n' ' ')log $log)"
		fi
	done
	if ((ok)); then
		passed=$((passed + 1))
		echo "PASS $line"
	else
		echo "FAIL $line"
	fi
done
kill -0 "$stress" 2>/dev/null || die "stress-ng ended before the runs did"
echo "# $passed of $runs runs passed in $((SECONDS - t0)) s beside stress-ng --cpu $cpus; load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
((passed == runs))
