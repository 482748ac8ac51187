package main

import (
	"net/netip"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

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
)

func (c configCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPortFailed
	ch <- descResolveFailures
	ch <- descResolved
}

func (c configCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.d.failedPorts() {
		ch <- prometheus.MustNewConstMetric(descPortFailed, prometheus.GaugeValue, 1, p.name, strconv.FormatUint(uint64(p.ifindex), 10))
	}
	for _, n := range c.d.resolver.stats() {
		ch <- prometheus.MustNewConstMetric(descResolveFailures, prometheus.CounterValue, float64(n.failures), n.host)
		ch <- prometheus.MustNewConstMetric(descResolved, prometheus.GaugeValue, float64(n.resolved), n.host)
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
