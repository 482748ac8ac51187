package egress

// The egress samplers across a take-over. An egress sampler is not pinned:
// a TCX egress link ends with its process, and Release and the next Open
// remove a clsact egress filter. What it counted is not lost with it: its
// counters map (the egress pools and drops, one line per port slot and
// CPU, bpf/tc_egress.c) is pinned as map_tc_out_counters, and map_ports
// records every port's directions (pin.PortValue.Dirs), so the program
// that takes over reads each port's final egress counts (Ended; the
// loader's Pinned.Egress),
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

// pinCounters pins the egress counters map m in st (nil: nothing
// pinned), replacing what a previous program pinned there (read at
// adoption).
func pinCounters(st *pin.State, m *ebpf.Map) error {
	if st == nil {
		return nil
	}
	path := st.Path(pin.MapPrefix + pinEgressCounters)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("replacing the pinned egress counters: %w", err)
	}
	if err := m.Pin(path); err != nil {
		return fmt.Errorf("pinning the egress counters: %w", err)
	}
	return nil
}

// Ended returns the egress counts of the ports pinned in sh.Pin sampled
// at egress, as their samplers left them, and unpins the map they are in
// (sh says the sizes it must have). A clsact egress filter of this state
// that outlived its process (a crash) is removed first (through filters,
// which hold the state's owner), so that the counts read are final. Runs
// in the loader's namespace, at adoption.
func Ended(sh Shared, filters clsact.Filters, ports iter.Seq2[int, pin.PortValue]) map[int]portstats.Counters {
	out := map[int]portstats.Counters{}
	for ifindex, v := range ports {
		if sflow.Direction(v.Dirs).Has(sflow.DirectionEgress) {
			filters.RemoveLeft(clsact.Egress, ifindex)
		}
	}
	path := sh.Pin.Path(pin.MapPrefix + pinEgressCounters)
	m, err := ebpf.LoadPinnedMap(path, nil)
	if errors.Is(err, os.ErrNotExist) {
		return out
	}
	if err != nil {
		sh.Log.Warn("pinned egress counters unreadable: the egress pools of the ports taken over start afresh", "err", err)
		return out
	}
	defer func() {
		if err := m.Close(); err != nil {
			sh.Log.Warn("closing the pinned egress counters", "err", err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			sh.Log.Warn("unpinning the egress counters", "err", err)
		}
	}()
	if int(m.MaxEntries()) != sh.MaxPorts*sh.CPUSlots {
		sh.Log.Warn("pinned egress counters of another size: the egress pools of the ports taken over start afresh",
			"entries", m.MaxEntries(), "want", sh.MaxPorts*sh.CPUSlots)
		return out
	}
	pages, err := portstats.Map(m, sh.MaxPorts, sh.CPUSlots)
	if err != nil {
		sh.Log.Warn("pinned egress counters unreadable: the egress pools of the ports taken over start afresh", "err", err)
		return out
	}
	for ifindex, v := range ports {
		if sflow.Direction(v.Dirs).Has(sflow.DirectionEgress) && int(v.Slot) < sh.MaxPorts {
			out[ifindex] = pages.Sum(v.Slot)
		}
	}
	if err := pages.Close(); err != nil {
		sh.Log.Warn("unmapping the pinned egress counters", "err", err)
	}
	return out
}
