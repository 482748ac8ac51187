package main

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/internal/config"
)

// configCollector exports the configuration plane's state: ports that
// cannot be sampled, collectors whose names do not resolve.
type configCollector struct{ d *daemon }

var (
	descPortFailed = prometheus.NewDesc("sflowswitchd_port_sampling_failed",
		"Ports configured for sampling that the kernel does not sample (see the log for why; retried with backoff).", []string{"port", "ifindex"}, nil)
	descResolveFailures = prometheus.NewDesc("sflowswitchd_collector_resolve_failures_total",
		"Failed lookups of the collector's host name.", []string{"collector"}, nil)
	descResolved = prometheus.NewDesc("sflowswitchd_collector_resolved",
		"1 if the collector's host name resolved at its last lookup.", []string{"collector"}, nil)
	descUnmatched = prometheus.NewDesc("sflowswitchd_port_pattern_unmatched",
		"1 for a ports or monitor_ports pattern that matches no port present.", []string{"pattern"}, nil)
)

func (c configCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPortFailed
	ch <- descResolveFailures
	ch <- descResolved
	ch <- descUnmatched
}

func (c configCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.d.portFail.Failed() {
		ch <- prometheus.MustNewConstMetric(descPortFailed, prometheus.GaugeValue, 1, p.Name, strconv.FormatUint(uint64(p.IfIndex), 10))
	}
	for _, n := range c.d.resolver.Stats() {
		ch <- prometheus.MustNewConstMetric(descResolveFailures, prometheus.CounterValue, float64(n.Failures), n.Host)
		ch <- prometheus.MustNewConstMetric(descResolved, prometheus.GaugeValue, float64(n.Resolved), n.Host)
	}
	c.d.mu.Lock()
	pats := make([]string, 0, len(c.d.unmatchedPats))
	for p := range c.d.unmatchedPats {
		pats = append(pats, p)
	}
	c.d.mu.Unlock()
	sort.Strings(pats)
	for _, p := range pats {
		ch <- prometheus.MustNewConstMetric(descUnmatched, prometheus.GaugeValue, 1, p)
	}
}

// noteSelection reports, when it changes, every pattern of ports and
// monitor_ports that matches no port present (a typo would otherwise stop
// sampling silently), and loudly when the selection matches nothing at
// all. Called by reconfigure only (one goroutine).
func (d *daemon) noteSelection(s config.Settings, ports []dataplane.PortInfo) {
	now := map[string]bool{}
	for _, p := range config.Unmatched(append(slices.Clone(s.Ports), s.MonitorPorts...), ports) {
		now[p] = true
		if !d.unmatchedPats[p] {
			d.log.Warn("port pattern matches no port; nothing is sampled through it until a matching port appears", "pattern", p)
		}
	}
	if len(s.Ports) > 0 && len(config.Unmatched(s.Ports, ports)) == len(s.Ports) && len(s.MonitorPorts) == 0 && !d.selectionEmpty {
		d.log.Error("no port matches the port selection: NOTHING IS SAMPLED until a matching port appears", "ports", strings.Join(s.Ports, ","), "ports_present", len(ports))
		d.selectionEmpty = true
	} else if d.selectionEmpty && len(config.Unmatched(s.Ports, ports)) < len(s.Ports) {
		d.selectionEmpty = false
	}
	d.mu.Lock()
	d.unmatchedPats = now
	d.mu.Unlock()
}

// checkReload refuses, before anything changes, new settings that could
// only be applied in part (config.CheckReload) over the running ones.
func (d *daemon) checkReload(s config.Settings) error {
	d.mu.Lock()
	ports := make([]dataplane.PortInfo, 0, len(d.ports))
	for _, p := range d.ports {
		ports = append(ports, p)
	}
	old := d.settings
	d.mu.Unlock()
	return config.CheckReload(s, old, ports, d.mibRows)
}
