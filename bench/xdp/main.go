// Command xdp benchmarks the XDP sampler's dataplane cost and its sample
// delivery rate in a namespace lab (test/lab/lab.sh), and prints the results as
// Markdown. It must run as root from the repository root (bench/xdp.sh
// does both); figures are recorded in bench/README.md.
//
// Parts (-parts, comma separated):
//
//	frames    real frames: trafgen in host 1 sends 64-byte UDP frames to
//	          host 2 through the switch's bridge as fast as it can. Per
//	          trial one XDP configuration sits on switch port p1; the
//	          frames forwarded per second (rx_packets of host 2's eth0)
//	          and the program's ns/packet from the kernel's BPF run-time
//	          statistics are recorded. Configurations alternate in
//	          rotating order, every round.
//	testrun   the same programs run by BPF_PROG_TEST_RUN with a repeat
//	          count, on a context whose ingress_ifindex is p1 (so the
//	          sampler finds p1's config): the kernel's mean duration per
//	          run, a cross-check of the real-frame figures.
//	delivery  samples per second reaching user space on one core: the
//	          ring buffer path (inline, rate 1) and the AF_XDP path
//	          (monitor, rate 1), sources paced at a ladder of rates plus
//	          an unpaced run ("max"), drops counted.
//	tc        the frames part's stream over TC configurations: a
//	          do-nothing program and the TC sampler (unsampled, 1-in-1024)
//	          attached with a TCX link and with a clsact cls_bpf filter
//	          (dataplane.TCModeClsact, the path of kernels before 6.6),
//	          no program and the XDP sampler, alternating (tc.go). Needs
//	          TCX. Not in the default set.
//	tcprofile the profile part's method on the TC configurations (TCX
//	          and clsact, tc_pass and the sampler at 1-in-1024), counting
//	          clsact's classifier layer (tc_run) apart. Needs TCX and perf;
//	          runs after profile. Not in the default set.
//	profile   the frames part's stream and configurations with BPF
//	          run-time statistics off: perf record samples every CPU
//	          during each trial and the samples in the program (and in
//	          the XDP dispatcher) per frame give its ns/frame without
//	          bpf_stats' two clock reads per run (profile.go). Runs last.
//
// BPF run-time statistics are switched on with BPF_ENABLE_STATS (a file
// descriptor the kernel counts as one user of the stats; they stop when
// the last holder closes it, also when this process dies), so the
// kernel.bpf_stats_enabled sysctl is never left on by a crash.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/bench/gen"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// options are the command-line settings.
type options struct {
	script     string
	prefix     string
	parts      map[string]bool
	rounds     int
	trial      time.Duration
	settle     time.Duration
	repeat     uint
	rates      []float64 // 0 = unpaced
	rateTrial  time.Duration
	rateRounds int
	profTrial  time.Duration
	profFreq   float64
	perf       string
	profKeep   bool
	// source of the frames, tc and profile parts' stream: trafgen, or gen
	// (bench/gen) with its frame lengths.
	source   string
	genSizes []int
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "xdp bench:", err)
		os.Exit(1)
	}
}

func parseFlags() (options, error) {
	var o options
	var parts, rates string
	flag.StringVar(&o.script, "lab", "test/lab/lab.sh", "path of lab.sh")
	flag.StringVar(&o.prefix, "prefix", fmt.Sprintf("xb%06x", os.Getpid()&0xffffff), "lab prefix (<= 8 chars)")
	flag.StringVar(&parts, "parts", "frames,testrun,delivery", "parts to run")
	flag.IntVar(&o.rounds, "rounds", 15, "rounds of the frames and testrun parts")
	flag.DurationVar(&o.trial, "trial", time.Second, "measurement window per frames trial")
	flag.DurationVar(&o.settle, "settle", 500*time.Millisecond, "wait after attaching before measuring")
	flag.UintVar(&o.repeat, "repeat", 1<<20, "BPF_PROG_TEST_RUN repeat count per testrun trial")
	flag.StringVar(&rates, "rates", "50k,100k,200k,300k,500k,750k,1M,2M,max", "paced source rates of the delivery part (frames/s; max = unpaced)")
	flag.DurationVar(&o.rateTrial, "rate-trial", 2*time.Second, "duration per delivery trial")
	flag.IntVar(&o.rateRounds, "rate-rounds", 3, "rounds of the delivery part")
	flag.DurationVar(&o.profTrial, "profile-trial", 10*time.Second, "measurement window per profile trial")
	// 4 kHz, not more: at 20 kHz the sampling interrupts (VM exits here) cost
	// a third of the forwarding rate and the trial-to-trial noise grew
	// from ~2 to ~10 ns/frame (bench/README.md, the profile runs).
	flag.Float64Var(&o.profFreq, "profile-freq", 4000, "profile part: samples per second per CPU (cpu-clock period = 1e9/freq ns)")
	flag.StringVar(&o.perf, "perf", "perf", "perf(1) executable for the profile part")
	flag.BoolVar(&o.profKeep, "profile-keep", false, "keep the profile part's perf recordings (paths printed on stderr)")
	flag.StringVar(&o.source, "source", "trafgen", "the stream of the frames, tc, profile and tcprofile parts: trafgen (a packet socket in host 1: skbs sent into its veth) or gen (bench/gen: xdp_frames redirected into its veth, received by p1 through NAPI as from a NIC; p1 gets GRO on)")
	var genSizes string
	flag.StringVar(&genSizes, "gen-sizes", "60", "-source gen: frame lengths without FCS, comma-separated, cycled")
	flag.Parse()
	if o.source != "trafgen" && o.source != "gen" {
		return o, fmt.Errorf("bad -source %q", o.source)
	}
	for _, f := range strings.Split(genSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return o, fmt.Errorf("bad -gen-sizes %q", genSizes)
		}
		o.genSizes = append(o.genSizes, n)
	}
	o.parts = make(map[string]bool)
	for _, p := range strings.Split(parts, ",") {
		switch p {
		case "frames", "testrun", "delivery", "tc", "profile", "tcprofile":
			o.parts[p] = true
		default:
			return o, fmt.Errorf("unknown part %q", p)
		}
	}
	for _, r := range strings.Split(rates, ",") {
		v, err := gen.ParseRate(r)
		if err != nil {
			return o, err
		}
		o.rates = append(o.rates, v)
	}
	if o.rounds < 1 || o.rateRounds < 1 || o.repeat < 1 || o.repeat > 1<<31 {
		return o, fmt.Errorf("rounds, rate-rounds and repeat must be >= 1")
	}
	if o.profFreq < 1 || o.profFreq > 1e5 {
		return o, fmt.Errorf("profile-freq must be in 1..100000")
	}
	return o, nil
}

// bench is the lab and the loaded programs shared by all parts.
type bench struct {
	o       options
	lab     *lab
	dp      *dataplane.Dataplane
	p1      int           // ifindex of switch port p1 (in the switch netns)
	pass    *ebpf.Program // xdp_pass, loaded on its own
	floor   *ebpf.Program // xdp_floor, loaded on its own with its own counters
	sampler *ebpf.Program // the sampler instance attached to p1 (by program ID)
	// The tc part's Dataplanes (TCX; clsact forced) and do-nothing TC
	// program; nil unless it runs.
	dpTCX, dpClsact *dataplane.Dataplane
	tcPass, tcFloor *ebpf.Program
	frame           []byte // 60-byte UDP frame host 1 -> host 2 (64 with FCS)
	out             io.Writer
	stats           io.Closer // BPF_ENABLE_STATS descriptor; nil when off
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("must run as root (namespaces, XDP, BPF)")
	}
	if runtime.NumCPU() < 2 {
		return fmt.Errorf("needs 2 CPUs (source and receiver pinned apart), have %d", runtime.NumCPU())
	}
	// The profile part needs the stats off; it closes them itself.
	var stats io.Closer
	if o.parts["frames"] || o.parts["testrun"] || o.parts["delivery"] || o.parts["tc"] {
		if stats, err = ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err != nil {
			return fmt.Errorf("enabling BPF run-time stats: %w", err)
		}
	}

	l, err := newLab(o.script, o.prefix, 2)
	if err != nil {
		return err
	}
	// Remove the lab on SIGINT/SIGTERM too; XDP links and sockets die with
	// the namespaces' interfaces and this process.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigc
		killChildren()
		if err := l.down(); err != nil {
			fmt.Fprintln(os.Stderr, "xdp bench:", err)
		}
		fmt.Fprintln(os.Stderr, "xdp bench: interrupted by", s)
		os.Exit(1)
	}()
	b := &bench{o: o, lab: l, out: os.Stdout, stats: stats}
	err = b.runParts()
	if cerr := b.close(); cerr != nil && err == nil {
		err = cerr
	}
	if derr := l.down(); derr != nil && err == nil {
		err = derr
	}
	return err
}

func (b *bench) runParts() error {
	if err := b.setup(); err != nil {
		return err
	}
	b.header()
	if b.o.parts["frames"] {
		if err := b.frames(); err != nil {
			return fmt.Errorf("frames: %w", err)
		}
	}
	if b.o.parts["testrun"] {
		if err := b.testRun(); err != nil {
			return fmt.Errorf("testrun: %w", err)
		}
	}
	if b.o.parts["delivery"] {
		if err := b.delivery(); err != nil {
			return fmt.Errorf("delivery: %w", err)
		}
	}
	if b.o.parts["tc"] {
		if err := b.tc(); err != nil {
			return fmt.Errorf("tc: %w", err)
		}
	}
	if b.o.parts["profile"] {
		if err := b.profile(); err != nil {
			return fmt.Errorf("profile: %w", err)
		}
	}
	if b.o.parts["tcprofile"] {
		if err := b.tcProfile(); err != nil {
			return fmt.Errorf("tcprofile: %w", err)
		}
	}
	return nil
}

// setup opens the Dataplane in the switch namespace, loads xdp_pass and
// finds the sampler program through a first attachment to p1.
func (b *bench) setup() error {
	var err error
	if b.p1, err = linkIndex(b.lab.sw, "p1"); err != nil {
		return err
	}
	err = netnsutil.DoNamed(b.lab.sw, func() error {
		var err error
		b.dp, err = dataplane.Open(dataplane.Config{Workers: 1, Hook: dataplane.HookXDP}) // this bench measures the XDP sampler
		return err
	})
	if err != nil {
		return err
	}
	spec, err := bpf.LoadSampler()
	if err != nil {
		return fmt.Errorf("loading sampler spec: %w", err)
	}
	if b.pass, err = ebpf.NewProgram(spec.Programs[bpf.SamplerProgXdpPass]); err != nil {
		return fmt.Errorf("loading xdp_pass: %w", err)
	}
	// xdp_floor indexes its own counters array by CPU number.
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("possible CPUs: %w", err)
	}
	spec.Maps[bpf.SamplerMapCounters].MaxEntries = uint32(cpus)
	var fl struct {
		Prog *ebpf.Program `ebpf:"xdp_floor"`
	}
	if err := spec.LoadAndAssign(&fl, nil); err != nil {
		return fmt.Errorf("loading xdp_floor: %w", err)
	}
	b.floor = fl.Prog
	if err := b.dp.AttachPort(b.p1, dataplane.PortConfig{Rate: 1 << 30, HeaderBytes: 128}); err != nil {
		return err
	}
	if mode := b.dp.AttachMode(b.p1); mode != dataplane.AttachNative {
		return fmt.Errorf("sampler attached to p1 in %q mode, want native", mode)
	}
	if err := b.openSampler(); err != nil {
		return err
	}
	if err := b.dp.DetachPort(b.p1); err != nil {
		return err
	}
	b.frame = netlab.UDPFrame(netlab.HostMAC(1), netlab.HostMAC(2),
		netip.AddrPortFrom(netlab.HostAddr(1), 40001),
		netip.AddrPortFrom(netlab.HostAddr(2), 7001), make([]byte, 18))
	if len(b.frame) != 60 {
		return fmt.Errorf("test frame is %d bytes, want 60", len(b.frame))
	}
	return nil
}

// openSampler opens the sampler instance attached to p1 as b.sampler,
// closing the previous one.
func (b *bench) openSampler() error {
	id, err := xdpProgID(b.lab.sw, "p1")
	if err != nil {
		return err
	}
	p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return fmt.Errorf("opening sampler program %d: %w", id, err)
	}
	if b.sampler != nil {
		if err := b.sampler.Close(); err != nil {
			return errors.Join(err, p.Close())
		}
	}
	b.sampler = p
	return nil
}

// xdpProgID returns the ID of the XDP program attached to link name in ns.
func xdpProgID(ns, name string) (uint32, error) {
	lk, err := netnsutil.Link(ns, name)
	if err != nil {
		return 0, err
	}
	x := lk.Attrs().Xdp
	if x == nil || x.ProgId == 0 {
		return 0, fmt.Errorf("no XDP program on %s in %s", name, ns)
	}
	return x.ProgId, nil
}

func (b *bench) close() error {
	var errs []error
	if b.sampler != nil {
		errs = append(errs, b.sampler.Close())
	}
	if b.pass != nil {
		errs = append(errs, b.pass.Close())
	}
	if b.floor != nil {
		errs = append(errs, b.floor.Close())
	}
	if b.tcPass != nil {
		errs = append(errs, b.tcPass.Close())
	}
	if b.tcFloor != nil {
		errs = append(errs, b.tcFloor.Close())
	}
	for _, dp := range []*dataplane.Dataplane{b.dp, b.dpTCX, b.dpClsact} {
		if dp != nil {
			errs = append(errs, dp.Close())
		}
	}
	if b.stats != nil {
		errs = append(errs, b.stats.Close())
	}
	for _, e := range errs {
		if e != nil {
			return fmt.Errorf("closing: %w", e)
		}
	}
	return nil
}

// header prints when and where the run happened.
func (b *bench) header() {
	var u unix.Utsname
	_ = unix.Uname(&u) // cannot fail on Linux
	load, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		load = []byte("unknown")
	}
	fmt.Fprintf(b.out, "# bench/xdp (go run ./bench/xdp) %s\n\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(b.out, "- date: %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(b.out, "- kernel: %s, %d CPUs, load average at start: %s\n",
		unix.ByteSliceToString(u.Release[:]), runtime.NumCPU(), strings.TrimSpace(string(load)))
	fmt.Fprintf(b.out, "- lab: %s (test/lab/lab.sh, 2 ports), sampler on switch port p1 (native XDP; the tc part: TC ingress too)\n", b.o.prefix)
	fmt.Fprintf(b.out, "- stream of the frames, tc and profile parts: %s\n\n", b.streamDesc())
}

// streamDesc describes the live-frame stream.
func (b *bench) streamDesc() string {
	if b.o.source == "gen" {
		return fmt.Sprintf("bench/gen h1 -> h2, frames of %v bytes without FCS (cycled), xdp_frames redirected into h1's veth, p1 receiving through NAPI (GRO on), generator pinned to CPU 1 at its maximum rate", b.o.genSizes)
	}
	return "trafgen h1 -> h2, 64-byte UDP"
}

// loadavg returns the first field of /proc/loadavg ("?" if unreadable).
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
