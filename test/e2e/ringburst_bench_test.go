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
// (bench/README.md, "Ring size"). The daemon samples p1 at 1 in 1 with
// its default hook and header size (TC ingress on veth, 128-byte headers:
// 192-byte ring records); each iteration sends a burst of
// ringBurstFrames 60-byte frames into p1 as fast as the lab's packet
// socket sends (about 0.3–0.5 M frames/s here), waits until every sample
// of the burst reached the collector or was counted as a kernel drop, and
// reads the port's counters from the daemon's metrics. Reported per
// burst: drops (ring full; mean and worst burst), drop-%, the share of
// bursts with any drop, and the burst's frames/s. Exact
// accounting is checked on every burst: pool = frames, selected = pool,
// samples received + kernel drops = selected. Run it idle and beside a
// CPU-bound process (`stress-ng --cpu 1`).
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

	var drops, frames, worst, lossy uint64
	var sending time.Duration
	next := uint64(1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m, err := fetchMetrics(lab)
		if err != nil {
			b.Fatal(err)
		}
		pool0, sel0, drops0 := portCounters(m, "p1")
		flows0 := col.flowsOf(p1)
		start := time.Now()
		sendNumbered(b, lab, 0, 1, next, ringBurstFrames)
		sending += time.Since(start)
		next += ringBurstFrames

		// Every sample of the burst is received or counted as dropped.
		deadline := time.Now().Add(20 * time.Second)
		for {
			if m, err = fetchMetrics(lab); err != nil {
				b.Fatal(err)
			}
			pool, sel, dr := portCounters(m, "p1")
			got := col.flowsOf(p1) - flows0
			if pool-pool0 == ringBurstFrames && sel-sel0 == ringBurstFrames && got+(dr-drops0) == ringBurstFrames {
				drops += dr - drops0
				frames += ringBurstFrames
				worst = max(worst, dr-drops0)
				if dr != drops0 {
					lossy++
				}
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("burst %d: pool +%d, selected +%d, received %d + kernel drops %d, want %d each and in all\n%s",
					i, pool-pool0, sel-sel0, got, dr-drops0, ringBurstFrames, d.log())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(drops)/float64(b.N), "drops/burst")
	b.ReportMetric(100*float64(drops)/float64(frames), "drop-%")
	b.ReportMetric(float64(worst), "max-drops/burst")
	b.ReportMetric(100*float64(lossy)/float64(b.N), "lossy-bursts-%")
	b.ReportMetric(float64(frames)/sending.Seconds(), "frames/s")
}
