package main

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
)

// portFailures are the ports the configuration asks to sample but the
// kernel does not (no free port slot, a driver refusing XDP, a port that
// vanished between discovery and attach). One such port affects only
// itself: it is logged when it starts and stops failing, exported
// (sflowswitchd_port_sampling_failed), reads sFlowFsPacketSamplingRate 0
// in the MIB, and is retried with backoff.
type portFailures struct {
	mu     sync.Mutex
	failed map[uint32]string // ifindex -> reason
	kick   chan struct{}     // wakes the retry loop when a port fails
}

func newPortFailures() *portFailures {
	return &portFailures{failed: map[uint32]string{}, kick: make(chan struct{}, 1)}
}

// note records the outcome of an agent.Apply: err's PortErrors are the
// ports failing now; every other port succeeded.
func (d *daemon) notePortFailures(err error) {
	ports, other := agent.SplitPortErrors(err)
	if other != nil && ports == nil {
		return // refused whole: nothing changed
	}
	f := d.portFail
	f.mu.Lock()
	defer f.mu.Unlock()
	for idx, e := range ports {
		reason := e.Error()
		if f.failed[idx] != reason {
			d.log.Warn("port not sampled: the kernel sampler cannot be set up on it; other ports are not affected, retrying",
				"port", d.portName(idx), "ifindex", idx, "err", e)
		}
	}
	for idx := range f.failed {
		if _, still := ports[idx]; !still {
			d.log.Info("port sampled again", "port", d.portName(idx), "ifindex", idx)
		}
	}
	f.failed = make(map[uint32]string, len(ports))
	for idx, e := range ports {
		f.failed[idx] = e.Error()
	}
	if len(ports) > 0 {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

// Backoff of the retries of failing ports.
const (
	portRetryMin = time.Second
	portRetryMax = time.Minute
)

// retryFailedPorts applies the configuration again while some port fails,
// waiting portRetryMin, then twice as long each time up to portRetryMax;
// it sleeps while no port fails.
func (d *daemon) retryFailedPorts(ctx context.Context) {
	wait := portRetryMin
	for {
		d.portFail.mu.Lock()
		n := len(d.portFail.failed)
		d.portFail.mu.Unlock()
		if n == 0 {
			wait = portRetryMin
			select {
			case <-ctx.Done():
				return
			case <-d.portFail.kick:
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if _, err := d.mib.Reapply(); err != nil {
			d.log.Warn("retrying failed ports", "err", err)
		}
		wait = min(2*wait, portRetryMax)
	}
}

// failedPort is a port the kernel does not sample although configured to.
type failedPort struct {
	name    string
	ifindex uint32
}

// failedPorts lists the failing ports by ifindex.
func (d *daemon) failedPorts() []failedPort {
	f := d.portFail
	f.mu.Lock()
	idxs := make([]uint32, 0, len(f.failed))
	for idx := range f.failed {
		idxs = append(idxs, idx)
	}
	f.mu.Unlock()
	sort.Slice(idxs, func(i, j int) bool { return idxs[i] < idxs[j] })
	out := make([]failedPort, len(idxs))
	for i, idx := range idxs {
		out[i] = failedPort{name: d.portName(idx), ifindex: idx}
	}
	return out
}
