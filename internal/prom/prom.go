// Package prom is the Prometheus exposition every part of the daemon
// exports through (github.com/prometheus/client_golang): one registry
// holding the Go runtime and process collectors, its /metrics handler,
// and the helpers collectors build their metrics with. The collectors
// themselves live with what they count (daemon/internal/metrics for the
// agent, the ports and the configuration; apps/appsubagent for the
// applications; the drop and feature reports beside them) and read
// atomic counters when scraped, so the hot path never touches
// Prometheus types.
package prom

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// namespace prefixes every metric of the daemon.
const namespace = "sflowswitchd"

// NewRegistry returns a registry holding the Go runtime collector
// (goroutines, heap, GC: go_*) and the process collector (RSS, open and
// maximum file descriptors, CPU: process_*).
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves reg in the Prometheus exposition formats. A collector
// that fails is logged and left out; the others are still served.
func Handler(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slogErrorLog{log},
		ErrorHandling: promhttp.ContinueOnError,
		// A scrape never holds more than a few goroutines.
		MaxRequestsInFlight: 4,
	})
}

type slogErrorLog struct{ log *slog.Logger }

func (l slogErrorLog) Println(v ...any) { l.log.Error("metrics", "err", v) }

// Counter and Gauge build a constant metric for a collector's Collect;
// the values are counters of our own, so an error is a programming error
// (wrong label count) and MustNewConstMetric's panic is right.
func Counter(d *prometheus.Desc, v uint64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

// Gauge: see Counter.
func Gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// Desc describes the metric Namespace_name with its variable labels.
func Desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
}
