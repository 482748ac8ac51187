package e2e

import (
	"fmt"
	"math"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBackoff: a flood at 1 in 1 with a quota of 1000 samples/s. The
// rate in force steps up at once to what fits (kernel at the power of two
// below, exact sub-sampling on top); once it has, every second delivers at
// most the quota plus one step (2000); each sample carries the rate in
// force, so the sum of the samples' rates (plus the samples the ring
// dropped, taken at 1 in 1 before the step) estimates the frames within
// binomial bounds, while the pool stays the kernel's exact count. When
// the flood ends (200 frames/s, within half the quota at 1 in 1), the rate
// returns to 1 after the hysteresis. A log line and a metric record each
// step.
func TestBackoff(t *testing.T) {
	const quota = 1000
	lab := newLab(t, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	col := listen(t, lab, collectorPort)
	before := lab.RxPackets(t, lab.Switch, "p1")
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "1", "-ports", "p1,p2", "-polling", "0", "-max-samples-per-second", fmt.Sprint(quota))
	d.waitReady(t, lab, "p1", "p2")

	flood := startTraffic(lab, 0, 2000, 0)
	start := time.Now()
	time.Sleep(6 * time.Second)
	floodSent := flood.stop()
	floodEnd := time.Now()
	calm := startTraffic(lab, 0, 10, 50*time.Millisecond)
	time.Sleep(7 * time.Second)
	calmSent := calm.stop()

	m := mustFetchMetrics(t, lab)
	rx := lab.RxPackets(t, lab.Switch, "p1") - before
	dgs := col.waitDelivered(t, lab)
	flows := goflowFlowsOf(dgs, p1)
	if len(flows) == 0 {
		t.Fatal("no flow sample of p1")
	}
	if rx != floodSent+calmSent {
		t.Errorf("kernel: p1 received %d frames, sent %d", rx, floodSent+calmSent)
	}
	pool, _, kdrops := portCounters(m, "p1")
	if pool != rx {
		t.Errorf("metrics: pool %d, kernel rx_packets %d", pool, rx)
	}
	// Per second of arrival: samples and the highest rate.
	type sec struct {
		n       int
		maxRate uint32
	}
	secs := map[int]*sec{}
	var est, variance float64
	maxRate := uint32(1)
	for i, f := range flows {
		if f.seq != uint32(i+1) {
			t.Fatalf("flow sample %d: sequence %d", i, f.seq)
		}
		if i > 0 && f.pool < flows[i-1].pool {
			t.Errorf("flow sample %d: pool ran backwards", i)
		}
		s := int(f.at.Sub(start) / time.Second)
		if secs[s] == nil {
			secs[s] = &sec{}
		}
		secs[s].n++
		secs[s].maxRate = max(secs[s].maxRate, f.rate)
		maxRate = max(maxRate, f.rate)
		est += float64(f.rate)
		variance += float64(f.rate) * float64(f.rate-1)
	}
	last := flows[len(flows)-1]
	est += float64(last.drop) // dropped in the ring: at 1 in 1, before the first step
	var line []string
	for s := 0; s <= int(time.Since(start)/time.Second); s++ {
		if v := secs[s]; v != nil {
			line = append(line, fmt.Sprintf("%ds:%d@%d", s, v.n, v.maxRate))
		}
	}
	t.Logf("flood %d frames in %v, calm %d; samples per second of arrival (count@highest rate): %s", floodSent,
		floodEnd.Sub(start).Round(time.Millisecond), calmSent, strings.Join(line, " "))
	if maxRate < 2 {
		t.Fatalf("the rate never stepped up (flood of %.0f frames/s)", float64(floodSent)/floodEnd.Sub(start).Seconds())
	}
	// Once stepped (from the second second of the flood on): at most the
	// quota plus one step per second.
	for s := 1; s < int(floodEnd.Sub(start)/time.Second); s++ {
		if v := secs[s]; v != nil && v.n > 2*quota {
			t.Errorf("second %d of the flood: %d samples, want at most %d (quota plus one step)", s, v.n, 2*quota)
		}
	}
	sd := math.Sqrt(variance)
	t.Logf("sum of the samples' rates + drops %.0f, frames %d (sd %.0f); last rate %d; ring drops %d", est, rx, sd, last.rate, kdrops)
	if math.Abs(est-float64(rx)) > 4*sd+float64(kdrops) {
		t.Errorf("frames estimated from the samples' rates %.0f, kernel counted %d: outside 4 σ (%.0f)", est, rx, sd)
	}
	// Back to the configured rate after the flood.
	if last.rate != 1 || last.at.Before(floodEnd) {
		t.Errorf("last sample (at %v after the flood) at rate %d, want 1", last.at.Sub(floodEnd).Round(time.Millisecond), last.rate)
	}
	if eff, ok := m.get("sflowswitchd_port_effective_sampling_rate", `port="p1"`); !ok || eff != 1 {
		t.Errorf("metrics: effective rate of p1 %d (%v), want 1", eff, ok)
	}
	up, _ := m.get("sflowswitchd_backoff_steps_total", `direction="up"`)
	down, _ := m.get("sflowswitchd_backoff_steps_total", `direction="down"`)
	if up == 0 || down == 0 || !strings.Contains(d.log(), "sampling backoff") {
		t.Errorf("backoff steps: %d up, %d down; log:\n%s", up, down, d.log())
	}
	for _, f := range flows {
		if f.at.After(floodEnd.Add(3*time.Second)) && f.rate > 1 {
			t.Logf("late sample seq %d rate %d pool %d at %v after the flood", f.seq, f.rate, f.pool, f.at.Sub(floodEnd).Round(time.Millisecond))
		}
	}
	for _, l := range strings.Split(d.log(), "\n") {
		if strings.Contains(l, "sampling backoff") {
			t.Log(l)
		}
	}
	checkIndependentDecoders(t, dgs, collectorPort, p1)
	d.signal(t, syscall.SIGTERM)
	d.waitExit(t, 10*time.Second)
}
