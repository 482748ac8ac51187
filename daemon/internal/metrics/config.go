package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/daemon/internal/collectoraddr"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/portfail"
	"github.com/sflowswitchd/sflowswitchd/internal/prom"
)

// ConfigState reads, at each scrape, what of the configuration does not
// take effect now (one bad thing stays small, and is reported).
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
	// Reconfigure returns the reconfigurations that failed (retried with
	// backoff) and whether the last one did; nil: none.
	Reconfigure func() (failures uint64, failing bool)
	// Reload returns the reloads (SIGHUP) refused and whether the last
	// one was applied; nil: none.
	Reload func() (failures uint64, lastOK bool)
	// Build is the running build (sflowswitchd_build_info).
	Build BuildInfo
	// Agent returns the agent address in force, the interface that has
	// it and how it was chosen ("" address: none yet); nil: none.
	Agent func() (address, iface, why string)
}

// BuildInfo is the running build's identity (internal/buildinfo).
type BuildInfo struct {
	Version, Commit, GoVersion string
}

var (
	portFailed = prom.Desc("port_sampling_failed",
		"Ports configured for sampling that the kernel does not sample, retried with backoff; reason: descriptors, memory, busy (transient: EMFILE/ENFILE, ENOMEM, EBUSY), no_slot, gone, refused (see the log).", "port", "ifindex", "reason")
	resolveFailures = prom.Desc("collector_resolve_failures_total",
		"Failed lookups of the collector's host name.", "collector")
	resolved = prom.Desc("collector_resolved",
		"1 if the collector's host name resolved at its last lookup.", "collector")
	refusedName = prom.Desc("collector_address_refused",
		"1 while the collector's host name resolves only to addresses that cannot be a collector at its port (this host's SNMP/AgentX ports): nothing is sent, its samples are counted as lost.", "collector")
	reconfFailures = prom.Desc("reconfigure_failures_total",
		"Reconfigurations (port changes, reloads, collector addresses) that could not be applied for a reason from outside, such as no descriptor left to list the links; retried with backoff.")
	reconfFailing = prom.Desc("configuration_stale",
		"1 while the last reconfiguration failed: port changes since are not applied yet (retried with backoff).")
	reloadFailures = prom.Desc("config_reload_failures_total",
		"Reloads (SIGHUP, systemctl reload) refused: the file, hsflowd.conf or the flags did not validate, or could only be applied in part; the settings in force stayed (see the log).")
	reloadOK = prom.Desc("config_last_reload_success",
		"1 if the last reload (or the start, before any) was applied, 0 if it was refused.")
	agentAddress = prom.Desc("agent_address_info",
		"The agent address in force (sFlowAgentAddress, in every datagram): always 1; the address, the interface that has it and how it was chosen in the labels.", "address", "interface", "why")
	buildInfo = prom.Desc("build_info",
		"The running build: always 1; its version, commit and Go toolchain in the labels.", "version", "commit", "goversion")
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
	ch <- refusedName
	ch <- unmatchedPattern
	ch <- reconfFailures
	ch <- reconfFailing
	ch <- reloadFailures
	ch <- reloadOK
	ch <- buildInfo
	ch <- agentAddress
}

func (c configCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.s.FailedPorts() {
		ch <- prom.Gauge(portFailed, 1, p.Name, strconv.FormatUint(uint64(p.IfIndex), 10), p.Reason)
	}
	for _, n := range c.s.Collectors() {
		ch <- prom.Counter(resolveFailures, n.Failures, n.Host)
		ch <- prom.Gauge(resolved, float64(n.Resolved), n.Host)
		ch <- prom.Gauge(refusedName, float64(n.Refused), n.Host)
	}
	for _, p := range c.s.UnmatchedPatterns() {
		ch <- prom.Gauge(unmatchedPattern, 1, p)
	}
	if c.s.Reconfigure != nil {
		n, failing := c.s.Reconfigure()
		stale := 0.0
		if failing {
			stale = 1
		}
		ch <- prom.Counter(reconfFailures, n)
		ch <- prom.Gauge(reconfFailing, stale)
	}
	if c.s.Reload != nil {
		n, ok := c.s.Reload()
		v := 0.0
		if ok {
			v = 1
		}
		ch <- prom.Counter(reloadFailures, n)
		ch <- prom.Gauge(reloadOK, v)
	}
	if c.s.Agent != nil {
		if a, iface, why := c.s.Agent(); a != "" {
			ch <- prom.Gauge(agentAddress, 1, a, iface, why)
		}
	}
	if b := c.s.Build; b.Version != "" {
		ch <- prom.Gauge(buildInfo, 1, b.Version, b.Commit, b.GoVersion)
	}
}
