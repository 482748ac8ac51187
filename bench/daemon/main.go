// Command daemon runs the sflowswitchd daemon benchmarks
// (bench/README.md). It must run as root: it builds a lab of
// network namespaces with test/lab/lab.sh and removes it at the end, also on
// SIGINT/SIGTERM.
//
//	go run ./bench/daemon cpu  [-bin bin/sflowswitchd] [-sampling 1000,10] [-rounds 5] [-window 10s]
//	    whole-daemon CPU and memory while the lab forwards at trafgen's
//	    maximum rate (4 ports, h1->h2 and h3->h4, 64-byte UDP).
//	go run ./bench/daemon live [-duration 10s] [-rounds 3] [-max-datagram 1400] [-source live|testrun|trafgen] [-cpuprofile F]
//	    samples/s end to end (kernel ring -> agent workers -> UDP datagrams
//	    -> collector) with the XDP sampler at rate 1, in process.
//	go run ./bench/daemon idle [-bin bin/sflowswitchd[,OTHER]] [-rounds 3] [-window 20s]
//	    the daemon sampling 4 ports with no traffic: CPU (utime+stime and
//	    schedstat run time) and context switches per second; several
//	    binaries are alternated round by round.
//	go run ./bench/daemon encode [-duration 5s] [-max-datagram 1400]
//	    the workers alone, fed from memory, sending to a loopback sink:
//	    CPU per flow sample.
//	go run ./bench/daemon compare -pcap BIN -tc BIN [-bin bin/sflowswitchd] [-sampling 10,100,1000,1] [-rounds 3] [-out DIR]
//	    techniques side by side on one lab port: no program, a do-nothing
//	    XDP program, the pcap and TC baselines (bench/baselines) and
//	    sflowswitchd; Markdown table, results.json and PNG plots in DIR.
//	    -traffic gen: on bench/gen's frames instead of trafgen's.
//	go run ./bench/daemon e2e [-bin bin/sflowswitchd] [-hooks tc,xdp] [-sampling 1,10] [-rounds 3] [-rate max] [-perf DIR] [-out DIR]
//	    samples/s end to end on real frames: bench/gen's frames received
//	    by p1, the daemon binary sampling it, a counting collector; the
//	    generator's and the daemon's CPU apart, every trial's accounting
//	    checked (e2e.go).
//	go run ./bench/daemon agree RUN_A RUN_B
//	    do two make bench runs agree within their reported spread?
//	go run ./bench/daemon page [-figures DIR] RUN
//	    the results page (bench/README.md) from one make bench run's
//	    results directory, plots copied into DIR (page.go).
//
// Results are printed as text tables, and with -out written as JSON and
// plots; bench/run.sh keeps them in a results directory and writes
// bench/README.md from it with the page subcommand.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: daemon cpu|live|idle|encode|compare|e2e|agree|page [flags]  (see go doc ./bench/daemon)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "cpu":
		err = runCPU(ctx, os.Args[2:])
	case "live":
		err = runLive(ctx, os.Args[2:])
	case liveInNamespace:
		err = runLiveInSwitch(ctx, os.Args[2:])
	case "idle":
		err = runIdle(ctx, os.Args[2:])
	case "encode":
		err = runEncode(ctx, os.Args[2:])
	case "compare":
		err = runCompare(ctx, os.Args[2:])
	case "e2e":
		err = runE2E(ctx, os.Args[2:])
	case "agree":
		err = runAgree(os.Args[2:])
	case "page":
		err = runPage(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/daemon:", err)
		stop()
		os.Exit(1)
	}
}

func numCPU() int { return runtime.NumCPU() }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
