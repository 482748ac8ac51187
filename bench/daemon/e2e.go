package main

// The e2e subcommand: samples per second end to end on real
// frames. bench/gen's generator (an XDP program run by BPF_PROG_RUN in
// live-frames mode, redirecting into host 1's veth) sends frames that the
// switch port p1 receives through its NAPI poll; the daemon binary samples
// p1 on the hook under test (XDP or TC ingress) and sends flow samples to a
// counting collector in the collector namespace. Nothing of the daemon is
// in this process: its CPU is its own, the generator's thread is measured
// apart, and the collector's thread too.
//
// Per trial (one hook, one sampling rate, one round): the daemon starts,
// the generator sends for warm-up + window, stops, the daemon drains, and
// the trial's totals are checked: the generator's count of frames sent =
// p1 rx_packets = the sampler's sample_pool; kernel samples = ring drops +
// samples the agent read; read = encoded + agent drops; encoded - unsent =
// samples at the collector + those lost in its socket (RcvbufErrors).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sflowswitchd/sflowswitchd/bench/gen"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// e2eOpts are the e2e subcommand's flags.
type e2eOpts struct {
	bin            string
	hooks          []string
	rates          []uint32
	rounds         int
	window, warmup time.Duration
	genRounds      int
	sizes          []int
	flows          int
	frame          string
	genRate        float64
	genCPU         int
	napi           string
	perfDir        string
	perfFreq       int
	daemonArgs     []string
	dir            string // -out: results.json and the PNG plots
	out            io.Writer
	args           []string
}

// e2eStdout receives e2e's report (a test reads it).
var e2eStdout io.Writer = os.Stdout

func parseE2E(args []string) (e2eOpts, error) {
	fs := flag.NewFlagSet("e2e", flag.ContinueOnError)
	o := e2eOpts{out: e2eStdout, args: args}
	var hooks, rates, sizes, genRate, daemonArgs string
	fs.StringVar(&o.bin, "bin", "bin/sflowswitchd", "daemon binary")
	fs.StringVar(&hooks, "hooks", "tc,xdp", "daemon hooks (-hook) to measure")
	fs.StringVar(&rates, "sampling", "1,10", "sampling rates N (1-in-N)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each runs every hook and rate once, order rotated")
	fs.DurationVar(&o.window, "window", 5*time.Second, "measurement window per trial")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "generator running before the window")
	fs.IntVar(&o.genRounds, "gen-rounds", 3, "windows of the generator alone (no daemon) before the trials")
	fs.StringVar(&sizes, "sizes", "imix", "frame lengths without FCS, cycled (imix = "+fmt.Sprint(gen.IMIX)+")")
	fs.IntVar(&o.flows, "flows", 1000, "flows (UDP source ports), cycled")
	fs.StringVar(&o.frame, "frame", "forward", "forward: host 1 -> host 2 through the bridge; local: to host 1's own MAC, so the bridge drops each frame on p1 after the sampler")
	fs.StringVar(&genRate, "rate", "max", "generator rate in frames/s (250k, 1.5M, ...; max = as fast as its thread can)")
	fs.IntVar(&o.genCPU, "gen-cpu", numCPU()-1, "CPU the generator's thread is pinned to (-1: none)")
	fs.StringVar(&o.napi, "napi", "softirq", "p1's NAPI poll: softirq (run where it is scheduled: on the generator's CPU, at the end of each of its batches) or threaded (a kernel thread of its own)")
	fs.StringVar(&o.perfDir, "perf", "", "record `dir`/e2e-HOOK-N.data with perf record -a -g during the first round's window of each trial, and its report")
	fs.IntVar(&o.perfFreq, "perf-freq", 1999, "perf sampling frequency (Hz per CPU)")
	fs.StringVar(&o.dir, "out", "", "directory for results.json and the PNG plots (e2e-samples.png, e2e-cpu.png, e2e-loss.png; none: stdout only)")
	fs.StringVar(&daemonArgs, "daemon-args", "", "extra daemon arguments, space-separated (e.g. \"-ring-bytes 33554432\")")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.daemonArgs = strings.Fields(daemonArgs)
	for _, h := range strings.Split(hooks, ",") {
		if h != "tc" && h != "xdp" && h != "auto" {
			return o, fmt.Errorf("bad hook %q", h)
		}
		o.hooks = append(o.hooks, h)
	}
	for _, r := range strings.Split(rates, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(r), 10, 32)
		if err != nil || v == 0 {
			return o, fmt.Errorf("bad sampling rate %q", r)
		}
		o.rates = append(o.rates, uint32(v))
	}
	var err error
	if o.sizes, err = parseSizes(sizes); err != nil {
		return o, err
	}
	if o.genRate, err = gen.ParseRate(genRate); err != nil {
		return o, err
	}
	if o.frame != "forward" && o.frame != "local" {
		return o, fmt.Errorf("bad -frame %q", o.frame)
	}
	if o.napi != "softirq" && o.napi != "threaded" {
		return o, fmt.Errorf("bad -napi %q", o.napi)
	}
	if o.rounds < 1 || o.genRounds < 0 {
		return o, errors.New("rounds >= 1, gen-rounds >= 0")
	}
	return o, nil
}

// parseSizes parses "imix" or a comma-separated list of frame lengths.
func parseSizes(s string) ([]int, error) {
	if s == "imix" {
		return gen.IMIX, nil
	}
	var v []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("bad frame length %q", f)
		}
		v = append(v, n)
	}
	return v, nil
}

// e2eBench is the lab, the generator and the collector shared by all trials.
type e2eBench struct {
	o       e2eOpts
	ctx     context.Context
	lab     *lab
	dir     string
	bin     string
	g       *gen.Generator
	sink    *sink
	sc      *scraper
	napiPID []int // threaded NAPI: p1's kernel threads
}

// genSender is a running Send of a generator.
type genSender struct {
	cancel context.CancelFunc
	done   chan error
}

// startSend runs g.Send(ctx, n, rate) in the background.
func startSend(ctx context.Context, g *gen.Generator, n uint64, rate float64) *genSender {
	gctx, cancel := context.WithCancel(ctx)
	s := &genSender{cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- g.Send(gctx, n, rate) }()
	return s
}

func (e *e2eBench) startGen(ctx context.Context, n uint64) *genSender {
	return startSend(ctx, e.g, n, e.o.genRate)
}

// stop ends the Send and returns its error.
func (s *genSender) stop() error {
	s.cancel()
	return <-s.done
}

func runE2E(ctx context.Context, args []string) error {
	o, err := parseE2E(args)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("e2e must run as root")
	}
	bin, err := daemonBinary(o.bin)
	if err != nil {
		return err
	}
	repo, err := repoRoot()
	if err != nil {
		return err
	}
	e := &e2eBench{o: o, ctx: ctx, bin: bin}
	if e.dir, err = os.MkdirTemp("", "bench-e2e-"); err != nil {
		return err
	}
	defer os.RemoveAll(e.dir)
	if e.lab, err = newLab(repo, 2); err != nil {
		return err
	}
	defer func() {
		if derr := e.lab.down(); derr != nil {
			fmt.Fprintln(os.Stderr, "e2e:", derr)
		}
	}()
	if err := e.setup(); err != nil {
		return err
	}
	defer e.close()
	return e.run()
}

func (e *e2eBench) setup() error {
	l := e.lab
	if err := gen.EnableNAPI(l.sw(), "p1"); err != nil {
		return err
	}
	if e.o.napi == "threaded" {
		pids, err := gen.ThreadedNAPI(l.sw(), "p1")
		if err != nil {
			return err
		}
		e.napiPID = pids
	}
	dst := netlab.HostMAC(2)
	if e.o.frame == "local" {
		dst = netlab.HostMAC(1)
	} else if err := announce(l.host(2), 2, 1); err != nil {
		return err
	}
	var err error
	e.g, err = gen.New(gen.Config{
		Namespace: l.host(1), Device: "eth0",
		SrcMAC: netlab.HostMAC(1), DstMAC: dst, Src: netlab.HostAddr(1), Dst: netlab.HostAddr(2), DstPort: 7000,
		Flows: e.o.flows, Sizes: e.o.sizes, CPU: e.o.genCPU,
	})
	if err != nil {
		return err
	}
	if e.sink, err = startSink(l.col(), collectorAddr+":6343"); err != nil {
		return err
	}
	e.sc = newScraper(l.sw(), metricsAddr)
	return nil
}

func (e *e2eBench) close() {
	if e.sink != nil {
		e.sink.close()
	}
	if e.g != nil {
		if err := e.g.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
		}
	}
}

// announce sends one frame from host s to host d, so that the bridge
// learns host s's MAC and forwards the generator's frames to it as known
// unicast (not flooded).
func announce(ns string, s, d int) error {
	frame := netlab.UDPFrame(netlab.HostMAC(s), netlab.HostMAC(d),
		netip.AddrPortFrom(netlab.HostAddr(s), 7000), netip.AddrPortFrom(netlab.HostAddr(d), 7000), make([]byte, 18))
	return inNetns(ns, func() error {
		ifc, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		defer syscall.Close(fd)
		if err := syscall.Sendto(fd, frame, 0, &syscall.SockaddrLinklayer{Ifindex: ifc.Index}); err != nil {
			return fmt.Errorf("announcing host %d: %w", s, err)
		}
		return nil
	})
}

// cpuTimes is the machine's CPU time by kind (/proc/stat, clock ticks),
// all CPUs and the generator's CPU.
type cpuTimes struct {
	all, genCPU [8]uint64 // user nice system idle iowait irq softirq steal
}

func readCPUTimes(genCPU int) (cpuTimes, error) {
	var t cpuTimes
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return t, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		var dst *[8]uint64
		switch {
		case f[0] == "cpu":
			dst = &t.all
		case f[0] == "cpu"+strconv.Itoa(genCPU):
			dst = &t.genCPU
		default:
			continue
		}
		for i := range dst {
			dst[i], _ = strconv.ParseUint(f[i+1], 10, 64)
		}
	}
	return t, nil
}

// share returns the fraction of the ticks between a and b spent in kind k
// (6 = softirq, 3 = idle), in % of one CPU for one CPU and in % of the
// machine for all.
func share(a, b [8]uint64, k int) float64 {
	var tot uint64
	for i := range a {
		tot += b[i] - a[i]
	}
	if tot == 0 {
		return 0
	}
	return 100 * float64(b[k]-a[k]) / float64(tot)
}

// e2eSnap is what is read at the edges of a window.
type e2eSnap struct {
	at                  time.Time
	gen                 gen.Counters
	genCPU, daemonCPU   time.Duration
	sinkCPU, napiCPU    time.Duration
	cpu                 cpuTimes
	p1Rx, p1RxDrop      uint64
	p2Tx                uint64
	m                   metrics // nil: no daemon
	sinkFlows, sinkDgrm uint64
	rcvbuf              uint64
}

func (e *e2eBench) snap(daemonPID int) (e2eSnap, error) {
	var s e2eSnap
	var err error
	s.at = time.Now()
	if s.gen, err = e.g.Counters(); err != nil {
		return s, err
	}
	if s.genCPU, err = e.g.CPU(); err != nil {
		return s, err
	}
	if daemonPID != 0 {
		if s.daemonCPU, err = schedCPU(daemonPID); err != nil {
			return s, err
		}
	}
	if s.sinkCPU, err = threadSched(int(e.sink.tid.Load())); err != nil {
		return s, err
	}
	for _, p := range e.napiPID {
		d, _, err := procSchedRun(p)
		if err != nil {
			return s, err
		}
		s.napiCPU += d
	}
	if s.cpu, err = readCPUTimes(e.o.genCPU); err != nil {
		return s, err
	}
	p1, err := linkStats(e.lab.sw(), "p1")
	if err != nil {
		return s, err
	}
	p2, err := linkStats(e.lab.sw(), "p2")
	if err != nil {
		return s, err
	}
	s.p1Rx, s.p1RxDrop, s.p2Tx = p1.RxPackets, p1.RxDropped, p2.TxPackets
	if daemonPID != 0 {
		if s.m, err = e.sc.scrape(); err != nil {
			return s, err
		}
	}
	s.sinkFlows, s.sinkDgrm = e.sink.flowSamples.Load(), e.sink.datagrams.Load()
	if s.rcvbuf, err = udpRcvbufErrors(e.lab.col()); err != nil {
		return s, err
	}
	return s, nil
}

// threadSched returns the run time of thread tid of this process
// (schedstat, nanoseconds).
func threadSched(tid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 0, fmt.Errorf("schedstat of thread %d: empty", tid)
	}
	v, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("schedstat of thread %d: %w", tid, err)
	}
	return time.Duration(v), nil
}

// e2eWindow is one window's figures.
type e2eWindow struct {
	Hook  string `json:"hook"` // "" for the generator alone
	Rate  uint32 `json:"rate"`
	Round int    `json:"round"`
	Load  string `json:"load"`
	// Generator: frames made, accepted by the veth, refused (p1's ring
	// full) per second; its thread's CPU (% of one core, including the
	// softirq work run on it); p1 received and p2 forwarded per second.
	GenRuns, GenSent, GenRefused float64
	GenCPU                       float64
	GenCPUSoftirq                float64 // softirq share of the generator's CPU (ticks), % of one core
	NAPICPU                      float64 // threaded NAPI: p1's thread, % of one core
	P1Rx, P2Tx                   float64
	// Samples per second: selected by the kernel, lost to a full ring,
	// read by the agent, dropped by the agent, encoded, at the collector.
	// Sub-sampled: kernel samples the agent leaves out on purpose (the
	// kernel samples at the power of two below N, the agent thins to N).
	Kernel, RingDrops, Read, Subsampled, AgentDrops, Encoded, Delivered float64
	CollectorDrops                                                      float64 // datagrams (RcvbufErrors)
	DaemonCPU, SinkCPU                                                  float64 // % of one core
	SoftirqAll, IdleAll                                                 float64 // % of the machine (all CPUs)
	// Over the whole trial (daemon start to drain, exact): the fractions
	// of the samples meant for the collector lost in the ring, in the
	// agent and in all.
	TrialRingLoss, TrialAgentLoss, TrialLoss float64
}

// loss is the fraction of the kernel samples meant for the collector (not
// sub-sampled away) that did not reach it.
func (w e2eWindow) loss() float64 {
	if w.Kernel-w.Subsampled <= 0 {
		return 0
	}
	return 1 - w.Delivered/(w.Kernel-w.Subsampled)
}

// usPerSample is the daemon's CPU per delivered sample, in µs.
func (w e2eWindow) usPerSample() float64 {
	if w.Delivered == 0 {
		return 0
	}
	return w.DaemonCPU / 100 / w.Delivered * 1e6
}

func diffE2E(a, b e2eSnap) e2eWindow {
	sec := b.at.Sub(a.at).Seconds()
	ps := func(x, y uint64) float64 { return float64(y-x) / sec }
	pct := func(x, y time.Duration) float64 { return 100 * (y - x).Seconds() / sec }
	w := e2eWindow{
		GenRuns: ps(a.gen.Runs, b.gen.Runs), GenSent: ps(a.gen.Sent, b.gen.Sent), GenRefused: ps(a.gen.Dropped, b.gen.Dropped),
		GenCPU: pct(a.genCPU, b.genCPU), NAPICPU: pct(a.napiCPU, b.napiCPU),
		GenCPUSoftirq: share(a.cpu.genCPU, b.cpu.genCPU, 6),
		P1Rx:          ps(a.p1Rx, b.p1Rx), P2Tx: ps(a.p2Tx, b.p2Tx),
		Delivered:      ps(a.sinkFlows, b.sinkFlows),
		CollectorDrops: float64(b.rcvbuf - a.rcvbuf),
		DaemonCPU:      pct(a.daemonCPU, b.daemonCPU), SinkCPU: pct(a.sinkCPU, b.sinkCPU),
		SoftirqAll: share(a.cpu.all, b.cpu.all, 6), IdleAll: share(a.cpu.all, b.cpu.all, 3),
	}
	if a.m != nil && b.m != nil {
		d := func(name string) float64 { return (b.m.sum(name) - a.m.sum(name)) / sec }
		w.Kernel = d("sflowswitchd_port_kernel_samples_total")
		w.RingDrops = d("sflowswitchd_port_kernel_drops_total")
		w.Read = d("sflowswitchd_kernel_samples_total")
		w.Subsampled = d("sflowswitchd_subsampled_away_total")
		w.AgentDrops = d("sflowswitchd_samples_dropped_total")
		w.Encoded = d("sflowswitchd_flow_samples_total")
	}
	return w
}

func (e *e2eBench) run() error {
	o := e.o
	w := o.out
	rate := "max"
	if o.genRate > 0 {
		rate = fmt.Sprintf("%.0f frames/s", o.genRate)
	}
	start := time.Now().UTC()
	fmt.Fprintf(w, "# e2e: samples/s end to end on generator frames (bench/daemon e2e %s)\n\n", strings.Join(o.args, " "))
	fmt.Fprintf(w, "- date %s, kernel %s, %d CPUs, load %s, lab %s\n", time.Now().UTC().Format(time.RFC3339), kernelRelease(), numCPU(), loadAvg(), e.lab.prefix)
	fmt.Fprintf(w, "- generator: bench/gen in %s -> eth0 -> p1, frames %v (without FCS, cycled), %d flows, %s, rate %s, thread pinned to CPU %d; p1 NAPI %s\n",
		e.lab.host(1), o.sizes, o.flows, o.frame, rate, o.genCPU, o.napi)
	fmt.Fprintf(w, "- daemon: %s -ports p1 -sampling N -hook H -drops off -polling 0%s (collector %s:6343, counting sink)\n\n",
		filepath.Base(e.bin), strings.Join(append([]string{""}, o.daemonArgs...), " "), collectorAddr)

	var alone []e2eWindow
	for r := 1; r <= o.genRounds; r++ {
		win, err := e.aloneWindow(r)
		if err != nil {
			return fmt.Errorf("generator alone: %w", err)
		}
		alone = append(alone, win)
	}
	if len(alone) > 0 {
		e.printAlone(alone)
	}

	type conf struct {
		hook string
		rate uint32
	}
	var confs []conf
	for _, h := range o.hooks {
		for _, r := range o.rates {
			confs = append(confs, conf{h, r})
		}
	}
	res := map[conf][]e2eWindow{}
	var balances []string
	for round := 1; round <= o.rounds; round++ {
		for i := range confs {
			c := confs[(i+round-1)%len(confs)]
			win, bal, err := e.trial(c.hook, c.rate, round)
			if err != nil {
				return fmt.Errorf("hook %s 1-in-%d round %d: %w", c.hook, c.rate, round, err)
			}
			res[c] = append(res[c], win)
			balances = append(balances, bal)
			fmt.Fprintf(os.Stderr, "e2e: round %d hook %s 1-in-%d: sent %.0f/s delivered %.0f/s loss %.4f (trial %.5f) gen %.0f%% daemon %.0f%% load %s\n",
				round, c.hook, c.rate, win.GenSent, win.Delivered, win.loss(), win.TrialLoss, win.GenCPU, win.DaemonCPU, win.Load)
		}
	}

	fmt.Fprintf(w, "## e2e: end to end, medians [min–max] over %d rounds of %v\n\n", o.rounds, o.window)
	fmt.Fprintf(w, "| hook | 1-in-N | frames/s sent | samples/s delivered | loss | ring loss | agent loss | generator CPU %% | daemon CPU %% | daemon µs per sample | collector CPU %% | machine idle %% |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range confs {
		ws := res[c]
		col := func(f func(e2eWindow) float64) string { return medRange(ws, f) }
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.hook, c.rate,
			col(func(x e2eWindow) float64 { return x.GenSent }),
			col(func(x e2eWindow) float64 { return x.Delivered }),
			col(func(x e2eWindow) float64 { return x.TrialLoss }),
			col(func(x e2eWindow) float64 { return x.TrialRingLoss }),
			col(func(x e2eWindow) float64 { return x.TrialAgentLoss }),
			col(func(x e2eWindow) float64 { return x.GenCPU }),
			col(func(x e2eWindow) float64 { return x.DaemonCPU }),
			col(func(x e2eWindow) float64 { return x.usPerSample() }),
			col(func(x e2eWindow) float64 { return x.SinkCPU }),
			col(func(x e2eWindow) float64 { return x.IdleAll }))
	}
	fmt.Fprintf(w, "\nRates and CPU over the window. Losses over the whole trial (the daemon's start to its drain, exact counts): loss = 1 − delivered / (kernel samples − sub-sampled away) (at 1-in-10 the kernel samples 1 in 8, the agent keeps 8 in 10); ring loss = samples the sampler could not put in a full ring / kernel samples; agent loss = samples the agent dropped (sflowswitchd_samples_dropped_total) or sent into the collector's full socket / samples meant for the collector; daemon µs per sample = daemon CPU / delivered samples. Generator CPU includes the softirq work the kernel runs on its thread (p1's NAPI poll, the hook, the bridge) when p1's NAPI is not threaded.\n\n")

	fmt.Fprintf(w, "## e2e per round\n\n")
	fmt.Fprintf(w, "| hook 1-in-N | frames/s sent | frames/s refused by the veth | p1 rx/s | kernel samples/s | ring drops/s | agent drops/s | samples/s delivered | trial loss | generator CPU %% | of it softirq %% | NAPI thread CPU %% | daemon CPU %% | daemon µs per sample | collector CPU %% | softirq %% of machine | load |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range confs {
		ws := res[c]
		l := func(f func(e2eWindow) float64, format string) string { return roundList(ws, f, format) }
		var loads []string
		for _, x := range ws {
			loads = append(loads, x.Load)
		}
		fmt.Fprintf(w, "| %s 1-in-%d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.hook, c.rate,
			l(func(x e2eWindow) float64 { return x.GenSent }, "%.0f"),
			l(func(x e2eWindow) float64 { return x.GenRefused }, "%.0f"),
			l(func(x e2eWindow) float64 { return x.P1Rx }, "%.0f"),
			l(func(x e2eWindow) float64 { return x.Kernel }, "%.0f"),
			l(func(x e2eWindow) float64 { return x.RingDrops }, "%.0f"),
			l(func(x e2eWindow) float64 { return x.AgentDrops }, "%.0f"),
			l(func(x e2eWindow) float64 { return x.Delivered }, "%.0f"),
			l(func(x e2eWindow) float64 { return x.TrialLoss }, "%.5f"),
			l(func(x e2eWindow) float64 { return x.GenCPU }, "%.1f"),
			l(func(x e2eWindow) float64 { return x.GenCPUSoftirq }, "%.1f"),
			l(func(x e2eWindow) float64 { return x.NAPICPU }, "%.1f"),
			l(func(x e2eWindow) float64 { return x.DaemonCPU }, "%.1f"),
			l(func(x e2eWindow) float64 { return x.usPerSample() }, "%.3f"),
			l(func(x e2eWindow) float64 { return x.SinkCPU }, "%.1f"),
			l(func(x e2eWindow) float64 { return x.SoftirqAll }, "%.1f"),
			strings.Join(loads, "; "))
	}
	fmt.Fprintf(w, "\n## e2e accounting per trial (from the daemon's start to its drain)\n\n")
	for _, b := range balances {
		fmt.Fprintln(w, "- "+b)
	}
	fmt.Fprintln(w)
	if o.dir == "" {
		return nil
	}
	r := e2eResults{Args: o.args, Start: start, End: time.Now().UTC(), Alone: alone}
	for _, c := range confs {
		r.Trials = append(r.Trials, res[c]...)
	}
	return r.write(o.dir)
}

func frac(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// medRange formats the median and min–max of f over ws.
func medRange(ws []e2eWindow, f func(e2eWindow) float64) string {
	v := make([]float64, len(ws))
	for i, x := range ws {
		v[i] = f(x)
	}
	lo, hi := minMax(v)
	m := median(v)
	format := "%.0f"
	switch {
	case hi < 1:
		format = "%.4f"
	case hi < 100:
		format = "%.2f"
	}
	return fmt.Sprintf(format+" ["+format+"–"+format+"]", m, lo, hi)
}

// roundList formats f over ws as a per-round list ("1, 2, 3"), which
// `daemon agree` reads.
func roundList(ws []e2eWindow, f func(e2eWindow) float64, format string) string {
	s := make([]string, len(ws))
	for i, x := range ws {
		s[i] = fmt.Sprintf(format, f(x))
	}
	return strings.Join(s, ", ")
}

// aloneWindow measures the generator with no daemon: p1 has no program.
func (e *e2eBench) aloneWindow(round int) (e2eWindow, error) {
	s := e.startGen(e.ctx, 0)
	err := sleepCtx(e.ctx, e.o.warmup)
	var a, b e2eSnap
	if err == nil {
		a, err = e.snap(0)
	}
	if err == nil {
		err = sleepCtx(e.ctx, e.o.window)
	}
	if err == nil {
		b, err = e.snap(0)
	}
	if serr := s.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return e2eWindow{}, err
	}
	win := diffE2E(a, b)
	win.Round, win.Load = round, loadAvg()
	return win, nil
}

func (e *e2eBench) printAlone(ws []e2eWindow) {
	w := e.o.out
	fmt.Fprintf(w, "## e2e: the generator alone (no daemon, no program on p1), %d windows of %v\n\n", len(ws), e.o.window)
	fmt.Fprintf(w, "| figure | median [min–max] | per round |\n|---|---|---|\n")
	for _, r := range []struct {
		name string
		f    func(e2eWindow) float64
		form string
	}{
		{"frames/s made (program runs)", func(x e2eWindow) float64 { return x.GenRuns }, "%.0f"},
		{"frames/s sent (accepted by the veth)", func(x e2eWindow) float64 { return x.GenSent }, "%.0f"},
		{"frames/s refused by the veth (p1's ring full)", func(x e2eWindow) float64 { return x.GenRefused }, "%.0f"},
		{"p1 rx frames/s", func(x e2eWindow) float64 { return x.P1Rx }, "%.0f"},
		{"p2 tx frames/s (forwarded)", func(x e2eWindow) float64 { return x.P2Tx }, "%.0f"},
		{"generator thread CPU % of one core", func(x e2eWindow) float64 { return x.GenCPU }, "%.1f"},
		{"of it softirq on the generator's CPU %", func(x e2eWindow) float64 { return x.GenCPUSoftirq }, "%.1f"},
		{"p1 NAPI thread CPU %", func(x e2eWindow) float64 { return x.NAPICPU }, "%.1f"},
		{"frames sent per second of generator CPU", func(x e2eWindow) float64 { return frac(x.GenSent, x.GenCPU/100) }, "%.0f"},
		{"machine idle %", func(x e2eWindow) float64 { return x.IdleAll }, "%.1f"},
	} {
		fmt.Fprintf(w, "| %s | %s | %s |\n", r.name, medRange(ws, r.f), roundList(ws, r.f, r.form))
	}
	var loads []string
	for _, x := range ws {
		loads = append(loads, x.Load)
	}
	fmt.Fprintf(w, "\nLoad average after each window: %s.\n\n", strings.Join(loads, "; "))
}

// trial runs one hook and rate: daemon up, generator for warm-up + window,
// generator stopped, drain, accounting. It returns the window's figures
// and the accounting line; an accounting that does not balance is an
// error.
func (e *e2eBench) trial(hook string, rate uint32, round int) (e2eWindow, string, error) {
	state := filepath.Join(e.dir, fmt.Sprintf("state-%s-%d-%d", hook, rate, round))
	if err := os.MkdirAll(state, 0o700); err != nil {
		return e2eWindow{}, "", err
	}
	logf, err := os.Create(filepath.Join(e.dir, fmt.Sprintf("daemon-%s-%d-%d.log", hook, rate, round)))
	if err != nil {
		return e2eWindow{}, "", err
	}
	defer logf.Close()
	args := append([]string{"-collector", collectorAddr + ":6343",
		"-sampling", fmt.Sprint(rate), "-polling", "0", "-ports", "p1", "-metrics", metricsAddr,
		"-log-level", "warn", "-hook", hook, "-drops", "off", "-agentx", "off", "-state-dir", state}, e.o.daemonArgs...)
	cmd := command(e.ctx, e.lab.sw(), e.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return e2eWindow{}, "", fmt.Errorf("starting daemon: %w", err)
	}
	defer stopProc(cmd)
	if err := waitPorts(e.ctx, e.sc, 1, rate); err != nil {
		b, _ := os.ReadFile(logf.Name())
		return e2eWindow{}, "", fmt.Errorf("daemon not sampling: %w; log:\n%s", err, b)
	}
	pid := cmd.Process.Pid
	start, err := e.snap(pid)
	if err != nil {
		return e2eWindow{}, "", err
	}
	s := e.startGen(e.ctx, 0)
	err = sleepCtx(e.ctx, e.o.warmup)
	var a, b e2eSnap
	var perfDone chan error
	if err == nil {
		a, err = e.snap(pid)
	}
	if err == nil && e.o.perfDir != "" && round == 1 {
		perfDone = e.startPerf(hook, rate, e.o.window)
	}
	if err == nil {
		err = sleepCtx(e.ctx, e.o.window)
	}
	if err == nil {
		b, err = e.snap(pid)
	}
	if serr := s.stop(); err == nil {
		err = serr
	}
	if perfDone != nil {
		if perr := <-perfDone; err == nil {
			err = perr
		}
	}
	if err != nil {
		return e2eWindow{}, "", err
	}
	win := diffE2E(a, b)
	win.Hook, win.Rate, win.Round, win.Load = hook, rate, round, loadAvg()
	end, err := e.drained(pid)
	if err != nil {
		return win, "", err
	}
	bal, tot, err := balance(hook, rate, round, start, end)
	if meant := float64(tot.kernel - tot.subsampled); meant > 0 {
		win.TrialRingLoss = float64(tot.ring) / float64(tot.kernel)
		win.TrialAgentLoss = float64(tot.agentDrops) / meant
		win.TrialLoss = 1 - float64(tot.delivered)/meant
	}
	return win, bal, err
}

// e2eTotals are a trial's counts from the daemon's start to its drain.
type e2eTotals struct {
	kernel, ring, subsampled, agentDrops, delivered uint64
}

// drained waits until the daemon has read, encoded and sent everything
// (its counters and the collector's stay unchanged for 2.5 s, longer than
// the one-second flush tick) and returns the last snapshot.
func (e *e2eBench) drained(pid int) (e2eSnap, error) {
	deadline := time.Now().Add(20 * time.Second)
	var last e2eSnap
	stable := time.Now()
	key := func(s e2eSnap) [6]float64 {
		return [6]float64{s.m.sum("sflowswitchd_port_kernel_samples_total"), s.m.sum("sflowswitchd_kernel_samples_total"),
			s.m.sum("sflowswitchd_flow_samples_total"), float64(s.sinkFlows), float64(s.rcvbuf), float64(s.p1Rx)}
	}
	for first := true; ; first = false {
		s, err := e.snap(pid)
		if err != nil {
			return s, err
		}
		if first || key(s) != key(last) {
			last, stable = s, time.Now()
		}
		if time.Since(stable) > 2500*time.Millisecond || time.Now().After(deadline) {
			return last, nil
		}
		if err := sleepCtx(e.ctx, 200*time.Millisecond); err != nil {
			return s, err
		}
	}
}

// balance checks a trial's totals from the daemon's start (a) to its
// drain (b) and returns them as one line.
func balance(hook string, rate uint32, round int, a, b e2eSnap) (string, e2eTotals, error) {
	d := func(name string) uint64 { return uint64(b.m.sum(name) - a.m.sum(name)) }
	sent := b.gen.Sent - a.gen.Sent
	refused := b.gen.Dropped - a.gen.Dropped
	rx := b.p1Rx - a.p1Rx
	rxDrop := b.p1RxDrop - a.p1RxDrop
	pool := d("sflowswitchd_port_sample_pool_total")
	kernel := d("sflowswitchd_port_kernel_samples_total")
	ring := d("sflowswitchd_port_kernel_drops_total")
	read := d("sflowswitchd_kernel_samples_total")
	encoded := d("sflowswitchd_flow_samples_total")
	subsampled := d("sflowswitchd_subsampled_away_total")
	dropped := d("sflowswitchd_samples_dropped_total")
	unsent := uint64(b.m.sumWhere("sflowswitchd_samples_dropped_total", `reason="send_error"`) -
		a.m.sumWhere("sflowswitchd_samples_dropped_total", `reason="send_error"`))
	delivered := b.sinkFlows - a.sinkFlows
	rcvbuf := b.rcvbuf - a.rcvbuf
	line := fmt.Sprintf("%s 1-in-%d round %d: generator sent %d (refused %d) = p1 rx_packets %d (rx_dropped %d) = sample_pool %d; kernel samples %d = ring drops %d + read %d; read = encoded %d + sub-sampled %d + agent drops before encoding %d; encoded − unsent (send errors) %d = delivered %d + lost in the collector's socket (RcvbufErrors %d datagrams)",
		hook, rate, round, sent, refused, rx, rxDrop, pool, kernel, ring, read, encoded, subsampled, dropped-unsent, encoded-unsent, delivered, rcvbuf)
	var bad []string
	if sent != rx || refused != rxDrop {
		bad = append(bad, "generator count != p1 counters")
	}
	if pool != rx {
		bad = append(bad, "sample_pool != p1 rx_packets")
	}
	if kernel != ring+read {
		bad = append(bad, "kernel samples != ring drops + read")
	}
	// Every sample read is encoded, sub-sampled away or dropped with a
	// reason; unsent ones (send_error) were encoded first.
	if read != encoded+subsampled+dropped-unsent {
		bad = append(bad, "read != encoded + sub-sampled + agent drops")
	}
	if encoded-unsent < delivered || (encoded-unsent != delivered && rcvbuf == 0) {
		bad = append(bad, "encoded − unsent != delivered with no collector loss")
	}
	if rate == 1 && kernel != pool {
		bad = append(bad, "at 1-in-1 kernel samples != sample_pool")
	}
	// Agent drops: before encoding (too large, unknown port), unsent
	// (send errors), and lost in the collector's socket.
	tot := e2eTotals{kernel: kernel, ring: ring, subsampled: subsampled, agentDrops: dropped + (encoded - unsent - delivered), delivered: delivered}
	if len(bad) > 0 {
		return line, tot, fmt.Errorf("accounting does not balance (%s): %s", strings.Join(bad, "; "), line)
	}
	return line + ": balanced", tot, nil
}

// startPerf records the whole machine (perf record -a -g) for d and
// writes the report next to the recording while the daemon binary still
// exists (perf resolves its symbols from it).
func (e *e2eBench) startPerf(hook string, rate uint32, d time.Duration) chan error {
	done := make(chan error, 1)
	base := filepath.Join(e.o.perfDir, fmt.Sprintf("e2e-%s-%d", hook, rate))
	go func() {
		if err := os.MkdirAll(e.o.perfDir, 0o755); err != nil {
			done <- err
			return
		}
		rec := exec.CommandContext(e.ctx, "perf", "record", "-a", "-g", "-F", fmt.Sprint(e.o.perfFreq), "-o", base+".data",
			"--", "sleep", fmt.Sprintf("%.3f", d.Seconds()))
		if out, err := rec.CombinedOutput(); err != nil {
			done <- fmt.Errorf("perf record: %w: %s", err, out)
			return
		}
		var errs []error
		for _, r := range []struct {
			suffix string
			args   []string
		}{
			{".comm.txt", []string{"--sort", "comm", "-g", "none"}},
			{".sym.txt", []string{"--sort", "comm,dso,sym", "-g", "none", "--percent-limit", "0.3"}},
		} {
			args := append([]string{"report", "-i", base + ".data", "--stdio", "--no-children"}, r.args...)
			out, err := exec.CommandContext(e.ctx, "perf", args...).Output()
			if err == nil {
				err = os.WriteFile(base+r.suffix, out, 0o644)
			}
			errs = append(errs, err)
		}
		done <- errors.Join(errs...)
	}()
	return done
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}
