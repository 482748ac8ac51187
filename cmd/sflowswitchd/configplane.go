package main

import "io"

// writeConfigMetrics writes the metrics of the configuration plane: ports
// that cannot be sampled, collectors that cannot be resolved, selections
// that match nothing.
func (d *daemon) writeConfigMetrics(w io.Writer) {
	d.writePortFailureMetrics(w)
}
