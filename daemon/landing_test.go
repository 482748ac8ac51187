package daemon

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestLanding: / on the metrics listener lists the endpoints; another
// path is 404.
func TestLanding(t *testing.T) {
	rec := httptest.NewRecorder()
	landing(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /: %d", rec.Code)
	}
	for _, want := range []string{`<a href="/metrics">/metrics</a>`, `<a href="/apm">/apm</a>`} {
		if !strings.Contains(body, want) {
			t.Errorf("GET / lacks %q:\n%s", want, body)
		}
	}
	rec = httptest.NewRecorder()
	landing(rec, httptest.NewRequest(http.MethodGet, "/nothing", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /nothing: %d, want 404", rec.Code)
	}
}
