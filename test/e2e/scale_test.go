package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// TestScalePorts (scale): 300 sampled ports whose ifindexes are
// all >= 65536 (they used to be refused, and at most 256 ports were
// sampled). Every port is attached and reported, none fails, and frames
// entering ports spread over the range are sampled with their ifindex.
// The 1000-port figures (start-up time, RSS, per-packet cost, SNMP walk)
// come from bench/scale (bench/README.md).
func TestScalePorts(t *testing.T) {
	const n, first = 300, 100000
	lab := netlab.NewScale(t, n, first)
	col := listen(t, lab, collectorPort)
	start := time.Now()
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-ports", "s*", "-sampling", "1", "-polling", "0", "-max-ports", "400", "-agentx", "off")
	get := func() (metrics, error) { return fetchMetrics(lab) }
	// How fast they attach is bench/scale's figure, not this test's: on a
	// loaded 2-core machine 300 ports took more than 10 s.
	m := waitMetricFor(t, d, fmt.Sprintf("%d ports sampled", n), time.Minute, get, func(m metrics) bool {
		k := 0
		for _, line := range m {
			if strings.HasPrefix(line, "sflowswitchd_port_sampling_rate{") {
				k++
			}
		}
		return k == n
	})
	t.Logf("%d ports (ifindex %d..%d) sampled %v after the daemon started", n, first, first+n-1, time.Since(start).Round(time.Millisecond))
	if _, ok := m.get("sflowswitchd_port_sampling_failed", ""); ok {
		t.Errorf("ports reported as failed:\n%s", strings.Join(m, "\n"))
	}
	for _, i := range []int{1, 150, n} {
		if !samplerAttached(t, lab, fmt.Sprintf("s%d", i)) {
			t.Errorf("no sampler on s%d", i)
		}
	}
	mac := func(i int) net.HardwareAddr { return net.HardwareAddr{0x02, 0, 0, 0x0a, byte(i >> 8), byte(i)} }
	for _, i := range []int{1, 150, n} {
		f := netlab.UDPFrame(mac(i), net.HardwareAddr{0x02, 0, 0, 0xff, 0xff, 0x01},
			netip.AddrPortFrom(netip.MustParseAddr("198.18.1.1"), 1000), netip.AddrPortFrom(netip.MustParseAddr("198.18.1.2"), 2000), []byte("scale"))
		lab.SendOnPeer(t, i, [][]byte{f, f, f})
	}
	for _, i := range []int{1, 150, n} {
		idx := uint32(first + i - 1)
		col.waitFor(t, 5*time.Second, fmt.Sprintf("samples of s%d (ifindex %d)", i, idx), func(dgs []datagram) bool {
			return len(flowSamplesOf(dgs, idx)) == 3
		})
	}
	checkIndependentDecoders(t, col.snapshot(t), collectorPort, first)
}
