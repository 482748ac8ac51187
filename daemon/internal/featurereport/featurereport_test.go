package featurereport

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"

	"github.com/cilium/ebpf"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/metricstest"
)

// TestKernelFeatureReport: the real probes of the running kernel, with
// af_xdp_need_wakeup switched off as on a kernel without AF_XDP. Whatever
// else the kernel lacks (tcx before 6.6) is reported too: one warning per
// missing feature with its effect, a summary counting them, and the
// metric 0 for each missing feature and 1 for every other.
func TestKernelFeatureReport(t *testing.T) {
	fs := features.ProbeFeatures() // the real probes (root, as all daemon tests)
	for i := range fs.List {
		if fs.List[i].Name == features.FeatureAFXDP {
			// As on a kernel without AF_XDP. The error says it is
			// simulated: this log was once read as the real probe's
			// answer on Linux 6.1, which has AF_XDP.
			fs.List[i].Err = fmt.Errorf("simulated by TestKernelFeatureReport: %w", ebpf.ErrNotSupported)
		}
	}
	missing := fs.Missing()
	var logBuf bytes.Buffer
	Log(slog.New(slog.NewTextHandler(&logBuf, nil)), fs)
	logs := logBuf.String()
	for _, want := range []string{
		"kernel feature unavailable", "feature=" + features.FeatureAFXDP, "monitor ports are refused",
		"kernel features probed", fmt.Sprintf("unavailable=%d", len(missing)),
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if got := strings.Count(logs, "kernel feature unavailable"); got != len(missing) {
		t.Errorf("%d unavailable features logged, want %d (%v):\n%s", got, len(missing), missing, logs)
	}
	for _, f := range missing {
		if !strings.Contains(logs, "feature="+f.Name+" ") {
			t.Errorf("missing feature %s not logged:\n%s", f.Name, logs)
		}
	}

	metrics := metricstest.Scrape(t, NewCollector(fs))
	if !strings.Contains(metrics, "# TYPE sflowswitchd_kernel_feature gauge") {
		t.Errorf("no TYPE line:\n%s", metrics)
	}
	if got := strings.Count(metrics, "\nsflowswitchd_kernel_feature{"); got != len(fs.List) {
		t.Errorf("%d series, want %d:\n%s", got, len(fs.List), metrics)
	}
	for _, f := range fs.List {
		v := 1
		if !f.Available() {
			v = 0
		}
		want := fmt.Sprintf(`sflowswitchd_kernel_feature{feature=%q,kernel=%q,required="%v",since=%q} %d`, f.Name, fs.Release, f.Required, f.Since, v)
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s:\n%s", want, metrics)
		}
	}
}

// TestTCAttachReported: the probe summary says how TC ports are attached,
// tcx where the kernel has TCX links and clsact where it does not.
func TestTCAttachReported(t *testing.T) {
	fs := features.ProbeFeatures()
	for _, c := range []struct {
		tcx  bool
		want string
	}{{true, "tc_attach=tcx"}, {false, "tc_attach=clsact"}} {
		for i := range fs.List {
			if fs.List[i].Name == features.FeatureTCX {
				fs.List[i].Err = nil
				if !c.tcx {
					fs.List[i].Err = ebpf.ErrNotSupported // as on Linux < 6.6
				}
			}
		}
		var logBuf bytes.Buffer
		Log(slog.New(slog.NewTextHandler(&logBuf, nil)), fs)
		if !strings.Contains(logBuf.String(), c.want) {
			t.Errorf("tcx available %v: the log lacks %q:\n%s", c.tcx, c.want, logBuf.String())
		}
	}
}
