package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// runIdle is part 4 (idle means asleep): the daemon sampling
// every lab port (1-in-1000, counters polled every 20 s, metrics on) with
// no traffic at all. Each binary of -bin (comma-separated, alternated
// round by round) is started fresh per round, left to settle, then
// measured over one window: utime+stime of /proc/PID/stat (10 ms ticks),
// the run time of its threads from /proc/PID/task/*/schedstat
// (nanoseconds: the precise figure at these levels) and their context
// switches per second.
func runIdle(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("idle", flag.ContinueOnError)
	bins := fs.String("bin", "bin/sflowswitchd", "daemon binaries, comma-separated (alternated per round)")
	rounds := fs.Int("rounds", 3, "rounds (one window per binary each)")
	window := fs.Duration("window", 20*time.Second, "length of each window")
	settle := fs.Duration("settle", 3*time.Second, "time after the ports are sampled before the window")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var paths []string
	for _, b := range strings.Split(*bins, ",") {
		p, err := daemonBinary(strings.TrimSpace(b))
		if err != nil {
			return err
		}
		paths = append(paths, p)
	}
	const nports = 4
	dl, err := newDaemonLab(nports)
	if err != nil {
		return err
	}
	defer dl.close()
	l, dir := dl.l, dl.dir

	fmt.Printf("# idle daemon: lab %s, %d ports sampled 1-in-1000, no traffic, window %v, load %s, %d CPUs\n",
		l.prefix, nports, *window, loadAvg(), numCPU())
	fmt.Printf("%-5s %-40s %9s %11s %9s %8s\n", "round", "binary", "stat_cpu%", "sched_cpu%", "csw/s", "threads")
	results := make([][]float64, len(paths))
	for r := 1; r <= *rounds; r++ {
		for i, bin := range paths {
			w, err := idleWindow(ctx, l, dir, bin, *window, *settle)
			if err != nil {
				return err
			}
			fmt.Printf("%-5d %-40s %9.3f %11.4f %9.1f %8d\n", r, bin, w.statPct, w.schedPct, w.cswPS, w.threads)
			results[i] = append(results[i], w.schedPct)
		}
	}
	for i, bin := range paths {
		v := results[i]
		fmt.Printf("# MEDIAN %s: %.4f%% of a core (schedstat), range %.4f..%.4f\n", bin, median(v), minOf(v), maxOf(v))
	}
	return nil
}

// idleResult is one idle window.
type idleResult struct {
	statPct, schedPct, cswPS float64
	threads                  int
}

func idleWindow(ctx context.Context, l *lab, dir, bin string, window, settle time.Duration) (idleResult, error) {
	var res idleResult
	args := []string{"-collector", collectorAddr + ":6343", "-sampling", "1000", "-polling", "20",
		"-ports", strings.Join(l.ports(), ","), "-metrics", metricsAddr, "-log-level", "warn"}
	logf, err := os.Create(filepath.Join(dir, "daemon-idle.log"))
	if err != nil {
		return res, err
	}
	defer logf.Close()
	d := command(ctx, l.sw(), bin, args...)
	d.Stdout, d.Stderr = logf, logf
	if err := d.Start(); err != nil {
		return res, fmt.Errorf("starting daemon: %w", err)
	}
	defer stopProc(d)
	pid := d.Process.Pid // nsenter execs the daemon: same PID
	sc := newScraper(l.sw(), metricsAddr)
	if err := waitPorts(ctx, sc, l.nports, 1000); err != nil {
		b, _ := os.ReadFile(logf.Name())
		return res, fmt.Errorf("daemon not sampling: %w; log:\n%s", err, b)
	}
	if err := sleepCtx(ctx, settle); err != nil {
		return res, err
	}
	snap := func() (time.Time, time.Duration, time.Duration, uint64, int, error) {
		at := time.Now()
		cpu, err := procCPU(pid)
		if err != nil {
			return at, 0, 0, 0, 0, err
		}
		run, n, err := procSchedRun(pid)
		if err != nil {
			return at, 0, 0, 0, 0, err
		}
		sw, err := procSwitches(pid)
		return at, cpu, run, sw, n, err
	}
	t0, c0, r0, s0, _, err := snap()
	if err != nil {
		return res, err
	}
	if err := sleepCtx(ctx, window); err != nil {
		return res, err
	}
	t1, c1, r1, s1, n, err := snap()
	if err != nil {
		return res, err
	}
	sec := t1.Sub(t0).Seconds()
	res = idleResult{statPct: 100 * (c1 - c0).Seconds() / sec, schedPct: 100 * (r1 - r0).Seconds() / sec,
		cswPS: float64(s1-s0) / sec, threads: n}
	return res, nil
}

// procSchedRun sums the time on CPU of every thread of pid
// (/proc/PID/task/TID/schedstat, first field, ns) and counts the threads.
// A thread that exits takes its time with it; the Go runtime keeps its
// threads.
func procSchedRun(pid int) (time.Duration, int, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, 0, err
	}
	var sum time.Duration
	n := 0
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // exited meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			continue
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("schedstat of %d/%s: %w", pid, t.Name(), err)
		}
		sum += time.Duration(v)
		n++
	}
	return sum, n, nil
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
