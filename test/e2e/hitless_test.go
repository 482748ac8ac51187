package e2e

// Hitless: a crash restart, an upgrade in place and a
// reconfiguration under steady traffic, each checked end to end with a
// collector and goflow2: pools equal the kernel's frame counts (the
// frames of any gap included), samples + drops within binomial bounds of
// the frames, sequence numbers and uptime continuing, nothing attached or
// pinned after the final SIGTERM.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"
	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pinfs"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// hitlessRate is the sampling rate of the hitless tests: a power of two,
// so that the kernel samples at it and nothing is sub-sampled away in
// user space (a per-process count that a crash would lose).
const hitlessRate = 16

// hitless is one hitless scenario: a lab, a collector, a pin directory
// and a state directory that every daemon of the scenario shares.
type hitless struct {
	lab        *netlab.Lab
	col        *collector
	pin, state string
	bin        string // the daemon binary the scenario runs
	args       []string
	p1         uint32
	before     uint64 // p1's rx_packets before the first daemon
}

func newHitless(t *testing.T, extra ...string) *hitless {
	t.Helper()
	lab := newLab(t, 2)
	h := &hitless{lab: lab, pin: pinfs.Dir(t), state: t.TempDir(), bin: daemonBin,
		p1: uint32(lab.LinkIndex(lab.Switch, "p1"))}
	h.col = listen(t, lab, collectorPort)
	h.args = append([]string{"-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", fmt.Sprint(hitlessRate), "-ports", "p1,p2", "-polling", "1",
		"-pin-dir", h.pin, "-state-dir", h.state}, extra...)
	return h
}

// start runs a daemon of the scenario and waits until it samples.
func (h *hitless) start(t *testing.T) *daemon {
	t.Helper()
	return startDaemonBin(t, h.lab, h.bin, append([]string{}, h.args...)...)
}

// flowView is a flow sample as goflow2 decoded it, with its datagram.
type flowView struct {
	at                    time.Time
	sub, dgSeq, uptime    uint32
	seq, rate, pool, drop uint32
}

// goflowFlowsOf returns goflow2's view of the flow samples of ifindex in
// arrival order.
func goflowFlowsOf(dgs []datagram, ifindex uint32) []flowView {
	var out []flowView
	for _, dg := range dgs {
		for _, s := range dg.gf.Samples {
			fs, ok := s.(goflow.FlowSample)
			if !ok || fs.Header.SourceIdType != 0 || fs.Header.SourceIdValue != ifindex {
				continue
			}
			f := flowView{at: dg.at, sub: dg.gf.SubAgentId, dgSeq: dg.gf.SequenceNumber, uptime: dg.gf.Uptime,
				seq: fs.Header.SampleSequenceNumber, rate: fs.SamplingRate, pool: fs.SamplePool, drop: fs.Drops}
			out = append(out, f)
		}
	}
	return out
}

// hitlessEnd is what the kernel and the daemon count once the traffic
// stopped and everything was delivered.
type hitlessEnd struct {
	rx, pool, selected, kdrops uint64
	flows                      []flowView
}

// waitSettled waits until the traffic's frames are all counted in the
// daemon's pool, and the samples the kernel selected are all read or
// dropped and delivered: the metrics and the last flow sample received
// do not change over 2 s (two worker ticks). The pool must reach the
// kernel's count within 20 s.
func (h *hitless) waitSettled(t *testing.T) hitlessEnd {
	t.Helper()
	var prev hitlessEnd
	stable := 0
	deadline := time.Now().Add(testutil.Scaled(30 * time.Second))
	for {
		m, err := fetchMetrics(h.lab)
		if err != nil {
			t.Fatal(err)
		}
		var e hitlessEnd
		e.rx = h.lab.RxPackets(t, h.lab.Switch, "p1") - h.before
		e.pool, e.selected, e.kdrops = portCounters(m, "p1")
		e.flows = goflowFlowsOf(h.col.snapshot(t), h.p1)
		same := e.rx == prev.rx && e.pool == prev.pool && e.selected == prev.selected && e.kdrops == prev.kdrops &&
			len(e.flows) == len(prev.flows)
		if same && e.pool == e.rx {
			stable++
		} else {
			stable = 0
		}
		if stable >= 4 {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled after 30 s: kernel rx %d, pool %d, selected %d, ring drops %d, %d flow samples received",
				e.rx, e.pool, e.selected, e.kdrops, len(e.flows))
		}
		prev = e
		time.Sleep(500 * time.Millisecond)
	}
}

// checkHitless checks the data of a scenario with one event (crash,
// upgrade, reconfiguration) at time event: pools exact, samples + drops
// binomial, sequence numbers and uptime continuing across the event. A
// crash (gapOK) may lose the samples in flight at the kill, which sFlow
// shows as a gap in the sample sequence numbers (never a repeat); they
// are reported. It returns the flow samples of p1.
func (h *hitless) checkHitless(t *testing.T, sent uint64, event time.Time, gapOK bool) []flowView {
	t.Helper()
	return h.check(t, sent, event, hitlessChecks{gapOK: gapOK, exact: true})
}

// hitlessChecks are the options of check: gapOK as checkHitless's; exact:
// the collector's sampler is the only one of the port and samples at the
// kernel's rate, so that the kernel's selected samples are exactly its
// numbered ones plus the ring drops (false when another sampler of the
// port, at a lower rate, makes the kernel select more).
type hitlessChecks struct {
	gapOK, exact bool
}

// check is checkHitless with options.
func (h *hitless) check(t *testing.T, sent uint64, event time.Time, o hitlessChecks) []flowView {
	t.Helper()
	gapOK := o.gapOK
	e := h.waitSettled(t)
	dgs := h.col.snapshot(t)
	if e.rx != sent {
		t.Errorf("kernel: p1 received %d frames, the traffic sent %d (lab not quiet?)", e.rx, sent)
	}
	// Pools: the pinned counters saw every frame, those of the gap too.
	if e.pool != e.rx {
		t.Errorf("metrics: p1 sample pool %d, kernel rx_packets %d", e.pool, e.rx)
	}
	flows := e.flows
	if len(flows) == 0 {
		t.Fatal("no flow sample of p1")
	}
	last := flows[len(flows)-1]
	if uint64(last.pool) > e.rx || uint64(last.pool) < e.rx-64*hitlessRate {
		t.Errorf("last sample_pool %d, kernel rx_packets %d: want at most, and within 64 samples of it", last.pool, e.rx)
	}
	if uint64(last.drop) != e.kdrops {
		t.Errorf("drops field of the last sample %d, ring drops counted %d", last.drop, e.kdrops)
	}
	// Sequence numbers: increasing per data source in arrival order; no
	// gap unless gapOK, and then one gap only, at the event.
	var gaps, lostInFlight uint32
	before, after := 0, 0
	for i, f := range flows {
		if f.rate != hitlessRate {
			t.Errorf("flow sample %d of p1: sampling_rate %d, want %d", i, f.rate, hitlessRate)
		}
		if f.at.Before(event) {
			before++
		} else {
			after++
		}
		if i == 0 {
			if f.seq != 1 {
				t.Errorf("first flow sample of p1: sequence %d, want 1", f.seq)
			}
			continue
		}
		p := flows[i-1]
		switch {
		case f.seq == p.seq+1:
		case f.seq > p.seq+1 && gapOK:
			gaps++
			lostInFlight += f.seq - p.seq - 1
		default:
			t.Errorf("flow sample %d of p1: sequence %d after %d (%v after the event)", i, f.seq, p.seq,
				f.at.Sub(event).Round(time.Millisecond))
		}
		if f.pool < p.pool {
			t.Errorf("flow sample %d of p1: sample_pool ran backwards %d -> %d", i, p.pool, f.pool)
		}
		if f.sub == p.sub && f.uptime < p.uptime {
			t.Errorf("flow sample %d of p1: uptime ran backwards %d -> %d ms", i, p.uptime, f.uptime)
		}
	}
	if before == 0 || after == 0 {
		t.Errorf("flow samples of p1: %d before the event, %d after: want both", before, after)
	}
	if gaps > 1 || lostInFlight > 64 {
		t.Errorf("flow samples of p1: %d gaps, %d samples lost in flight (want at most one gap, at the kill)", gaps, lostInFlight)
	}
	// Exact accounting: every sample the kernel selected was numbered
	// (encoded), or dropped in the ring; at a crash, the samples read but
	// not yet numbered are lost uncounted: at most a ring read's batch.
	numbered := uint64(last.seq)
	uncounted := int64(e.selected) - int64(numbered+e.kdrops)
	if !o.exact {
		uncounted = 0 // the kernel selects for another sampler too
	}
	if uncounted < 0 || (!gapOK && uncounted != 0) || uncounted > 64 {
		t.Errorf("kernel selected %d samples, numbered %d + ring drops %d (%d uncounted)", e.selected, numbered, e.kdrops, uncounted)
	}
	mean, sd, ok := withinSigmas(int(numbered+e.kdrops), int(e.rx), 1/float64(hitlessRate), 4)
	t.Logf("%d frames: %d samples numbered + %d ring drops (expected %.0f ± %.1f), %d received, %d lost in flight, %d read uncounted; last pool %d",
		e.rx, numbered, e.kdrops, mean, sd, len(flows), lostInFlight, uncounted, last.pool)
	if !ok {
		t.Errorf("%d samples + %d drops of %d frames, want %.0f ± 4×%.1f", numbered, e.kdrops, e.rx, mean, sd)
	}
	// Datagram sequence numbers per sub-agent increase (continue across
	// the event); uptime does not restart.
	lastDg := map[uint32]datagram{}
	for _, dg := range dgs {
		if p, ok := lastDg[dg.gf.SubAgentId]; ok {
			switch {
			case dg.gf.SequenceNumber == p.gf.SequenceNumber+1:
			case dg.gf.SequenceNumber > p.gf.SequenceNumber && gapOK:
			default:
				t.Errorf("sub-agent %d: datagram sequence %d after %d", dg.gf.SubAgentId, dg.gf.SequenceNumber, p.gf.SequenceNumber)
			}
			if dg.gf.Uptime+1000 < p.gf.Uptime { // another worker's clock read may lag by a flush
				t.Errorf("sub-agent %d: uptime %d ms after %d ms", dg.gf.SubAgentId, dg.gf.Uptime, p.gf.Uptime)
			}
		} else if dg.gf.SequenceNumber != 1 {
			t.Errorf("sub-agent %d: first datagram's sequence %d, want 1", dg.gf.SubAgentId, dg.gf.SequenceNumber)
		}
		lastDg[dg.gf.SubAgentId] = dg
	}
	// Counter samples of p1 (polling 1 s) continue too.
	cs := counterSamplesOf(dgs, sflow.DataSource{Type: sflow.SourceIfIndex, Index: h.p1})
	for i := 1; i < len(cs); i++ {
		if d := cs[i].seq - cs[i-1].seq; d != 1 && !(gapOK && d > 1 && d < 10) {
			t.Errorf("counter sample %d of p1: sequence %d after %d", i, cs[i].seq, cs[i-1].seq)
		}
	}
	if len(cs) == 0 || cs[0].seq != 1 {
		t.Errorf("counter samples of p1: %d, want some from sequence 1", len(cs))
	}
	checkIndependentDecoders(t, dgs, collectorPort, h.p1)
	return flows
}

// stopClean stops d with SIGTERM and checks that nothing is left: no
// sampler on any port, nothing pinned, no SNMP snapshot.
func (h *hitless) stopClean(t *testing.T, d *daemon) {
	t.Helper()
	d.signal(t, syscall.SIGTERM)
	if code := d.waitExit(t, 15*time.Second); code != 0 {
		t.Errorf("exit status %d after SIGTERM\n%s", code, d.log())
	}
	h.checkNothingLeft(t, "SIGTERM")
}

// checkNothingLeft checks that no sampler is attached to a lab port and
// that the pin directory holds nothing.
func (h *hitless) checkNothingLeft(t *testing.T, after string) {
	t.Helper()
	deadline := time.Now().Add(testutil.Scaled(2 * time.Second))
	for _, l := range []string{"p1", "p2", "mgmt0", "br0"} {
		for samplerAttached(t, h.lab, l) {
			if time.Now().After(deadline) {
				t.Errorf("a sampler is still attached to %s after %s", l, after)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if es := pinfs.Entries(t, h.pin); len(es) != 0 {
		t.Errorf("pinned after %s: %v", after, es)
	}
	if _, err := os.Stat(filepath.Join(h.state, "snmp.json")); err == nil {
		t.Errorf("SNMP snapshot left in the state directory after %s", after)
	}
}

// TestHitlessCrash: SIGKILL under steady traffic, a restart 3 s later
// (as systemd's Restart= would): the samplers kept counting on their
// pinned links, the new daemon adopts them, and the data is exact. With
// a 16 KiB ring (…/small-ring) the 3 s of samples do not fit: what the
// ring could not hold is counted in drops (the kernel's count, in the
// drops field of the samples that follow). Then: a SIGKILL followed by
// `sflowswitchd -cleanup` leaves nothing.
func TestHitlessCrash(t *testing.T) {
	for _, c := range []struct {
		name string
		ring int
	}{{"default-ring", 0}, {"small-ring", 16384}} {
		t.Run(c.name, func(t *testing.T) {
			var extra []string
			if c.ring != 0 {
				extra = []string{"-ring-bytes", fmt.Sprint(c.ring)}
			}
			hitlessCrash(t, newHitless(t, extra...), c.ring != 0)
		})
	}
}

func hitlessCrash(t *testing.T, h *hitless, wantDrops bool) {
	h.before = h.lab.RxPackets(t, h.lab.Switch, "p1")
	d1 := h.start(t)
	d1.waitReady(t, h.lab, "p1", "p2")
	tr := startTraffic(h.lab, 0, 32, 10*time.Millisecond)
	time.Sleep(2 * time.Second)
	d1.signal(t, syscall.SIGKILL)
	d1.waitExit(t, 10*time.Second)
	killed := time.Now()
	for _, p := range []string{"p1", "p2"} {
		if !samplerAttached(t, h.lab, p) {
			t.Errorf("%s: no sampler attached after SIGKILL (the pinned link should keep it)", p)
		}
	}
	time.Sleep(3 * time.Second)
	d2 := h.start(t)
	d2.waitReady(t, h.lab, "p1", "p2")
	if !strings.Contains(d2.log(), "samplers taken over from the previous program") {
		t.Errorf("the restarted daemon did not log the takeover:\n%s", d2.log())
	}
	time.Sleep(2 * time.Second)
	sent := tr.stop()
	flows := h.checkHitless(t, sent, killed, true)
	// The gap: frames of the 3 s without a daemon are in the pools, and
	// their samples waited in the ring (or are counted in drops).
	var inGap int
	for _, f := range flows {
		if f.at.After(killed) && f.at.Before(killed.Add(3*time.Second)) {
			inGap++
		}
	}
	if inGap != 0 {
		t.Errorf("%d flow samples arrived while no daemon ran", inGap)
	}
	if last := flows[len(flows)-1]; wantDrops != (last.drop > 0) {
		t.Errorf("drops field of the last sample %d: want drops %v", last.drop, wantDrops)
	}
	h.stopClean(t, d2)

	t.Run("cleanup", func(t *testing.T) {
		d3 := h.start(t)
		d3.waitReady(t, h.lab, "p1", "p2")
		d3.signal(t, syscall.SIGKILL)
		d3.waitExit(t, 10*time.Second)
		if len(pinfs.Entries(t, h.pin)) == 0 || !samplerAttached(t, h.lab, "p1") {
			t.Fatal("nothing pinned or attached after SIGKILL")
		}
		out, err := h.lab.Run(h.lab.Switch, h.bin, "-cleanup", "-pin-dir", h.pin, "-state-dir", h.state)
		if err != nil {
			t.Fatalf("sflowswitchd -cleanup: %v\n%s", err, out)
		}
		t.Logf("-cleanup: %s", strings.TrimSpace(string(out)))
		h.checkNothingLeft(t, "SIGKILL and -cleanup")
	})
}

// buildNext builds the daemon afresh, as version "hl-next", into dir.
func buildNext(t *testing.T, dir string) string {
	t.Helper()
	next := filepath.Join(dir, "sflowswitchd.next")
	cmd := exec.Command("go", "build", "-ldflags", "-X main.version=hl-next", "-o", next,
		"github.com/sflowswitchd/sflowswitchd/cmd/sflowswitchd")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the next daemon: %v\n%s", err, out)
	}
	return next
}

// copyFile copies src to dst, executable.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// handover is the handover as the collector saw it: the last flow sample
// of p1 from the old program (received before the new one started) and
// the first from the new one, the time between their arrivals, the
// samples taken meanwhile (their frames sent in between: they waited in
// the ring and were delivered by the new program) and the frames p1
// received meanwhile (the kernel's count, from rx readings every 10 ms).
type handover struct {
	last, first    time.Time // arrivals
	gap            time.Duration
	samplesTaken   int
	framesReceived uint64
}

// measureHandover finds the handover in flows; before is p1's rx_packets
// at the sampler's attachment (a sample's pool counts from it).
func measureHandover(flows []flowView, newStart time.Time, rx *rxLog, before uint64) handover {
	var h handover
	for i := 1; i < len(flows); i++ {
		a, b := flows[i-1], flows[i]
		if a.at.Before(newStart) && !b.at.Before(newStart) {
			h.last, h.first, h.gap = a.at, b.at, b.at.Sub(a.at)
			from, to := rx.at(a.at), rx.at(b.at)
			h.framesReceived = to - from
			for _, f := range flows[i:] {
				if p := uint64(f.pool) + before; p > from && p <= to {
					h.samplesTaken++
				}
			}
			break
		}
	}
	return h
}

// rxLog reads p1's rx_packets every 10 ms until stopped.
type rxLog struct {
	mu   sync.Mutex
	ts   []time.Time
	rx   []uint64
	done chan struct{}
	stop chan struct{}
}

func logRx(t *testing.T, lab *netlab.Lab, port string) *rxLog {
	l := &rxLog{done: make(chan struct{}), stop: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			st, err := linkStatsOf(lab, port)
			if err == nil {
				l.mu.Lock()
				l.ts, l.rx = append(l.ts, time.Now()), append(l.rx, st)
				l.mu.Unlock()
			}
			select {
			case <-l.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(l.end)
	return l
}

func (l *rxLog) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// at is the last reading at or before when.
func (l *rxLog) at(when time.Time) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var v uint64
	for i, ts := range l.ts {
		if ts.After(when) {
			break
		}
		v = l.rx[i]
	}
	return v
}

// TestHitlessUpgrade: under steady traffic, SIGUSR2 with three binaries
// in turn at the daemon's path: one that cannot start (refused, the
// daemon keeps running), one that passes the check but fails to start
// (rolled back: the previous executable, kept open, takes the samplers
// back), then a freshly built one: the same process (PID) runs the new
// program. The samplers stayed attached throughout, and the data is exact
// with sequence numbers contiguous (no sample lost, none repeated).
func TestHitlessUpgrade(t *testing.T) {
	h := newHitless(t)
	dir := t.TempDir()
	next := buildNext(t, dir)
	h.bin = filepath.Join(dir, "sflowswitchd")
	copyFile(t, daemonBin, h.bin)
	h.before = h.lab.RxPackets(t, h.lab.Switch, "p1")
	d := h.start(t)
	d.waitReady(t, h.lab, "p1", "p2")
	rx := logRx(t, h.lab, "p1")
	tr := startTraffic(h.lab, 0, 32, 10*time.Millisecond)
	time.Sleep(2 * time.Second)
	event := time.Now()

	// A binary that cannot start: refused, the running program stays.
	replace := func(script string) {
		t.Helper()
		tmp := h.bin + ".tmp"
		if err := os.WriteFile(tmp, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, h.bin); err != nil {
			t.Fatal(err)
		}
	}
	replace("#!/bin/sh\necho broken >&2\nexit 1\n")
	d.signal(t, syscall.SIGUSR2)
	d.waitLog(t, 20*time.Second, "upgrade in place refused; this program keeps running")
	time.Sleep(time.Second)

	// A binary that passes the check but fails to start (here: an
	// unknown flag): it rolls back to the running program's executable.
	real := filepath.Join(dir, "sflowswitchd.real")
	copyFile(t, next, real)
	replace(fmt.Sprintf("#!/bin/sh\n[ \"$1\" = -upgrade-check ] && exec %s \"$@\"\nexec %s -no-such-flag \"$@\"\n", real, real))
	d.signal(t, syscall.SIGUSR2)
	d.waitLog(t, 20*time.Second, "rollback=true")
	if !strings.Contains(d.log(), "the new program failed to start; the previous binary takes the samplers back") {
		t.Errorf("no rollback logged:\n%s", d.log())
	}
	time.Sleep(time.Second)

	// The fresh binary: the upgrade.
	if err := os.Rename(next, h.bin); err != nil { // as dpkg replaces it
		t.Fatal(err)
	}
	d.signal(t, syscall.SIGUSR2)
	waitCount(t, d, "upgrade in place: exec", 2) // the rollback execs without this line
	newStart := time.Now()                       // the new program starts at the earliest now
	d.waitLog(t, 20*time.Second, "to=hl-next rollback=false")
	if !d.alive() {
		t.Fatal("the daemon's process is gone after the upgrade")
	}
	if !strings.Contains(d.log(), "to=hl-next") {
		t.Errorf("the upgrade did not run the new binary:\n%s", d.log())
	}
	d.waitReady(t, h.lab, "p1", "p2")
	// The upgraded program is the same instance: it kept the namespace's
	// lock across the execs (and the rollback); another start is refused
	// with the same PID.
	second := h.lab.Start(t, h.lab.Switch, daemonBin, hermetic(t, -1, []string{"-ports", "p1"})...)
	d2 := &daemon{cmd: second, out: second.Stdout.(fmt.Stringer)}
	if code := d2.waitExit(t, testutil.Scaled(10*time.Second)); code != 1 ||
		!strings.Contains(d2.log(), fmt.Sprintf("another sflowswitchd runs in this network namespace: PID %d", d.cmd.Process.Pid)) {
		t.Errorf("a second start after the upgrade: exit %d\n%s", code, d2.log())
	}
	time.Sleep(2 * time.Second)
	sent := tr.stop()
	flows := h.checkHitless(t, sent, event, false)
	for _, l := range strings.Split(d.log(), "\n") {
		if strings.HasPrefix(l, "time=") && (strings.Contains(l, "upgrade") || strings.Contains(l, "taken over")) {
			t.Log(l)
		}
	}
	ho := measureHandover(flows, newStart, rx, h.before)
	t.Logf("last sample of the old program received at %s, first of the new at %s", ho.last.UTC().Format("15:04:05.000"), ho.first.UTC().Format("15:04:05.000"))
	t.Logf("handover: %v from the last flow sample of the old program to the first of the new; %d samples taken meanwhile (all delivered), %d frames received and counted meanwhile",
		ho.gap.Round(time.Millisecond), ho.samplesTaken, ho.framesReceived)
	if ho.gap == 0 {
		t.Error("no handover seen in the flow samples")
	}
	h.stopClean(t, d)
}

// waitCount waits until the daemon's log holds want n times.
func waitCount(t *testing.T, d *daemon, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(testutil.Scaled(20 * time.Second))
	for strings.Count(d.log(), want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("daemon log holds %q %d times, want %d:\n%s", want, strings.Count(d.log(), want), n, d.log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// linkStatsOf is the rx_packets of port in the lab's switch namespace.
func linkStatsOf(lab *netlab.Lab, port string) (uint64, error) {
	l, err := netnsutil.Link(lab.Switch, port)
	if err != nil {
		return 0, err
	}
	if l.Attrs().Statistics == nil {
		return 0, fmt.Errorf("%s: no statistics", port)
	}
	return l.Attrs().Statistics.RxPackets, nil
}

// TestHitlessSNMPSet: reconfiguration under steady traffic. A manager
// claims receiver 2 (a second collector) and points a second sampler of
// p1 at it, at rate 16 like the static one; then, in turn: it SETs that
// sampler's rate to 8, which changes the port's kernel rate (16 -> 8);
// it moves receiver 2 to a third collector; the daemon upgrades in place
// (SIGUSR2, the same binary: the SNMP-set configuration must come back);
// a port is added. The static sampler (receiver 1) is unaffected by all
// of it: rate 16 throughout (sub-sampled exactly from the kernel's 8),
// sequence numbers contiguous, pools continuous and exact. The changed
// sampler's sequence numbers and pool continue across both of its
// collectors, and its rate field changes once, at a known sample (but for
// at most one sample per CPU after it, drawn at the old rate and carrying
// it); each
// part's sample count is binomial, and every sample the kernel selected
// is one of its samples or a ring drop.
func TestHitlessSNMPSet(t *testing.T) {
	snmp := startSnmpd(t)
	h := newHitless(t, "-agentx", "unix:"+snmp.SocketPath, "-ports", "p*")
	col2 := listen(t, h.lab, collectorPort+1)
	h.before = h.lab.RxPackets(t, h.lab.Switch, "p1")
	d := h.start(t)
	d.waitReady(t, h.lab, "p1", "p2")
	g := snmp.Client(t, "private")
	g.Timeout, g.Retries = 2*time.Second, 2
	waitUntil(t, 15*time.Second, "SFLOW-MIB through snmpd", func() bool { return mibAnswers(g) })
	set := func(pdus ...gosnmp.SnmpPDU) {
		t.Helper()
		if r, err := g.Set(pdus); err != nil || r.Error != gosnmp.NoError {
			t.Fatalf("SET %v: %v %v", pdus[0].Name, err, r)
		}
	}
	collector := h.lab.CollectorAddr.As4()
	ds := fmt.Sprintf("11.1.3.6.1.2.1.2.2.1.1.%d.2", h.p1) // sFlowFsTable: p1, instance 2
	set(gosnmp.SnmpPDU{Name: rcvrColumn + "2.2", Type: gosnmp.OctetString, Value: "hl-manager"},
		gosnmp.SnmpPDU{Name: rcvrColumn + "3.2", Type: gosnmp.Integer, Value: 600})
	set(gosnmp.SnmpPDU{Name: rcvrColumn + "6.2", Type: gosnmp.OctetString, Value: string(collector[:])},
		gosnmp.SnmpPDU{Name: rcvrColumn + "7.2", Type: gosnmp.Integer, Value: int(collectorPort + 1)})
	set(gosnmp.SnmpPDU{Name: fsColumn + "3." + ds, Type: gosnmp.Integer, Value: 2},
		gosnmp.SnmpPDU{Name: fsColumn + "4." + ds, Type: gosnmp.Integer, Value: hitlessRate})
	time.Sleep(1200 * time.Millisecond) // a worker tick: the workers run the new sampler

	tr := startTraffic(h.lab, 0, 32, 10*time.Millisecond)
	time.Sleep(3 * time.Second)
	event := time.Now()
	set(gosnmp.SnmpPDU{Name: fsColumn + "4." + ds, Type: gosnmp.Integer, Value: hitlessRate / 2})
	time.Sleep(2 * time.Second)
	// Receiver 2 moves to another collector.
	col3 := listen(t, h.lab, collectorPort+2)
	set(gosnmp.SnmpPDU{Name: rcvrColumn + "7.2", Type: gosnmp.Integer, Value: int(collectorPort + 2)})
	time.Sleep(2 * time.Second)
	// An upgrade in place (the same binary): the SNMP-set configuration
	// (receiver 2, the sampler at rate 8) is restored in the new program.
	d.signal(t, syscall.SIGUSR2)
	d.waitLog(t, 20*time.Second, "upgrade in place completed")
	if !strings.Contains(d.log(), "SNMP-set configuration restored") {
		t.Errorf("the upgrade did not restore the SNMP-set configuration:\n%s", d.log())
	}
	time.Sleep(2 * time.Second)
	// A port added (sampled: -ports p*).
	h.lab.AddPort(t)
	waitUntil(t, 10*time.Second, "p3 sampled", func() bool { return samplerAttached(t, h.lab, "p3") })
	time.Sleep(2 * time.Second)
	sent := tr.stop()
	// Receiver 1, the static sampler: unaffected.
	h.check(t, sent, event, hitlessChecks{})

	// Receiver 2, the sampler whose rate changed.
	m, err := fetchMetrics(h.lab)
	if err != nil {
		t.Fatal(err)
	}
	_, selected, kdrops := portCounters(m, "p1")
	rx := h.lab.RxPackets(t, h.lab.Switch, "p1") - h.before
	dgs2, dgs3 := col2.snapshot(t), col3.snapshot(t)
	flows := append(goflowFlowsOf(dgs2, h.p1), goflowFlowsOf(dgs3, h.p1)...)
	if len(flows) == 0 || len(goflowFlowsOf(dgs3, h.p1)) == 0 {
		t.Fatal("no flow sample of p1 at receiver 2's first or second collector")
	}
	change, stragglers := -1, 0
	for i, f := range flows {
		if f.seq != uint32(i+1) {
			t.Fatalf("receiver 2: flow sample %d has sequence %d, want %d", i, f.seq, i+1)
		}
		if i > 0 && f.pool < flows[i-1].pool {
			t.Errorf("receiver 2: flow sample %d: pool ran backwards %d -> %d", i, flows[i-1].pool, f.pool)
		}
		switch {
		case f.rate == hitlessRate && change < 0:
		case f.rate == hitlessRate/2 && change < 0:
			change = i
		case f.rate == hitlessRate/2:
		case f.rate == hitlessRate && stragglers < runtime.NumCPU():
			// Each CPU's next sample after the change was drawn at the
			// old rate (its skip count): the kernel tells that rate, and
			// the sample carries it (at most one per CPU).
			stragglers++
		default:
			for j := max(0, i-5); j < min(len(flows), i+5); j++ {
				g := flows[j]
				t.Logf("receiver 2 sample %d: seq %d rate %d pool %d at %s (sub-agent %d, datagram %d)", j, g.seq, g.rate, g.pool,
					g.at.UTC().Format("15:04:05.000"), g.sub, g.dgSeq)
			}
			t.Fatalf("receiver 2: flow sample %d: rate %d (change at %d)", i, f.rate, change)
		}
	}
	if change <= 0 {
		t.Fatalf("receiver 2: the rate never changed (or from the first sample): %d", change)
	}
	at := flows[change-1].pool // frames up to the last sample at the old rate
	last := flows[len(flows)-1]
	if numbered := uint64(last.seq); selected != numbered+kdrops {
		t.Errorf("receiver 2: kernel selected %d samples, numbered %d + ring drops %d", selected, numbered, kdrops)
	}
	m1, sd1, ok1 := withinSigmas(change, int(at), 1/float64(hitlessRate), 4)
	m2, sd2, ok2 := withinSigmas(len(flows)-change+int(last.drop), int(rx)-int(at), 2/float64(hitlessRate), 4)
	t.Logf("receiver 2: %d samples after the change taken at the old rate (a CPU's skip count drawn before it)", stragglers)
	t.Logf("receiver 2: rate %d -> %d at sample %d (pool %d -> %d, SET %v after traffic start); %d samples of %d frames (%.0f ± %.1f), then %d + %d drops of %d frames (%.0f ± %.1f)",
		hitlessRate, hitlessRate/2, flows[change].seq, at, flows[change].pool, event.Sub(flows[0].at).Round(time.Millisecond),
		change, at, m1, sd1, len(flows)-change, last.drop, int(rx)-int(at), m2, sd2)
	if !ok1 || !ok2 {
		t.Errorf("receiver 2: sample counts outside 4 σ of the binomial")
	}
	checkIndependentDecoders(t, dgs2, collectorPort+1, h.p1)
	checkIndependentDecoders(t, dgs3, collectorPort+2, h.p1)
	h.stopClean(t, d)
}
