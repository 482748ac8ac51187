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
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sflowswitchd/sflowswitchd/internal/ratelog"
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
// that fails is logged and left out; the others are still served. Its
// errors (a client that aborts a scrape makes one per metric family) are
// logged at most once a second with the number not logged, and counted
// (HandlerErrors).
func Handler(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	return HandlerLimited(reg, HandlerErrors(log))
}

// HandlerErrors returns the limiter of a /metrics handler's error lines
// on log, for HandlerLimited: its Total counts every error.
func HandlerErrors(log *slog.Logger) *ratelog.Limiter {
	return ratelog.New(log, slog.LevelWarn, "metrics: scrape failed (a client that went away, or a collector's error)", time.Second)
}

// HandlerLimited is Handler with its error lines written through errs.
func HandlerLimited(reg *prometheus.Registry, errs *ratelog.Limiter) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slogErrorLog{errs},
		ErrorHandling: promhttp.ContinueOnError,
		// A scrape never holds more than a few goroutines.
		MaxRequestsInFlight: 4,
	})
}

type slogErrorLog struct{ l *ratelog.Limiter }

func (l slogErrorLog) Println(v ...any) { l.l.Log("err", shortErr(fmt.Sprint(v...))) }

// shortErr keeps an error line short: promhttp's messages quote whole
// metric families.
func shortErr(s string) string {
	const max = 300
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// Counter and Gauge build a constant metric for a collector's Collect.
// Label values come from outside (port names from the kernel,
// application names): one that is not valid UTF-8 has its invalid bytes
// replaced (Label), so it never costs the other series
// (MustNewConstMetric panicked, and every other port's series vanished
// from random scrapes). An error left (a wrong label count, a programming
// error) makes that one series invalid, reported in the scrape's errors.
func Counter(d *prometheus.Desc, v uint64, labels ...string) prometheus.Metric {
	return constMetric(d, prometheus.CounterValue, float64(v), labels)
}

// Gauge: see Counter.
func Gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return constMetric(d, prometheus.GaugeValue, v, labels)
}

func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64, labels []string) prometheus.Metric {
	for i, l := range labels {
		if !utf8.ValidString(l) {
			labels = slices.Clone(labels)
			for j := i; j < len(labels); j++ {
				labels[j] = Label(labels[j])
			}
			break
		}
	}
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

// Label returns s as a label value: valid UTF-8, each invalid byte
// replaced by U+FFFD (so two names that differ only there still differ in
// length at least; the ifindex label tells ports apart).
func Label(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Desc describes the metric Namespace_name with its variable labels.
func Desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
}
