package main

import (
	"io"
	"net/netip"

	"github.com/sflowswitchd/sflowswitchd/mib"
)

// writeConfigMetrics writes the metrics of the configuration plane: ports
// that cannot be sampled, collectors that cannot be resolved, selections
// that match nothing.
func (d *daemon) writeConfigMetrics(w io.Writer) {
	d.writePortFailureMetrics(w)
	d.resolver.writeMetrics(w)
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
