package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestTwoCollectors runs the daemon with two collectors. Both must receive
// the same flow samples (sequence numbers, pools, sampled frames). Then
// the first listener closes (its port answers with ICMP port unreachable):
// the second must still receive every sample with contiguous sequences and
// a count within statistics, the metrics must show send errors, and the
// daemon must keep running.
func TestTwoCollectors(t *testing.T) {
	const n, k1, k2 = 10, 10000, 10000
	lab := newLab(t, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	colA := listen(t, lab, 6343)
	colB := listen(t, lab, 6344)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:6343", lab.CollectorAddr), "-collector", fmt.Sprintf("%s:6344", lab.CollectorAddr),
		"-sampling", fmt.Sprint(n), "-ports", "p1,p2", "-polling", "0",
		// Drop notifications off: their datagrams to the gone collector
		// would share its ICMP port-unreachable budget (one per second per
		// peer after a burst) with the workers' sockets, so whether a
		// worker's socket sees ECONNREFUSED would be left to chance.
		"-drops", "off")
	d.waitReady(t, lab, "p1", "p2")

	// Phase 1: both collectors alive.
	sendNumbered(t, lab, 0, 1, 1, k1)
	dgsB := colB.waitDelivered(t, lab, colA)
	dgsA := colA.snapshot(t)
	fa, fb := flowSamplesOf(dgsA, p1), flowSamplesOf(dgsB, p1)
	if len(fa) != len(fb) {
		t.Fatalf("collector 6343 got %d flow samples of p1, 6344 got %d", len(fa), len(fb))
	}
	for i := range fa {
		na, _ := frameNumber(fa[i].header)
		nb, _ := frameNumber(fb[i].header)
		if fa[i].seq != fb[i].seq || fa[i].pool != fb[i].pool || fa[i].rate != fb[i].rate || na != nb {
			t.Fatalf("flow sample %d: 6343 has seq %d pool %d frame %d, 6344 has seq %d pool %d frame %d",
				i, fa[i].seq, fa[i].pool, na, fb[i].seq, fb[i].pool, nb)
		}
	}
	if mean, sd, ok := withinSigmas(len(fa), k1, 1.0/n, 4); !ok {
		t.Errorf("phase 1: %d flow samples, want %.0f ± 4×%.1f", len(fa), mean, sd)
	}
	for _, c := range []struct {
		port uint16
		dgs  []datagram
	}{{6343, dgsA}, {6344, dgsB}} {
		checkDatagramSequences(t, c.dgs)
		checkSampleSequences(t, c.dgs)
		checkIndependentDecoders(t, c.dgs, c.port, p1)
	}
	t.Logf("phase 1: both collectors received the same %d flow samples", len(fa))

	// Phase 2: collector 6343 is gone.
	colA.close()
	sendNumbered(t, lab, 0, 1, k1+1, k2)
	// Not waitDelivered: the first datagrams to the closed port leave
	// without an error (the ICMP answer comes after them), so they are
	// neither received nor counted lost.
	sent := time.Now()
	dgsB = colB.waitQuiet(t, sent, p1)
	fb2 := flowSamplesOf(dgsB, p1)[len(fb):]
	if mean, sd, ok := withinSigmas(len(fb2), k2, 1.0/n, 4); !ok {
		t.Errorf("phase 2: collector 6344 got %d flow samples, want %.0f ± 4×%.1f", len(fb2), mean, sd)
	}
	for i, f := range fb2 {
		num, ok := frameNumber(f.header)
		if !ok || num <= k1 || num > k1+k2 {
			t.Fatalf("phase 2 flow sample %d: frame %d, want one of phase 2 (%d..%d)", i, num, k1+1, k1+k2)
		}
	}
	checkDatagramSequences(t, dgsB)
	checkSampleSequences(t, dgsB)
	checkIndependentDecoders(t, dgsB, 6344, p1)

	m, err := fetchMetrics(lab)
	if err != nil {
		t.Fatal(err)
	}
	errs := m.sum("sflowswitchd_send_errors_total")
	t.Logf("phase 2: collector 6344 got %d flow samples; daemon send errors %d, samples unsent %d", len(fb2), errs, m.sum("sflowswitchd_samples_dropped_total"))
	if errs == 0 {
		t.Errorf("metrics show no send error after collector 6343 went away")
	}
	// Per collector: the errors and the lost samples
	// are the gone collector's only; the live one counts at least the
	// datagrams it received.
	a, b := fmt.Sprintf(`collector="%s:6343"`, lab.CollectorAddr), fmt.Sprintf(`collector="%s:6344"`, lab.CollectorAddr)
	errA, _ := m.get("sflowswitchd_collector_send_errors_total", a)
	errB, okB := m.get("sflowswitchd_collector_send_errors_total", b)
	lostA := m.sumWith("sflowswitchd_collector_samples_lost_total", a, `reason="send_error"`)
	lostB := m.sumWith("sflowswitchd_collector_samples_lost_total", b, "")
	sentB, _ := m.get("sflowswitchd_collector_datagrams_sent_total", b)
	t.Logf("per collector: 6343 send errors %d, samples lost %d; 6344 send errors %d, samples lost %d, datagrams %d (received %d)",
		errA, lostA, errB, lostB, sentB, len(dgsB))
	if errA != errs || lostA == 0 || !okB || errB != 0 || lostB != 0 || sentB < uint64(len(dgsB)) {
		t.Errorf("per-collector metrics wrong (want every send error and lost sample on 6343, 6344 clean)")
	}
	if !d.alive() {
		t.Fatalf("daemon died\n%s", d.log())
	}
	// Still sampling after the errors.
	before := len(flowSamplesOf(dgsB, p1))
	sendNumbered(t, lab, 0, 1, k1+k2+1, 1000)
	colB.waitFor(t, 5*time.Second, "flow samples after the send errors", func(dgs []datagram) bool {
		return len(flowSamplesOf(dgs, p1)) > before
	})
}
