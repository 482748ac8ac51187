// Package metrics exposes the daemon's counters to Prometheus with
// github.com/prometheus/client_golang: one registry holding the Go runtime
// and process collectors and one collector per part of the daemon (the
// agent's workers and collectors, the sampled ports, the application
// sub-agent). The collectors read the parts' atomic counters when scraped,
// so the hot path never touches Prometheus types.
//
// To export something new, write a prometheus.Collector next to the
// counters (or use prometheus.NewCounterFunc) and register it on the
// daemon's registry (Registry.MustRegister in cmd/sflowswitchd).
package metrics
