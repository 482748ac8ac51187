package featurereport

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/testkit/metricstest"
)

func TestKernelFeatureReport(t *testing.T) {
	fs := dataplane.ProbeFeatures() // the real probes (root, as all daemon tests)
	for i := range fs.List {
		if fs.List[i].Name == dataplane.FeatureAFXDP {
			fs.List[i].Err = ebpf.ErrNotSupported // as on a kernel without AF_XDP
		}
	}
	var logBuf bytes.Buffer
	Log(slog.New(slog.NewTextHandler(&logBuf, nil)), fs)
	logs := logBuf.String()
	for _, want := range []string{
		"kernel feature unavailable", "feature=" + dataplane.FeatureAFXDP, "monitor ports are refused",
		"kernel features probed", "unavailable=1",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Count(logs, "kernel feature unavailable") != 1 {
		t.Errorf("want exactly one unavailable feature logged:\n%s", logs)
	}

	metrics := metricstest.Scrape(t, NewCollector(fs))
	if !strings.Contains(metrics, "# TYPE sflowswitchd_kernel_feature gauge") {
		t.Errorf("no TYPE line:\n%s", metrics)
	}
	if got := strings.Count(metrics, "\nsflowswitchd_kernel_feature{"); got != len(fs.List) {
		t.Errorf("%d series, want %d:\n%s", got, len(fs.List), metrics)
	}
	off := `sflowswitchd_kernel_feature{feature="af_xdp_need_wakeup",kernel="` + fs.Release + `",required="false",since="5.4"} 0`
	on := `sflowswitchd_kernel_feature{feature="xdp_frags",kernel="` + fs.Release + `",required="true",since="5.18"} 1`
	for _, want := range []string{off, on} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s:\n%s", want, metrics)
		}
	}
}

// TestTCAttachReported: the probe summary says how TC ports are attached,
// tcx where the kernel has TCX links and clsact where it does not.
func TestTCAttachReported(t *testing.T) {
	fs := dataplane.ProbeFeatures()
	for _, c := range []struct {
		tcx  bool
		want string
	}{{true, "tc_attach=tcx"}, {false, "tc_attach=clsact"}} {
		for i := range fs.List {
			if fs.List[i].Name == dataplane.FeatureTCX {
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
