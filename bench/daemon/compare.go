package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/bench/gen"
	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// The techniques compared (bench/README.md, "Forwarding next to the other techniques").
const (
	techNone = "no program"
	techPass = "do-nothing XDP"
	techPcap = "packet socket + cBPF (pcap)"
	techTC   = "TCX eBPF + ring (hsflowd epcap)"
	techSFSD = "sflowswitchd"           // default hook (auto: TC ingress on veth)
	techSFSX = "sflowswitchd -hook xdp" // the XDP sampler on veth
)

var (
	allTechs     = []string{techNone, techPass, techPcap, techTC, techSFSD, techSFSX}
	samplerTechs = []string{techPcap, techTC, techSFSD, techSFSX}
)

// compareOpts are the compare subcommand's flags.
type compareOpts struct {
	bin, pcapBin, tcBin string
	rates               []uint32
	rounds              int
	window, warmup      time.Duration
	statsWindow         time.Duration
	drops               string
	idle                time.Duration
	poolFrames          int
	poolRate            uint32
	poolRounds          int
	out                 string
	// traffic is the frame source: trafgen, or gen (bench/gen) with its
	// rate (0: as fast as its thread can), frame lengths, flows and CPU.
	traffic  string
	genRate  float64
	genSizes []int
	genFlows int
	genCPU   int
}

// trial is one measurement window of one technique at one rate.
type trial struct {
	Tech  string  `json:"tech"`
	Rate  uint32  `json:"rate"` // 0: no sampling (no program, do-nothing XDP)
	Round int     `json:"round"`
	InPPS float64 `json:"in_pps"` // frames received on p1
	// FwdPPS is frames forwarded out of p2 per second.
	FwdPPS float64 `json:"fwd_pps"`
	// CPUPct is the sampling process's CPU (utime+stime) in % of one core.
	CPUPct float64 `json:"cpu_pct"`
	// NsPerPkt is the program's run time per run from bpf_stats (-1: n/a).
	NsPerPkt float64 `json:"ns_per_pkt"`
	// SamplesPS is flow samples of p1 received by the collector per second.
	SamplesPS float64 `json:"samples_ps"`
	// KnownLost is what the technique itself reports lost in the window
	// (-1: it has no such count).
	KnownLost float64 `json:"known_lost"`
	// CollectorDrops is datagrams the collector's socket dropped (UDP
	// RcvbufErrors of its namespace): losses of the lab, not the technique.
	CollectorDrops float64 `json:"collector_drops"`
	// With -traffic gen: frames per second the generator sent (the veth
	// accepted) and refused (p1's ring full), and its thread's CPU in % of
	// one core (with the softirq work the kernel ran on it: p1's NAPI
	// poll, the hook, the bridge, host 2's receive).
	GenPPS     float64 `json:"gen_pps,omitempty"`
	GenRefused float64 `json:"gen_refused_pps,omitempty"`
	GenCPU     float64 `json:"gen_cpu_pct,omitempty"`
}

// expected is the samples per second the technique should deliver.
func (t trial) expected() float64 {
	if t.Rate == 0 {
		return 0
	}
	return t.InPPS / float64(t.Rate)
}

// lossFrac is the fraction of expected samples that did not reach the
// collector (negative values are sampling noise above the mean).
func (t trial) lossFrac() float64 {
	if e := t.expected(); e > 0 {
		return 1 - t.SamplesPS/e
	}
	return 0
}

// cpuPerMpkt is CPU milliseconds of the sampling process per million
// forwarded packets.
func (t trial) cpuPerMpkt() float64 {
	if t.FwdPPS <= 0 {
		return 0
	}
	return t.CPUPct / 100 * 1000 / (t.FwdPPS / 1e6)
}

// techIdle is one technique's CPU with its port sampled and no traffic.
type techIdle struct {
	Tech   string  `json:"tech"`
	CPUPct float64 `json:"cpu_pct"`
}

// poolResult is one technique's sample_pool after exactly-counted traffic.
type poolResult struct {
	Tech     string  `json:"tech"`
	Frames   uint64  `json:"frames"` // p1 rx_packets over the trial
	LastPool uint32  `json:"last_pool"`
	ErrPct   float64 `json:"err_pct"`
	Samples  uint64  `json:"samples"`
}

// results is everything one compare run measured.
type results struct {
	Start time.Time `json:"start"`
	Load  []string  `json:"load"`
	Opts  string    `json:"opts"`
	Drops string    `json:"drops"` // sflowswitchd's -drops
	// Traffic describes the frame source ("" in older results: trafgen).
	Traffic string       `json:"traffic,omitempty"`
	Trials  []trial      `json:"trials"`
	Idle    []techIdle   `json:"idle"`
	Pools   []poolResult `json:"pools"`
}

func parseCompare(args []string) (compareOpts, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	var o compareOpts
	var rates string
	fs.StringVar(&o.bin, "bin", "bin/sflowswitchd", "daemon binary")
	fs.StringVar(&o.pcapBin, "pcap", "", "pcapsample binary (go build ./bench/baselines/pcapsample)")
	fs.StringVar(&o.tcBin, "tc", "", "tcsample binary (go build ./bench/baselines/tcsample)")
	fs.StringVar(&rates, "sampling", "10,100,1000,1", "sampling rates N (1-in-N)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; every round runs each technique once per rate, order rotated")
	fs.DurationVar(&o.window, "window", 2*time.Second, "measurement window per trial (samples are counted at the collector over the window shifted by up to 1.3 s)")
	fs.DurationVar(&o.warmup, "warmup", 700*time.Millisecond, "wait after a technique is ready before measuring")
	fs.StringVar(&o.drops, "drops", "off", "sflowswitchd's dropped-packet notifications (-drops on|off): off compares the sampling techniques alone (the lab's sink drops every frame, and the drop watcher is a tracepoint program run for every drop in the kernel; its cost is measured by bench/drops)")
	fs.DurationVar(&o.statsWindow, "stats-window", time.Second, "window after each trial with BPF run-time statistics on, for the kernel ns per packet (off in the main window)")
	fs.DurationVar(&o.idle, "idle", 5*time.Second, "idle CPU window per sampling technique (no traffic)")
	fs.IntVar(&o.poolFrames, "pool-frames", 100000, "frames sent per sample_pool accuracy trial")
	fs.IntVar(&o.poolRounds, "pool-rounds", 2, "sample_pool accuracy trials per technique")
	var poolRate uint
	fs.UintVar(&poolRate, "pool-rate", 100, "sampling rate of the sample_pool trials")
	fs.StringVar(&o.out, "out", "", "directory for results.md, results.json and the PNG plots (none: stdout only)")
	var genRate, genSizes string
	fs.StringVar(&o.traffic, "traffic", "trafgen", "frame source: trafgen (64-byte UDP from a packet socket in host 1, at trafgen's maximum rate) or gen (bench/gen: an XDP program run in live-frames mode, redirecting into host 1's veth; p1 gets GRO on, so that its veth receives through NAPI)")
	fs.StringVar(&genRate, "gen-rate", "max", "-traffic gen: frames/s (250k, 1.5M, ...; max = as fast as the generator's thread can, with p1's receive path run on that thread)")
	fs.StringVar(&genSizes, "gen-sizes", "60", "-traffic gen: frame lengths without FCS, cycled (imix = "+fmt.Sprint(gen.IMIX)+")")
	fs.IntVar(&o.genFlows, "gen-flows", 1000, "-traffic gen: flows (UDP source ports), cycled")
	fs.IntVar(&o.genCPU, "gen-cpu", numCPU()-1, "-traffic gen: CPU the generator's thread is pinned to (-1: none)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.traffic != "trafgen" && o.traffic != "gen" {
		return o, fmt.Errorf("bad -traffic %q", o.traffic)
	}
	var err error
	if o.genRate, err = gen.ParseRate(genRate); err != nil {
		return o, err
	}
	if o.genSizes, err = parseSizes(genSizes); err != nil {
		return o, err
	}
	o.poolRate = uint32(poolRate)
	for _, r := range strings.Split(rates, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(r), 10, 32)
		if err != nil || v == 0 {
			return o, fmt.Errorf("bad sampling rate %q", r)
		}
		o.rates = append(o.rates, uint32(v))
	}
	if o.pcapBin == "" || o.tcBin == "" {
		return o, errors.New("-pcap and -tc binaries are required")
	}
	if o.rounds < 1 || o.poolRounds < 0 || o.poolRate == 0 {
		return o, errors.New("rounds >= 1, pool-rounds >= 0, pool-rate >= 1")
	}
	return o, nil
}

// comparer holds the lab and what every trial shares.
type comparer struct {
	o       compareOpts
	lab     *lab
	dir     string
	sink    *poolSink
	pass    *ebpf.Program
	p1      int
	sc      *scraper
	ctx     context.Context
	traffic *exec.Cmd
	colXDP  link.Link // xdp_pass on the collector's eth0
	// -traffic gen: the generator and its Send running for the rate phase.
	g       *gen.Generator
	sending *genSender
}

// runCompare is the compare subcommand: techniques side by side on the
// same lab (h1 -> p1 -> bridge -> p2 -> h2, 64-byte UDP at trafgen's
// maximum rate), alternating within each round.
func runCompare(ctx context.Context, args []string) error {
	o, err := parseCompare(args)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("compare must run as root")
	}
	if on, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled"); err == nil && strings.TrimSpace(string(on)) != "0" {
		return errors.New("kernel.bpf_stats_enabled is on: every BPF technique's forwarding would include the statistics' clock reads; set it to 0")
	}
	repo, err := repoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	l, err := newLab(repo, 2)
	if err != nil {
		return err
	}
	defer func() {
		if derr := l.down(); derr != nil {
			fmt.Fprintln(os.Stderr, "compare:", derr)
		}
	}()
	c := &comparer{o: o, lab: l, dir: dir, ctx: ctx, sc: newScraper(l.sw(), metricsAddr)}
	if err := c.setup(); err != nil {
		return err
	}
	defer c.close()

	res := &results{Start: time.Now().UTC(), Opts: strings.Join(args, " "), Drops: o.drops, Traffic: c.trafficDesc()}
	res.Load = append(res.Load, loadAvg())
	if err := c.idlePhase(res); err != nil {
		return fmt.Errorf("idle phase: %w", err)
	}
	if err := c.poolPhase(res); err != nil {
		return fmt.Errorf("sample_pool phase: %w", err)
	}
	if err := c.ratePhase(res); err != nil {
		return fmt.Errorf("forwarding phase: %w", err)
	}
	res.Load = append(res.Load, loadAvg())
	md := res.markdown()
	fmt.Print(md)
	if o.out == "" {
		return nil
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "results.md"), []byte(md), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "results.json"), js, 0o644); err != nil {
		return err
	}
	return res.plots(o.out)
}

func (c *comparer) setup() error {
	idx, err := linkIndexIn(c.lab.sw(), "p1")
	if err != nil {
		return err
	}
	c.p1 = idx
	spec, err := bpf.LoadSampler()
	if err != nil {
		return err
	}
	if c.pass, err = ebpf.NewProgram(spec.Programs[bpf.SamplerProgXdpPass]); err != nil {
		return fmt.Errorf("loading xdp_pass: %w", err)
	}
	if c.sink, err = startPoolSink(c.lab.col(), collectorAddr+":6343"); err != nil {
		return err
	}
	// The collector's eth0 receives through veth's own NAPI ring (an XDP
	// program attached), not the machine-wide per-CPU backlog, which other
	// jobs on this shared machine can overflow: a datagram lost there would
	// be charged to the technique (as the e2e tests do).
	err = inNetns(c.lab.col(), func() error {
		ifc, err := netInterfaceIndex("eth0")
		if err != nil {
			return err
		}
		c.colXDP, err = link.AttachXDP(link.XDPOptions{Program: c.pass, Interface: ifc, Flags: link.XDPDriverMode})
		return err
	})
	if err != nil {
		return fmt.Errorf("xdp_pass on the collector's eth0: %w", err)
	}
	c.sink.ifindex.Store(uint32(idx))
	if c.o.traffic == "gen" {
		return c.setupGen()
	}
	return nil
}

// setupGen loads the generator (host 1 -> host 2 through the bridge) and
// turns on p1's NAPI receive, which a veth needs to accept redirected
// frames.
func (c *comparer) setupGen() error {
	if err := gen.EnableNAPI(c.lab.sw(), "p1"); err != nil {
		return err
	}
	if err := announce(c.lab.host(2), 2, 1); err != nil {
		return err
	}
	var err error
	c.g, err = gen.New(gen.Config{
		Namespace: c.lab.host(1), Device: "eth0",
		SrcMAC: netlab.HostMAC(1), DstMAC: netlab.HostMAC(2), Src: netlab.HostAddr(1), Dst: netlab.HostAddr(2), DstPort: 7000,
		Flows: c.o.genFlows, Sizes: c.o.genSizes, CPU: c.o.genCPU,
	})
	return err
}

// trafficDesc describes the frame source for the report.
func (c *comparer) trafficDesc() string {
	if c.o.traffic != "gen" {
		return "trafgen: 64-byte UDP frames from a packet socket in h1 at trafgen's maximum rate"
	}
	rate := "as fast as its thread can (p1's NAPI poll, the hook and the bridge run on that thread, in softirq at the end of each batch)"
	if c.o.genRate > 0 {
		rate = fmt.Sprintf("paced at %.0f frames/s", c.o.genRate)
	}
	return fmt.Sprintf("bench/gen: frames of %v bytes without FCS (cycled), %d flows, from an XDP program run by BPF_PROG_RUN in live-frames mode in h1, redirected into h1's veth, received by p1 through NAPI (GRO on), %s, thread pinned to CPU %d",
		c.o.genSizes, c.o.genFlows, rate, c.o.genCPU)
}

func (c *comparer) close() {
	if c.sending != nil {
		if err := c.sending.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "compare: generator:", err)
		}
	}
	if c.g != nil {
		if err := c.g.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
		}
	}
	if c.traffic != nil {
		stopProc(c.traffic)
	}
	if c.sink != nil {
		c.sink.close()
	}
	if c.colXDP != nil {
		c.colXDP.Close()
	}
	if c.pass != nil {
		c.pass.Close()
	}
}

// running is a technique attached to p1.
type running struct {
	tech  string
	pid   int                     // sampling process (0: none)
	progs []*ebpf.Program         // programs whose bpf_stats count per packet
	stop  func() (int64, error)   // detaches; returns the technique's own loss count (-1: none)
	lost  func() (float64, error) // technique-reported losses so far (nil: only at stop)
}

// start attaches technique tech at 1-in-rate to p1 and waits until it
// samples.
func (c *comparer) start(tech string, rate uint32) (*running, error) {
	r := &running{tech: tech, stop: func() (int64, error) { return -1, nil }}
	switch tech {
	case techNone:
		return r, nil
	case techPass:
		var l link.Link
		err := inNetns(c.lab.sw(), func() error {
			var err error
			l, err = link.AttachXDP(link.XDPOptions{Program: c.pass, Interface: c.p1, Flags: link.XDPDriverMode})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("attaching xdp_pass: %w", err)
		}
		r.progs = []*ebpf.Program{c.pass}
		r.stop = func() (int64, error) { return -1, l.Close() }
		return r, nil
	case techPcap, techTC:
		bin := c.o.pcapBin
		if tech == techTC {
			bin = c.o.tcBin
		}
		return c.startBaseline(r, bin, rate)
	case techSFSD:
		return c.startDaemon(r, rate, "auto")
	case techSFSX:
		return c.startDaemon(r, rate, "xdp")
	}
	return nil, fmt.Errorf("unknown technique %q", tech)
}

func (c *comparer) startBaseline(r *running, bin string, rate uint32) (*running, error) {
	cmd := command(c.ctx, c.lab.sw(), bin, "-dev", "p1", "-rate", fmt.Sprint(rate),
		"-collector", collectorAddr+":6343")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	lines := bufio.NewScanner(out)
	ready := make(chan bool, 1)
	go func() { ready <- lines.Scan() && lines.Text() == "ready" }()
	select {
	case ok := <-ready:
		if !ok {
			stopProc(cmd)
			return nil, fmt.Errorf("%s did not start: %s", bin, stderr.String())
		}
	case <-time.After(15 * time.Second):
		stopProc(cmd)
		return nil, fmt.Errorf("%s not ready after 15 s", bin)
	}
	r.pid = cmd.Process.Pid
	if r.tech == techTC {
		progs, err := tcxPrograms(c.lab.sw(), c.p1)
		if err != nil {
			stopProc(cmd)
			return nil, err
		}
		r.progs = progs
	}
	r.stop = func() (int64, error) {
		for _, p := range r.progs {
			p.Close()
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return -1, err
		}
		var res struct {
			KnownDrops uint64 `json:"known_drops"`
		}
		var jerr error
		if lines.Scan() {
			jerr = json.Unmarshal(lines.Bytes(), &res)
		} else {
			jerr = fmt.Errorf("%s printed no result: %s", bin, stderr.String())
		}
		_, _ = io.Copy(io.Discard, out)
		werr := cmd.Wait()
		if r.tech == techTC {
			return -1, errors.Join(jerr, werr) // the technique cannot know
		}
		return int64(res.KnownDrops), errors.Join(jerr, werr)
	}
	return r, nil
}

func (c *comparer) startDaemon(r *running, rate uint32, hook string) (*running, error) {
	logf, err := os.Create(filepath.Join(c.dir, fmt.Sprintf("daemon-%s-%d.log", hook, rate)))
	if err != nil {
		return nil, err
	}
	cmd := command(c.ctx, c.lab.sw(), c.o.bin, "-collector", collectorAddr+":6343",
		"-sampling", fmt.Sprint(rate), "-polling", "0", "-ports", "p1",
		"-metrics", metricsAddr, "-log-level", "warn", "-hook", hook, "-drops", c.o.drops)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting daemon: %w", err)
	}
	if err := waitPorts(c.ctx, c.sc, 1, rate); err != nil {
		stopProc(cmd)
		logf.Close()
		b, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("daemon not sampling: %w; log:\n%s", err, b)
	}
	r.pid = cmd.Process.Pid
	// The port's program, wherever the hook put it: XDP, or TCX ingress
	// (hook auto on veth).
	id, err := xdpProgIDIn(c.lab.sw(), "p1")
	if err == nil && id != 0 {
		var p *ebpf.Program
		if p, err = ebpf.NewProgramFromID(ebpf.ProgramID(id)); err == nil {
			r.progs = []*ebpf.Program{p}
		}
	} else {
		r.progs, err = tcxPrograms(c.lab.sw(), c.p1)
	}
	if err != nil {
		stopProc(cmd)
		logf.Close()
		return nil, err
	}
	r.lost = func() (float64, error) {
		m, err := c.sc.scrape()
		if err != nil {
			return 0, err
		}
		return m.sum("sflowswitchd_port_kernel_drops_total") + m.sum("sflowswitchd_samples_dropped_total"), nil
	}
	r.stop = func() (int64, error) {
		for _, p := range r.progs {
			p.Close()
		}
		stopProc(cmd)
		return -1, logf.Close()
	}
	return r, nil
}

// snapshot is what is read at both edges of a window.
type snapshot struct {
	at      time.Time
	cpu     time.Duration
	in, fwd uint64
	flows   uint64
	lost    float64
	rcvbuf  uint64 // UDP RcvbufErrors of the collector namespace
	gen     gen.Counters
	genCPU  time.Duration
}

func (c *comparer) snap(r *running) (snapshot, error) {
	s := snapshot{at: time.Now()}
	var err error
	if r.pid != 0 {
		if s.cpu, err = schedCPU(r.pid); err != nil {
			return s, err
		}
	}
	p1, err := linkStats(c.lab.sw(), "p1")
	if err != nil {
		return s, err
	}
	p2, err := linkStats(c.lab.sw(), "p2")
	if err != nil {
		return s, err
	}
	s.in, s.fwd = p1.RxPackets, p2.TxPackets
	s.flows = c.sink.flows.Load()
	if s.rcvbuf, err = udpRcvbufErrors(c.lab.col()); err != nil {
		return s, err
	}
	if c.g != nil {
		if s.gen, err = c.g.Counters(); err != nil {
			return s, err
		}
		if s.genCPU, err = c.g.CPU(); err != nil {
			return s, err
		}
	}
	if r.lost != nil {
		if s.lost, err = r.lost(); err != nil {
			return s, err
		}
	}
	return s, nil
}

// deliveryLag is how late a sample may reach the collector: sflowswitchd
// hands samples that wait below the ring's wake-up mark to its workers at
// their one-second tick, when datagrams are flushed anyway (and the
// baselines flush a partial datagram once a second). Samples are counted at
// the collector over the window shifted by this lag, so a window's count
// is not cut off mid-batch.
const deliveryLag = 1300 * time.Millisecond

// measure runs one window on a running technique.
func (c *comparer) measure(r *running, rate uint32, round int) (trial, error) {
	if err := sleepCtx(c.ctx, c.o.warmup); err != nil {
		return trial{}, err
	}
	a, err := c.snap(r)
	if err != nil {
		return trial{}, err
	}
	sampling := r.tech != techNone && r.tech != techPass
	lag := time.Duration(0)
	if sampling {
		lag = min(deliveryLag, c.o.window)
	}
	if err := sleepCtx(c.ctx, lag); err != nil {
		return trial{}, err
	}
	flowsA := c.sink.flows.Load()
	if err := sleepCtx(c.ctx, c.o.window-lag); err != nil {
		return trial{}, err
	}
	b, err := c.snap(r)
	if err != nil {
		return trial{}, err
	}
	if err := sleepCtx(c.ctx, lag); err != nil {
		return trial{}, err
	}
	flowsB := c.sink.flows.Load()
	ns, err := c.nsPerPkt(r)
	if err != nil {
		return trial{}, err
	}
	sec := b.at.Sub(a.at).Seconds()
	t := trial{Tech: r.tech, Rate: rate, Round: round,
		InPPS:          float64(b.in-a.in) / sec,
		FwdPPS:         float64(b.fwd-a.fwd) / sec,
		CPUPct:         100 * (b.cpu - a.cpu).Seconds() / sec,
		NsPerPkt:       ns,
		SamplesPS:      float64(flowsB-flowsA) / sec,
		KnownLost:      -1,
		CollectorDrops: float64(b.rcvbuf - a.rcvbuf),
	}
	if c.g != nil {
		t.GenPPS = float64(b.gen.Sent-a.gen.Sent) / sec
		t.GenRefused = float64(b.gen.Dropped-a.gen.Dropped) / sec
		t.GenCPU = 100 * (b.genCPU - a.genCPU).Seconds() / sec
	}
	if r.lost != nil {
		t.KnownLost = b.lost - a.lost
	}
	return t, nil
}

// idlePhase: each sampling technique at 1-in-1000 on p1 with no traffic.
func (c *comparer) idlePhase(res *results) error {
	for _, tech := range samplerTechs {
		r, err := c.start(tech, 1000)
		if err != nil {
			return err
		}
		err = sleepCtx(c.ctx, time.Second)
		var a, b time.Duration
		if err == nil {
			a, err = schedCPU(r.pid)
		}
		start := time.Now()
		if err == nil {
			err = sleepCtx(c.ctx, c.o.idle)
		}
		if err == nil {
			b, err = schedCPU(r.pid)
		}
		_, serr := r.stop()
		if err = errors.Join(err, serr); err != nil {
			return fmt.Errorf("%s: %w", tech, err)
		}
		res.Idle = append(res.Idle, techIdle{Tech: tech, CPUPct: 100 * (b - a).Seconds() / time.Since(start).Seconds()})
	}
	return nil
}

// poolPhase: exactly poolFrames frames through p1 per trial; the last flow
// sample's pool against the kernel's rx_packets of p1 over the trial.
func (c *comparer) poolPhase(res *results) error {
	conf := filepath.Join(c.dir, "pool.cfg")
	if err := os.WriteFile(conf, []byte(trafgenConf(1, 2)), 0o644); err != nil {
		return err
	}
	for round := 0; round < c.o.poolRounds; round++ {
		for _, tech := range samplerTechs {
			c.sink.reset()
			r, err := c.start(tech, c.o.poolRate)
			if err != nil {
				return err
			}
			pr, err := c.poolTrial(r, conf)
			_, serr := r.stop()
			if err = errors.Join(err, serr); err != nil {
				return fmt.Errorf("%s: %w", tech, err)
			}
			// Baselines flush their last datagram when they stop.
			if err := sleepCtx(c.ctx, 300*time.Millisecond); err != nil {
				return err
			}
			p, ok := c.sink.pool()
			if !ok {
				return fmt.Errorf("%s: no flow sample reached the collector", tech)
			}
			pr.LastPool = p
			pr.ErrPct = 100 * (float64(p) - float64(pr.Frames)) / float64(pr.Frames)
			res.Pools = append(res.Pools, pr)
		}
	}
	return nil
}

func (c *comparer) poolTrial(r *running, conf string) (poolResult, error) {
	pr := poolResult{Tech: r.tech}
	a, err := linkStats(c.lab.sw(), "p1")
	if err != nil {
		return pr, err
	}
	f0 := c.sink.flows.Load()
	if c.g != nil {
		if err := c.g.Send(c.ctx, uint64(c.o.poolFrames), c.o.genRate); err != nil {
			return pr, fmt.Errorf("generator, %d frames: %w", c.o.poolFrames, err)
		}
	} else {
		g := command(c.ctx, c.lab.host(1), "trafgen", "--dev", "eth0", "--conf", conf, "--cpus", "1",
			"--no-sock-mem", "--notouch-irq", "--no-cpu-stats", "--num", fmt.Sprint(c.o.poolFrames))
		if out, err := g.CombinedOutput(); err != nil {
			return pr, fmt.Errorf("trafgen --num %d: %w: %s", c.o.poolFrames, err, out)
		}
	}
	// The daemon sends what it holds within a second.
	if err := sleepCtx(c.ctx, 1500*time.Millisecond); err != nil {
		return pr, err
	}
	b, err := linkStats(c.lab.sw(), "p1")
	if err != nil {
		return pr, err
	}
	pr.Frames = b.RxPackets - a.RxPackets
	pr.Samples = c.sink.flows.Load() - f0
	if pr.Frames == 0 {
		return pr, errors.New("no frame reached p1")
	}
	return pr, nil
}

// ratePhase: trafgen h1 -> h2 at its maximum rate for the whole phase;
// every round runs, per sampling rate, each technique once (order rotated
// round by round), with no program and the do-nothing XDP program as the
// references of that same rate block.
func (c *comparer) ratePhase(res *results) error {
	if c.g != nil {
		c.sending = startSend(c.ctx, c.g, 0, c.o.genRate)
	} else {
		g, err := startTrafgen(c.ctx, c.lab, c.dir, 1, 2)
		if err != nil {
			return err
		}
		c.traffic = g
	}
	if err := sleepCtx(c.ctx, time.Second); err != nil {
		return err
	}
	for round := 0; round < c.o.rounds; round++ {
		for ri, rate := range c.o.rates {
			for i := range allTechs {
				tech := allTechs[(i+round+ri)%len(allTechs)]
				r, err := c.start(tech, rate)
				if err != nil {
					return err
				}
				t, err := c.measure(r, rate, round)
				lost, serr := r.stop()
				if err = errors.Join(err, serr); err != nil {
					return fmt.Errorf("%s 1-in-%d: %w", tech, rate, err)
				}
				if lost >= 0 {
					// Reported at stop for the whole trial: scale to the window.
					t.KnownLost = float64(lost)
				}
				if tech == techNone || tech == techPass {
					t.Rate = 0
					t.Tech = tech + "@" + fmt.Sprint(rate) // reference of this rate block
				}
				res.Trials = append(res.Trials, t)
				fmt.Fprintf(os.Stderr, "compare: round %d 1-in-%d %-32s fwd %8.0f pps cpu %6.2f%% ns/pkt %6.1f samples/s %8.0f lost %.0f gen %.0f pps %.0f%%\n",
					round+1, rate, tech, t.FwdPPS, t.CPUPct, t.NsPerPkt, t.SamplesPS, t.KnownLost, t.GenPPS, t.GenCPU)
			}
		}
		res.Load = append(res.Load, loadAvg())
	}
	return nil
}

// tcxPrograms opens the TCX programs attached to ifindex in ns.
func tcxPrograms(ns string, ifindex int) ([]*ebpf.Program, error) {
	var progs []*ebpf.Program
	err := inNetns(ns, func() error {
		for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress} {
			q, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: at})
			if err != nil {
				return fmt.Errorf("querying TCX programs: %w", err)
			}
			for _, ap := range q.Programs {
				p, err := ebpf.NewProgramFromID(ap.ID)
				if err != nil {
					return err
				}
				progs = append(progs, p)
			}
		}
		return nil
	})
	if err == nil && len(progs) == 0 {
		err = errors.New("no TCX ingress program on p1")
	}
	return progs, err
}

func linkIndexIn(ns, name string) (int, error) {
	var idx int
	err := inNetns(ns, func() error {
		i, err := netInterfaceIndex(name)
		idx = i
		return err
	})
	return idx, err
}

func xdpProgIDIn(ns, name string) (uint32, error) {
	var id uint32
	err := inNetns(ns, func() error {
		var err error
		id, err = xdpProgIDHere(name)
		return err
	})
	return id, err
}

// schedCPU is the time all threads of pid spent on a CPU, in nanoseconds
// (schedstat): /proc/PID/stat's utime+stime tick at 10 ms, too coarse for
// a 2 s window of a process using 1% of a core.
func schedCPU(pid int) (time.Duration, error) {
	d, _, err := procSchedRun(pid)
	return d, err
}

// nsPerPkt is the technique's programs' run time per run, from the
// kernel's BPF statistics over a window of its own after the main one (-1:
// no program). The statistics are on only in that window: they wrap every
// program run in two sched_clock() reads, which on this KVM guest are
// kvm-clock reads costing tens of ns per packet, and would otherwise slow
// the forwarding of every BPF technique in the main window but not of the
// packet socket or of no program.
func (c *comparer) nsPerPkt(r *running) (float64, error) {
	if len(r.progs) == 0 {
		return -1, nil
	}
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return 0, fmt.Errorf("enabling BPF run-time statistics: %w", err)
	}
	defer stats.Close()
	read := func() (time.Duration, uint64, error) {
		var ns time.Duration
		var n uint64
		for _, p := range r.progs {
			st, err := p.Stats()
			if err != nil {
				return 0, 0, err
			}
			ns += st.Runtime
			n += st.RunCount
		}
		return ns, n, nil
	}
	ns0, n0, err := read()
	if err != nil {
		return 0, err
	}
	if err := sleepCtx(c.ctx, c.o.statsWindow); err != nil {
		return 0, err
	}
	ns1, n1, err := read()
	if err != nil {
		return 0, err
	}
	if n1 == n0 {
		return -1, nil
	}
	return float64(ns1-ns0) / float64(n1-n0), nil
}
