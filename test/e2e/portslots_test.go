package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// waitMetric polls the daemon's metrics until cond holds (10 s at most).
func waitMetric(t *testing.T, d *daemon, what string, get func() (metrics, error), cond func(metrics) bool) metrics {
	t.Helper()
	return waitMetricFor(t, d, what, 10*time.Second, get, cond)
}

// waitMetricFor is waitMetric with a timeout.
func waitMetricFor(t *testing.T, d *daemon, what string, timeout time.Duration, get func() (metrics, error), cond func(metrics) bool) metrics {
	t.Helper()
	deadline := time.Now().Add(testutil.Scaled(timeout))
	for {
		m, err := get()
		if err == nil && cond(m) {
			return m
		}
		if time.Now().After(deadline) || !d.alive() {
			t.Fatalf("waiting for %s: %v\nmetrics:\n%s\n%s", what, err, strings.Join(m, "\n"), d.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPortSlotsExhausted: with more ports than
// port slots (-max-ports), the ports that fit are sampled, the one that
// does not is reported (log and sflowswitchd_port_sampling_failed, never
// in the sampled ports' metrics), and it is sampled as soon as a slot is
// freed, without a restart.
func TestPortSlotsExhausted(t *testing.T) {
	lab := newLab(t, 3)
	col := listen(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "1", "-ports", "p*", "-polling", "0", "-max-ports", "2")
	d.waitReady(t, lab, "p1", "p2")
	get := func() (metrics, error) { return fetchMetrics(lab) }
	m := waitMetric(t, d, "p3 reported as not sampled", get, func(m metrics) bool {
		v, ok := m.get("sflowswitchd_port_sampling_failed", `port="p3"`)
		return ok && v == 1
	})
	if _, ok := m.get("sflowswitchd_port_sampling_rate", `port="p3"`); ok {
		t.Errorf("p3 (no slot) reported as sampled in the metrics")
	}
	if !strings.Contains(d.log(), "port not sampled") || !strings.Contains(d.log(), "p3") {
		t.Errorf("no log line naming p3 as not sampled\n%s", d.log())
	}
	if samplerAttached(t, lab, "p3") {
		t.Errorf("sampler attached to p3 although every slot is in use")
	}
	// The others sample.
	p2 := uint32(lab.LinkIndex(lab.Switch, "p2"))
	lab.SendFrames(t, 1, testFrames(lab, 1, 0, 1, 20))
	col.waitFor(t, 5*time.Second, "samples of p2", func(dgs []datagram) bool { return len(flowSamplesOf(dgs, p2)) > 0 })

	// A slot is freed: p3 is sampled without a restart.
	lab.DelPort(t, 1)
	waitMetric(t, d, "p3 sampled after p1 is removed", get, func(m metrics) bool {
		_, failed := m.get("sflowswitchd_port_sampling_failed", `port="p3"`)
		_, sampled := m.get("sflowswitchd_port_sampling_rate", `port="p3"`)
		return !failed && sampled
	})
	p3 := uint32(lab.LinkIndex(lab.Switch, "p3"))
	lab.SendFrames(t, 1, testFrames(lab, 1, 0, 100, 20)) // hosts: h2 is index 0 now, h3 index 1
	col.waitFor(t, 5*time.Second, "samples of p3", func(dgs []datagram) bool { return len(flowSamplesOf(dgs, p3)) > 0 })
	if !strings.Contains(d.log(), "port sampled again") {
		t.Errorf("no log line for p3 sampled again\n%s", d.log())
	}
}
