package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/portstats"

	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// config is one configuration of switch port p1.
type config struct {
	name string
	prog func(b *bench) *ebpf.Program // nil: no program
	port *dataplane.PortConfig        // sampler config; nil: not the sampler
	// dp is the Dataplane that attaches the sampler (nil: b.dp, the XDP
	// one; the tc part's TCX and clsact ones).
	dp func(b *bench) *dataplane.Dataplane
	// custom attaches prog itself (nil: an XDP link in driver mode).
	custom func(b *bench) (func() error, error)
}

// dpFor returns the Dataplane that attaches c's sampler.
func (b *bench) dpFor(c config) *dataplane.Dataplane {
	if c.dp != nil {
		return c.dp(b)
	}
	return b.dp
}

// Sampler configurations. Rate 1<<30: the random test almost never
// selects (1 frame in 2^30), so the unsampled path is what runs. Rate
// 1024: what the agent programs for a configured 1-in-1000 (the largest
// power of two <= N, docs/ARCHITECTURE.md "Packet sampling").
var (
	cfgUnsampled = dataplane.PortConfig{Rate: 1 << 30, Mode: dataplane.ModeInline, HeaderBytes: 128}
	cfgN1000     = dataplane.PortConfig{Rate: 1024, Mode: dataplane.ModeInline, HeaderBytes: 128}
	cfgEvery     = dataplane.PortConfig{Rate: 1, Mode: dataplane.ModeInline, HeaderBytes: 128}
)

var (
	confNone      = config{name: "no program"}
	confPass      = config{name: "xdp_pass", prog: func(b *bench) *ebpf.Program { return b.pass }}
	confFloor     = config{name: "xdp_floor (pool + skip countdown only)", prog: func(b *bench) *ebpf.Program { return b.floor }}
	confUnsampled = config{name: "sampler unsampled (rate 2^30)", prog: samplerProg, port: &cfgUnsampled}
	confN1000     = config{name: "sampler 1-in-1024 (N=1000)", prog: samplerProg, port: &cfgN1000}
	confEvery     = config{name: "sampler sampled (rate 1, hdr 128)", prog: samplerProg, port: &cfgEvery}
)

func samplerProg(b *bench) *ebpf.Program { return b.sampler }

// attach puts c on p1 and returns the function that removes it.
func (b *bench) attach(c config) (func() error, error) {
	switch {
	case c.port != nil:
		dp := b.dpFor(c)
		if err := dp.AttachPort(b.p1, *c.port); err != nil {
			return nil, err
		}
		// Each attachment loads the port's own instance of the sampler:
		// measure that one.
		var err error
		switch mode := dp.AttachMode(b.p1); mode {
		case dataplane.AttachTCX, dataplane.AttachClsact:
			err = b.openTCSampler(mode)
		default:
			err = b.openSampler()
		}
		if err != nil {
			return nil, errors.Join(err, dp.DetachPort(b.p1))
		}
		return func() error { return dp.DetachPort(b.p1) }, nil
	case c.custom != nil:
		return c.custom(b)
	case c.prog != nil:
		var l link.Link
		err := netnsutil.DoNamed(b.lab.sw, func() error {
			var err error
			l, err = link.AttachXDP(link.XDPOptions{Program: c.prog(b), Interface: b.p1, Flags: link.XDPDriverMode})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("attaching %s to p1: %w", c.name, err)
		}
		return l.Close, nil
	}
	return func() error { return nil }, nil
}

// ringCounter drains worker 0's ring on a goroutine pinned to CPU 0,
// counting samples, until stop.
type ringCounter struct {
	n    atomic.Uint64
	stop atomic.Bool
	done chan error
}

func (b *bench) startRingCounter() (*ringCounter, error) { return startRingCounter(b.dp) }

// startRingCounter drains worker 0's ring of dp (see ringCounter).
func startRingCounter(dp *dataplane.Dataplane) (*ringCounter, error) {
	r, err := dp.Source(0)
	if err != nil {
		return nil, err
	}
	rc := &ringCounter{done: make(chan error, 1)}
	go func() {
		if err := pinThread(0); err != nil {
			rc.done <- err
			return
		}
		count := func(*reader.RawSample) {}
		for !rc.stop.Load() {
			n, err := r.Read(time.Now().Add(50*time.Millisecond), count)
			rc.n.Add(uint64(n))
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				rc.done <- err
				return
			}
		}
		rc.done <- nil
	}()
	return rc, nil
}

func (rc *ringCounter) close() error {
	rc.stop.Store(true)
	return <-rc.done
}

// progStats returns a program's cumulative run time and run count.
func progStats(p *ebpf.Program) (time.Duration, uint64, error) {
	s, err := p.Stats()
	if err != nil {
		return 0, 0, fmt.Errorf("program stats: %w", err)
	}
	return s.Runtime, s.RunCount, nil
}

// snapshot is the state read at the start and end of a trial.
type snapshot struct {
	t       time.Time
	rx      uint64 // host 2 eth0 rx_packets
	runtime time.Duration
	runs    uint64
	pc      portstats.Counters
}

func (b *bench) snap(c config, readRx func() (uint64, error)) (snapshot, error) {
	var s snapshot
	var err error
	if readRx != nil {
		if s.rx, err = readRx(); err != nil {
			return s, err
		}
	}
	if c.prog != nil {
		if s.runtime, s.runs, err = progStats(c.prog(b)); err != nil {
			return s, err
		}
	}
	if c.port != nil {
		if s.pc, err = b.dpFor(c).Stats().Ingress(b.p1); err != nil {
			return s, err
		}
	}
	s.t = time.Now()
	return s, nil
}

// overStream runs trial for every configuration in confs, b.o.rounds
// times with the order rotated each round, on one trafgen stream h1 -> h2
// kept for the whole run (the frames and profile parts). readRx reads host
// 2's rx_packets. It returns the load average at the start of each round.
func (b *bench) overStream(confs []config, trial func(c config, readRx func() (uint64, error)) error) ([]string, error) {
	h2, err := netnsutil.Netlink(b.lab.hosts[1])
	if err != nil {
		return nil, err
	}
	defer h2.Close()
	readRx := func() (uint64, error) { return rxPackets(h2, "eth0") }

	// Host 2 speaks once so the bridge learns its MAC: the stream is
	// forwarded as known unicast to p2, not flooded.
	if err := b.announceHost2(); err != nil {
		return nil, err
	}
	rc, err := b.startRingCounter()
	if err != nil {
		return nil, err
	}
	var tg stream
	if b.o.source == "gen" {
		tg, err = b.startGen()
	} else {
		tg, err = startTrafgen(b.lab.hosts[0], b.frame, 1)
	}
	if err != nil {
		return nil, errors.Join(err, rc.close())
	}
	var loads []string
	err = func() error {
		for round := 0; round < b.o.rounds; round++ {
			loads = append(loads, loadavg())
			for i := range confs {
				c := confs[(i+round)%len(confs)] // rotate the order every round
				if err := trial(c, readRx); err != nil {
					return fmt.Errorf("%s: %w", c.name, err)
				}
			}
		}
		return nil
	}()
	if serr := tg.stop(); serr != nil && err == nil {
		err = serr
	}
	if cerr := rc.close(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, tg.output())
	}
	return loads, nil
}

// frames is part 1 (bpf_stats with real frames) and part 2 (bridge
// forwarding rate): one trafgen stream for the whole part, the XDP
// configuration of p1 changing between trials.
func (b *bench) frames() error {
	confs := []config{confNone, confPass, confFloor, confUnsampled, confN1000, confEvery}
	pps, nsPkt, drops := newSeries(), newSeries(), newSeries()
	loads, err := b.overStream(confs, func(c config, readRx func() (uint64, error)) error {
		return b.framesTrial(c, readRx, pps, nsPkt, drops)
	})
	if err != nil {
		return err
	}

	w := b.out
	fmt.Fprintf(w, "## frames: %s, %d rounds x %v per configuration, order rotated each round (load average per round: %v)\n\n", b.streamDesc(), b.o.rounds, b.o.trial, loads)
	fmt.Fprintf(w, "| configuration on p1 | forwarded pps (median) | vs xdp_pass | vs no program | XDP ns/packet, bpf_stats (median) | minus xdp_pass | ring drops | per-round pps | per-round ns/packet |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range confs {
		n := c.name
		ratio := func(base string) string {
			return fmt.Sprintf("%.3f", median(ratios(pps.vals[n], pps.vals[base])))
		}
		ns, over, nsl := "n/a", "n/a", "n/a"
		if c.prog != nil {
			ns = fmt.Sprintf("%.1f", nsPkt.median(n))
			over = fmt.Sprintf("%+.1f", median(diffs(nsPkt.vals[n], nsPkt.vals[confPass.name])))
			nsl = list("%.1f", nsPkt.vals[n])
		}
		dr := "n/a"
		if c.port != nil {
			dr = fmt.Sprintf("%.4f", drops.median(n))
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s | %s | %s | %s |\n", n, pps.median(n),
			ratio(confPass.name), ratio(confNone.name), ns, over, dr, list("%.0f", pps.vals[n]), nsl)
	}
	fmt.Fprintf(w, "\nRatios and differences are per round (same round, adjacent trials), then the median. Ring drops: drops/samples of the sampler (reader on CPU 0 counting samples).\n\n")
	return nil
}

func (b *bench) framesTrial(c config, readRx func() (uint64, error), pps, nsPkt, drops *series) error {
	detach, err := b.attach(c)
	if err != nil {
		return err
	}
	time.Sleep(b.o.settle)
	s0, err := b.snap(c, readRx)
	if err == nil {
		time.Sleep(b.o.trial)
		var s1 snapshot
		s1, err = b.snap(c, readRx)
		if err == nil {
			dt := s1.t.Sub(s0.t).Seconds()
			rate := float64(s1.rx-s0.rx) / dt
			if rate == 0 {
				err = fmt.Errorf("no frames reached host 2")
			}
			pps.add(c.name, rate)
			if c.prog != nil && rate > 0 {
				if s1.runs == s0.runs {
					err = fmt.Errorf("program did not run (BPF stats off?)")
				} else {
					nsPkt.add(c.name, float64(s1.runtime-s0.runtime)/float64(s1.runs-s0.runs))
				}
			}
			if c.port != nil {
				samples := s1.pc.Samples - s0.pc.Samples
				frac := 0.0
				if samples > 0 {
					frac = float64(s1.pc.Drops-s0.pc.Drops) / float64(samples)
				}
				drops.add(c.name, frac)
			}
		}
	}
	if derr := detach(); derr != nil && err == nil {
		err = derr
	}
	return err
}

// ratios returns a[i]/b[i]; diffs a[i]-b[i].
func ratios(a, b []float64) []float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		if b[i] != 0 {
			r = append(r, a[i]/b[i])
		}
	}
	return r
}

func diffs(a, b []float64) []float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		r = append(r, a[i]-b[i])
	}
	return r
}

// testRun is the BPF_PROG_TEST_RUN cross-check of part 1: no traffic;
// each program runs `repeat` times on the 60-byte frame with
// ingress_ifindex = p1, alternating, every round.
func (b *bench) testRun() error {
	confs := []config{confPass, confFloor, confUnsampled, confEvery}
	rc, err := b.startRingCounter()
	if err != nil {
		return err
	}
	dur, statNs, drops := newSeries(), newSeries(), newSeries()
	var loads []string
	err = func() error {
		for round := 0; round < b.o.rounds; round++ {
			loads = append(loads, loadavg())
			for _, c := range confs {
				if err := b.testRunTrial(c, dur, statNs, drops); err != nil {
					return fmt.Errorf("%s: %w", c.name, err)
				}
			}
		}
		return nil
	}()
	if cerr := rc.close(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	w := b.out
	fmt.Fprintf(w, "## testrun: BPF_PROG_TEST_RUN, repeat %d, 60-byte frame, ctx ingress_ifindex = p1, %d rounds (load average per round: %v)\n\n", b.o.repeat, b.o.rounds, loads)
	fmt.Fprintf(w, "| program | test_run ns/run (median) | minus xdp_pass | bpf_stats ns/run (median) | minus xdp_pass | ring drops | per-round test_run ns |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|\n")
	for _, c := range confs {
		n := c.name
		dr := "n/a"
		if c.port != nil {
			dr = fmt.Sprintf("%.4f", drops.median(n))
		}
		fmt.Fprintf(w, "| %s | %.1f | %+.1f | %.1f | %+.1f | %s | %s |\n", n, dur.median(n),
			median(diffs(dur.vals[n], dur.vals[confPass.name])), statNs.median(n),
			median(diffs(statNs.vals[n], statNs.vals[confPass.name])), dr, list("%.0f", dur.vals[n]))
	}
	fmt.Fprintf(w, "\ntest_run ns/run is the kernel's own loop timing (includes the loop around the program); bpf_stats ns/run is run_time_ns/run_cnt over the same runs.\n\n")
	return nil
}

func (b *bench) testRunTrial(c config, dur, statNs, drops *series) error {
	// The sampler reads its config by ingress ifindex: it must be in the
	// port map (attached); xdp_pass is run without attaching.
	detach := func() error { return nil }
	if c.port != nil {
		var err error
		if detach, err = b.attach(c); err != nil {
			return err
		}
	}
	s0, err := b.snap(c, nil)
	if err == nil {
		var d uint32
		err = netnsutil.DoNamed(b.lab.sw, func() error {
			var err error
			d, err = newTestRunner(c.prog(b).FD(), b.frame, b.p1, false).run(uint32(b.o.repeat))
			return err
		})
		if err == nil {
			var s1 snapshot
			if s1, err = b.snap(c, nil); err == nil {
				dur.add(c.name, float64(d))
				if runs := s1.runs - s0.runs; runs > 0 {
					statNs.add(c.name, float64(s1.runtime-s0.runtime)/float64(runs))
				}
				if c.port != nil {
					if samples := s1.pc.Samples - s0.pc.Samples; samples > 0 {
						drops.add(c.name, float64(s1.pc.Drops-s0.pc.Drops)/float64(samples))
					}
				}
			}
		}
	}
	if derr := detach(); derr != nil && err == nil {
		err = derr
	}
	return err
}

// announceHost2 writes one frame from host 2 to host 1 out of host 2's
// eth0 (AF_PACKET, inside host 2's namespace) so that the bridge learns
// host 2's MAC.
func (b *bench) announceHost2() error {
	frame := netlab.UDPFrame(netlab.HostMAC(2), netlab.HostMAC(1),
		netip.AddrPortFrom(netlab.HostAddr(2), 7001),
		netip.AddrPortFrom(netlab.HostAddr(1), 40001), make([]byte, 18))
	ifindex, err := linkIndex(b.lab.hosts[1], "eth0")
	if err != nil {
		return err
	}
	err = netnsutil.DoNamed(b.lab.hosts[1], func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		defer unix.Close(fd)
		if err := unix.Sendto(fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: ifindex}); err != nil {
			return fmt.Errorf("AF_PACKET send: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("announcing host 2: %w", err)
	}
	time.Sleep(50 * time.Millisecond)
	return nil
}
