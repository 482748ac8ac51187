// Package portfail keeps the ports the configuration asks to sample but
// the kernel does not (no free port slot, a driver refusing XDP, a port
// that vanished between discovery and attach), and retries them with
// backoff. One such port affects only itself: it is logged when it starts
// and stops failing, listed for metrics
// (sflowswitchd_port_sampling_failed), reads sFlowFsPacketSamplingRate 0
// in the MIB, and is retried.
package portfail

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
)

// Tracker is the set of failing ports.
type Tracker struct {
	log  *slog.Logger
	name func(ifindex uint32) string

	mu     sync.Mutex
	failed map[uint32]string // ifindex -> reason
	kick   chan struct{}     // wakes the retry loop when a port fails
}

// New returns an empty tracker that logs to log, naming ports with name
// (which returns "" for an unknown port).
func New(log *slog.Logger, name func(ifindex uint32) string) *Tracker {
	return &Tracker{log: log, name: name, failed: map[uint32]string{}, kick: make(chan struct{}, 1)}
}

// Note records the outcome of an agent.Apply: err's PortErrors are the
// ports failing now; every other port succeeded.
func (t *Tracker) Note(err error) {
	ports, other := agent.SplitPortErrors(err)
	if other != nil && ports == nil {
		return // refused whole: nothing changed
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for idx, e := range ports {
		reason := e.Error()
		if t.failed[idx] != reason {
			t.log.Warn("port not sampled: the kernel sampler cannot be set up on it; other ports are not affected, retrying",
				"port", t.name(idx), "ifindex", idx, "err", e)
		}
	}
	for idx := range t.failed {
		if _, still := ports[idx]; !still {
			t.log.Info("port sampled again", "port", t.name(idx), "ifindex", idx)
		}
	}
	t.failed = make(map[uint32]string, len(ports))
	for idx, e := range ports {
		t.failed[idx] = e.Error()
	}
	if len(ports) > 0 {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

// Backoff of the retries of failing ports.
const (
	// retryMin is the wait before the first retry.
	retryMin = time.Second
	// retryMax is the longest wait between retries.
	retryMax = time.Minute
)

// Retry calls reapply (which applies the configuration again, and so
// calls Note) while some port fails, waiting retryMin, then twice as long
// each time up to retryMax, until ctx ends; it sleeps while no port fails.
func (t *Tracker) Retry(ctx context.Context, reapply func() error) {
	wait := retryMin
	for {
		t.mu.Lock()
		n := len(t.failed)
		t.mu.Unlock()
		if n == 0 {
			wait = retryMin
			select {
			case <-ctx.Done():
				return
			case <-t.kick:
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if err := reapply(); err != nil {
			t.log.Warn("retrying failed ports", "err", err)
		}
		wait = min(2*wait, retryMax)
	}
}

// Port is a port the kernel does not sample although configured to.
type Port struct {
	Name    string
	IfIndex uint32
}

// Failed lists the failing ports by ifindex.
func (t *Tracker) Failed() []Port {
	t.mu.Lock()
	idxs := make([]uint32, 0, len(t.failed))
	for idx := range t.failed {
		idxs = append(idxs, idx)
	}
	t.mu.Unlock()
	sort.Slice(idxs, func(i, j int) bool { return idxs[i] < idxs[j] })
	out := make([]Port, len(idxs))
	for i, idx := range idxs {
		out[i] = Port{Name: t.name(idx), IfIndex: idx}
	}
	return out
}
