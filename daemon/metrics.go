package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/daemon/internal/dropnotify"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/featurereport"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/metrics"
	"github.com/sflowswitchd/sflowswitchd/internal/prom"
)

// newMetrics returns the daemon's Prometheus registry: Go runtime and
// process metrics, the agent's counters per worker and per collector and
// the sampled ports' kernel counters. The other parts of the daemon
// register their own collectors on d.metrics when they start (the
// application sub-agent in startApps; see internal/metrics); /metrics
// serves it when -metrics is set.
func (d *Daemon) newMetrics() *prometheus.Registry {
	reg := prom.NewRegistry()
	reg.MustRegister(metrics.NewAgentCollector(d.agent), metrics.NewPortCollector(d.portMetrics),
		featurereport.NewCollector(d.dp.Features()), dropnotify.NewCollector(d.drops, d.portName))
	return reg
}

// portMetrics returns the sampled ports' kernel counters, read now.
func (d *Daemon) portMetrics() []metrics.Port {
	d.mu.Lock()
	states := make(map[uint32]portState, len(d.sampled))
	for k, v := range d.sampled {
		// The name as the port is called now: a rename changes no
		// sampling configuration, so d.sampled may hold the old one.
		if p, ok := d.ports[int(k)]; ok {
			v.name = p.Name
		}
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
			AFXDPDrops: d.dp.SocketDrops(idx), Rate: st.rate, KernelRate: st.kernelRate})
	}
	return out
}
