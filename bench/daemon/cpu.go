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

// cpuSnapshot is everything read at the edge of a measurement window.
type cpuSnapshot struct {
	at          time.Time
	cpu         time.Duration
	rss, hwm    uint64
	rxIn, txOut uint64 // frames into the switch (p1+p3 rx), forwarded out (p2+p4 tx)
	m           metrics
	sinkDgrams  uint64
	sinkFlows   uint64
	sinkRcvbuf  uint64
	switches    uint64
}

func takeCPUSnapshot(l *lab, pid int, sc *scraper, s *sink, senders, receivers []int) (cpuSnapshot, error) {
	var snap cpuSnapshot
	var err error
	snap.at = time.Now()
	if snap.cpu, err = procCPU(pid); err != nil {
		return snap, err
	}
	if snap.rss, snap.hwm, err = procMem(pid); err != nil {
		return snap, err
	}
	if snap.switches, err = procSwitches(pid); err != nil {
		return snap, err
	}
	for _, i := range senders {
		st, err := linkStats(l.sw(), portName(i))
		if err != nil {
			return snap, err
		}
		snap.rxIn += st.RxPackets
	}
	for _, i := range receivers {
		st, err := linkStats(l.sw(), portName(i))
		if err != nil {
			return snap, err
		}
		snap.txOut += st.TxPackets
	}
	if snap.m, err = sc.scrape(); err != nil {
		return snap, err
	}
	snap.sinkDgrams, snap.sinkFlows = s.datagrams.Load(), s.flowSamples.Load()
	if snap.sinkRcvbuf, err = udpRcvbufErrors(l.col()); err != nil {
		return snap, err
	}
	return snap, nil
}

// cpuWindow is one measurement window's results.
type cpuWindow struct {
	cpuPct                                       float64 // daemon utime+stime, % of one core
	rssKiB, hwmKiB                               uint64
	inPPS, fwdPPS                                float64
	kernelSPS, flowSPS                           float64
	dgramPS, sinkFlowSPS                         float64
	kernelDrops, agentDrops, sendErrs, sinkDrops float64
	switchesPS                                   float64
}

func diffCPU(a, b cpuSnapshot) cpuWindow {
	sec := b.at.Sub(a.at).Seconds()
	d := func(name string) float64 { return b.m.sum(name) - a.m.sum(name) }
	return cpuWindow{
		cpuPct:      100 * (b.cpu - a.cpu).Seconds() / sec,
		rssKiB:      b.rss,
		hwmKiB:      b.hwm,
		inPPS:       float64(b.rxIn-a.rxIn) / sec,
		fwdPPS:      float64(b.txOut-a.txOut) / sec,
		kernelSPS:   d("sflowswitchd_kernel_samples_total") / sec,
		flowSPS:     d("sflowswitchd_flow_samples_total") / sec,
		dgramPS:     d("sflowswitchd_datagrams_sent_total") / sec,
		sinkFlowSPS: float64(b.sinkFlows-a.sinkFlows) / sec,
		kernelDrops: d("sflowswitchd_port_kernel_drops_total"),
		agentDrops:  d("sflowswitchd_samples_dropped_total"),
		sendErrs:    d("sflowswitchd_send_errors_total"),
		sinkDrops:   float64(b.sinkRcvbuf - a.sinkRcvbuf),
		switchesPS:  float64(b.switches-a.switches) / sec,
	}
}

func printWindowHeader() {
	fmt.Printf("%-8s %-6s %7s %8s %8s %10s %10s %9s %9s %8s %9s %7s %7s %7s %7s %7s\n",
		"sampling", "window", "cpu%", "rssKiB", "hwmKiB", "in_pps", "fwd_pps", "ksamp/s", "flows/s", "dgram/s", "sink_fl/s",
		"kdrops", "adrops", "senderr", "sinkdrp", "csw/s")
}

func printWindow(rate, label string, w cpuWindow) {
	fmt.Printf("%-8s %-6s %7.2f %8d %8d %10.0f %10.0f %9.0f %9.0f %8.1f %9.0f %7.0f %7.0f %7.0f %7.0f %7.0f\n",
		rate, label, w.cpuPct, w.rssKiB, w.hwmKiB, w.inPPS, w.fwdPPS, w.kernelSPS, w.flowSPS, w.dgramPS, w.sinkFlowSPS,
		w.kernelDrops, w.agentDrops, w.sendErrs, w.sinkDrops, w.switchesPS)
}

// medianWindow takes the median of every column separately.
func medianWindow(ws []cpuWindow) cpuWindow {
	col := func(f func(cpuWindow) float64) float64 {
		v := make([]float64, len(ws))
		for i, w := range ws {
			v[i] = f(w)
		}
		return median(v)
	}
	return cpuWindow{
		cpuPct:      col(func(w cpuWindow) float64 { return w.cpuPct }),
		rssKiB:      uint64(col(func(w cpuWindow) float64 { return float64(w.rssKiB) })),
		hwmKiB:      uint64(col(func(w cpuWindow) float64 { return float64(w.hwmKiB) })),
		inPPS:       col(func(w cpuWindow) float64 { return w.inPPS }),
		fwdPPS:      col(func(w cpuWindow) float64 { return w.fwdPPS }),
		kernelSPS:   col(func(w cpuWindow) float64 { return w.kernelSPS }),
		flowSPS:     col(func(w cpuWindow) float64 { return w.flowSPS }),
		dgramPS:     col(func(w cpuWindow) float64 { return w.dgramPS }),
		sinkFlowSPS: col(func(w cpuWindow) float64 { return w.sinkFlowSPS }),
		kernelDrops: col(func(w cpuWindow) float64 { return w.kernelDrops }),
		agentDrops:  col(func(w cpuWindow) float64 { return w.agentDrops }),
		sendErrs:    col(func(w cpuWindow) float64 { return w.sendErrs }),
		sinkDrops:   col(func(w cpuWindow) float64 { return w.sinkDrops }),
		switchesPS:  col(func(w cpuWindow) float64 { return w.switchesPS }),
	}
}

// runCPU is part 1: the daemon's CPU and memory while the lab forwards at
// the highest rate trafgen reaches, at each sampling rate.
func runCPU(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cpu", flag.ContinueOnError)
	bin := fs.String("bin", "bin/sflowswitchd", "daemon binary")
	rates := fs.String("sampling", "1000,10", "comma-separated sampling rates to measure")
	rounds := fs.Int("rounds", 5, "measurement windows per sampling rate")
	window := fs.Duration("window", 10*time.Second, "length of each window")
	warmup := fs.Duration("warmup", 3*time.Second, "traffic before the first window")
	workers := fs.Int("workers", 0, "daemon -workers (0: daemon default, one per CPU)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	binPath, err := daemonBinary(*bin)
	if err != nil {
		return err
	}
	const nports = 4
	dl, err := newDaemonLab(nports)
	if err != nil {
		return err
	}
	defer dl.close()
	l, dir, s := dl.l, dl.dir, dl.sink

	fmt.Printf("# daemon CPU/RSS: lab %s, %d ports, trafgen 64-byte UDP at max rate h1->h2 and h3->h4, window %v x %d, load %s, %d CPUs\n",
		l.prefix, nports, *window, *rounds, loadAvg(), numCPU())
	for _, r := range strings.Split(*rates, ",") {
		rate, err := strconv.ParseUint(strings.TrimSpace(r), 10, 32)
		if err != nil || rate == 0 {
			return fmt.Errorf("bad sampling rate %q", r)
		}
		if err := cpuOneRate(ctx, l, s, dir, binPath, uint32(rate), *workers, *rounds, *window, *warmup); err != nil {
			return err
		}
	}
	return nil
}

const metricsAddr = "127.0.0.1:9116"

func cpuOneRate(ctx context.Context, l *lab, s *sink, dir, bin string, rate uint32, workers, rounds int, window, warmup time.Duration) error {
	args := []string{"-collector", collectorAddr + ":6343", "-sampling", fmt.Sprint(rate), "-polling", "20",
		"-ports", strings.Join(l.ports(), ","), "-metrics", metricsAddr, "-log-level", "warn"}
	if workers > 0 {
		args = append(args, "-workers", fmt.Sprint(workers))
	}
	logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("daemon-%d.log", rate)))
	if err != nil {
		return err
	}
	defer logf.Close()
	d := command(ctx, l.sw(), bin, args...)
	d.Stdout, d.Stderr = logf, logf
	if err := d.Start(); err != nil {
		return fmt.Errorf("starting daemon: %w", err)
	}
	defer stopProc(d)
	pid := d.Process.Pid // nsenter execs the daemon: same PID
	sc := newScraper(l.sw(), metricsAddr)
	if err := waitPorts(ctx, sc, l.nports, rate); err != nil {
		b, _ := os.ReadFile(logf.Name())
		return fmt.Errorf("daemon not sampling: %w; log:\n%s", err, b)
	}
	senders, receivers := []int{1, 3}, []int{2, 4}
	label := fmt.Sprintf("1/%d", rate)
	printWindowHeader()

	// Idle: the daemon with its ports sampled and no traffic.
	a, err := takeCPUSnapshot(l, pid, sc, s, senders, receivers)
	if err != nil {
		return err
	}
	if err := sleepCtx(ctx, window); err != nil {
		return err
	}
	b, err := takeCPUSnapshot(l, pid, sc, s, senders, receivers)
	if err != nil {
		return err
	}
	printWindow(label, "idle", diffCPU(a, b))

	for i, src := range senders {
		g, err := startTrafgen(ctx, l, dir, src, receivers[i])
		if err != nil {
			return err
		}
		defer stopProc(g)
	}
	if err := sleepCtx(ctx, warmup); err != nil {
		return err
	}
	var ws []cpuWindow
	a, err = takeCPUSnapshot(l, pid, sc, s, senders, receivers)
	if err != nil {
		return err
	}
	for i := 0; i < rounds; i++ {
		if err := sleepCtx(ctx, window); err != nil {
			return err
		}
		b, err := takeCPUSnapshot(l, pid, sc, s, senders, receivers)
		if err != nil {
			return err
		}
		w := diffCPU(a, b)
		ws = append(ws, w)
		printWindow(label, fmt.Sprintf("r%d", i+1), w)
		a = b
	}
	printWindow(label, "MEDIAN", medianWindow(ws))
	fmt.Printf("# load after 1/%d: %s\n", rate, loadAvg())
	return nil
}

// waitPorts waits until the daemon reports nports sampled ports at rate.
func waitPorts(ctx context.Context, sc *scraper, nports int, rate uint32) error {
	deadline := time.Now().Add(20 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		m, err := sc.scrape()
		if err == nil {
			n := 0
			for _, v := range m["sflowswitchd_port_sampling_rate"] {
				if v == float64(rate) {
					n++
				}
			}
			if n == nports {
				return nil
			}
			last = fmt.Errorf("%d of %d ports sampled at %d", n, nports, rate)
		} else {
			last = err
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return last
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
