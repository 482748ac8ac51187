// Package featurereport reports the kernel features the dataplane probed
// at start (features.Features): in the log, what is missing and what the
// daemon does instead (docs/reference/kernels.md), and as the metric
// sflowswitchd_kernel_feature.
package featurereport

import (
	"log/slog"
	"strconv"
	"strings"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/internal/prom"
)

// Log says at start what the kernel lacks of what the agent
// uses, and what the daemon does instead (docs/reference/kernels.md); features
// present are listed at debug level. A feature whose probe the kernel
// refused for lack of privilege is not said to be missing from the
// kernel: the line names the capabilities the daemon lacks.
// tc_attach and egress_attach are how the TC ingress and TC egress
// samplers attach on this kernel: TCX links, or before Linux 6.6 cls_bpf
// filters on the clsact qdisc (the same fallback both ways).
func Log(log *slog.Logger, fs *features.Features) {
	missing := fs.Missing()
	denied := 0
	for _, f := range fs.List {
		if f.Available() {
			log.Debug("kernel feature available", "feature", f.Name, "since", "Linux "+f.Since)
			continue
		}
		if pe, ok := f.NotPermitted(); ok {
			denied++
			log.Warn("kernel feature not probed: the daemon is not permitted to use it (a capability is missing), the kernel may well have it",
				"feature", f.Name, "missing", strings.Join(pe.Missing, ","), "used_for", f.UsedFor, "effect", f.Without, "err", pe.Err)
			continue
		}
		log.Warn("kernel feature unavailable", "feature", f.Name, "since", "Linux "+f.Since,
			"used_for", f.UsedFor, "effect", f.Without, "err", f.Err)
	}
	log.Info("kernel features probed", "kernel", fs.Release, "probed", len(fs.List), "unavailable", len(missing),
		"not_permitted", denied, "tc_attach", dataplane.TCAttachMode(fs), "egress_attach", dataplane.TCAttachMode(fs))
}

// featureDesc is sflowswitchd_kernel_feature: 1 per feature the kernel
// has, 0 per feature it lacks (see the log for the effect).
var featureDesc = prometheus.NewDesc("sflowswitchd_kernel_feature",
	"Kernel features the agent uses: 1 available, 0 unavailable (docs/reference/kernels.md says what the daemon does without each).",
	[]string{"feature", "since", "required", "kernel"}, nil)

// featureCollector exports the features probed at start.
type featureCollector struct{ fs *features.Features }

// NewCollector returns the collector of sflowswitchd_kernel_feature for
// the features fs (nil: none).
func NewCollector(fs *features.Features) prometheus.Collector { return featureCollector{fs} }

func (c featureCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- featureDesc
	ch <- deniedDesc
}

func (c featureCollector) Collect(ch chan<- prometheus.Metric) {
	if c.fs == nil {
		return
	}
	for _, f := range c.fs.List {
		v := 0.0
		if f.Available() {
			v = 1
		}
		ch <- prom.Gauge(featureDesc, v, f.Name, f.Since, strconv.FormatBool(f.Required), c.fs.Release)
		if pe, ok := f.NotPermitted(); ok {
			ch <- prom.Gauge(deniedDesc, 1, f.Name, strings.Join(pe.Missing, ","))
		}
	}
}

// deniedDesc is sflowswitchd_kernel_feature_not_permitted: 1 per feature
// whose probe was refused for lack of privilege (unknown whether the
// kernel has it), with the capabilities missing.
var deniedDesc = prometheus.NewDesc("sflowswitchd_kernel_feature_not_permitted",
	"Kernel features whose probe the kernel refused for lack of privilege (whether the kernel has them is unknown), with the capabilities the daemon lacks.",
	[]string{"feature", "missing"}, nil)
