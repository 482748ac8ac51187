package dataplane

import (
	"fmt"
	"os"

	"github.com/cilium/ebpf"

	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"
)

// The workers' sample sources (package reader): one per worker, reading
// its ring buffer and the AF_XDP sockets of the monitor ports it owns.

// Source returns worker's sample source, creating it on first use (and
// again after the previous one was closed). The Dataplane closes it.
func (d *Dataplane) Source(worker int) (*reader.Source, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkRing(worker); err != nil {
		return nil, fmt.Errorf("dataplane: source %d: %w", worker, err)
	}
	if s := d.sources[worker]; s != nil && !s.Closed() {
		return s, nil
	}
	s, err := reader.OpenRing(d.rings[worker].FD(), d.cfg.RingBytes, ringIdle{d.objs.RingIdle, uint32(worker)}, d.log)
	if err != nil {
		return nil, fmt.Errorf("dataplane: source %d: %w", worker, err)
	}
	d.sources[worker] = s
	return s, nil
}

// checkRing reports whether worker names a ring of the open Dataplane.
// Called with mu held.
func (d *Dataplane) checkRing(worker int) error {
	if d.closed {
		return os.ErrClosed
	}
	if worker < 0 || worker >= len(d.rings) {
		return fmt.Errorf("worker not in 0..%d", len(d.rings)-1)
	}
	return nil
}

// ringIdle is worker's entry in the programs' ring_idle map
// (dataplane/bpf/ring.h), the ring's idle flag (reader.IdleFlag).
type ringIdle struct {
	m      *ebpf.Map
	worker uint32
}

// SetIdle implements reader.IdleFlag.
func (r ringIdle) SetIdle(on bool) error {
	var v uint32
	if on {
		v = 1
	}
	return r.m.Update(r.worker, v, ebpf.UpdateAny)
}
