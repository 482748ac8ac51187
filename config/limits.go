package config

import "fmt"

// Limits of the settings whose size the daemon's memory follows
// (-snmp-instances 65535 cost 86 MB per sampled port, an
// hsflowd.conf of 20,001 collectors reached 5 GB). Each follows from the
// memory budget of docs/reference/bounds.md; the products of
// settings, whose cost only the components know (the SFLOW-MIB's rows,
// the datagram streams), are checked by the composition
// (daemon.Validate). A setting above its limit is refused with the limit
// and what to change.
const (
	// MaxCollectors bounds the static collectors (flags, the config
	// file, hsflowd.conf): each is a receiver row, an instance of every
	// data source in the SFLOW-MIB and a datagram stream of every
	// sub-agent.
	MaxCollectors = 16
	// MaxSNMPReceivers bounds snmp_receivers (sFlowRcvrTable rows, each a
	// possible stream of every sub-agent).
	MaxSNMPReceivers = 1024
	// MaxSNMPInstances bounds snmp_instances; the product with max_ports
	// is bounded too (daemon.Validate).
	MaxSNMPInstances = 1024
	// MaxPortPatterns bounds ports and monitor_ports together: every
	// pattern is matched against every port at every port change.
	MaxPortPatterns = 1024
	// MaxPortSampling bounds port_sampling (one rate per port name).
	MaxPortSampling = 4096
	// MaxSamplingSpeeds bounds sampling_speed; MaxAgentCIDRs agent_cidr.
	MaxSamplingSpeeds = 64
	MaxAgentCIDRs     = 64
)

// validateLimits checks the settings against the limits above.
func (s *Settings) validateLimits() []error {
	var errs []error
	over := func(what string, n, limit int, hint string) {
		if n > limit {
			errs = append(errs, fmt.Errorf("%s: %d, at most %d (%s)", what, n, limit, hint))
		}
	}
	over("collectors", len(s.Collectors), MaxCollectors, "each is a receiver, an SFLOW-MIB instance of every port and a datagram stream of every sub-agent")
	over("port patterns (ports and monitor_ports)", len(s.Ports)+len(s.MonitorPorts), MaxPortPatterns, "use globs")
	over("port_sampling entries", len(s.PortSampling), MaxPortSampling, "set sampling or sampling_speed for most ports")
	over("sampling_speed entries", len(s.SamplingSpeed), MaxSamplingSpeeds, "one per link speed")
	over("agent_cidr entries", len(s.AgentCIDR), MaxAgentCIDRs, "the agent address preference")
	return errs
}
