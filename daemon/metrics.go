package daemon

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/dropnotify"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/featurereport"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/metrics"
	"github.com/sflowswitchd/sflowswitchd/internal/listener"
	"github.com/sflowswitchd/sflowswitchd/internal/prom"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// newMetrics returns the daemon's Prometheus registry: Go runtime and
// process metrics, the agent's counters per worker and per collector and
// the sampled ports' kernel counters. The other parts of the daemon
// register their own collectors on d.metrics when they start (the
// application sub-agent in startApps; see internal/prom); /metrics
// serves it when -metrics is set.
func (d *Daemon) newMetrics() *prometheus.Registry {
	reg := prom.NewRegistry()
	reg.MustRegister(metrics.NewAgentCollector(d.agent), metrics.NewPortCollector(d.portMetrics),
		featurereport.NewCollector(d.dp.Features()), dropnotify.NewCollector(d.drops, d.portName))
	reg.MustRegister(backoffCollector{d}, metrics.NewTransitCollector(d.transitMetrics), snmpRestoreCollector{d}, forwardingCollector{d})
	if d.psample != nil {
		reg.MustRegister(psampleCollector{d.psample})
	}
	if d.dnssd != nil {
		reg.MustRegister(dnssdCollector{d.dnssd})
	}
	return reg
}

// transitMetrics reads the transit counts (false while transit is off).
func (d *Daemon) transitMetrics() (metrics.Transit, bool) {
	tr := d.dp.Transit()
	if !tr.On() {
		return metrics.Transit{}, false
	}
	s, err := tr.Stats()
	if err != nil {
		d.log.Warn("reading transit counts", "err", err)
		return metrics.Transit{}, false
	}
	n, err := tr.Parked()
	if err != nil {
		d.log.Warn("reading transit counts", "err", err)
		return metrics.Transit{}, false
	}
	return metrics.Transit{Parked: s.Parked, Unparked: s.Unparked, Sent: s.Sent, Dropped: s.Dropped,
		Consumed: s.Consumed, Stale: s.Stale, Deferred: s.Deferred, Queued: s.Queued, Waiting: n}, true
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
		if d.psample != nil && (d.mixed == nil || d.mixed.UsesPsample(idx)) {
			// The pool as the port's packet counter gave it at its
			// latest sample, the samples lost (GROUP_SEQ gaps).
			pool, drops := d.psample.PortPool(idx)
			eff, _ := d.agent.EffectiveRate(idx)
			out = append(out, metrics.Port{Name: st.name, IfIndex: idx, Pool: pool, Drops: drops, Rate: st.rate,
				KernelRate: max(eff, st.rate), EffectiveRate: max(eff, st.rate)})
			continue
		}
		c, err := d.dp.Stats().Ingress(int(idx))
		if err != nil {
			continue
		}
		eff, _ := d.agent.EffectiveRate(idx)
		mp := metrics.Port{Name: st.name, IfIndex: idx, Pool: c.Pool, Samples: c.Samples, Drops: c.Drops,
			AFXDPDrops: d.dp.Stats().SocketDrops(idx), Rate: st.rate, KernelRate: agent.KernelRate(max(eff, st.rate)), EffectiveRate: max(eff, st.rate)}
		if d.dp.Stats().Direction(int(idx)).Has(sflow.DirectionEgress) {
			if e, err := d.dp.Stats().Egress(int(idx)); err == nil {
				mp.Egress, mp.EgressPool, mp.EgressSamples, mp.EgressDrops = true, e.Pool, e.Samples, e.Drops
			}
		}
		out = append(out, mp)
	}
	return out
}

// serveMetrics starts the Prometheus listener (/metrics, /apm), with its
// bounds (internal/listener: a connection cap, timeouts, GET only). It
// stops with ctx: the listener closes, requests in flight (which read the
// dataplane's mapped counters) complete, and only then is running done,
// so run closes the dataplane after the last handler.
func (d *Daemon) serveMetrics(ctx context.Context, addr string, running *sync.WaitGroup) error {
	mux := http.NewServeMux()
	scrapeErrs := prom.HandlerErrors(d.log)
	var mh http.Handler = prom.HandlerLimited(d.metrics, scrapeErrs)
	if d.metricsHook != nil {
		mh = d.metricsHook(mh)
	}
	mux.Handle("/metrics", mh)
	mux.HandleFunc("/apm", d.apps.ServeAPM)
	mux.HandleFunc("/", landing)
	srv, err := listener.Listen("metrics", addr, mux, listener.Defaults, d.log)
	if err != nil {
		return err
	}
	config.WarnExposed(d.log, "metrics", srv.Addr().String())
	d.metrics.MustRegister(listener.Collector(scrapeErrs, srv))
	running.Go(func() { srv.Serve(ctx) })
	d.log.Info("metrics listening", "addr", srv.Addr().String())
	return nil
}

// endpoints are what the metrics listener serves, listed at /.
var endpoints = []struct{ path, what string }{
	{"/metrics", "Prometheus metrics (sflowswitchd_*, Go runtime, process)"},
	{"/apm", "APM reports (RFC 3729) as JSON, when -app-api is on (sflowswitchd apm)"},
}

// landing is / on the metrics listener: the endpoints, as
// node_exporter's landing page lists its own; any other path is 404.
func landing(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><title>sflowswitchd</title></head><body>\n<h1>sflowswitchd</h1>\n<ul>\n")
	for _, e := range endpoints {
		fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a>: %s</li>\n", e.path, e.path, html.EscapeString(e.what))
	}
	b.WriteString("</ul>\n</body></html>\n")
	_, _ = io.WriteString(w, b.String()) // a client gone is not ours to report
}

// backoffSteps is sflowswitchd_backoff_steps_total{direction}.
var backoffSteps = prom.Desc("backoff_steps_total",
	"Steps of a port's sampling rate in force by the backoff (max_samples_per_second, max_port_samples_per_second).", "direction")

// backoffCollector exports the backoff's steps.
type backoffCollector struct{ d *Daemon }

func (c backoffCollector) Describe(ch chan<- *prometheus.Desc) { ch <- backoffSteps }

func (c backoffCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prom.Counter(backoffSteps, c.d.backoffUp.Load(), "up")
	ch <- prom.Counter(backoffSteps, c.d.backoffDown.Load(), "down")
}

// snmpRestoreRefused is sflowswitchd_snmp_restore_refused_total{what}.
var snmpRestoreRefused = prom.Desc("snmp_restore_refused_total",
	"What a start refused of the SNMP-set configuration the previous program kept (the state directory's snmp.json), by what: receiver, sampler, poller (rows a SET with their values would be refused; dropped), file (damaged and set aside as snmp.json.damaged, or refused by the agent as a whole). See the log.", "what")

// snmpRestoreCollector exports snmpRefused.
type snmpRestoreCollector struct{ d *Daemon }

func (c snmpRestoreCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- snmpRestoreRefused
	ch <- pinReplaced
}

func (c snmpRestoreCollector) Collect(ch chan<- prometheus.Metric) {
	r := &c.d.snmpRefused
	ch <- prom.Counter(snmpRestoreRefused, r.receiver.Load(), "receiver")
	ch <- prom.Counter(snmpRestoreRefused, r.sampler.Load(), "sampler")
	ch <- prom.Counter(snmpRestoreRefused, r.poller.Load(), "poller")
	ch <- prom.Counter(snmpRestoreRefused, r.file.Load(), "file")
	if why := c.d.dp.Pinned().Replaced(); why != "" {
		ch <- prom.Counter(pinReplaced, 1, why)
	}
}

// pinReplaced is sflowswitchd_pinned_state_replaced_total{reason}.
var pinReplaced = prom.Desc("pinned_state_replaced_total",
	"Pinned sampler state this start found and replaced instead of adopting it, by reason: layout (another version), sizes (other settings), unreadable (no valid description), damaged (an object missing or not the daemon's). Its samples in flight are lost and pools start afresh: a gap in the data (see the log).", "reason")

// forwardingReadErrors is sflowswitchd_forwarding_read_errors_total.
var forwardingReadErrors = prom.Desc("forwarding_read_errors_total",
	"Reads of the kernel's forwarding tables (FDB, neighbours, links, addresses, routes) that failed, e.g. with no descriptor left (EMFILE); the output, extended_switch and extended_router lookups use the tables read before. Logged once, then at most once a minute with the number left out.")

// forwardingCollector exports the forwarding table's read errors.
type forwardingCollector struct{ d *Daemon }

func (c forwardingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- forwardingReadErrors }

func (c forwardingCollector) Collect(ch chan<- prometheus.Metric) {
	if c.d.output != nil {
		ch <- prom.Counter(forwardingReadErrors, c.d.output.ReadErrors())
	}
}
