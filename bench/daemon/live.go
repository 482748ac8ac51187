package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/portstats"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/source"
)

// liveInNamespace is the hidden subcommand runLive re-executes this
// program with inside the switch namespace: the agent's receiver sockets
// are opened by worker goroutines on any OS thread, so the whole process
// must live in the switch namespace, as the daemon does.
const liveInNamespace = "live-in-switch"

// liveFlags are shared by runLive and runLiveInSwitch.
type liveFlags struct {
	fs          *flag.FlagSet
	prefix      string
	workers     int
	seconds     time.Duration
	rounds      int
	warmup      time.Duration
	maxDatagram int
	headerBytes int
	source      string
	frame       string
	frameLen    int
	ringBytes   int
	batch       int
	rate        uint
	cpuprofile  string
	send        string
}

func newLiveFlags(name string) *liveFlags {
	f := &liveFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	fs := f.fs
	fs.StringVar(&f.prefix, "prefix", "", "lab prefix (set by live for "+liveInNamespace+")")
	fs.IntVar(&f.workers, "workers", runtime.NumCPU(), "agent workers (sub-agents); ports p1, p2 go to workers by ifindex")
	fs.DurationVar(&f.seconds, "duration", 10*time.Second, "length of each measurement round")
	fs.IntVar(&f.rounds, "rounds", 3, "measurement rounds")
	fs.DurationVar(&f.warmup, "warmup", 2*time.Second, "load before the first round")
	fs.IntVar(&f.maxDatagram, "max-datagram", 1400, "receiver max_datagram_size (bytes)")
	fs.IntVar(&f.headerBytes, "header", 128, "sampled header bytes")
	fs.StringVar(&f.source, "source", "live", "frame source: live (BPF_PROG_RUN live frames on p1, p2), testrun (BPF_PROG_TEST_RUN of the ports' sampler, no frame reaches the stack; see testrun.go) or trafgen (h1->h2 and h2->h1 at max rate)")
	fs.StringVar(&f.frame, "frame", "local", "live frames: local (dst MAC = src MAC: the bridge drops the frame on the ingress port) or forward (h1->h2, h2->h1 through the bridge)")
	fs.IntVar(&f.frameLen, "frame-len", 60, "live frame length without FCS (60 = 64-byte frame; the sampled header is min(frame, -header))")
	fs.IntVar(&f.ringBytes, "ring-bytes", dataplane.DefaultRingBytes, "ring buffer bytes per worker")
	fs.IntVar(&f.batch, "batch", 1<<14, "live frames per BPF_PROG_RUN call")
	fs.UintVar(&f.rate, "sampling", 1, "sampling rate (1 = every frame)")
	fs.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of the measurement rounds to `file`")
	fs.StringVar(&f.send, "send", "gso", "datagram sends: "+sendModes)
	return f
}

// args renders the flags for the re-executed child.
func (f *liveFlags) args() []string {
	var a []string
	f.fs.VisitAll(func(fl *flag.Flag) { a = append(a, "-"+fl.Name+"="+fl.Value.String()) })
	return a
}

// liveStdout receives the output of runLive's child (a test reads it).
var liveStdout io.Writer = os.Stdout

// runLive is part 2: it builds a 2-port lab and runs the measurement in a
// child process inside the switch namespace.
func runLive(ctx context.Context, args []string) error {
	f := newLiveFlags("live")
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	repo, err := repoRoot()
	if err != nil {
		return err
	}
	l, err := newLab(repo, 2)
	if err != nil {
		return err
	}
	defer func() {
		if err := l.down(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	f.prefix = l.prefix
	if f.cpuprofile != "" {
		abs, err := filepath.Abs(f.cpuprofile)
		if err != nil {
			return err
		}
		f.cpuprofile = abs
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command("nsenter", append([]string{"--net=" + nsPath(l.sw()), "--", exe, liveInNamespace}, f.args()...)...)
	cmd.SysProcAttr = newSession()
	cmd.Stdout, cmd.Stderr = liveStdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", liveInNamespace, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// SIGTERM lets the child detach XDP and close its sockets.
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			killGroup(cmd.Process.Pid)
			<-done
		}
		return ctx.Err()
	}
}

// liveSnapshot is the state at a round's edge.
type liveSnapshot struct {
	at                 time.Time
	proc, gen, sinkCPU time.Duration
	ports              []portstats.Counters
	workers            []workerCounts
	sinkFlows          uint64
	sinkDgrams         uint64
	sinkRcvbuf         uint64
	genFrames          uint64
}

type workerCounts struct {
	kernel, subsampled, flows, dgrams, sendErrs, unsent, tooLarge, unknown, readErrs uint64
}

func readWorker(s *agent.WorkerStats) workerCounts {
	return workerCounts{
		kernel: s.KernelSamples.Load(), subsampled: s.SubsampledAway.Load(), flows: s.FlowSamples.Load(),
		dgrams: s.Datagrams.Load(), sendErrs: s.SendErrors.Load(), unsent: s.SamplesUnsent.Load(),
		tooLarge: s.TooLarge.Load(), unknown: s.UnknownPort.Load(), readErrs: s.ReadErrors.Load(),
	}
}

// runLiveInSwitch runs in the switch namespace: sampler at rate 1 on p1 and
// p2, agent workers reading the rings, a frame source, a sink in the
// collector namespace.
func runLiveInSwitch(ctx context.Context, args []string) error {
	f := newLiveFlags(liveInNamespace)
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	l := &lab{prefix: f.prefix, nports: 2}
	s, err := startSink(l.col(), collectorAddr+":6343")
	if err != nil {
		return err
	}
	defer s.close()

	// The XDP sampler: -source testrun runs it with BPF_PROG_TEST_RUN.
	dp, err := dataplane.Open(dataplane.Config{Workers: f.workers, RingBytes: f.ringBytes, Hook: dataplane.HookXDP})
	if err != nil {
		return err
	}
	defer func() {
		if err := dp.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing dataplane:", err)
		}
	}()
	// The daemon's own sample path (source, reader.Source).
	opts := agent.Options{Workers: f.workers, Source: source.BPF{DP: dp}}
	if err := setSendMode(&opts, f.send); err != nil {
		return err
	}
	ag := agent.New(opts)
	readers, err := source.BPFReaders(dp, f.workers)
	if err != nil {
		return err
	}
	agentCtx, stopAgent := context.WithCancel(context.Background())
	agentDone := make(chan struct{})
	go func() { ag.Run(agentCtx, readers); close(agentDone) }()
	defer func() { stopAgent(); <-agentDone }()

	ports := []string{"p1", "p2"}
	ifidx := make([]int, len(ports))
	cfg := agent.Config{
		AgentAddress: netip.MustParseAddr("198.19.255.1"),
		Receivers:    []agent.ReceiverConfig{{Index: 1, Address: netip.MustParseAddrPort(collectorAddr + ":6343"), MaxDatagramSize: f.maxDatagram}},
	}
	for i, p := range ports {
		ifc, err := net.InterfaceByName(p)
		if err != nil {
			return fmt.Errorf("port %s: %w", p, err)
		}
		ifidx[i] = ifc.Index
		cfg.Samplers = append(cfg.Samplers, agent.SamplerConfig{IfIndex: uint32(ifc.Index), Instance: 1, Receiver: 1, Rate: uint32(f.rate), HeaderBytes: f.headerBytes})
	}
	if err := ag.Apply(cfg); err != nil {
		return fmt.Errorf("agent config: %w", err)
	}
	for _, idx := range ifidx {
		fmt.Printf("# port ifindex %d -> worker %d, attach %s\n", idx, idx%f.workers, dp.AttachMode(idx))
	}

	var genTID atomic.Int64
	var genFrames atomic.Uint64 // frames BPF_PROG_RUN ran the sampler on
	genCtx, stopGen := context.WithCancel(ctx)
	var genWG sync.WaitGroup
	genErr := make(chan error, 1)
	defer func() { stopGen(); genWG.Wait() }()
	switch f.source {
	case "testrun":
		stop, err := startTestrunSource(genCtx, f, ports, ifidx, &genTID, &genFrames, genErr, &genWG)
		if err != nil {
			return err
		}
		defer stop()
	case "live":
		prog, err := attachedProgram(ports[0])
		if err != nil {
			return err
		}
		defer prog.Close()
		frames := make([][]byte, len(ports))
		for i := range ports {
			src := i + 1
			dst := src // local: the bridge learns src on the ingress port and drops the frame there
			if f.frame == "forward" {
				dst = 3 - src
			}
			frames[i] = netlab.UDPFrame(netlab.HostMAC(src), netlab.HostMAC(dst),
				netip.AddrPortFrom(netlab.HostAddr(src), 40000), netip.AddrPortFrom(netlab.HostAddr(3-src), 7000), make([]byte, max(f.frameLen-42, 0)))
		}
		genWG.Add(1)
		go func() {
			defer genWG.Done()
			// Locked for the thread's CPU time; the ingress ifindex in the
			// context resolves in this thread's (the switch) namespace.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			genTID.Store(int64(syscall.Gettid()))
			if err := liveFrames(genCtx, prog, frames, ifidx, f.batch, &genFrames); err != nil && genCtx.Err() == nil {
				genErr <- err
			}
		}()
	case "trafgen":
		dir, err := os.MkdirTemp("", "bench-daemon-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		for _, sd := range [][2]int{{1, 2}, {2, 1}} {
			g, err := startTrafgen(genCtx, l, dir, sd[0], sd[1])
			if err != nil {
				return err
			}
			defer stopProc(g)
		}
	default:
		return fmt.Errorf("unknown -source %q", f.source)
	}

	snap := func() (liveSnapshot, error) {
		var sn liveSnapshot
		var err error
		sn.at = time.Now()
		sn.genFrames = genFrames.Load()
		if sn.proc, err = procCPU(os.Getpid()); err != nil {
			return sn, err
		}
		if sn.gen, err = threadCPU(genTID.Load()); err != nil {
			return sn, err
		}
		if sn.sinkCPU, err = threadCPU(s.tid.Load()); err != nil {
			return sn, err
		}
		for _, idx := range ifidx {
			c, err := dp.Stats().Ingress(idx)
			if err != nil {
				return sn, err
			}
			sn.ports = append(sn.ports, c)
		}
		for i := 0; i < f.workers; i++ {
			sn.workers = append(sn.workers, readWorker(ag.Stats(i)))
		}
		sn.sinkFlows, sn.sinkDgrams = s.flowSamples.Load(), s.datagrams.Load()
		if sn.sinkRcvbuf, err = udpRcvbufErrors(l.col()); err != nil {
			return sn, err
		}
		return sn, nil
	}

	if err := sleepCtx(ctx, f.warmup); err != nil {
		return err
	}
	if f.cpuprofile != "" {
		pf, err := os.Create(f.cpuprofile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Printf("# live: source=%s frame=%s/%dB sampling=1/%d workers=%d max_datagram=%d header=%d ring=%d send=%s load=%s cpus=%d\n",
		f.source, f.frame, f.frameLen, f.rate, f.workers, f.maxDatagram, f.headerBytes, f.ringBytes, f.send, loadAvg(), numCPU())
	fmt.Printf("%-6s %10s %10s %10s %10s %10s %8s %10s %7s %7s %7s %6s %6s %6s %6s %7s\n",
		"round", "pool/s", "ksamp/s", "ringdrp/s", "wk_ksmp/s", "flows/s", "dgram/s", "sink_fl/s", "senderr", "unsent", "sinkdrp",
		"proc%", "gen%", "sink%", "agent%", "us/smp")
	a, err := snap()
	if err != nil {
		return err
	}
	var flowRates, usPer, lossFracs []float64
	for r := 1; r <= f.rounds; r++ {
		select {
		case err := <-genErr:
			return err
		default:
		}
		if err := sleepCtx(ctx, f.seconds); err != nil {
			return err
		}
		b, err := snap()
		if err != nil {
			return err
		}
		sec := b.at.Sub(a.at).Seconds()
		var pool, ks, drops float64
		for i := range b.ports {
			pool += float64(b.ports[i].Pool - a.ports[i].Pool)
			ks += float64(b.ports[i].Samples - a.ports[i].Samples)
			drops += float64(b.ports[i].Drops - a.ports[i].Drops)
		}
		var w workerCounts
		var perWorker string
		for i := range b.workers {
			x, y := a.workers[i], b.workers[i]
			d := workerCounts{kernel: y.kernel - x.kernel, flows: y.flows - x.flows, dgrams: y.dgrams - x.dgrams,
				sendErrs: y.sendErrs - x.sendErrs, unsent: y.unsent - x.unsent, tooLarge: y.tooLarge - x.tooLarge,
				unknown: y.unknown - x.unknown, readErrs: y.readErrs - x.readErrs, subsampled: y.subsampled - x.subsampled}
			w.kernel += d.kernel
			w.flows += d.flows
			w.dgrams += d.dgrams
			w.sendErrs += d.sendErrs
			w.unsent += d.unsent
			w.tooLarge += d.tooLarge
			w.unknown += d.unknown
			w.readErrs += d.readErrs
			perWorker += fmt.Sprintf(" w%d: %.0f kernel/s %.0f flows/s %.0f dgram/s unsent %d too_large %d unknown_port %d read_err %d;",
				i, float64(d.kernel)/sec, float64(d.flows)/sec, float64(d.dgrams)/sec, d.unsent, d.tooLarge, d.unknown, d.readErrs)
		}
		proc, gen, sk := (b.proc - a.proc).Seconds(), (b.gen - a.gen).Seconds(), (b.sinkCPU - a.sinkCPU).Seconds()
		agentCPU := proc - gen - sk
		us := 0.0
		if w.flows > 0 {
			us = agentCPU / float64(w.flows) * 1e6
		}
		fmt.Printf("%-6d %10.0f %10.0f %10.0f %10.0f %10.0f %8.0f %10.0f %7d %7d %7d %6.1f %6.1f %6.1f %6.1f %7.3f\n",
			r, pool/sec, ks/sec, drops/sec, float64(w.kernel)/sec, float64(w.flows)/sec, float64(w.dgrams)/sec,
			float64(b.sinkFlows-a.sinkFlows)/sec, w.sendErrs, w.unsent, b.sinkRcvbuf-a.sinkRcvbuf,
			100*proc/sec, 100*gen/sec, 100*sk/sec, 100*agentCPU/sec, us)
		fmt.Printf("#  %s\n", perWorker)
		if f.source == "live" {
			// Frames are counted per finished batch: up to one batch
			// (per port) of difference at each edge.
			fmt.Printf("#  generated %d frames (BPF_PROG_RUN repeat count), sample_pool of the ports grew by %.0f\n", b.genFrames-a.genFrames, pool)
		}
		if f.source == "testrun" {
			lossFracs = append(lossFracs, testrunRound(b.genFrames-a.genFrames, ks, drops, float64(b.sinkFlows-a.sinkFlows), sec))
		}
		flowRates = append(flowRates, float64(w.flows)/sec)
		usPer = append(usPer, us)
		a = b
	}
	fmt.Printf("# MEDIAN flows/s %.0f, agent CPU per flow sample %.3f us; load %s\n", median(flowRates), median(usPer), loadAvg())
	if f.source == "testrun" {
		// Stop the generator, let the workers drain the rings and flush,
		// then check that every produced sample is delivered or counted.
		stopGen()
		genWG.Wait()
		return testrunBalance(ctx, f, dp, ag, s, l, ifidx, flowRates, lossFracs)
	}
	return nil
}

// attachedProgram opens the XDP program attached to port (the sampler the
// dataplane attached).
func attachedProgram(port string) (*ebpf.Program, error) {
	lk, err := netlink.LinkByName(port)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", port, err)
	}
	x := lk.Attrs().Xdp
	if x == nil || x.ProgId == 0 {
		return nil, fmt.Errorf("no XDP program on %s", port)
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(x.ProgId))
	if err != nil {
		return nil, fmt.Errorf("XDP program %d of %s: %w", x.ProgId, port, err)
	}
	return prog, nil
}

// liveFrames runs prog with BPF_F_TEST_XDP_LIVE_FRAMES on frames[i]
// "received" on ifindex[i] (struct xdp_md's ingress_ifindex, resolved in
// the calling thread's namespace), alternating the ports batch by batch,
// until ctx ends. XDP_PASS frames continue into the stack of that device
// (here: the bridge), as if they had arrived on it.
func liveFrames(ctx context.Context, prog *ebpf.Program, frames [][]byte, ifindex []int, batch int, count *atomic.Uint64) error {
	for i := 0; ctx.Err() == nil; i++ {
		k := i % len(frames)
		md := [6]uint32{0, uint32(len(frames[k])), 0, uint32(ifindex[k]), 0, 0} // data, data_end, data_meta, ingress_ifindex, rx_queue_index, egress_ifindex
		if _, err := prog.Run(&ebpf.RunOptions{
			Data:    frames[k],
			Context: md[:],
			Repeat:  uint32(batch),
			Flags:   unix.BPF_F_TEST_XDP_LIVE_FRAMES,
		}); err != nil {
			return fmt.Errorf("BPF_PROG_RUN live frames on ifindex %d: %w", ifindex[k], err)
		}
		count.Add(uint64(batch))
	}
	return nil
}
