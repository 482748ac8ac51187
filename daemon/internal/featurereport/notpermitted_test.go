package featurereport

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/metricstest"
)

// TestNotPermittedReported: a feature whose probe was
// refused for lack of privilege is logged as not permitted with the
// capability missing, never as unavailable in the kernel, and exported as
// sflowswitchd_kernel_feature_not_permitted.
func TestNotPermittedReported(t *testing.T) {
	fs := &features.Features{Release: "6.18.0", List: []features.Feature{
		{Name: features.FeatureAFXDP, Since: "5.4", UsedFor: "monitor ports", Without: "monitor ports are refused",
			Err: &features.PermissionError{Missing: []string{"CAP_NET_RAW"}, Err: unix.EPERM}},
		{Name: features.FeatureXDP, Since: "4.8", UsedFor: "the sampler", Required: true},
	}}
	var buf bytes.Buffer
	Log(slog.New(slog.NewTextHandler(&buf, nil)), fs)
	logs := buf.String()
	if strings.Contains(logs, "kernel feature unavailable") {
		t.Errorf("a refused probe logged as a missing kernel feature:\n%s", logs)
	}
	for _, want := range []string{"kernel feature not probed", "feature=af_xdp_need_wakeup", "missing=CAP_NET_RAW", "not_permitted=1"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	m := metricstest.Scrape(t, NewCollector(fs))
	if !strings.Contains(m, `sflowswitchd_kernel_feature_not_permitted{feature="af_xdp_need_wakeup",missing="CAP_NET_RAW"} 1`) {
		t.Errorf("metrics lack the refused probe:\n%s", m)
	}
}
