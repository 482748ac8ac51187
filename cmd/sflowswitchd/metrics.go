package main

import (
	"bufio"
	"fmt"
	"net/http"
	"sort"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
)

// portMetrics are a sampled port's kernel counters.
type portMetrics struct {
	name                 string
	ifindex              uint32
	pool, samples, drops uint64
	afxdpDrops           uint64
	rate, kernelRate     uint32
}

// metricsHandler serves the daemon's counters in the Prometheus text
// exposition format (version 0.0.4). Every sample the agent could not
// deliver is visible here, by reason.
type metricsHandler struct {
	agent *agent.Agent
	ports func() []portMetrics
	apps  *apps
	// features of the kernel, probed at start (features.go).
	features *dataplane.Features
}

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	bw := bufio.NewWriter(w)
	defer bw.Flush()

	type workerMetric struct {
		name, help string
		get        func(*agent.WorkerStats) uint64
	}
	workerMetrics := []workerMetric{
		{"sflowswitchd_kernel_samples_total", "Packet samples received from the kernel.", func(s *agent.WorkerStats) uint64 { return s.KernelSamples.Load() }},
		{"sflowswitchd_subsampled_away_total", "Kernel samples not kept by software sub-sampling to the configured rate.", func(s *agent.WorkerStats) uint64 { return s.SubsampledAway.Load() }},
		{"sflowswitchd_flow_samples_total", "Flow samples encoded into datagrams.", func(s *agent.WorkerStats) uint64 { return s.FlowSamples.Load() }},
		{"sflowswitchd_counter_samples_total", "Counter samples encoded into datagrams.", func(s *agent.WorkerStats) uint64 { return s.CounterSamples.Load() }},
		{"sflowswitchd_datagrams_sent_total", "Datagrams sent to collectors.", func(s *agent.WorkerStats) uint64 { return s.Datagrams.Load() }},
		{"sflowswitchd_bytes_sent_total", "Bytes of datagrams sent to collectors.", func(s *agent.WorkerStats) uint64 { return s.Bytes.Load() }},
		{"sflowswitchd_send_errors_total", "Datagrams the socket refused.", func(s *agent.WorkerStats) uint64 { return s.SendErrors.Load() }},
		{"sflowswitchd_poll_errors_total", "Counter polls that failed.", func(s *agent.WorkerStats) uint64 { return s.PollErrors.Load() }},
		{"sflowswitchd_ring_read_errors_total", "Errors reading the kernel sample ring.", func(s *agent.WorkerStats) uint64 { return s.ReadErrors.Load() }},
	}
	n := h.agent.Workers()
	for _, m := range workerMetrics {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s counter\n", m.name, m.help, m.name)
		for i := 0; i < n; i++ {
			fmt.Fprintf(bw, "%s{worker=\"%d\"} %d\n", m.name, i, m.get(h.agent.Stats(i)))
		}
	}
	// Samples lost in user space, by reason.
	const dropped = "sflowswitchd_samples_dropped_total"
	fmt.Fprintf(bw, "# HELP %s Samples the agent could not deliver, by reason.\n# TYPE %s counter\n", dropped, dropped)
	for i := 0; i < n; i++ {
		s := h.agent.Stats(i)
		for _, r := range []struct {
			reason string
			v      uint64
		}{
			{"send_error", s.SamplesUnsent.Load()},
			{"too_large", s.TooLarge.Load()},
			{"unknown_port", s.UnknownPort.Load()},
		} {
			fmt.Fprintf(bw, "%s{worker=\"%d\",reason=%q} %d\n", dropped, i, r.reason, r.v)
		}
	}
	h.apps.WriteMetrics(bw)
	writeFeatureMetrics(bw, h.features)
	if h.ports == nil {
		return
	}
	ports := h.ports()
	sort.Slice(ports, func(i, j int) bool { return ports[i].ifindex < ports[j].ifindex })
	for _, m := range []struct {
		name, help, typ string
		get             func(*portMetrics) uint64
	}{
		{"sflowswitchd_port_sample_pool_total", "Frames the port's sampler saw (sFlow sample_pool).", "counter", func(p *portMetrics) uint64 { return p.pool }},
		{"sflowswitchd_port_kernel_samples_total", "Frames the kernel selected for sampling on the port.", "counter", func(p *portMetrics) uint64 { return p.samples }},
		{"sflowswitchd_port_kernel_drops_total", "Selected frames the kernel could not deliver (ring full, no socket).", "counter", func(p *portMetrics) uint64 { return p.drops }},
		{"sflowswitchd_port_afxdp_drops_total", "Frames the port's AF_XDP sockets dropped (rx_dropped, rx_ring_full, fill ring empty).", "counter", func(p *portMetrics) uint64 { return p.afxdpDrops }},
		{"sflowswitchd_port_sampling_rate", "Configured sampling rate of the port.", "gauge", func(p *portMetrics) uint64 { return uint64(p.rate) }},
		{"sflowswitchd_port_kernel_sampling_rate", "Power-of-two rate the kernel samples the port at.", "gauge", func(p *portMetrics) uint64 { return uint64(p.kernelRate) }},
	} {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", m.name, m.help, m.name, m.typ)
		for i := range ports {
			p := &ports[i]
			fmt.Fprintf(bw, "%s{port=%q,ifindex=\"%d\"} %d\n", m.name, p.name, p.ifindex, m.get(p))
		}
	}
}
