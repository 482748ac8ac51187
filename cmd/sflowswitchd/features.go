package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
)

// logKernelFeatures says at start what the kernel lacks of what the agent
// uses, and what the daemon does instead (docs/KERNELS.md); features
// present are listed at debug level.
func logKernelFeatures(log *slog.Logger, fs *dataplane.Features) {
	missing := fs.Missing()
	for _, f := range fs.List {
		if f.Available() {
			log.Debug("kernel feature available", "feature", f.Name, "since", "Linux "+f.Since)
			continue
		}
		log.Warn("kernel feature unavailable", "feature", f.Name, "since", "Linux "+f.Since,
			"used_for", f.UsedFor, "effect", f.Without, "err", f.Err)
	}
	log.Info("kernel features probed", "kernel", fs.Release, "probed", len(fs.List), "unavailable", len(missing))
}

// writeFeatureMetrics writes sflowswitchd_kernel_feature: 1 per feature
// the kernel has, 0 per feature it lacks (see the log for the effect).
func writeFeatureMetrics(w io.Writer, fs *dataplane.Features) {
	if fs == nil {
		return
	}
	const name = "sflowswitchd_kernel_feature"
	fmt.Fprintf(w, "# HELP %s Kernel features the agent uses: 1 available, 0 unavailable (docs/KERNELS.md says what the daemon does without each).\n# TYPE %s gauge\n", name, name)
	for _, f := range fs.List {
		v := 0
		if f.Available() {
			v = 1
		}
		fmt.Fprintf(w, "%s{feature=%q,since=%q,required=\"%t\",kernel=%q} %d\n", name, f.Name, f.Since, f.Required, fs.Release, v)
	}
}
