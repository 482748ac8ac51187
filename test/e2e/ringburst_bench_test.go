package e2e

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// ringBurstFrames is the burst of BenchmarkRingBurst: TestSampling's
// burst at 1 in 1.
const ringBurstFrames = 20000

// BenchmarkRingBurst measures how much of a burst of samples a worker's
// ring absorbs, by ring size (-ring-bytes), to choose the default
// (bench/ring.sh; bench/README.md, "Ring size"). The daemon samples p1 at
// 1 in 1 with its default hook and header size (TC ingress on veth,
// 128-byte headers: 192-byte ring records). Each iteration sends a burst
// of ringBurstFrames 60-byte frames into p1 as fast as the lab's packet
// socket sends (about 0.1–0.5 M frames/s here), waits until the agent has
// read every sample of the burst or it was counted as a kernel drop (the
// daemon's metrics), and pauses 100 ms before the next burst. Reported
// per burst: drops (ring full; mean and worst burst), drop-%, the share
// of bursts with any drop, and the burst's frames/s. Exact accounting is
// checked on every burst (pool = frames, selected = pool, read by the
// agent + kernel drops = selected) and at the end (flow samples at the
// collector + kernel drops = frames). Run it idle and beside a CPU-bound
// process (`stress-ng --cpu 1`).
func BenchmarkRingBurst(b *testing.B) {
	for _, rb := range []int{1 << 20, 2 << 20, 4 << 20, 8 << 20} {
		b.Run(fmt.Sprintf("ring=%dMiB", rb>>20), func(b *testing.B) { benchRingBurst(b, rb) })
	}
}

func benchRingBurst(b *testing.B, ringBytes int) {
	lab := newLab(b, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	col := listenCounting(b, lab, collectorPort)
	d := startDaemon(b, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "1", "-ports", "p1", "-polling", "0", "-drops", "off", "-ring-bytes", strconv.Itoa(ringBytes))
	d.waitReady(b, lab, "p1")
	counters := func() (pool, selected, drops, read uint64) {
		m, err := fetchMetrics(lab)
		if err != nil {
			b.Fatal(err)
		}
		pool, selected, drops = portCounters(m, "p1")
		return pool, selected, drops, m.sum("sflowswitchd_kernel_samples_total")
	}

	var drops, frames, worst, lossy uint64
	var sending time.Duration
	next := uint64(1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pool0, sel0, drops0, read0 := counters()
		start := time.Now()
		sendNumbered(b, lab, 0, 1, next, ringBurstFrames)
		sending += time.Since(start)
		next += ringBurstFrames

		// Every sample of the burst is read by the agent or counted as
		// dropped (the datagrams may still wait for their flush).
		deadline := time.Now().Add(20 * time.Second)
		for {
			pool, sel, dr, read := counters()
			if pool-pool0 == ringBurstFrames && sel-sel0 == ringBurstFrames && (read-read0)+(dr-drops0) == ringBurstFrames {
				drops += dr - drops0
				frames += ringBurstFrames
				worst = max(worst, dr-drops0)
				if dr != drops0 {
					lossy++
				}
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("burst %d: pool +%d, selected +%d, read %d + kernel drops %d, want %d each and in all\n%s",
					i, pool-pool0, sel-sel0, read-read0, dr-drops0, ringBurstFrames, d.log())
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // bursts apart, as in TestSampling
	}
	b.StopTimer()
	// Whatever the agent read reaches the collector: received + drops =
	// frames sent, exactly.
	var got uint64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if got = col.flowsOf(p1); got+drops == frames || time.Now().After(deadline) {
			break
		}
	}
	if got+drops != frames {
		b.Errorf("collector received %d flow samples + %d kernel drops, %d frames sent", got, drops, frames)
	}
	b.ReportMetric(float64(drops)/float64(b.N), "drops/burst")
	b.ReportMetric(100*float64(drops)/float64(frames), "drop-%")
	b.ReportMetric(float64(worst), "max-drops/burst")
	b.ReportMetric(100*float64(lossy)/float64(b.N), "lossy-bursts-%")
	b.ReportMetric(float64(frames)/sending.Seconds(), "frames/s")
}
