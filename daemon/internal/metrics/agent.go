package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane/forwarding"
	"github.com/sflowswitchd/sflowswitchd/internal/prom"
)

// workerMetric is one counter of agent.WorkerStats, exported per worker.
type workerMetric struct {
	desc *prometheus.Desc
	get  func(*agent.WorkerStats) uint64
}

var workerMetrics = []workerMetric{
	{prom.Desc("kernel_samples_total", "Packet samples received from the kernel.", "worker"), func(s *agent.WorkerStats) uint64 { return s.KernelSamples.Load() }},
	{prom.Desc("subsampled_away_total", "Kernel samples not kept by software sub-sampling to the configured rate.", "worker"), func(s *agent.WorkerStats) uint64 { return s.SubsampledAway.Load() }},
	{prom.Desc("flow_samples_total", "Flow samples encoded into datagrams.", "worker"), func(s *agent.WorkerStats) uint64 { return s.FlowSamples.Load() }},
	{prom.Desc("counter_samples_total", "Counter samples encoded into datagrams.", "worker"), func(s *agent.WorkerStats) uint64 { return s.CounterSamples.Load() }},
	{prom.Desc("datagrams_sent_total", "Datagrams sent to collectors.", "worker"), func(s *agent.WorkerStats) uint64 { return s.Datagrams.Load() }},
	{prom.Desc("bytes_sent_total", "Bytes of datagrams sent to collectors.", "worker"), func(s *agent.WorkerStats) uint64 { return s.Bytes.Load() }},
	{prom.Desc("send_errors_total", "Datagrams the socket refused.", "worker"), func(s *agent.WorkerStats) uint64 { return s.SendErrors.Load() }},
	{prom.Desc("poll_errors_total", "Counter polls that failed (e.g. no descriptor left, EMFILE); the poll sends the counters it could read. Logged once, then at most once a minute per worker with the number left out.", "worker"), func(s *agent.WorkerStats) uint64 { return s.PollErrors.Load() }},
	{prom.Desc("transit_samples_total", "Kernel samples followed to the port their frame left by (transit on): their flow samples carry extended_egress_queue, extended_transit (sampled at ingress) and extended_queue (through a qdisc).", "worker"), func(s *agent.WorkerStats) uint64 { return s.TransitRecords.Load() }},
	{prom.Desc("ring_read_errors_total", "Errors reading the kernel sample ring.", "worker"), func(s *agent.WorkerStats) uint64 { return s.ReadErrors.Load() }},
}

// routerResults is sflowswitchd_extended_router_total{worker,result}: the
// samples whose sampler asked the kernel's FIB, by what became of their
// extended_router (ok: sent; the other results say why it was left out,
// forwarding.RouterResult).
var routerResults = prom.Desc("extended_router_total", "Samples whose sampler asked the FIB, by result: ok (extended_router sent), not_routed, no_route, no_generation, stale, mismatch (left out).", "worker", "result")

// tunnelResults is sflowswitchd_tunnel_samples_total{worker,result}: the
// kernel samples of tunnel devices by what their tunnel records said
// (agent.TunnelResult).
var tunnelResults = prom.Desc("tunnel_samples_total", "Kernel samples of tunnel devices (VXLAN, GRE), by result: ok (the outer header's record sent), outer_unknown (the VNI only), none (no tunnel record).", "worker", "result")

var samplesDropped = prom.Desc("samples_dropped_total", "Samples the agent lost (could not deliver), by reason; not packets the switch dropped (sflowswitchd_switch_dropped_packets_total).", "worker", "reason")

// Per collector: the receiver row (sFlowRcvrIndex) and its address,
// counting every datagram sent to it (the workers', the drop reporter's
// and the application engine's: Agent.CollectorStats).
var (
	collDatagrams  = prom.Desc("collector_datagrams_sent_total", "Datagrams sent to the collector.", "receiver", "collector")
	collBytes      = prom.Desc("collector_bytes_sent_total", "Bytes of datagrams sent to the collector.", "receiver", "collector")
	collSendErrors = prom.Desc("collector_send_errors_total", "Datagrams to the collector the socket refused.", "receiver", "collector")
	collLost       = prom.Desc("collector_samples_lost_total", "Samples for the collector that did not reach it, by reason (send_error: in a datagram the socket refused or could not send — no route, no resolved address, ICMP unreachable; too_large: above its maximum datagram size).", "receiver", "collector", "reason")
)

// agentCollector exports the agent's per-worker and per-collector
// counters.
type agentCollector struct{ a *agent.Agent }

// NewAgentCollector returns a collector of a's counters: per worker
// (sflowswitchd_kernel_samples_total{worker}, ...,
// sflowswitchd_samples_dropped_total{worker,reason}) and per collector
// (sflowswitchd_collector_*{receiver,collector}).
func NewAgentCollector(a *agent.Agent) prometheus.Collector { return agentCollector{a} }

func (c agentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range workerMetrics {
		ch <- m.desc
	}
	for _, d := range []*prometheus.Desc{routerResults, tunnelResults, samplesDropped, collDatagrams, collBytes, collSendErrors, collLost} {
		ch <- d
	}
}

func (c agentCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.a.Workers()
	for i := 0; i < n; i++ {
		s := c.a.Stats(i)
		w := strconv.Itoa(i)
		for _, m := range workerMetrics {
			ch <- prom.Counter(m.desc, m.get(s), w)
		}
		ch <- prom.Counter(samplesDropped, s.SamplesUnsent.Load(), w, "send_error")
		ch <- prom.Counter(samplesDropped, s.TooLarge.Load(), w, "too_large")
		ch <- prom.Counter(samplesDropped, s.UnknownPort.Load(), w, "unknown_port")
		for _, r := range forwarding.RouterResults() {
			ch <- prom.Counter(routerResults, s.Router[r].Load(), w, r.String())
		}
		for r := agent.TunnelResult(0); r < agent.TunnelResultCount; r++ {
			ch <- prom.Counter(tunnelResults, s.Tunnel[r].Load(), w, r.String())
		}
	}
	for _, t := range c.a.CollectorStats() {
		r, addr := strconv.Itoa(t.Receiver), t.Collector()
		ch <- prom.Counter(collDatagrams, t.Datagrams, r, addr)
		ch <- prom.Counter(collBytes, t.Bytes, r, addr)
		ch <- prom.Counter(collSendErrors, t.SendErrors, r, addr)
		ch <- prom.Counter(collLost, t.SamplesUnsent, r, addr, "send_error")
		ch <- prom.Counter(collLost, t.TooLarge, r, addr, "too_large")
	}
}
