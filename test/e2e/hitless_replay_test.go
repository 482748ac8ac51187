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
// samplers over. Six rounds, each with another delay (1 to 10 ms). The flow samples
// of p1 name each frame once at most (no record read again by the
// program that takes the ring over), their sequence numbers only
// increase, and the samples lost in flight at the kills (the gaps in the
// sequence numbers: numbered into datagrams not yet sent) are a send
// batch at most per kill. (Before, the ring's consumer position was stored only after a
// whole batch, while datagrams of the batch were sent every 32: the next
// program read the sent part again, 1760 frames twice in one run.)
//
// Then an upgrade in place (SIGUSR2) with a burst of 6000 frames in the
// ring. At 1 in 1 every frame is a sample, so the last flow sample's pool is
// p1's rx_packets exactly, and its sequence number plus its drops (the
// ring's losses) are that pool: the records a killed daemon had read
// past its last send are read again, with their own pools and the
// sequence numbers that were not sent. (Before, the agent state kept the
// pool and sequence number of the latest record read, ahead of the ring
// position: the records read again had their pools raised above it and
// numbers skipped, and the last pool stayed above rx_packets for good.)
func TestHitlessKillMidBatch(t *testing.T) {
	h := newHitless(t, "-sampling", "1")
	lab := h.lab
	h.before = lab.RxPackets(t, lab.Switch, "p1")
	d := h.start(t)
	d.waitReady(t, lab, "p1", "p2")
	const perRound = 6000
	delays := []time.Duration{1 * time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 5 * time.Millisecond, 7 * time.Millisecond, 10 * time.Millisecond}
	kills := len(delays)
	for round, delay := range delays {
		d.stop(t)
		sendNumbered(t, lab, 0, 1, uint64(round*perRound), perRound)
		d.signal(t, syscall.SIGCONT)
		time.Sleep(delay)
		d.signal(t, syscall.SIGKILL)
		d.waitExit(t, 10*time.Second)
		d = h.start(t)
		d.waitReady(t, lab, "p1", "p2")
	}
	// An upgrade in place with a burst waiting in the ring, then frames
	// after the last take-over: the last samples are of frames whose
	// samples are not lost in flight at a kill.
	d.stop(t)
	sendNumbered(t, lab, 0, 1, uint64(kills*perRound), perRound)
	d.signal(t, syscall.SIGCONT)
	d.signal(t, syscall.SIGUSR2)
	d.waitLog(t, 20*time.Second, "upgrade in place completed")
	d.waitReady(t, lab, "p1", "p2")
	sendNumbered(t, lab, 0, 1, uint64((kills+1)*perRound), 100)
	// Settled: the pool is the kernel's count, nothing new over 2 s.
	e := h.waitSettled(t)
	dgs := h.col.snapshot(t)
	if len(e.flows) == 0 {
		t.Fatal("no flow sample of p1")
	}
	last := e.flows[len(e.flows)-1]
	t.Logf("p1 received %d frames; last flow sample: sequence %d, pool %d, drops %d; ring drops %d",
		e.rx, last.seq, last.pool, last.drop, e.kdrops)
	if uint64(last.pool) != e.rx {
		t.Errorf("last sample_pool %d, p1's rx_packets %d: want equal (1 in 1)", last.pool, e.rx)
	}
	if uint64(last.seq)+uint64(last.drop) != uint64(last.pool) {
		t.Errorf("last flow sample: sequence %d + drops %d = %d, want its pool %d (every frame numbered or dropped once)",
			last.seq, last.drop, uint64(last.seq)+uint64(last.drop), last.pool)
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
	t.Logf("%d frames sent, %d reported, %d reported twice, %d samples lost in flight (sequence gaps)", (kills+1)*perRound+100, len(seen), len(dups), lost)
	if len(dups) != 0 {
		t.Errorf("%d frames reported twice, e.g. %v", len(dups), dups[:min(5, len(dups))])
	}
	// In flight at a kill: the samples of the datagrams a worker had
	// made and not yet sent, a send batch (32 datagrams) at most.
	perDatagram := 0
	for _, dg := range dgs {
		perDatagram = max(perDatagram, len(dg.our.Samples))
	}
	if lost > kills*32*perDatagram {
		t.Errorf("%d samples lost in flight at %d kills, want at most a send batch each (32 datagrams of %d samples)", lost, kills, perDatagram)
	}
	if len(seen) < (kills+1)*perRound/2 {
		t.Errorf("%d of %d frames reported: the lab lost most of the bursts, nothing tested", len(seen), (kills+1)*perRound)
	}
	h.stopClean(t, d)
}
