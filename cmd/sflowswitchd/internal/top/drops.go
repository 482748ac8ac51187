package top

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// dropView accumulates discarded_packet samples (dropped-packet
// notifications, docs/spec/sflow_drops.md) by reason and by port.
type dropView struct {
	notifications uint64
	byReason      map[dropReasonKey]uint64
	byPort        map[dropPortKey]uint64
	// lost is the latest drops field per agent and data source: the
	// notifications the agent could not send (rate limit, resources).
	lost map[sourceKey]uint32
}

type dropReasonKey struct {
	agent  netip.Addr
	reason sflow.DropReason
	linux  string // extended_linux_drop_reason, "" when absent
}

type dropPortKey struct {
	agent   netip.Addr
	in, out uint32
}

// add accounts for one discarded_packet sample.
func (v *dropView) add(agent netip.Addr, s *sflow.DiscardedPacket) {
	if v.byReason == nil {
		v.byReason = map[dropReasonKey]uint64{}
		v.byPort = map[dropPortKey]uint64{}
		v.lost = map[sourceKey]uint32{}
	}
	v.notifications++
	linux := ""
	for _, r := range s.Records {
		if l, ok := r.(*sflow.ExtendedLinuxDropReason); ok {
			linux = l.Reason
		}
	}
	v.byReason[dropReasonKey{agent, s.Reason, linux}]++
	v.byPort[dropPortKey{agent, s.Input, s.Output}]++
	v.lost[sourceKey{agent, s.Source}] = s.Drops
}

// render appends the DROPS tables.
func (v *dropView) render(b *strings.Builder) {
	var lost uint64
	for _, n := range v.lost {
		lost += uint64(n)
	}
	fmt.Fprintf(b, "\nDROPS (discarded_packet notifications %d; not sent by the agents: %d, their latest drops fields)\n", v.notifications, lost)
	t := table{header: []string{"agent", "reason", "code", "linux reason", "notifications"}}
	keys := slices.Collect(maps.Keys(v.byReason))
	slices.SortFunc(keys, func(x, y dropReasonKey) int {
		if c := cmp.Compare(v.byReason[y], v.byReason[x]); c != 0 {
			return c
		}
		if c := x.agent.Compare(y.agent); c != 0 {
			return c
		}
		if c := cmp.Compare(x.reason, y.reason); c != 0 {
			return c
		}
		return strings.Compare(x.linux, y.linux)
	})
	for _, k := range keys {
		linux := k.linux
		if linux == "" {
			linux = "-"
		}
		t.add(addrString(k.agent), k.reason.String(), fmt.Sprint(uint32(k.reason)), linux, fmt.Sprint(v.byReason[k]))
	}
	t.write(b, "(none yet)")
	b.WriteString("\nDROPS by port (input: ifIndex received on; output: ifIndex of an egress drop, 0 otherwise)\n")
	t = table{header: []string{"agent", "input", "output", "notifications"}}
	pk := slices.Collect(maps.Keys(v.byPort))
	slices.SortFunc(pk, func(x, y dropPortKey) int {
		if c := cmp.Compare(v.byPort[y], v.byPort[x]); c != 0 {
			return c
		}
		if c := x.agent.Compare(y.agent); c != 0 {
			return c
		}
		if c := cmp.Compare(x.in, y.in); c != 0 {
			return c
		}
		return cmp.Compare(x.out, y.out)
	})
	for _, k := range pk {
		t.add(addrString(k.agent), fmt.Sprint(k.in), fmt.Sprint(k.out), fmt.Sprint(v.byPort[k]))
	}
	t.write(b, "(none yet)")
}
