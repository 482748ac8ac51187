// Package metrics holds the Prometheus collectors of the daemon's own
// parts: the agent's workers and collectors, the sampled ports, and the
// configuration that does not take effect (failed ports, collector names,
// unmatched port patterns). They read the parts' atomic counters when
// scraped, so the hot path never touches Prometheus types.
//
// To export something new, write a prometheus.Collector next to the
// counters it reads (internal/prom has the helpers) and register it on
// the daemon's registry (daemon/metrics.go).
package metrics
