package dropnotify

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"

	"github.com/cilium/ebpf"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/metricstest"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// TestWithoutBTFTracepoint: on a kernel without tp_btf_kfree_skb (the
// running kernel's probe results with that one switched off, as such a
// kernel reports it) drop notifications stay off: Start fails with an
// error naming the feature and the release that brought it, before
// loading anything; a SIGHUP (Apply) asking for them again is refused
// the same way; drops off is accepted; the metrics say notifications
// are off (no function names, no counts).
func TestWithoutBTFTracepoint(t *testing.T) {
	testskip.Root(t)
	probed := features.ProbeFeatures()
	fs := &features.Features{Release: probed.Release}
	for _, f := range probed.List {
		if f.Name == features.FeatureBTFTracepoint {
			f.Err = ebpf.ErrNotSupported
		}
		fs.List = append(fs.List, f)
	}
	var logs bytes.Buffer
	r := New(2, fs, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	on := Config{On: true, Limit: 100, HeaderBytes: 128}

	err := r.Start(ctx, on)
	for _, want := range []string{"drop notifications unavailable", features.FeatureBTFTracepoint, "needs Linux 5.5"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Start without %s = %v, want an error saying %q", features.FeatureBTFTracepoint, err, want)
		}
	}
	if !errors.Is(err, ebpf.ErrNotSupported) {
		t.Errorf("Start error %v does not wrap the probe's error", err)
	}
	if !errors.Is(err, ErrKernelFeature) {
		t.Errorf("Start error %v is not marked ErrKernelFeature (the daemon logs it as a warning)", err)
	}
	if r.dp != nil {
		t.Fatal("the drop program was loaded on a kernel without tp_btf")
	}
	if err := r.Apply(on); err == nil || !strings.Contains(err.Error(), features.FeatureBTFTracepoint) {
		t.Errorf("Apply (SIGHUP) without %s = %v, want it refused", features.FeatureBTFTracepoint, err)
	}
	if err := r.Apply(Config{}); err != nil {
		t.Errorf("Apply(drops off) = %v", err)
	}
	if r.dp != nil {
		t.Error("the drop program was loaded")
	}
	if strings.Contains(logs.String(), "drop notifications on") {
		t.Errorf("the runner logged notifications on:\n%s", logs.String())
	}
	m := metricstest.Scrape(t, NewCollector(r, func(uint32) string { return "" }))
	if !strings.Contains(m, "sflowswitchd_drop_function_names 0") {
		t.Errorf("metrics do not say notifications are off:\n%s", m)
	}
	if strings.Contains(m, "sflowswitchd_switch_dropped_packets_total{") {
		t.Errorf("per-reason drop counts without the program:\n%s", m)
	}
}
