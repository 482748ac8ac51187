package main

import (
	"fmt"
	"net/netip"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/internal/agentaddr"
	"github.com/sflowswitchd/sflowswitchd/mib"
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
	for _, p := range c.d.failedPorts() {
		ch <- prometheus.MustNewConstMetric(descPortFailed, prometheus.GaugeValue, 1, p.name, strconv.FormatUint(uint64(p.ifindex), 10))
	}
	for _, n := range c.d.resolver.stats() {
		ch <- prometheus.MustNewConstMetric(descResolveFailures, prometheus.CounterValue, float64(n.failures), n.host)
		ch <- prometheus.MustNewConstMetric(descResolved, prometheus.GaugeValue, float64(n.resolved), n.host)
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

// staticReceivers turns the configured collectors into the MIB's static
// receivers without waiting on DNS: a host name takes the address it last
// resolved to, or none yet (the receiver then counts its samples as lost
// until the name resolves; the resolver retries with backoff). The names
// to resolve are handed to res.
func staticReceivers(s Settings, res *resolver) []mib.StaticReceiver {
	var out []mib.StaticReceiver
	var hosts []string
	for _, c := range s.staticCollectors() {
		ca, err := parseCollector(c.Address) // validated with the settings
		if err != nil {
			continue
		}
		r := mib.StaticReceiver{Address: netip.AddrPortFrom(ca.ip, ca.port), MaxDatagramSize: c.MaxDatagramSize}
		if ca.host != "" {
			hosts = append(hosts, ca.host)
			r.Name = ca.host
			if a, ok := res.get(ca.host); ok {
				r.Address = netip.AddrPortFrom(a, ca.port)
			}
		}
		out = append(out, r)
	}
	res.want(hosts)
	return out
}

// unmatched returns the patterns that match none of ports.
func unmatched(patterns []string, ports []dataplane.PortInfo) []string {
	var out []string
	for _, pat := range patterns {
		hit := false
		for _, p := range ports {
			if ok, _ := path.Match(pat, p.Name); ok {
				hit = true
				break
			}
		}
		if !hit {
			out = append(out, pat)
		}
	}
	return out
}

// noteSelection reports, when it changes, every pattern of ports and
// monitor_ports that matches no port present (a typo would otherwise stop
// sampling silently), and loudly when the selection matches nothing at
// all. Called by reconfigure only (one goroutine).
func (d *daemon) noteSelection(s Settings, ports []dataplane.PortInfo) {
	now := map[string]bool{}
	for _, p := range unmatched(append(slices.Clone(s.Ports), s.MonitorPorts...), ports) {
		now[p] = true
		if !d.unmatchedPats[p] {
			d.log.Warn("port pattern matches no port; nothing is sampled through it until a matching port appears", "pattern", p)
		}
	}
	if len(s.Ports) > 0 && len(unmatched(s.Ports, ports)) == len(s.Ports) && len(s.MonitorPorts) == 0 && !d.selectionEmpty {
		d.log.Error("no port matches the port selection: NOTHING IS SAMPLED until a matching port appears", "ports", strings.Join(s.Ports, ","), "ports_present", len(ports))
		d.selectionEmpty = true
	} else if d.selectionEmpty && len(unmatched(s.Ports, ports)) < len(s.Ports) {
		d.selectionEmpty = false
	}
	d.mu.Lock()
	d.unmatchedPats = now
	d.mu.Unlock()
}

// checkReload refuses, before anything changes, new settings that could
// only be applied in part: more collectors than the MIB's receiver rows
// and instances (sized at start-up), or a port selection that matches none
// of the ports present while the running one matches some (a typo in
// ports would silence the agent). Ports that do not exist yet can still be
// named next to others.
func (d *daemon) checkReload(s Settings) error {
	if n := len(s.staticCollectors()); n > d.mibRows {
		return fmt.Errorf("%d collectors, but the SFLOW-MIB was sized at start-up for %d (snmp_receivers, snmp_instances): restart to add collectors", n, d.mibRows)
	}
	d.mu.Lock()
	ports := make([]dataplane.PortInfo, 0, len(d.ports))
	for _, p := range d.ports {
		ports = append(ports, p)
	}
	old := d.settings
	d.mu.Unlock()
	selects := func(pats, mon []string) bool {
		return len(pats) == 0 || len(unmatched(pats, ports)) < len(pats) || len(unmatched(mon, ports)) < len(mon)
	}
	if !selects(s.Ports, s.MonitorPorts) && selects(old.Ports, old.MonitorPorts) {
		return fmt.Errorf("ports %q match none of the %d ports present: sampling would stop on every port", s.Ports, len(ports))
	}
	return nil
}

// requireAgentAddress refuses to start when no agent address can be
// chosen (issue 10, defect 12). sFlow v5 allows an agent address of type
// UNKNOWN (sflow_version_5.txt, address_type 0), but common collectors
// drop such datagrams whole (goflow2's decoder: "unknown IP version 0"),
// so sending them would be sampling into nothing at those collectors;
// an address that appears later (DHCP) is picked up by the restart
// systemd makes (Restart=on-failure). Once running, the last address
// chosen is kept if every address disappears (reconfigure).
func requireAgentAddress(s Settings) error {
	addrs, err := agentaddr.List()
	if err != nil {
		return err
	}
	if _, _, err := agentaddr.Choose(s.AgentAddress, s.AgentInterface, addrs); err != nil {
		return fmt.Errorf("no agent address (%v): every sFlow datagram carries an address identifying this switch, "+
			"and one of unknown type is dropped by common collectors; give an interface an address, "+
			"or set -agent-address / agent_address (an address of this switch) or -agent-interface", err)
	}
	return nil
}
