package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/daemon/internal/collectoraddr"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/portfail"
	"github.com/sflowswitchd/sflowswitchd/internal/prom"
)

// ConfigState reads, at each scrape, what of the configuration does not
// take effect now (issue 10: one bad thing stays small, and is reported).
type ConfigState struct {
	// FailedPorts are the ports configured for sampling that the kernel
	// does not sample.
	FailedPorts func() []portfail.Port
	// Collectors are the resolution figures of the collectors' host
	// names.
	Collectors func() []collectoraddr.NameStats
	// UnmatchedPatterns are the ports and monitor_ports patterns that
	// match no port present, sorted.
	UnmatchedPatterns func() []string
}

var (
	portFailed = prom.Desc("port_sampling_failed",
		"Ports configured for sampling that the kernel does not sample (see the log for why; retried with backoff).", "port", "ifindex")
	resolveFailures = prom.Desc("collector_resolve_failures_total",
		"Failed lookups of the collector's host name.", "collector")
	resolved = prom.Desc("collector_resolved",
		"1 if the collector's host name resolved at its last lookup.", "collector")
	unmatchedPattern = prom.Desc("port_pattern_unmatched",
		"1 for a ports or monitor_ports pattern that matches no port present.", "pattern")
)

type configCollector struct{ s ConfigState }

// NewConfigCollector returns the collector of the configuration plane's
// state: ports that cannot be sampled, collectors whose names do not
// resolve, port patterns that match nothing.
func NewConfigCollector(s ConfigState) prometheus.Collector { return configCollector{s} }

func (c configCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- portFailed
	ch <- resolveFailures
	ch <- resolved
	ch <- unmatchedPattern
}

func (c configCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.s.FailedPorts() {
		ch <- prometheus.MustNewConstMetric(portFailed, prometheus.GaugeValue, 1, p.Name, strconv.FormatUint(uint64(p.IfIndex), 10))
	}
	for _, n := range c.s.Collectors() {
		ch <- prometheus.MustNewConstMetric(resolveFailures, prometheus.CounterValue, float64(n.Failures), n.Host)
		ch <- prometheus.MustNewConstMetric(resolved, prometheus.GaugeValue, float64(n.Resolved), n.Host)
	}
	for _, p := range c.s.UnmatchedPatterns() {
		ch <- prometheus.MustNewConstMetric(unmatchedPattern, prometheus.GaugeValue, 1, p)
	}
}
