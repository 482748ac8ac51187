package agent

import (
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// ReceiverConfig is one collector: a row of sFlowRcvrTable.
type ReceiverConfig struct {
	// Index is sFlowRcvrIndex (1-based). Samplers and pollers name their
	// receiver by it.
	Index int
	// Address is the collector's UDP address (sFlowRcvrAddress and
	// sFlowRcvrPort).
	Address netip.AddrPort
	// MaxDatagramSize is sFlowRcvrMaximumDatagramSize: no datagram sent to
	// this receiver is longer (0 = sflow.DefaultMaxDatagramSize).
	MaxDatagramSize int
	// Unresolved is the collector as configured (host name and port)
	// while its name cannot be resolved to an address it can be sent to
	// (Address is then the zero AddrPort): the receiver's samplers and
	// pollers keep running and everything they would send is counted as
	// lost (send errors, samples unsent) until the name resolves.
	Unresolved string
}

// SamplerConfig is a flow sampler: a row of sFlowFsTable.
type SamplerConfig struct {
	// IfIndex is the port (data source ifIndex.IfIndex).
	IfIndex uint32
	// Instance is sFlowFsInstance, distinguishing several samplers on one
	// data source.
	Instance int
	// Receiver is the index of the receiver the samples go to.
	Receiver int
	// Rate is sFlowFsPacketSamplingRate: 1 in Rate packets is sampled
	// (0 = off).
	Rate uint32
	// HeaderBytes is sFlowFsMaximumHeaderSize: bytes of each sampled frame
	// copied into sampled_header.
	HeaderBytes int
}

// PollerConfig is a counter poller: a row of sFlowCpTable.
type PollerConfig struct {
	// Source is the data source: ifIndex.N for a port, entPhysicalEntry.1
	// for the host.
	Source sflow.DataSource
	// Instance is sFlowCpInstance.
	Instance int
	// Receiver is the index of the receiver the samples go to.
	Receiver int
	// Interval is sFlowCpInterval (0 = off).
	Interval time.Duration
}

// Config is the whole sampling configuration. Apply replaces the running
// configuration with it; state of samplers, pollers and receivers that
// stay (sequence numbers, phases) is kept.
type Config struct {
	// AgentAddress is sFlowAgentAddress, carried in every datagram.
	AgentAddress netip.Addr
	Receivers    []ReceiverConfig
	Samplers     []SamplerConfig
	Pollers      []PollerConfig
	// MonitorPorts are ports whose traffic is a mirror copy (SPAN/TAP):
	// their sampled frames are delivered through AF_XDP and the rest is
	// dropped (docs/ARCHITECTURE.md "Two delivery paths").
	MonitorPorts map[uint32]bool
	// Directions are the ports sampled in another direction than ingress
	// (sflow.DirectionEgress, sflow.DirectionBoth); a port absent is sampled at
	// ingress. A monitor port is sampled at ingress only.
	Directions map[uint32]sflow.Direction
	// Hooks are the ports' own hooks (port_hook: "auto", "xdp", "tc" or
	// "psample"; PortSampling.Hook); a port absent takes the source's
	// choice. Not for a monitor port (XDP).
	Hooks map[uint32]string
}

// MaxHeaderBytes is the largest sFlowFsMaximumHeaderSize the dataplane
// copies (the XDP program's limit).
const MaxHeaderBytes = 256

// Validate checks the configuration's internal consistency: unique
// receiver indexes, samplers and pollers naming existing receivers, unique
// (data source, instance) pairs and values in range.
func (c *Config) Validate() error {
	rcv := make(map[int]bool, len(c.Receivers))
	for _, r := range c.Receivers {
		if r.Index < 1 {
			return fmt.Errorf("receiver index %d: must be >= 1", r.Index)
		}
		if rcv[r.Index] {
			return fmt.Errorf("receiver %d defined twice", r.Index)
		}
		if (!r.Address.IsValid() || r.Address.Port() == 0) && (r.Unresolved == "" || r.Address.IsValid()) {
			return fmt.Errorf("receiver %d: invalid collector address %q", r.Index, r.Address)
		}
		if r.MaxDatagramSize != 0 && (r.MaxDatagramSize < 200 || r.MaxDatagramSize > 65507) {
			return fmt.Errorf("receiver %d: maximum datagram size %d outside 200..65507", r.Index, r.MaxDatagramSize)
		}
		rcv[r.Index] = true
	}
	type key struct {
		ds   sflow.DataSource
		inst int
	}
	seen := make(map[key]bool)
	for _, s := range c.Samplers {
		k := key{sflow.DataSource{Type: sflow.SourceIfIndex, Index: s.IfIndex}, s.Instance}
		if seen[k] {
			return fmt.Errorf("sampler %d.%d defined twice", s.IfIndex, s.Instance)
		}
		seen[k] = true
		if !rcv[s.Receiver] {
			return fmt.Errorf("sampler %d.%d: no receiver %d", s.IfIndex, s.Instance, s.Receiver)
		}
		if s.HeaderBytes < 20 || s.HeaderBytes > MaxHeaderBytes {
			return fmt.Errorf("sampler %d.%d: header bytes %d outside 20..%d", s.IfIndex, s.Instance, s.HeaderBytes, MaxHeaderBytes)
		}
	}
	seen = make(map[key]bool)
	for _, p := range c.Pollers {
		k := key{p.Source, p.Instance}
		if seen[k] {
			return fmt.Errorf("poller %s.%d defined twice", p.Source, p.Instance)
		}
		seen[k] = true
		if !rcv[p.Receiver] {
			return fmt.Errorf("poller %s.%d: no receiver %d", p.Source, p.Instance, p.Receiver)
		}
		if p.Interval < 0 {
			return fmt.Errorf("poller %s.%d: negative interval", p.Source, p.Instance)
		}
	}
	return nil
}

// planPorts derives the dataplane settings of every sampled port: the
// kernel rate is the largest power of two not above the smallest instance
// rate, the header length the largest instance's.
func planPorts(c *Config, workerOf func(sflow.DataSource) int) map[uint32]PortSampling {
	rates := make(map[uint32][]uint32)
	plans := make(map[uint32]PortSampling)
	for _, s := range c.Samplers {
		if s.Rate == 0 {
			continue
		}
		rates[s.IfIndex] = append(rates[s.IfIndex], s.Rate)
		p := plans[s.IfIndex]
		if s.HeaderBytes > p.HeaderBytes {
			p.HeaderBytes = s.HeaderBytes
		}
		plans[s.IfIndex] = p
	}
	for idx, p := range plans {
		p.KernelRate = KernelRate(rates[idx]...)
		p.Rate = minRate(rates[idx])
		p.Worker = workerOf(sflow.DataSource{Type: sflow.SourceIfIndex, Index: idx})
		p.Monitor = c.MonitorPorts[idx]
		p.Direction = sflow.DirectionIngress
		if d := c.Directions[idx]; d != 0 && !p.Monitor {
			p.Direction = d
		}
		if !p.Monitor {
			p.Hook = c.Hooks[idx]
		}
		plans[idx] = p
	}
	return plans
}

// minRate is the smallest of rates (none 0).
func minRate(rates []uint32) uint32 {
	m := rates[0]
	for _, r := range rates[1:] {
		m = min(m, r)
	}
	return m
}

// sortedKeys returns the keys of m in increasing order.
func sortedKeys[V any](m map[uint32]V) []uint32 {
	keys := make([]uint32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
