package dataplane

// The egress samplers across a take-over. An egress sampler is not pinned:
// a TCX egress link ends with its process, and Release and the next Open
// remove a clsact egress filter. What it counted is not lost with it: its
// counters map (the egress pools and drops, one line per port slot and
// CPU, bpf/tc_egress.c) is pinned as map_tc_out_counters, and map_ports
// records every port's directions (pinPortValue.Dirs), so the program
// that takes over reads each port's final egress counts (AdoptedEgress),
// which the agent adds to the port's base before it attaches the egress
// sampler anew: the port's pool continues over the frames sampled at
// egress before the take-over (sflow_version_5.txt section 4,
// flow_sample.sample_pool, never running backwards).

import (
	"errors"
	"fmt"
	"iter"
	"os"

	"github.com/sflowswitchd/sflowswitchd/dataplane/portstats"

	"github.com/sflowswitchd/sflowswitchd/dataplane/clsact"

	"github.com/cilium/ebpf"

	"github.com/sflowswitchd/sflowswitchd/dataplane/pin"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// pinEgressCounters is the pinned name of the egress counters map.
const pinEgressCounters = pin.EgressCounters

// pinEgress pins the egress counters map m, replacing what a previous
// program pinned there (read at adoption). Called with mu held.
func (d *Dataplane) pinEgress(m *ebpf.Map) error {
	if d.pin == nil {
		return nil
	}
	path := d.pin.Path(pin.MapPrefix + pinEgressCounters)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("replacing the pinned egress counters: %w", err)
	}
	if err := m.Pin(path); err != nil {
		return fmt.Errorf("pinning the egress counters: %w", err)
	}
	return nil
}

// endedEgress returns the egress counts of the pinned ports sampled at
// egress, as their samplers left them, and unpins the map they are in. A
// clsact egress filter of this state that outlived its process (a crash)
// is removed first, so that the counts read are final. Runs in the
// Dataplane's namespace, at adoption.
func (d *Dataplane) endedEgress(ports iter.Seq2[int, pin.PortValue]) map[int]portstats.Counters {
	out := map[int]portstats.Counters{}
	for ifindex, v := range ports {
		if sflow.Direction(v.Dirs).Has(sflow.DirectionEgress) {
			d.filters.RemoveLeft(clsact.Egress, ifindex)
		}
	}
	path := d.pin.Path(pin.MapPrefix + pinEgressCounters)
	m, err := ebpf.LoadPinnedMap(path, nil)
	if errors.Is(err, os.ErrNotExist) {
		return out
	}
	if err != nil {
		d.log.Warn("pinned egress counters unreadable: the egress pools of the ports taken over start afresh", "err", err)
		return out
	}
	defer func() {
		if err := m.Close(); err != nil {
			d.log.Warn("closing the pinned egress counters", "err", err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("unpinning the egress counters", "err", err)
		}
	}()
	if int(m.MaxEntries()) != d.cfg.MaxPorts*d.cpuSlots {
		d.log.Warn("pinned egress counters of another size: the egress pools of the ports taken over start afresh",
			"entries", m.MaxEntries(), "want", d.cfg.MaxPorts*d.cpuSlots)
		return out
	}
	pages, err := portstats.Map(m, d.cfg.MaxPorts, d.cpuSlots)
	if err != nil {
		d.log.Warn("pinned egress counters unreadable: the egress pools of the ports taken over start afresh", "err", err)
		return out
	}
	for ifindex, v := range ports {
		if sflow.Direction(v.Dirs).Has(sflow.DirectionEgress) && int(v.Slot) < d.cfg.MaxPorts {
			out[ifindex] = pages.Sum(v.Slot)
		}
	}
	if err := pages.Close(); err != nil {
		d.log.Warn("unmapping the pinned egress counters", "err", err)
	}
	return out
}

// AdoptedEgress returns the egress counts (pool, drops) of the ports taken
// over at Open that the previous program sampled at egress, as its egress
// samplers left them: those samplers ended with it, and a port's pool and
// drops continue over them. Nil when none.
func (d *Dataplane) AdoptedEgress() map[int]portstats.Counters {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[int]portstats.Counters, len(d.adoptedEgress))
	for k, v := range d.adoptedEgress {
		out[k] = v
	}
	return out
}
