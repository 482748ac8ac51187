package metrics_test

import (
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/daemon/internal/collectoraddr"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/metrics"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/portfail"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/metricstest"
)

// TestConfigCollector: each failing port, collector name and unmatched
// pattern is one series with its labels.
func TestConfigCollector(t *testing.T) {
	m := metricstest.Scrape(t, metrics.NewConfigCollector(metrics.ConfigState{
		FailedPorts: func() []portfail.Port {
			return []portfail.Port{{Name: "swp2", IfIndex: 4, Reason: "no_slot"}, {Name: "p\xff", IfIndex: 5, Reason: "descriptors"}}
		},
		Collectors: func() []collectoraddr.NameStats {
			return []collectoraddr.NameStats{{Host: "a.example", Failures: 3}, {Host: "b.example", Resolved: 1, Refused: 1}}
		},
		UnmatchedPatterns: func() []string { return []string{"sw*p"} },
	}))
	for _, want := range []string{
		`sflowswitchd_port_sampling_failed{ifindex="4",port="swp2",reason="no_slot"} 1`,
		"sflowswitchd_port_sampling_failed{ifindex=\"5\",port=\"p\uFFFD\",reason=\"descriptors\"} 1",
		`sflowswitchd_collector_address_refused{collector="b.example"} 1`,
		`sflowswitchd_collector_resolve_failures_total{collector="a.example"} 3`,
		`sflowswitchd_collector_resolve_failures_total{collector="b.example"} 0`,
		`sflowswitchd_collector_resolved{collector="a.example"} 0`,
		`sflowswitchd_collector_resolved{collector="b.example"} 1`,
		`sflowswitchd_port_pattern_unmatched{pattern="sw*p"} 1`,
	} {
		if !strings.Contains(m, "\n"+want+"\n") {
			t.Errorf("no %s in:\n%s", want, m)
		}
	}
}
