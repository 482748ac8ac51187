package main

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/dataplane/afxdp"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
)

// maxBatch bounds the frames of one paced BPF_PROG_TEST_RUN call, so a
// late wake-up of the source becomes a short burst, not a flood.
const maxBatch = 1024

// minBatch is the smallest paced batch (the kernel's default live-frame
// batch size).
const minBatch = 64

// pacedSource runs tr on a goroutine pinned to CPU 1 inside the switch
// namespace for d, at rate frames/s (0: as fast as the kernel goes), and
// returns the frames it ran and the wall time.
func (b *bench) pacedSource(live bool, rate float64, d time.Duration) (uint64, time.Duration, error) {
	type result struct {
		sent    uint64
		elapsed time.Duration
		err     error
	}
	done := make(chan result, 1)
	go func() {
		// Pinned and namespace-switched; never unlocked, so the runtime
		// discards this thread when the goroutine ends.
		if err := pinThread(1); err != nil {
			done <- result{err: err}
			return
		}
		if err := netnsutil.Enter(b.lab.sw); err != nil {
			done <- result{err: err}
			return
		}
		tr := newTestRunner(b.sampler.FD(), b.frame, b.p1, live)
		var sent uint64
		start := time.Now()
		for {
			el := time.Since(start)
			if el >= d {
				done <- result{sent: sent, elapsed: el}
				return
			}
			n := uint64(maxBatch)
			if rate > 0 {
				due := uint64(rate * el.Seconds())
				if due < sent+minBatch {
					// Sleep until a minimum batch is due: one syscall per
					// 64 frames at least (live-frame mode sets up its page
					// pool per call, which small batches cannot afford).
					time.Sleep(time.Duration(float64(sent+minBatch-due) / rate * float64(time.Second)))
					continue
				}
				n = min(due-sent, maxBatch)
			}
			if _, err := tr.run(uint32(n)); err != nil {
				done <- result{err: err}
				return
			}
			sent += n
		}
	}()
	r := <-done
	return r.sent, r.elapsed, r.err
}

// deliveryRow is one trial's result.
type deliveryRow struct {
	offered, delivered, dropFrac float64
}

// delivery is part 3: samples per second reaching user space on one core
// (receiver pinned to CPU 0, source to CPU 1), through the ring buffer and
// through AF_XDP.
func (b *bench) delivery() error {
	ring := make(map[float64][]deliveryRow)
	xsk := make(map[float64][]deliveryRow)
	var loads []string
	for round := 0; round < b.o.rateRounds; round++ {
		loads = append(loads, loadavg())
		for _, rate := range b.o.rates {
			r, err := b.ringTrial(rate)
			if err != nil {
				return fmt.Errorf("ring buffer at %v/s: %w", rate, err)
			}
			ring[rate] = append(ring[rate], r)
			x, err := b.xskTrial(rate)
			if err != nil {
				return fmt.Errorf("AF_XDP at %v/s: %w", rate, err)
			}
			xsk[rate] = append(xsk[rate], x)
		}
	}
	w := b.out
	fmt.Fprintf(w, "## delivery: samples/s into user space on one core, rate 1, 60-byte frames, %v per trial, %d rounds (load average per round: %v)\n\n", b.o.rateTrial, b.o.rateRounds, loads)
	fmt.Fprintf(w, "Ring: inline, header 128, source = BPF_PROG_TEST_RUN of xdp_sampler (repeat, paced) on CPU 1, reader = Source(0).Read counting on CPU 0; drops = sampler drops counter.\n")
	fmt.Fprintf(w, "AF_XDP: monitor mode, source = BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES of xdp_sampler on CPU 1, receiver = afxdp.Socket.Receive (copy mode, default rings) on CPU 0; drops = sampler drops + XSK rx_dropped + rx_ring_full.\n\n")
	for _, part := range []struct {
		name string
		rows map[float64][]deliveryRow
	}{{"ring buffer", ring}, {"AF_XDP", xsk}} {
		fmt.Fprintf(w, "### %s\n\n| source rate | offered samples/s (median) | delivered samples/s (median) | drop fraction (median) | per-round drop fraction |\n|---|---|---|---|---|\n", part.name)
		best, bestAll := 0.0, 0.0
		for _, rate := range b.o.rates {
			rows := part.rows[rate]
			var off, del, fr []float64
			for _, r := range rows {
				off, del, fr = append(off, r.offered), append(del, r.delivered), append(fr, r.dropFrac)
			}
			label := "max (unpaced)"
			if rate > 0 {
				label = fmt.Sprintf("%.0f/s", rate)
			}
			fmt.Fprintf(w, "| %s | %.0f | %.0f | %.5f | %s |\n", label, median(off), median(del), median(fr), list("%.5f", fr))
			if median(fr) == 0 && median(del) > best {
				best = median(del)
			}
			if slices.Max(fr) == 0 && median(del) > bestAll {
				bestAll = median(del)
			}
		}
		fmt.Fprintf(w, "\nHighest delivered rate with drops 0: %.0f samples/s (median drop fraction 0), %.0f samples/s (0 in every round)\n\n", best, bestAll)
	}
	return nil
}

// ringTrial attaches the sampler inline at rate 1, drives it at rate and
// counts what the reader gets.
func (b *bench) ringTrial(rate float64) (deliveryRow, error) {
	detach, err := b.attach(confEvery)
	if err != nil {
		return deliveryRow{}, err
	}
	row, err := func() (deliveryRow, error) {
		rc, err := b.startRingCounter()
		if err != nil {
			return deliveryRow{}, err
		}
		c0, err := b.dp.Stats().Ingress(b.p1)
		if err != nil {
			rc.close()
			return deliveryRow{}, err
		}
		got0 := rc.n.Load()
		_, el, err := b.pacedSource(false, rate, b.o.rateTrial)
		time.Sleep(100 * time.Millisecond) // let the reader drain the ring
		got := rc.n.Load() - got0
		if cerr := rc.close(); err == nil {
			err = cerr
		}
		if err != nil {
			return deliveryRow{}, err
		}
		c1, err := b.dp.Stats().Ingress(b.p1)
		if err != nil {
			return deliveryRow{}, err
		}
		return newDeliveryRow(c1.Samples-c0.Samples, got, c1.Drops-c0.Drops, el), nil
	}()
	if derr := detach(); derr != nil && err == nil {
		err = derr
	}
	return row, err
}

// newDeliveryRow turns a trial's counts over el into rates.
func newDeliveryRow(samples, got, drops uint64, el time.Duration) deliveryRow {
	r := deliveryRow{
		offered:   float64(samples) / el.Seconds(),
		delivered: float64(got) / el.Seconds(),
	}
	if samples > 0 {
		r.dropFrac = float64(drops) / float64(samples)
	}
	return r
}

// xskTrial attaches the sampler in monitor mode at rate 1 with an AF_XDP
// socket on p1 queue 0 and drives it with live frames at rate.
func (b *bench) xskTrial(rate float64) (deliveryRow, error) {
	pc := dataplane.PortConfig{Rate: 1, Mode: dataplane.ModeMonitor, HeaderBytes: 128}
	if err := b.dp.AttachPort(b.p1, pc); err != nil {
		return deliveryRow{}, err
	}
	row, err := b.xskMeasure(rate)
	if derr := b.dp.DetachPort(b.p1); derr != nil && err == nil {
		err = derr
	}
	return row, err
}

func (b *bench) xskMeasure(rate float64) (deliveryRow, error) {
	var s *afxdp.Socket
	err := netnsutil.DoNamed(b.lab.sw, func() error {
		var err error
		s, err = afxdp.Open(b.p1, 0, afxdp.Options{})
		return err
	})
	if err != nil {
		return deliveryRow{}, err
	}
	var key uint32
	xsks, err := b.dp.XSKMap(b.p1)
	if err == nil {
		key, err = xsks.Key(0)
	}
	if err == nil {
		err = xsks.Set(key, s.FD())
	}
	if err != nil {
		s.Close()
		return deliveryRow{}, err
	}
	var got atomic.Uint64
	var stop atomic.Bool
	rxDone := make(chan error, 1)
	go func() {
		if err := pinThread(0); err != nil {
			rxDone <- err
			return
		}
		count := func([]byte) {}
		for !stop.Load() {
			n, err := s.Receive(count)
			if err != nil {
				rxDone <- err
				return
			}
			if n == 0 {
				if _, err := s.Poll(20 * time.Millisecond); err != nil {
					rxDone <- err
					return
				}
			}
			got.Add(uint64(n))
		}
		rxDone <- nil
	}()
	// Stats is a getsockopt on the socket's fd, safe next to Receive.
	st0, err0 := s.Stats()
	c0, err1 := b.dp.Stats().Ingress(b.p1)
	_, el, err := b.pacedSource(true, rate, b.o.rateTrial)
	time.Sleep(100 * time.Millisecond) // let the receiver drain the RX ring
	n := got.Load()
	st1, err2 := s.Stats()
	c1, err3 := b.dp.Stats().Ingress(b.p1)
	stop.Store(true)
	err4 := <-rxDone
	err5 := xsks.Set(key, -1)
	err6 := s.Close()
	for _, e := range []error{err, err0, err1, err2, err3, err4, err5, err6} {
		if e != nil {
			return deliveryRow{}, e
		}
	}
	drops := (c1.Drops - c0.Drops) + (st1.RxDropped - st0.RxDropped) + (st1.RxRingFull - st0.RxRingFull)
	return newDeliveryRow(c1.Samples-c0.Samples, n, drops, el), nil
}
