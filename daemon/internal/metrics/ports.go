package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/internal/prom"
)

// Port is a sampled port's kernel counters and rates, as the daemon reads
// them at scrape time.
type Port struct {
	Name                 string
	IfIndex              uint32
	Pool, Samples, Drops uint64
	AFXDPDrops           uint64
	// Egress is whether the port is sampled at egress, and EgressPool,
	// EgressSamples and EgressDrops its egress counters (Pool, Samples
	// and Drops are the ingress ones): each direction has its own pool.
	Egress                                 bool
	EgressPool, EgressSamples, EgressDrops uint64
	Rate, KernelRate                       uint32
	// EffectiveRate is the rate in force: Rate, or the backoff's
	// (agent.Backoff).
	EffectiveRate uint32
}

var (
	portPool          = prom.Desc("port_sample_pool_total", "Frames the port's ingress sampler saw (sFlow sample_pool, with the egress pool of a port sampled both ways).", "port", "ifindex")
	portSamples       = prom.Desc("port_kernel_samples_total", "Frames the kernel selected for sampling on the port.", "port", "ifindex")
	portDrops         = prom.Desc("port_kernel_drops_total", "Samples the agent lost: frames selected for sampling that the kernel could not deliver (ring full, no socket); not packets the switch dropped (sflowswitchd_switch_dropped_packets_total).", "port", "ifindex")
	portEgressPool    = prom.Desc("port_egress_sample_pool_total", "Frames the port's egress sampler saw (its flow samples' sample_pool is this plus the ingress pool); only for ports sampled at egress.", "port", "ifindex")
	portEgressSamples = prom.Desc("port_egress_kernel_samples_total", "Frames the kernel selected for sampling leaving the port.", "port", "ifindex")
	portEgressDrops   = prom.Desc("port_egress_kernel_drops_total", "Frames selected leaving the port that the kernel could not deliver (ring full).", "port", "ifindex")
	portAFXDPDrops    = prom.Desc("port_afxdp_drops_total", "Frames the port's AF_XDP sockets dropped (rx_dropped, rx_ring_full, fill ring empty).", "port", "ifindex")
	portRate          = prom.Desc("port_sampling_rate", "Configured sampling rate of the port.", "port", "ifindex")
	portKernelRate    = prom.Desc("port_kernel_sampling_rate", "Power-of-two rate the kernel samples the port at.", "port", "ifindex")
	portEffRate       = prom.Desc("port_effective_sampling_rate", "Sampling rate in force on the port: the configured one, or the backoff's while the samples offered exceed a quota.", "port", "ifindex")
)

type portCollector struct{ ports func() []Port }

// NewPortCollector returns a collector of the ports ports returns at each
// scrape (sflowswitchd_port_*{port,ifindex}).
func NewPortCollector(ports func() []Port) prometheus.Collector { return portCollector{ports} }

func (c portCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{portPool, portSamples, portDrops, portAFXDPDrops, portRate, portKernelRate,
		portEgressPool, portEgressSamples, portEgressDrops, portEffRate} {
		ch <- d
	}
}

func (c portCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.ports() {
		idx := strconv.FormatUint(uint64(p.IfIndex), 10)
		ch <- prom.Counter(portPool, p.Pool, p.Name, idx)
		ch <- prom.Counter(portSamples, p.Samples, p.Name, idx)
		ch <- prom.Counter(portDrops, p.Drops, p.Name, idx)
		ch <- prom.Counter(portAFXDPDrops, p.AFXDPDrops, p.Name, idx)
		ch <- prom.Gauge(portRate, float64(p.Rate), p.Name, idx)
		ch <- prom.Gauge(portKernelRate, float64(p.KernelRate), p.Name, idx)
		if p.Egress {
			ch <- prom.Counter(portEgressPool, p.EgressPool, p.Name, idx)
			ch <- prom.Counter(portEgressSamples, p.EgressSamples, p.Name, idx)
			ch <- prom.Counter(portEgressDrops, p.EgressDrops, p.Name, idx)
		}
		ch <- prom.Gauge(portEffRate, float64(p.EffectiveRate), p.Name, idx)
	}
}
