package agent

import (
	"sync/atomic"

	"github.com/sflowswitchd/sflowswitchd/dataplane/forwarding"
)

// WorkerStats counts what one worker (sub-agent) did. Each worker owns its
// own WorkerStats, so the atomic adds never contend across CPUs; readers
// (metrics) load them at any time.
type WorkerStats struct {
	// KernelSamples are samples received from the kernel.
	KernelSamples atomic.Uint64
	// SubsampledAway are kernel samples a sampler did not keep (software
	// sub-sampling to the configured rate).
	SubsampledAway atomic.Uint64
	// FlowSamples are flow samples encoded into datagrams.
	FlowSamples atomic.Uint64
	// CounterSamples are counter samples encoded into datagrams.
	CounterSamples atomic.Uint64
	// UnknownPort are kernel samples of a port with no sampler in this
	// worker (a port being reconfigured): dropped and counted.
	UnknownPort atomic.Uint64
	// TooLarge are samples larger than a receiver's maximum datagram size.
	TooLarge atomic.Uint64
	// PollErrors are counter polls that failed to read their counters.
	PollErrors atomic.Uint64
	// Datagrams and Bytes are datagrams sent successfully.
	Datagrams atomic.Uint64
	Bytes     atomic.Uint64
	// SendErrors are datagrams the socket refused; SamplesUnsent the
	// samples they held.
	SendErrors    atomic.Uint64
	SamplesUnsent atomic.Uint64
	// ReadErrors are errors reading the kernel sample ring.
	ReadErrors atomic.Uint64
	// Router counts the samples whose kernel asked the FIB, by what became
	// of their extended_router (forwarding.RouterResult: sent, or why not).
	Router [forwarding.RouterResultCount]atomic.Uint64
	// TransitRecords counts the kernel samples followed to a port their
	// frame left by, whose flow samples carry the transit records
	// (worker.transitRecords).
	TransitRecords atomic.Uint64
	// Tunnel counts the kernel samples of tunnel devices by what their
	// tunnel records said (TunnelResult).
	Tunnel [TunnelResultCount]atomic.Uint64
}

// TunnelResult says what a sample of a tunnel device got
// (sflowswitchd_tunnel_samples_total{result}).
type TunnelResult int

// Tunnel results.
const (
	TunnelOK           TunnelResult = iota // the outer header's record (and the VNI's for VXLAN)
	TunnelOuterUnknown                     // the VNI only: the outer addresses are not known (replicated to several remotes, no remote learned)
	TunnelNone                             // no tunnel record: a collect_md device's frame without metadata, or a device not (yet) in the table
	// TunnelResultCount is the number of results.
	TunnelResultCount
)

// String names the result (metric label values).
func (r TunnelResult) String() string {
	switch r {
	case TunnelOK:
		return "ok"
	case TunnelOuterUnknown:
		return "outer_unknown"
	case TunnelNone:
		return "none"
	}
	return "unknown"
}
