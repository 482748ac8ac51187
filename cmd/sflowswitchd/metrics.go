package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/internal/metrics"
)

// newMetrics returns the daemon's Prometheus registry: Go runtime and
// process metrics, the agent's counters per worker and per collector, the
// sampled ports' kernel counters and, with -app-api, the application
// sub-agent's. Other parts of the daemon register their own collectors on
// d.metrics (see internal/metrics).
func (d *daemon) newMetrics() *prometheus.Registry {
	reg := metrics.NewRegistry()
	reg.MustRegister(metrics.NewAgentCollector(d.agent), metrics.NewPortCollector(d.portMetrics))
	if d.apps != nil {
		reg.MustRegister(metrics.NewAppCollector(d.apps.engine.Stats(), d.apps.conn))
	}
	return reg
}

// portMetrics returns the sampled ports' kernel counters, read now.
func (d *daemon) portMetrics() []metrics.Port {
	d.mu.Lock()
	states := make(map[uint32]portState, len(d.sampled))
	for k, v := range d.sampled {
		states[k] = v
	}
	d.mu.Unlock()
	out := make([]metrics.Port, 0, len(states))
	for idx, st := range states {
		c, err := d.dp.PortCounters(int(idx))
		if err != nil {
			continue
		}
		out = append(out, metrics.Port{Name: st.name, IfIndex: idx, Pool: c.Pool, Samples: c.Samples, Drops: c.Drops,
			AFXDPDrops: d.monitors.SocketDrops(idx), Rate: st.rate, KernelRate: st.kernelRate})
	}
	return out
}
