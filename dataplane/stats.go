package dataplane

// The attached ports' counters as the samplers count them (statistics):
// read by workers for every flow sample and by the metrics, without a
// lock or a system call.

import (
	"fmt"
	"sync/atomic"

	"github.com/sflowswitchd/sflowswitchd/dataplane/portstats"
	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Stats are the attached ports' counters: each port's ingress and egress
// counters (pool, samples, drops) summed over the CPUs from the
// memory-mapped counter arrays, the directions it is sampled in, and a
// monitor port's socket drops. No lock, no system call: workers on
// different CPUs read pools for every flow sample without contending.
// Valid until the Dataplane's Close.
type Stats struct {
	// slotOf maps attached ifindexes to counter slots and directions. It
	// is replaced (copy on write, under the Dataplane's mu) on attach,
	// detach and direction changes.
	slotOf atomic.Pointer[map[int]portSlot]
	// counters are the ingress samplers' counters, mapped at Open;
	// egress the egress sampler's, from its load on.
	counters *portstats.Pages
	egress   atomic.Pointer[portstats.Pages]
	mon      *reader.MonitorPorts
}

// portSlot is what the lock-free readers know of an attached port: its
// counter slot and the directions it is sampled in.
type portSlot struct {
	slot uint32
	dirs sflow.Direction
}

// Stats are the attached ports' counters.
func (d *Dataplane) Stats() *Stats { return &d.stats }

// publish installs a fresh copy of the ifindex -> slot and directions map
// of ports. Called with the Dataplane's mu held.
func (s *Stats) publish(ports map[int]*port) {
	m := make(map[int]portSlot, len(ports))
	for idx, p := range ports {
		m[idx] = portSlot{slot: p.slot, dirs: p.cfg.Direction}
	}
	s.slotOf.Store(&m)
}

// Ingress sums the port's per-CPU ingress counters (zeros when it is not
// sampled at ingress) through the memory-mapped counter array.
func (s *Stats) Ingress(ifindex int) (portstats.Counters, error) {
	if slots := s.slotOf.Load(); slots != nil {
		if ps, ok := (*slots)[ifindex]; ok {
			if !ps.dirs.Has(sflow.DirectionIngress) {
				return portstats.Counters{}, nil
			}
			return s.counters.Sum(ps.slot), nil
		}
	}
	return portstats.Counters{}, fmt.Errorf("dataplane: counters of ifindex %d: %w", ifindex, ErrNotAttached)
}

// Egress sums the port's per-CPU egress counters (zeros when the port is
// not sampled at egress), through the memory-mapped egress counter array.
func (s *Stats) Egress(ifindex int) (portstats.Counters, error) {
	if slots := s.slotOf.Load(); slots != nil {
		if ps, ok := (*slots)[ifindex]; ok {
			if !ps.dirs.Has(sflow.DirectionEgress) {
				return portstats.Counters{}, nil
			}
			if pages := s.egress.Load(); pages != nil {
				return pages.Sum(ps.slot), nil
			}
			return portstats.Counters{}, nil
		}
	}
	return portstats.Counters{}, fmt.Errorf("dataplane: egress counters of ifindex %d: %w", ifindex, ErrNotAttached)
}

// Direction returns the directions ifindex is sampled in (0 when it is
// not attached).
func (s *Stats) Direction(ifindex int) sflow.Direction {
	if slots := s.slotOf.Load(); slots != nil {
		return (*slots)[ifindex].dirs
	}
	return 0
}

// Pool returns the port's sample_pool and drops: the sum over the
// directions it is sampled in (its data source covers them:
// docs/ARCHITECTURE.md, "Egress sampling"), the samplers' drops plus, for
// a monitor port, what its sockets lost after the redirect (as last read
// by the worker, see reader.Source); zeros for a port not attached.
func (s *Stats) Pool(ifindex uint32) (pool, drops uint64) {
	c, err := s.Ingress(int(ifindex))
	if err != nil {
		return 0, 0
	}
	e, _ := s.Egress(int(ifindex))
	return c.Pool + e.Pool, c.Drops + e.Drops + s.mon.SocketDrops(ifindex)
}

// SocketDrops returns what a monitor port's AF_XDP sockets lost, as last
// read by its worker (see reader.Source); 0 for an inline port.
func (s *Stats) SocketDrops(ifindex uint32) uint64 {
	return s.mon.SocketDrops(ifindex)
}
