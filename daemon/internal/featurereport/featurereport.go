// Package featurereport reports the kernel features the dataplane probed
// at start (dataplane.Features): in the log, what is missing and what the
// daemon does instead (docs/KERNELS.md), and as the metric
// sflowswitchd_kernel_feature.
package featurereport

import (
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
)

// Log says at start what the kernel lacks of what the agent
// uses, and what the daemon does instead (docs/KERNELS.md); features
// present are listed at debug level.
func Log(log *slog.Logger, fs *dataplane.Features) {
	missing := fs.Missing()
	for _, f := range fs.List {
		if f.Available() {
			log.Debug("kernel feature available", "feature", f.Name, "since", "Linux "+f.Since)
			continue
		}
		log.Warn("kernel feature unavailable", "feature", f.Name, "since", "Linux "+f.Since,
			"used_for", f.UsedFor, "effect", f.Without, "err", f.Err)
	}
	log.Info("kernel features probed", "kernel", fs.Release, "probed", len(fs.List), "unavailable", len(missing),
		"tc_attach", fs.TCAttachMode())
}

// featureDesc is sflowswitchd_kernel_feature: 1 per feature the kernel
// has, 0 per feature it lacks (see the log for the effect).
var featureDesc = prometheus.NewDesc("sflowswitchd_kernel_feature",
	"Kernel features the agent uses: 1 available, 0 unavailable (docs/KERNELS.md says what the daemon does without each).",
	[]string{"feature", "since", "required", "kernel"}, nil)

// featureCollector exports the features probed at start.
type featureCollector struct{ fs *dataplane.Features }

// NewCollector returns the collector of sflowswitchd_kernel_feature for
// the features fs (nil: none).
func NewCollector(fs *dataplane.Features) prometheus.Collector { return featureCollector{fs} }

func (c featureCollector) Describe(ch chan<- *prometheus.Desc) { ch <- featureDesc }

func (c featureCollector) Collect(ch chan<- prometheus.Metric) {
	if c.fs == nil {
		return
	}
	for _, f := range c.fs.List {
		v := 0.0
		if f.Available() {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(featureDesc, prometheus.GaugeValue, v, f.Name, f.Since, strconv.FormatBool(f.Required), c.fs.Release)
	}
}
