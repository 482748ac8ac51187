package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestHitlessKillMidBatch: no frame is reported twice across crash
// restarts. At rate 1 the daemon is stopped (SIGSTOP) while 6000 numbered
// frames arrive, so that its ring holds them all, and then let go
// (SIGCONT) and killed (SIGKILL) a few milliseconds later, while it reads
// that batch and sends the datagrams it made; a new daemon takes the
// samplers over. Three rounds, each with another delay. The flow samples
// of p1 name each frame once at most (no record read again by the
// program that takes the ring over), their sequence numbers only
// increase, and the samples lost in flight at the kills (the gaps in the
// sequence numbers: read and numbered but not sent) are a batch at most
// per kill. (Before, the ring's consumer position was stored only after a
// whole batch, while datagrams of the batch were sent every 32: the next
// program read the sent part again, 1760 frames twice in one run.)
func TestHitlessKillMidBatch(t *testing.T) {
	h := newHitless(t, "-sampling", "1")
	lab := h.lab
	d := h.start(t)
	d.waitReady(t, lab, "p1", "p2")
	const perRound = 6000
	for round, delay := range []time.Duration{2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond} {
		d.stop(t)
		sendNumbered(t, lab, 0, 1, uint64(round*perRound), perRound)
		d.signal(t, syscall.SIGCONT)
		time.Sleep(delay)
		d.signal(t, syscall.SIGKILL)
		d.waitExit(t, 10*time.Second)
		d = h.start(t)
		d.waitReady(t, lab, "p1", "p2")
	}
	// Settled: no new flow sample of p1 over 2 s.
	var dgs []datagram
	for stable, prev := 0, -1; stable < 4; time.Sleep(500 * time.Millisecond) {
		dgs = h.col.snapshot(t)
		n := len(goflowFlowsOf(dgs, h.p1))
		if n == prev {
			stable++
		} else {
			stable = 0
		}
		prev = n
	}
	seen := map[uint64]int{}
	var dups []string
	var lastSeq uint32
	lost := 0
	for _, dg := range dgs {
		for _, s := range dg.our.Samples {
			fs, ok := s.(*sflow.FlowSample)
			if !ok || fs.Source.Index != h.p1 {
				continue
			}
			if fs.SequenceNumber <= lastSeq {
				t.Errorf("sample sequence %d after %d", fs.SequenceNumber, lastSeq)
			}
			lost += int(fs.SequenceNumber - lastSeq - 1)
			lastSeq = fs.SequenceNumber
			for _, r := range fs.Records {
				if hdr, ok := r.(*sflow.SampledHeader); ok {
					if n, ok := frameNumber(hdr); ok {
						if seen[n]++; seen[n] == 2 {
							dups = append(dups, fmt.Sprint(n))
						}
					}
				}
			}
		}
	}
	t.Logf("%d frames sent, %d reported, %d reported twice, %d samples lost in flight (sequence gaps)", 3*perRound, len(seen), len(dups), lost)
	if len(dups) != 0 {
		t.Errorf("%d frames reported twice, e.g. %v", len(dups), dups[:min(5, len(dups))])
	}
	if lost > 3*64 {
		t.Errorf("%d samples lost in flight at 3 kills, want at most a batch (64) each", lost)
	}
	if len(seen) < 3*perRound/2 {
		t.Errorf("%d of %d frames reported: the lab lost most of the bursts, nothing tested", len(seen), 3*perRound)
	}
	h.stopClean(t, d)
}
