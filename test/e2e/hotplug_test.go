package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestHotplug adds a port to the lab while the daemon (ports "p*") runs:
// frames entering it are sampled within 2 s of the hot-plug and its
// counters are polled. Then the port is removed: within 2 s nothing is
// reported for its ifindex any more, and the daemon keeps sampling p1.
func TestHotplug(t *testing.T) {
	lab := newLab(t, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	col := listen(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "1", "-ports", "p*", "-polling", "1")
	d.waitReady(t, lab, "p1", "p2")

	plugged := time.Now()
	i := lab.AddPort(t)
	port := fmt.Sprintf("p%d", i)
	host := len(lab.Hosts) - 1
	idx := uint32(lab.LinkIndex(lab.Switch, port))
	if idx == 0 {
		t.Fatalf("%s has no ifindex after AddPort", port)
	}
	// One frame every 20 ms from the new host, stamped with its send time,
	// until a sample of it arrives.
	var first flowRec
	for num := uint64(1); ; num++ {
		lab.SendFrames(t, host, testFrames(lab, host, 0, num, 1))
		if fs := flowSamplesOf(col.snapshot(t), idx); len(fs) > 0 {
			first = fs[0]
			break
		}
		if time.Since(plugged) > testutil.Scaled(6*time.Second) {
			t.Fatalf("no flow sample of hot-plugged %s (ifindex %d) %v after AddPort\n%s", port, idx, testutil.Scaled(6*time.Second), d.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	sampledAfter := frameSentAt(first.header).Sub(plugged)
	t.Logf("hot-plugged %s (ifindex %d): first sampled frame sent %v after AddPort began, its sample arrived after %v",
		port, idx, sampledAfter.Round(time.Millisecond), first.at.Sub(plugged).Round(time.Millisecond))
	// 2 s, times the time scale of an emulated test VM (testutil.Scaled).
	if bound := testutil.Scaled(2 * time.Second); sampledAfter > bound {
		t.Errorf("hot-plugged %s first sampled %v after it was added, want within %v", port, sampledAfter, bound)
	}
	if !samplerAttached(t, lab, port) {
		t.Errorf("no sampler on hot-plugged %s", port)
	}
	ds := sflow.DataSource{Type: sflow.SourceIfIndex, Index: idx}
	col.waitFor(t, 3*time.Second, "a counter sample of the hot-plugged port", func(dgs []datagram) bool {
		return len(counterSamplesOf(dgs, ds)) > 0
	})

	// Removal.
	removed := time.Now()
	lab.DelPort(t, i)
	for num := uint64(1); time.Since(removed) < 3500*time.Millisecond; num += 10 {
		lab.SendFrames(t, 0, testFrames(lab, 0, 1, num, 10))
		time.Sleep(50 * time.Millisecond)
	}
	dgs := col.snapshot(t)
	var lastSeen time.Time
	p1After := 0
	for _, dg := range dgs {
		if len(flowSamplesOf([]datagram{dg}, idx))+len(counterSamplesOf([]datagram{dg}, ds)) > 0 {
			lastSeen = dg.at
		}
		if dg.at.After(removed.Add(2 * time.Second)) {
			p1After += len(flowSamplesOf([]datagram{dg}, p1))
		}
	}
	t.Logf("removed %s: last reported %v after DelPort began; %d samples of p1 in the last 1.5 s", port, lastSeen.Sub(removed).Round(time.Millisecond), p1After)
	if lastSeen.After(removed.Add(2 * time.Second)) {
		t.Errorf("removed %s still reported %v after DelPort", port, lastSeen.Sub(removed))
	}
	if p1After == 0 {
		t.Errorf("no sample of p1 more than 2 s after the removal of %s\n%s", port, d.log())
	}
	if !d.alive() {
		t.Fatalf("daemon died\n%s", d.log())
	}
	checkDatagramSequences(t, dgs)
	checkSampleSequences(t, dgs)
}
