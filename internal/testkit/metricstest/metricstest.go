// Package metricstest helps tests read metrics as Prometheus scrapes them.
package metricstest

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/internal/prom"
)

// Scrape serves collectors through the daemon's /metrics handler
// (prom.Handler) and returns the text exposition.
func Scrape(t *testing.T, cs ...prometheus.Collector) string {
	t.Helper()
	reg := prom.NewRegistry()
	reg.MustRegister(cs...)
	rec := httptest.NewRecorder()
	prom.Handler(reg, slog.Default()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body.String())
	}
	return rec.Body.String()
}
