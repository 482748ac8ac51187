package e2e

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestHitlessDirections: ports sampled both ways or at egress only,
// through an upgrade in place (SIGUSR2) and a crash restart (SIGKILL and
// a new daemon), at each ingress hook. p1 receives frames all along and
// sends frames but while no daemon runs (its egress sampler is attached
// anew by the program that takes over, so a frame sent in between could
// not be sampled). The last sample_pool of p1 is within 64 samples below
// its frame count in the sampled directions (received + sent for both,
// sent for egress), pools strictly increase, sample sequence numbers
// continue (one gap at most, at a crash: the samples in flight), and no
// frame is reported twice.
func TestHitlessDirections(t *testing.T) {
	for _, c := range []struct{ dir, hook string }{{"both", "xdp"}, {"both", "tc"}, {"egress", "tc"}} {
		for _, event := range []string{"upgrade", "crash"} {
			t.Run(c.dir+"-"+c.hook+"/"+event, func(t *testing.T) {
				hitlessDirection(t, c.dir, c.hook, event)
			})
		}
	}
}

// numberedTraffic sends batches of test frames from host src to host
// dst's MAC, each frame numbered once (from first on), until stopped.
type numberedTraffic struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	next   uint64
	sent   uint64
}

func startNumbered(lab *netlab.Lab, src, dst int, first uint64) *numberedTraffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &numberedTraffic{cancel: cancel, done: make(chan struct{}), next: first}
	go func() {
		defer close(tr.done)
		for ctx.Err() == nil {
			frames := numberedFrames(lab, src, dst, lab.HostMACs[dst], tr.next, 32)
			if err := lab.Do(lab.Hosts[src], func() error { return sendBatch(frames) }); err == nil {
				tr.mu.Lock()
				tr.sent += uint64(len(frames))
				tr.mu.Unlock()
			}
			tr.next += uint64(len(frames)) // a frame perhaps sent is never numbered again
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return tr
}

func (tr *numberedTraffic) stop() {
	tr.cancel()
	<-tr.done
}

// p1Packets is p1's rx_packets and tx_packets.
func p1Packets(t *testing.T, lab *netlab.Lab) (rx, tx uint64) {
	t.Helper()
	var st *netlink.LinkStatistics
	err := lab.Do(lab.Switch, func() error {
		l, err := netlink.LinkByName("p1")
		if err != nil {
			return err
		}
		st = l.Attrs().Statistics
		return nil
	})
	if err != nil || st == nil {
		t.Fatalf("p1's statistics: %v", err)
	}
	return st.RxPackets, st.TxPackets
}

func hitlessDirection(t *testing.T, dir, hook, event string) {
	h := newHitless(t, "-direction", dir, "-hook", hook)
	lab := h.lab
	rx0, tx0 := p1Packets(t, lab)
	d := h.start(t)
	d.waitReady(t, lab, "p1", "p2")
	in := startNumbered(lab, 0, 1, 0)      // in at p1, out at p2
	out := startNumbered(lab, 1, 0, 1<<40) // in at p2, out at p1
	time.Sleep(2 * time.Second)
	out.stop()
	time.Sleep(200 * time.Millisecond)
	eventAt := time.Now()
	switch event {
	case "upgrade":
		d.signal(t, syscall.SIGUSR2)
		d.waitLog(t, 20*time.Second, "upgrade in place completed")
	case "crash":
		d.signal(t, syscall.SIGKILL)
		d.waitExit(t, 10*time.Second)
		time.Sleep(time.Second)
		d = h.start(t)
	}
	d.waitReady(t, lab, "p1", "p2")
	// The egress sampler is attached anew once the samples that waited
	// are read (the adoption's end, a second at most after the start).
	deadline := time.Now().Add(testutil.Scaled(10 * time.Second))
	for egressAttached(t, lab, int(h.p1)) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("p1's egress sampler not attached again after the %s:\n%s", event, d.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	out = startNumbered(lab, 1, 0, 1<<41)
	time.Sleep(2 * time.Second)
	out.stop()
	in.stop()

	// Settled: no new flow sample of p1 over 2 s.
	var flows []flowView
	for stable, prev := 0, -1; stable < 4; time.Sleep(500 * time.Millisecond) {
		flows = goflowFlowsOf(h.col.snapshot(t), h.p1)
		if len(flows) == prev {
			stable++
		} else {
			stable = 0
		}
		prev = len(flows)
	}
	rx1, tx1 := p1Packets(t, lab)
	want := tx1 - tx0
	if dir == "both" {
		want += rx1 - rx0
	}
	if len(flows) == 0 {
		t.Fatal("no flow sample of p1")
	}
	last := flows[len(flows)-1]
	t.Logf("p1 received %d, sent %d frames; %d flow samples, last pool %d (frames in the sampled directions %d)",
		rx1-rx0, tx1-tx0, len(flows), last.pool, want)
	if uint64(last.pool) > want || uint64(last.pool)+64*hitlessRate < want {
		t.Errorf("last sample_pool %d, p1's frames in the sampled directions %d: want at most, and within 64 samples of it", last.pool, want)
	}
	gaps := 0
	for i := 1; i < len(flows); i++ {
		p, f := flows[i-1], flows[i]
		if f.pool <= p.pool {
			t.Errorf("flow sample %d of p1: sample_pool %d after %d (%v after the %s)", i, f.pool, p.pool, f.at.Sub(eventAt).Round(time.Millisecond), event)
			for j := max(0, i-4); j < min(len(flows), i+4); j++ {
				t.Logf("  flow %d: seq %d pool %d drops %d sub %d dg %d at %v", j, flows[j].seq, flows[j].pool, flows[j].drop, flows[j].sub, flows[j].dgSeq, flows[j].at.Sub(eventAt).Round(time.Millisecond))
			}
		}
		switch {
		case f.seq == p.seq+1:
		case f.seq > p.seq+1 && event == "crash" && f.seq-p.seq <= 64:
			gaps++
		default:
			t.Errorf("flow sample %d of p1: sequence %d after %d", i, f.seq, p.seq)
		}
	}
	if gaps > 1 {
		t.Errorf("%d gaps in p1's sample sequence, want at most one (at the kill)", gaps)
	}
	if dups := duplicateFrames(h.col.snapshot(t), h.p1); len(dups) != 0 {
		t.Errorf("%d frames reported twice, e.g. %v", len(dups), dups[:min(len(dups), 5)])
	}
	h.stopClean(t, d)
}

// egressAttached is how p1's egress sampler is attached, "" when not.
func egressAttached(t *testing.T, lab *netlab.Lab, ifindex int) string {
	t.Helper()
	var m string
	if err := lab.Do(lab.Switch, func() (err error) { m, err = dataplane.KernelAttachmentEgress(ifindex); return }); err != nil {
		t.Fatal(err)
	}
	return m
}

// duplicateFrames returns the numbers of the test frames that more than
// one flow sample of ifindex reports (each frame crosses a port once in
// each direction at most, and the test's frame numbers are unique).
func duplicateFrames(dgs []datagram, ifindex uint32) []string {
	seen := map[string]int{}
	var dups []string
	for _, dg := range dgs {
		for _, s := range dg.our.Samples {
			fs, ok := s.(*sflow.FlowSample)
			if !ok || fs.Source.Index != ifindex {
				continue
			}
			for _, r := range fs.Records {
				hdr, ok := r.(*sflow.SampledHeader)
				if !ok {
					continue
				}
				if n, ok := frameNumber(hdr); ok {
					k := fmt.Sprintf("%d/out=%v", n, fs.Output == sflow.IfIndex(ifindex))
					if seen[k]++; seen[k] == 2 {
						dups = append(dups, k)
					}
				}
			}
		}
	}
	return dups
}

// TestPortHook: -port-hook puts single ports at their own hook over
// -hook: under auto both veth ports would be sampled at TC; p1 set to xdp
// is sampled with XDP, p2 stays at TC, and both are sampled.
func TestPortHook(t *testing.T) {
	lab := newLab(t, 2)
	col := listen(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "1", "-ports", "p1,p2", "-port-hook", "p1=xdp")
	d.waitReady(t, lab, "p1", "p2")
	if m := samplerAttachment(t, lab, "p1"); m != dataplane.AttachNative && m != dataplane.AttachGeneric {
		t.Errorf("p1 (port_hook xdp) attached as %q", m)
	}
	if m := samplerAttachment(t, lab, "p2"); m != dataplane.AttachTCX && m != dataplane.AttachClsact {
		t.Errorf("p2 (auto, veth) attached as %q, want TC", m)
	}
	in1, in2 := startNumbered(lab, 0, 1, 0), startNumbered(lab, 1, 0, 1<<40) // into p1, into p2
	time.Sleep(500 * time.Millisecond)
	in1.stop()
	in2.stop()
	p1, p2 := uint32(lab.LinkIndex(lab.Switch, "p1")), uint32(lab.LinkIndex(lab.Switch, "p2"))
	deadline := time.Now().Add(testutil.Scaled(5 * time.Second))
	for time.Now().Before(deadline) {
		dgs := col.snapshot(t)
		if len(goflowFlowsOf(dgs, p1)) > 0 && len(goflowFlowsOf(dgs, p2)) > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("flow samples of p1 %d, of p2 %d: want both sampled", len(goflowFlowsOf(col.snapshot(t), p1)), len(goflowFlowsOf(col.snapshot(t), p2)))
}
