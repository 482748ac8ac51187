package source

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane/psample"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pslab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// The psample path end to end with act_sample (the VM's Debian kernels;
// skipped with the feature named elsewhere): rules installed by the
// agent, samples through the workers to a collector, read by goflow2.

// counts reads ports' counters in lab.
func counts(t *testing.T, lab *pslab.Lab, idx ...int) []psample.PortCounts {
	t.Helper()
	out := make([]psample.PortCounts, len(idx))
	lab.Do(t, func() error {
		r, err := psample.NewStatsReader()
		if err != nil {
			return err
		}
		defer r.Close()
		for i, x := range idx {
			if out[i], err = r.Read(uint32(x)); err != nil {
				return err
			}
		}
		return nil
	})
	return out
}

// waitQuiet waits until the collector's sample count holds still.
func waitQuiet(t *testing.T, r *run) {
	t.Helper()
	last, still := -1, 0
	for still < 3 {
		time.Sleep(testutil.Scaled(400 * time.Millisecond))
		n := 0
		for _, ss := range r.col.samples(t) {
			n += len(ss)
		}
		if n == last {
			still++
		} else {
			still, last = 0, n
		}
	}
}

// haltAgent stops the workers (their datagrams flushed) without closing
// p, so that the readers' state can be read.
func (r *run) haltAgent() {
	r.cancel()
	<-r.done
	r.cancel = func() {}
}

// tcShow is tc filter show on a port's side in lab.
func tcShow(t *testing.T, lab *pslab.Lab, port, side string) string {
	t.Helper()
	return lab.MustCmd(t, "tc", "filter", "show", "dev", port, side)
}

// TestPsampleRates: act_sample at 1 in 1, 64 and 1000, through the agent:
// the samples within binomial bounds of the packets sent (every frame at
// 1 in 1), received + the drops field = the samples the kernel numbered
// (every GROUP_SEQ gap counted), pools never backwards and at most the
// port's received packets (equal to them at 1 in 1), the configured rate
// exact in every sample; rules gone at exit.
func TestPsampleRates(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	type port struct {
		rate    uint32
		frames  int
		idx     int
		in, out string
	}
	ports := []*port{{rate: 1, frames: 2000, in: "sfps0", out: "sfps1"}, {rate: 64, frames: 20000, in: "sfps2", out: "sfps3"},
		{rate: 1000, frames: 100000, in: "sfps4", out: "sfps5"}}
	rates := map[int]uint32{}
	var idx []int
	for _, p := range ports {
		p.idx, _ = lab.Veth(t, p.in, p.out)
		rates[p.idx] = p.rate
		idx = append(idx, p.idx)
	}
	var p *Psample
	lab.Do(t, func() (err error) { p, err = NewPsample(PsampleConfig{Workers: 2}); return err })
	r := startAgent(t, lab, p, 2)
	pre := counts(t, lab, idx...) // the pools count from the rules' install, between pre and before
	r.apply(t, rates, nil)
	for _, pt := range ports {
		out := tcShow(t, lab, pt.in, "ingress")
		if !strings.Contains(out, fmt.Sprintf("sample rate 1/%d group %d trunc_size 128", pt.rate, p.cfg.Group(uint32(pt.idx), false))) {
			t.Fatalf("rule of %s:\n%s", pt.in, out)
		}
	}
	before := counts(t, lab, idx...)
	for _, pt := range ports {
		lab.Send(t, pt.out, udpFrames(pt.frames))
	}
	waitQuiet(t, r)
	after := counts(t, lab, idx...)
	// The tap's samples are not numbered: its own count of the samples
	// the kernel took (all groups) stands for the numbers, summed.
	conn := p.readers[0].conn.Load()
	tap, err := conn.TapStats()
	if err != nil {
		t.Fatal(err)
	}
	var taken uint64
	r.haltAgent()
	got := r.col.samples(t)
	for i, pt := range ports {
		ss := got[uint32(pt.idx)]
		rx := after[i].RxPackets - before[i].RxPackets
		rxAll := after[i].RxPackets - pre[i].RxPackets
		pp := p.table.Load().ports[uint32(pt.idx)]
		numbered := uint64(pp.seq[0].Next()) // a fresh group numbers from 0
		var lastPool, drops uint32
		for j, s := range ss {
			g := s.g
			if g.SamplingRate != pt.rate || g.Input != uint32(pt.idx) || g.SamplePool < lastPool {
				t.Fatalf("%s sample %d: rate %d input %d pool %d after %d", pt.in, j, g.SamplingRate, g.Input, g.SamplePool, lastPool)
			}
			lastPool, drops = g.SamplePool, g.Drops
		}
		ok, mean, sd := binomialOK(len(ss)+int(drops), pt.frames, pt.rate)
		t.Logf("%s 1 in %d: %d frames, rx %d, %d samples + %d dropped (kernel numbered %d; expected %.0f ± %.1f), last pool %d, reader lost %d, overruns %d",
			pt.in, pt.rate, pt.frames, rx, len(ss), drops, numbered, mean, sd, lastPool, p.ReaderStats(pp.worker).Lost.Load(), p.ReaderStats(pp.worker).Overruns.Load())
		if rx != uint64(pt.frames) {
			t.Errorf("%s received %d of %d frames", pt.in, rx, pt.frames)
		}
		taken += uint64(len(ss)) + uint64(drops)
		if conn.Intake() == psample.IntakeNetlink && uint64(len(ss))+uint64(drops) != numbered {
			t.Errorf("%s: %d samples + %d drops != %d numbered by the kernel", pt.in, len(ss), drops, numbered)
		}
		if !ok {
			t.Errorf("%s: %d samples + drops, outside %.0f ± 5×%.1f", pt.in, len(ss)+int(drops), mean, sd)
		}
		// A sample's pool is the port's counter read after its frame was
		// counted: at most what the port received since the rule went
		// in, and at 1 in 1 (the last frame sampled) all of it.
		if uint64(lastPool) > rxAll || (pt.rate == 1 && uint64(lastPool) < rx) {
			t.Errorf("%s: last pool %d, port received %d (%d since before the rule)", pt.in, lastPool, rx, rxAll)
		}
		if pool, d := p.PortPool(uint32(pt.idx)); pool != uint64(lastPool) || d != uint64(drops) {
			t.Errorf("%s: PortPool %d/%d, last sample %d/%d", pt.in, pool, d, lastPool, drops)
		}
	}
	t.Logf("intake %v; tap %+v", conn.Intake(), tap)
	if conn.Intake() == psample.IntakeTap && taken != tap.Seen {
		t.Errorf("samples + drops of every port %d != %d the tap saw the kernel take", taken, tap.Seen)
	}
	r.stop()
	for _, pt := range ports {
		if out := tcShow(t, lab, pt.in, "ingress"); strings.Contains(out, "matchall") {
			t.Errorf("rule of %s left at exit:\n%s", pt.in, out)
		}
		if q := lab.MustCmd(t, "tc", "qdisc", "show", "dev", pt.in); strings.Contains(q, "clsact") {
			t.Errorf("qdisc of %s left at exit:\n%s", pt.in, q)
		}
	}
}

// TestPsampleEgress: a port sampled at egress (act_sample on its egress
// side) reports output = the port and input = the port the bridge took
// the frame in by (PSAMPLE_ATTR_IIFINDEX, skb_iif); its pool is the
// port's sent packets.
func TestPsampleEgress(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	in, _ := lab.Veth(t, "sfps0", "sfps1")
	out, _ := lab.Veth(t, "sfps2", "sfps3")
	lab.IP(t, "link", "add", "sfpsbr", "type", "bridge")
	lab.IP(t, "link", "set", "sfps0", "master", "sfpsbr")
	lab.IP(t, "link", "set", "sfps2", "master", "sfpsbr")
	lab.IP(t, "link", "set", "sfpsbr", "up")
	var p *Psample
	lab.Do(t, func() (err error) { p, err = NewPsample(PsampleConfig{Workers: 1}); return err })
	r := startAgent(t, lab, p, 1)
	pre := counts(t, lab, out) // the pool counts from the rule's install, between pre and before
	r.apply(t, map[int]uint32{out: 1}, map[uint32]sflow.Direction{uint32(out): sflow.DirectionEgress})
	if s := tcShow(t, lab, "sfps2", "egress"); !strings.Contains(s, "sample rate 1/1") {
		t.Fatalf("egress rule:\n%s", s)
	}
	before := counts(t, lab, out)
	const n = 300
	lab.Send(t, "sfps1", udpFrames(n)) // to an unknown MAC: flooded out of sfps2
	waitQuiet(t, r)
	after := counts(t, lab, out)
	r.haltAgent()
	ss := r.col.samples(t)[uint32(out)]
	tx := after[0].TxPackets - before[0].TxPackets
	var lastPool, drops uint32
	bridged, own := 0, 0
	for j, s := range ss {
		switch {
		case s.g.Output != uint32(out):
			t.Fatalf("sample %d: output %d, want %d", j, s.g.Output, out)
		case s.g.Input == uint32(in):
			bridged++
		case s.g.Input == sflow.IfIndexInternal:
			own++ // a frame the switch itself sent out of sfps2 (no input port)
		default:
			t.Fatalf("sample %d: input %d, want %d (bridged) or 0x3FFFFFFF (the switch's own)", j, s.g.Input, in)
		}
		lastPool, drops = s.g.SamplePool, s.g.Drops
	}
	txAll := after[0].TxPackets - pre[0].TxPackets
	t.Logf("egress: %d frames bridged, tx %d (%d since before the rule), %d samples (%d bridged, %d the switch's own) + %d dropped, last pool %d",
		n, tx, txAll, len(ss), bridged, own, drops, lastPool)
	if bridged+int(drops) < n || uint64(len(ss))+uint64(drops) < tx || uint64(lastPool) < tx || uint64(lastPool) > txAll {
		t.Errorf("tx %d, %d samples (%d bridged) + %d drops, last pool %d: want %d bridged, a sample per frame sent, the pool within the port's tx counts [%d, %d]",
			tx, len(ss), bridged, drops, lastPool, n, tx, txAll)
	}
}

// TestPsampleListenOnly: rules installed by hand with tc (as switch
// software does); the agent reads their group only, at the rate each
// sample carries, and leaves the rules alone.
func TestPsampleListenOnly(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	i0, _ := lab.Veth(t, "sfps0", "sfps1")
	i2, _ := lab.Veth(t, "sfps2", "sfps3")
	lab.MustCmd(t, "tc", "qdisc", "add", "dev", "sfps0", "clsact")
	lab.MustCmd(t, "tc", "filter", "add", "dev", "sfps0", "ingress", "matchall", "action", "sample", "rate", "10", "group", "77", "trunc", "128")
	lab.MustCmd(t, "tc", "qdisc", "add", "dev", "sfps2", "clsact")
	lab.MustCmd(t, "tc", "filter", "add", "dev", "sfps2", "ingress", "matchall", "action", "sample", "rate", "1", "group", "78")
	var p *Psample
	lab.Do(t, func() (err error) { p, err = NewPsample(PsampleConfig{Workers: 1, ListenGroup: 77}); return err })
	r := startAgent(t, lab, p, 1)
	// The agent's own rate is lower than the switch's: the samples carry
	// the switch's (the worker keeps all, reporting the larger).
	r.apply(t, map[int]uint32{i0: 1, i2: 1}, nil)
	const n = 3000
	lab.Send(t, "sfps1", udpFrames(n))
	lab.Send(t, "sfps3", udpFrames(100))
	waitQuiet(t, r)
	r.haltAgent()
	got := r.col.samples(t)
	ss := got[uint32(i0)]
	var drops uint32
	for j, s := range ss {
		if s.g.SamplingRate != 10 || s.g.Input != uint32(i0) {
			t.Fatalf("sample %d: rate %d input %d", j, s.g.SamplingRate, s.g.Input)
		}
		drops = s.g.Drops
	}
	ok, mean, sd := binomialOK(len(ss)+int(drops), n, 10)
	t.Logf("listen-only group 77: %d samples + %d dropped of %d frames at 1 in 10 (%.0f ± %.1f); group 78's %d samples foreign: %d",
		len(ss), drops, n, mean, sd, 100, p.ReaderStats(0).Foreign.Load())
	if !ok {
		t.Errorf("%d samples + %d drops outside %.0f ± 5×%.1f", len(ss), drops, mean, sd)
	}
	if len(got[uint32(i2)]) != 0 || p.ReaderStats(0).Foreign.Load() != 100 {
		t.Errorf("group 78: %d samples sent, %d foreign, want 0 and 100", len(got[uint32(i2)]), p.ReaderStats(0).Foreign.Load())
	}
	r.stop()
	if s := tcShow(t, lab, "sfps0", "ingress"); !strings.Contains(s, "sample rate 1/10 group 77") {
		t.Errorf("listen-only mode removed the switch's rule:\n%s", s)
	}
}

// helperEnv makes the test binary a daemon stand-in that installs a rule
// and waits to be killed (TestPsampleKilled).
const helperEnv = "SFPS_PSAMPLE_HELPER"

// TestPsampleHelper is the stand-in's body; it does nothing in a normal
// run.
func TestPsampleHelper(t *testing.T) {
	arg := os.Getenv(helperEnv)
	if arg == "" {
		return
	}
	ns, idxs, _ := strings.Cut(arg, ",")
	idx, _ := strconv.Atoi(idxs)
	err := netnsutil.DoNamed(ns, func() error {
		p, err := NewPsample(PsampleConfig{Workers: 1})
		if err != nil {
			return err
		}
		return p.SetPort(uint32(idx), agent.PortSampling{Rate: 5, HeaderBytes: 64, Direction: sflow.DirectionBoth})
	})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	time.Sleep(time.Hour)
}

// TestPsampleKilled: the rules of a daemon killed with SIGKILL stay (a
// filter outlives its process) until the next start removes them.
func TestPsampleKilled(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	i0, _ := lab.Veth(t, "sfps0", "sfps1")
	cmd := exec.Command(os.Args[0], "-test.run=^TestPsampleHelper$")
	cmd.Env = append(os.Environ(), helperEnv+"="+lab.NS+","+strconv.Itoa(i0))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("helper: %q %v", line, err)
	}
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for _, side := range []string{"ingress", "egress"} {
		if s := tcShow(t, lab, "sfps0", side); !strings.Contains(s, "sample rate 1/5") {
			t.Fatalf("after SIGKILL, no %s rule left to clean up:\n%s", side, s)
		}
	}
	var p *Psample
	lab.Do(t, func() (err error) { p, err = NewPsample(PsampleConfig{Workers: 1}); return err })
	defer lab.Do(t, p.Close)
	for _, side := range []string{"ingress", "egress"} {
		if s := tcShow(t, lab, "sfps0", side); strings.Contains(s, "matchall") {
			t.Errorf("the killed daemon's %s rule survived the restart:\n%s", side, s)
		}
	}
	if q := lab.MustCmd(t, "tc", "qdisc", "show", "dev", "sfps0"); strings.Contains(q, "clsact") {
		t.Errorf("the killed daemon's qdisc survived the restart:\n%s", q)
	}
}

// TestPsampleGapsInDrops: the agent's sockets overrun (the smallest
// receive buffer, 1 in 1, a burst): every sample the kernel numbered is
// either in a flow sample or in the drops field of the port's next one,
// and the metrics count the same. One more frame after the burst reveals
// the losses at its end; those of them within the reordering window
// (psample.Window) count once the socket has gone quiet, in the sample of
// a second frame.
func TestPsampleGapsInDrops(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	i0, _ := lab.Veth(t, "sfps0", "sfps1")
	var p *Psample
	lab.Do(t, func() (err error) {
		// The netlink intake's socket (the tap's ring:
		// TestPsampleTapLossInDrops).
		p, err = NewPsample(PsampleConfig{Workers: 1, Conn: psample.ConnConfig{RcvBuf: 1, Intake: psample.IntakeNetlink}})
		return err
	})
	r := startAgent(t, lab, p, 1)
	r.apply(t, map[int]uint32{i0: 1}, nil)
	const n = 5000
	lab.Send(t, "sfps1", udpFrames(n))
	waitQuiet(t, r)
	lab.Send(t, "sfps1", udpFrames(1))
	waitQuiet(t, r)
	lab.Send(t, "sfps1", udpFrames(1))
	waitQuiet(t, r)
	r.haltAgent()
	ss := r.col.samples(t)[uint32(i0)]
	if len(ss) == 0 {
		t.Fatal("no sample")
	}
	last := ss[len(ss)-1].g
	st := p.ReaderStats(0)
	t.Logf("%d frames at 1 in 1: %d samples + %d drops (last sample); reader: lost %d, overruns %d; last pool %d",
		n+2, len(ss), last.Drops, st.Lost.Load(), st.Overruns.Load(), last.SamplePool)
	if len(ss)+int(last.Drops) != n+2 || uint64(last.Drops) != st.Lost.Load() {
		t.Errorf("%d samples + %d drops != %d frames sampled, or drops != the reader's lost %d", len(ss), last.Drops, n+2, st.Lost.Load())
	}
	if st.Overruns.Load() > 0 && last.Drops == 0 {
		t.Errorf("%d overruns and no drop counted", st.Overruns.Load())
	}
	if last.SamplePool != n+2 {
		t.Errorf("last pool %d, want %d", last.SamplePool, n+2)
	}
}

// TestPsampleTapLossInDrops: the tap intake with a ring of one page
// overflows under a burst at 1 in 1: every sample the kernel took is
// either in a flow sample or in the drops field of the port's next one
// (pool = samples + drops, exactly), the reader's Lost and the tap's
// own count agree, and the tap is the intake chosen by default.
func TestPsampleTapLossInDrops(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	i0, _ := lab.Veth(t, "sfps0", "sfps1")
	var p *Psample
	lab.Do(t, func() (err error) {
		p, err = NewPsample(PsampleConfig{Workers: 1, Conn: psample.ConnConfig{TapRingBytes: os.Getpagesize()}})
		return err
	})
	conn := p.readers[0].conn.Load()
	if conn.Intake() != psample.IntakeTap {
		t.Fatalf("intake %v, want the tap (it could not attach: %v)", conn.Intake(), conn.TapErr())
	}
	r := startAgent(t, lab, p, 1)
	r.apply(t, map[int]uint32{i0: 1}, nil)
	const n = 3000
	lab.Send(t, "sfps1", udpFrames(n))
	waitQuiet(t, r)
	lab.Send(t, "sfps1", udpFrames(1))
	waitQuiet(t, r)
	st, err := conn.TapStats()
	if err != nil {
		t.Fatal(err)
	}
	r.haltAgent()
	ss := r.col.samples(t)[uint32(i0)]
	if len(ss) == 0 {
		t.Fatal("no sample")
	}
	last := ss[len(ss)-1].g
	rs := p.ReaderStats(0)
	t.Logf("%d frames at 1 in 1: %d samples + %d drops (last sample); reader lost %d; tap %+v; last pool %d",
		n+1, len(ss), last.Drops, rs.Lost.Load(), st, last.SamplePool)
	if len(ss)+int(last.Drops) != n+1 || uint64(last.Drops) != rs.Lost.Load() || st.Lost != rs.Lost.Load() {
		t.Errorf("%d samples + %d drops != %d frames sampled, or drops != the reader's lost %d != the tap's lost %d",
			len(ss), last.Drops, n+1, rs.Lost.Load(), st.Lost)
	}
	if last.Drops == 0 {
		t.Error("no drop with a one-page ring")
	}
	if last.SamplePool != n+1 || st.Seen != n+1 {
		t.Errorf("last pool %d, tap saw %d, want %d", last.SamplePool, st.Seen, n+1)
	}
}

// TestPsampleRejoin: the psample module unloaded and loaded again (a
// driver reload, a warm reboot) makes the family anew; the listen-only
// readers re-join it (WatchFamily) and samples flow again, the family's
// absence and the rejoin counted.
func TestPsampleRejoin(t *testing.T) {
	needActSample(t)
	if _, err := os.Stat("/sys/module/psample/initstate"); err != nil {
		testskip.Feature(t, builtinPsample{}, "psample as a module")
	}
	lab := pslab.New(t)
	i0, _ := lab.Veth(t, "sfps0", "sfps1")
	rule := []string{"tc", "filter", "add", "dev", "sfps0", "ingress", "matchall", "action", "sample", "rate", "1", "group", "1"}
	lab.MustCmd(t, "tc", "qdisc", "add", "dev", "sfps0", "clsact")
	lab.MustCmd(t, rule[0], rule[1:]...)
	var p *Psample
	lab.Do(t, func() (err error) {
		// The netlink intake: the tap holds the psample module (it
		// cannot be unloaded while attached: TestTapHoldsModule).
		p, err = NewPsample(PsampleConfig{Workers: 1, IngressGroup: 1, EgressGroup: 2, Conn: psample.ConnConfig{Intake: psample.IntakeNetlink}})
		return err
	})
	r := startAgent(t, lab, p, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.WatchFamily(ctx, time.Second); close(done) }()
	defer func() { cancel(); <-done }()
	r.apply(t, map[int]uint32{i0: 1}, nil)
	lab.Send(t, "sfps1", udpFrames(20))
	waitQuiet(t, r)
	before := len(r.col.samples(t)[uint32(i0)])
	if before != 20 {
		t.Fatalf("%d samples before the reload, want 20", before)
	}
	lab.MustCmd(t, "tc", "filter", "del", "dev", "sfps0", "ingress")
	if out, err := exec.Command("modprobe", "-r", "act_sample", "psample").CombinedOutput(); err != nil {
		t.Fatalf("modprobe -r act_sample psample: %v: %s", err, out)
	}
	deadline := time.Now().Add(testutil.Scaled(5 * time.Second))
	for !p.FamilyGone.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the family's removal not noticed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := exec.Command("modprobe", "psample").CombinedOutput(); err != nil {
		t.Fatalf("modprobe psample: %v: %s", err, out)
	}
	_ = exec.Command("modprobe", "act_sample").Run() // tc loads it too
	deadline = time.Now().Add(testutil.Scaled(5 * time.Second))
	for p.Rejoins.Load() == 0 || p.FamilyGone.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("no rejoin after the family came back (rejoins %d, gone %v)", p.Rejoins.Load(), p.FamilyGone.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(testutil.Scaled(1500 * time.Millisecond)) // the reader's next second: its new socket
	lab.MustCmd(t, rule[0], rule[1:]...)
	lab.Send(t, "sfps1", udpFrames(30))
	waitQuiet(t, r)
	after := len(r.col.samples(t)[uint32(i0)]) - before
	t.Logf("after the reload: %d samples of 30 frames, rejoins %d, reader lost %d, rejoin errors %d",
		after, p.Rejoins.Load(), p.ReaderStats(0).Lost.Load(), p.ReaderStats(0).RejoinErrors.Load())
	if after != 30 {
		t.Errorf("%d samples after the family came back, want 30", after)
	}
}

// builtinPsample is the probe of a psample built into the kernel (it
// cannot be unloaded).
type builtinPsample struct{}

func (builtinPsample) Unavailable(string) error {
	return errors.New("psample is built into the kernel: it cannot be reloaded")
}
