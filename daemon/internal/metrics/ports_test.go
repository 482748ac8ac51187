package metrics

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/metricstest"
)

// TestPortNameNotUTF8: a port whose name is not
// valid UTF-8 (ip link add $'p\xff\xfe') costs only itself: every port's
// series is in every scrape, the bad name with its invalid bytes replaced,
// and nothing panics. The collector used to panic in MustNewConstMetric,
// and 4, 1, 1 and 0 of 10 ports were left in four scrapes.
func TestPortNameNotUTF8(t *testing.T) {
	ports := make([]Port, 10)
	for i := range ports {
		ports[i] = Port{Name: fmt.Sprintf("p%d", i), IfIndex: uint32(100 + i), Pool: 7, Rate: 100, KernelRate: 64}
	}
	ports[4].Name = "p\xff\xfe"
	c := NewPortCollector(func() []Port { return ports })
	for scrape := 0; scrape < 4; scrape++ {
		out := metricstest.Scrape(t, c)
		for _, p := range ports {
			want := fmt.Sprintf(`sflowswitchd_port_sampling_rate{ifindex="%d",port=%q} 100`, p.IfIndex, strings.ToValidUTF8(p.Name, "\uFFFD\uFFFD"))
			if !strings.Contains(out, want) {
				t.Errorf("scrape %d lacks %s", scrape, want)
			}
		}
		if n := strings.Count(out, "sflowswitchd_port_sample_pool_total{"); n != len(ports) {
			t.Errorf("scrape %d: %d ports' pools, want %d", scrape, n, len(ports))
		}
	}
}
