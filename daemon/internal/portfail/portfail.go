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
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
)

// Tracker is the set of failing ports.
type Tracker struct {
	log  *slog.Logger
	name func(ifindex uint32) string

	mu     sync.Mutex
	failed map[uint32]failure // by ifindex
	kick   chan struct{}      // wakes the retry loop when a port fails
}

// failure is why a port is not sampled, and its name when it failed (the
// port may vanish meanwhile).
type failure struct {
	err, reason string
	name        string
}

// New returns an empty tracker that logs to log, naming ports with name
// (which returns "" for an unknown port).
func New(log *slog.Logger, name func(ifindex uint32) string) *Tracker {
	return &Tracker{log: log, name: name, failed: map[uint32]failure{}, kick: make(chan struct{}, 1)}
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
	next := make(map[uint32]failure, len(ports))
	for idx, e := range ports {
		f := failure{err: e.Error(), reason: Reason(e), name: t.name(idx)}
		if f.name == "" { // vanished since: the name it had
			f.name = t.failed[idx].name
		}
		if t.failed[idx].err != f.err {
			t.log.Warn("port not sampled: the kernel sampler cannot be set up on it; other ports are not affected, retrying",
				"port", f.name, "ifindex", idx, "reason", f.reason, "err", bpf.FirstLine(e))
		}
		next[idx] = f
	}
	for idx, f := range t.failed {
		if _, still := ports[idx]; still {
			continue
		}
		// No longer failing: sampled now, or gone (a port that vanished
		// mid-attach is not "sampled again", and has no name left).
		if t.name(idx) == "" {
			t.log.Info("failing port gone; no longer retried", "port", f.name, "ifindex", idx)
		} else {
			t.log.Info("port sampled again", "port", t.name(idx), "ifindex", idx)
		}
	}
	t.failed = next
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
	// Reason classifies why (Reason).
	Reason string
}

// Reason classifies a port's failure for metrics: "descriptors" (EMFILE,
// ENFILE), "memory" (ENOMEM), "busy" (EBUSY): transient, retried like
// every failure; "gone" (the port vanished: ENODEV, ENOENT); "no_slot"
// (every port slot in use); "refused" (anything else: a driver refusing
// XDP, a TC setup in the way).
func Reason(err error) string {
	// Some loaders' errors (cilium/ebpf's BTF load) carry the errno only
	// in their text.
	has := func(errno syscall.Errno) bool {
		return errors.Is(err, errno) || strings.Contains(err.Error(), errno.Error())
	}
	switch {
	case has(syscall.EMFILE), has(syscall.ENFILE):
		return "descriptors"
	case has(syscall.ENOMEM):
		return "memory"
	case has(syscall.EBUSY):
		return "busy"
	case errors.Is(err, dataplane.ErrNoPortSlot):
		return "no_slot"
	case has(syscall.ENODEV), errors.Is(err, syscall.ENOENT):
		return "gone"
	}
	return "refused"
}

// Failed lists the failing ports by ifindex.
func (t *Tracker) Failed() []Port {
	t.mu.Lock()
	out := make([]Port, 0, len(t.failed))
	for idx, f := range t.failed {
		out = append(out, Port{Name: f.name, IfIndex: idx, Reason: f.reason})
	}
	t.mu.Unlock()
	for i := range out {
		if n := t.name(out[i].IfIndex); n != "" {
			out[i].Name = n // renamed since
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IfIndex < out[j].IfIndex })
	return out
}
