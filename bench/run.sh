#!/usr/bin/env bash
# Runs the project's benchmarks, writes every raw table and plot under
# bench/results/STAMP/ (not committed) and, from that directory alone, the
# results page bench/README.md with its plots in bench/figures/
# (`bench/daemon page`, page.go). `make bench` calls it as root (the
# dataplane benchmarks attach XDP programs inside network namespaces they
# create). The results directory holds:
#
#   run.txt     the run: command, knobs, date, git commit, machine, and
#               each part's start, end and exit status
#   load.txt    the load average every 10 s during the run
#   go.txt      the Go micro-benchmarks (benchstat-friendly)
#   NAME.txt    each bench/NAME.sh's output (compare, daemon, drops, e2e,
#               egress, ring, scale, xdp)
#   compare/    results.json, results.md and the PNG plots of compare.sh
#   e2e/        results.json and the PNG plots of e2e.sh
#   README.md   the results page made from this directory
#
# A part that fails is recorded in run.txt and on the page; the others
# still run. BENCH_PAGE=0 leaves bench/README.md and bench/figures alone
# (the page is still written to the results directory): for trial runs
# with short settings, such as
#
#   BENCH_PAGE=0 BENCH_COUNT=1 BENCH_TIME=10ms BENCH_PARTS="e2e drops" \
#     E2E_BENCH_ARGS="-rounds 1 -window 1s -warmup 500ms -gen-rounds 1" bench/run.sh
#
# The whole run takes about 30 minutes with the defaults below: short
# benchmark times and fewer rounds than the scripts' own defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "run.sh: must run as root" >&2; exit 1; }
command_line="bench/run.sh${*:+ $*}"
if [ -n "${MAKELEVEL:-}" ]; then
	command_line="make bench ($command_line)"
fi
out=bench/results/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"

count=${BENCH_COUNT:-6}
benchtime=${BENCH_TIME:-100ms}
export BENCH_OUT="$out"
export DAEMON_BENCH_ROUNDS=${DAEMON_BENCH_ROUNDS:-3}
export DAEMON_BENCH_WINDOW=${DAEMON_BENCH_WINDOW:-5s}
export RING_BENCH_ROUNDS=${RING_BENCH_ROUNDS:-1}
export E2E_BENCH_ROUNDS=${E2E_BENCH_ROUNDS:-3}
# The scripts' own defaults, set here so that run.txt records them.
export RING_BENCH_BURSTS=${RING_BENCH_BURSTS:-10}
export DROPS_BENCH_N=${DROPS_BENCH_N:-4}
export ROUNDS=${ROUNDS:-9} N=${N:-2000000} # egress.sh
# Per script, the arguments it is given (word-split).
xdp_args=${XDP_BENCH_ARGS:--rounds 9 -rate-rounds 2 -parts frames,testrun,delivery,tc,profile -profile-trial 5s}
# The side-by-side comparison runs on bench/gen's frames: rates
# trafgen cannot offer on 2 cores. COMPARE_BENCH_ARGS="-traffic trafgen"
# for the packet-socket source.
compare_args=${COMPARE_BENCH_ARGS:--traffic gen}
# Four rates, so that the page's plots show samples/s and CPU per sample
# by rate and hook.
e2e_args=${E2E_BENCH_ARGS:--sampling 1,10,100,1000}
scale_args=${SCALE_BENCH_ARGS:-}
drops_args=${DROPS_BENCH_ARGS:-}
# egress.sh compares the working tree with a base revision.
egress_args=${EGRESS_BENCH_ARGS:-main}
# The parts to run (all by default): go and the names of bench/*.sh.
parts=${BENCH_PARTS:-go compare daemon drops e2e egress ring scale xdp}
page=${BENCH_PAGE:-1}

# The load average every 10 s, for the page's machine line.
(while :; do echo "$(date -u +%FT%TZ) $(cat /proc/loadavg)"; sleep 10; done) >"$out/load.txt" &
loadpid=$!
trap 'kill "$loadpid" 2>/dev/null || true' EXIT

commit=$(git rev-parse HEAD)
dirty=$(git diff --quiet HEAD -- . ':!bench/README.md' ':!bench/figures' && echo no || echo yes)
{
	echo "command: $command_line"
	echo "knobs: BENCH_COUNT=$count BENCH_TIME=$benchtime DAEMON_BENCH_ROUNDS=$DAEMON_BENCH_ROUNDS DAEMON_BENCH_WINDOW=$DAEMON_BENCH_WINDOW RING_BENCH_ROUNDS=$RING_BENCH_ROUNDS RING_BENCH_BURSTS=$RING_BENCH_BURSTS E2E_BENCH_ROUNDS=$E2E_BENCH_ROUNDS DROPS_BENCH_N=$DROPS_BENCH_N ROUNDS=$ROUNDS N=$N XDP_BENCH_ARGS='$xdp_args' COMPARE_BENCH_ARGS='$compare_args' E2E_BENCH_ARGS='$e2e_args' SCALE_BENCH_ARGS='$scale_args' DROPS_BENCH_ARGS='$drops_args' EGRESS_BENCH_ARGS='$egress_args' BENCH_PARTS='$parts'"
	echo "start: $(date -u +%FT%TZ)"
	echo "commit: $commit"
	echo "branch: $(git rev-parse --abbrev-ref HEAD)"
	echo "dirty: $dirty"
	echo "subject: $(git log -1 --format=%s)"
	echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
	echo "cpus: $(nproc)"
	echo "memory: $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
	echo "kernel: $(uname -r)"
	echo "virt: $(systemd-detect-virt 2>/dev/null || echo unknown)"
	echo "go: $(go env GOVERSION)"
	echo "load-start: $(cat /proc/loadavg)"
} >"$out/run.txt"

# part NAME CMD...: runs CMD with its output into $out/NAME.txt and its
# errors into $out/NAME.err (and both to the terminal), records its start, end and exit status in run.txt.
part() {
	local name=$1 rc=0 start
	shift
	start=$(date -u +%FT%TZ)
	echo "== $name -> $out/$name.txt"
	"$@" 2> >(tee "$out/$name.err" >&2) | tee "$out/$name.txt" || rc=$?
	echo "part: $name $start $(date -u +%FT%TZ) $rc" >>"$out/run.txt"
	[ "$rc" = 0 ] || echo "== $name FAILED (exit $rc); the other parts go on" >&2
}

# gobench runs the Go micro-benchmarks; it fails if any package does.
gobench() {
	local rc=0
	go test -run '^$' -bench . -benchmem -count "$count" -benchtime "$benchtime" \
		./sflow/ ./agent/... ./apps/app/ ./apps/httpsflow/ ./apps/apm/ ./dataplane/ ./dataplane/forwarding/ \
		./dataplane/linkstats/ ./source/counters/host/ || rc=1
	# AgentX PDU encode/decode only (the package's other benchmarks go through a real snmpd).
	go test -run '^$' -bench PDU -benchmem -count "$count" -benchtime "$benchtime" ./internal/agentx/ || rc=1
	# The benchmarks' frame generator (bench/gen): frames/s and its
	# thread's CPU per frame, into an XDP drop on the switch port.
	go -C bench test -run '^$' -bench Send -benchtime 2000000x -count "$count" ./gen/ || rc=1
	return "$rc"
}

for name in $parts; do
	if [ "$name" = go ]; then
		echo "== Go micro-benchmarks (count=$count, benchtime=$benchtime)"
		part go gobench
		continue
	fi
	[ -f "bench/$name.sh" ] || { echo "run.sh: no bench/$name.sh" >&2; exit 2; }
	case $name in
	xdp) args=$xdp_args ;;
	compare) args=$compare_args ;;
	e2e) args=$e2e_args ;;
	scale) args=$scale_args ;;
	drops) args=$drops_args ;;
	egress) args=$egress_args ;;
	*) args= ;;
	esac
	# shellcheck disable=SC2086 # word splitting of the argument list is wanted
	part "$name" bash "bench/$name.sh" $args
done
{
	echo "end: $(date -u +%FT%TZ)"
	echo "load-end: $(cat /proc/loadavg)"
} >>"$out/run.txt"
kill "$loadpid" 2>/dev/null || true

# The results page, from the results directory alone: written there with
# its plots in figures/, then (unless BENCH_PAGE=0) copied to
# bench/README.md and bench/figures/, where its links are the same.
go -C bench run ./daemon page -figures "../$out/figures" "../$out" >"$out/README.md"
if [ "$page" = 1 ]; then
	cp "$out/README.md" bench/README.md
	mkdir -p bench/figures
	if compgen -G "$out/figures/*.png" >/dev/null; then
		cp "$out"/figures/*.png bench/figures/
	fi
	echo "results in $out; page: bench/README.md, plots: bench/figures/"
else
	echo "results in $out; page: $out/README.md (BENCH_PAGE=0: bench/README.md left alone)"
fi
