package redistest

import (
	"fmt"
	"sort"
)

// Fixture is a SONiC switch's Redis content in SONiC's schema (sonic-swss
// and sonic-buildimage's table layouts): front-panel ports named as SONiC
// names them (Ethernet0, Ethernet4, ...), a PortChannel, a VLAN, the sFlow
// tables, PORT_INDEX_TABLE as port_index_mapper writes it, and the ports'
// SAI counters.
type Fixture struct {
	// Ports is the number of Ethernet ports (Ethernet0 .. Ethernet<4(n-1)>).
	Ports int
	// OSIndex gives a port's Linux ifindex for PORT_INDEX_TABLE ifindex
	// (port_index_mapper: if_nametoindex); nil or 0 leaves the port out
	// of PORT_INDEX_TABLE.
	OSIndex func(name string) int
	// LAG is the PortChannel and its members (Members names).
	LAG     string
	Members []string
	// VLAN is a VLAN (Vlan<N>) with VLANMember untagged in it.
	VLAN       string
	VLANMember string
	// Collectors are SFLOW_COLLECTOR entries: name → fields.
	Collectors map[string][]string
	// Global are SFLOW|global's fields.
	Global []string
	// Ready writes SYSTEM_READY|SYSTEM_STATE Status UP.
	Ready bool
	// MAC is DEVICE_METADATA|localhost mac.
	MAC string
}

// LACPMAC is the LACP partner system of the fixture's first LAG member.
const LACPMAC = "52:54:00:aa:bb:cc"

// PortName is port i's name (SONiC's lane-based numbering, 4 lanes a port).
func PortName(i int) string { return fmt.Sprintf("Ethernet%d", 4*i) }

// PortOID is port i's SAI object id in COUNTERS_PORT_NAME_MAP.
func PortOID(i int) string { return fmt.Sprintf("oid:0x1000000000%03x", 2+i) }

// SAIStats are the COUNTERS:<oid> fields the fixture writes.
var SAIStats = []string{
	"SAI_PORT_STAT_IF_IN_OCTETS", "SAI_PORT_STAT_IF_IN_UCAST_PKTS", "SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS",
	"SAI_PORT_STAT_IF_IN_MULTICAST_PKTS", "SAI_PORT_STAT_IF_IN_BROADCAST_PKTS", "SAI_PORT_STAT_IF_IN_DISCARDS",
	"SAI_PORT_STAT_IF_IN_ERRORS", "SAI_PORT_STAT_IF_IN_UNKNOWN_PROTOS", "SAI_PORT_STAT_IF_OUT_OCTETS",
	"SAI_PORT_STAT_IF_OUT_UCAST_PKTS", "SAI_PORT_STAT_IF_OUT_NON_UCAST_PKTS", "SAI_PORT_STAT_IF_OUT_MULTICAST_PKTS",
	"SAI_PORT_STAT_IF_OUT_BROADCAST_PKTS", "SAI_PORT_STAT_IF_OUT_DISCARDS", "SAI_PORT_STAT_IF_OUT_ERRORS",
	"SAI_PORT_STAT_DOT3_STATS_ALIGNMENT_ERRORS", "SAI_PORT_STAT_DOT3_STATS_FCS_ERRORS",
	"SAI_PORT_STAT_DOT3_STATS_SYMBOL_ERRORS", "SAI_PORT_STAT_DOT3_STATS_FRAME_TOO_LONGS",
	"SAI_PORT_STAT_IN_DROPPED_PKTS", "SAI_PORT_STAT_PFC_0_RX_PKTS",
}

// Counter is the value the fixture writes for port i's stat k (an index
// of SAIStats) at generation gen: distinct per port, stat and generation,
// above 2^32 for the octets (64-bit counters), unlike any netdev count.
func Counter(i, k, gen int) uint64 {
	v := uint64(1_000_000*(i+1) + 1000*k + 7*gen)
	if k == 0 || k == 8 { // octets
		v += 5_000_000_000
	}
	return v
}

// CountersCmds are the commands that set port i's counters at gen.
func CountersCmds(i, gen int) string {
	cmd := "HSET COUNTERS:" + PortOID(i)
	for k, s := range SAIStats {
		cmd += fmt.Sprintf(" %s %d", s, Counter(i, k, gen))
	}
	return cmd
}

// Write writes the fixture into s.
func (f Fixture) Write(s *Server) {
	s.t.Helper()
	var appl, counters, config, state []string
	nameMap := "HSET COUNTERS_PORT_NAME_MAP"
	for i := 0; i < f.Ports; i++ {
		n := PortName(i)
		appl = append(appl, fmt.Sprintf("HSET PORT_TABLE:%s alias etp%d admin_status up oper_status up speed 100000 mtu 9100 lanes %d,%d,%d,%d index %d", n, i+1, 4*i, 4*i+1, 4*i+2, 4*i+3, i))
		config = append(config, fmt.Sprintf("HSET PORT|%s alias etp%d admin_status up speed 100000 mtu 9100 lanes %d,%d,%d,%d index %d", n, i+1, 4*i, 4*i+1, 4*i+2, 4*i+3, i))
		nameMap += " " + n + " " + PortOID(i)
		counters = append(counters, CountersCmds(i, 0))
		if f.OSIndex != nil {
			if os := f.OSIndex(n); os > 0 {
				state = append(state, fmt.Sprintf("HSET PORT_INDEX_TABLE|%s index %d ifindex %d", n, 4*i+1, os))
			}
		}
		state = append(state, fmt.Sprintf("HSET PORT_TABLE|%s state ok netdev_oper_status up admin_status up mtu 9100 speed 100000", n))
	}
	if f.Ports > 0 {
		counters = append(counters, nameMap)
	}
	if f.LAG != "" {
		config = append(config, fmt.Sprintf("HSET PORTCHANNEL|%s admin_status up mtu 9100 min_links 1 lacp_key auto", f.LAG))
		for _, m := range f.Members {
			config = append(config, fmt.Sprintf("HSET PORTCHANNEL_MEMBER|%s|%s NULL NULL", f.LAG, m))
		}
		appl = append(appl, fmt.Sprintf("HSET LAG_TABLE:%s admin_status up oper_status up mtu 9100", f.LAG))
		state = append(state, fmt.Sprintf("HSET LAG_TABLE|%s state ok", f.LAG))
		// teamd's LACP state as tlm_teamd copies it (sonic-swss
		// tlm_teamd/values_store.h), and teamsyncd's member status: the
		// first member is selected and in sync with partner LACPMAC
		// (LACPState 61: Activity, Aggregation, Synchronization,
		// Collecting, Distributing), the others are not selected
		// (LACPState 69: Activity, Aggregation, Defaulted; no partner).
		mac := f.MAC
		if mac == "" {
			mac = "00:00:00:00:00:00"
		}
		for i, m := range f.Members {
			actor, partner, psys, sel, status := 61, 61, LACPMAC, "true", "enabled"
			if i > 0 {
				actor, partner, psys, sel, status = 69, 2, "00:00:00:00:00:00", "false", "disabled"
			}
			appl = append(appl, fmt.Sprintf("HSET LAG_MEMBER_TABLE:%s:%s status %s", f.LAG, m, status))
			state = append(state, fmt.Sprintf("HSET LAG_MEMBER_TABLE|%s|%s runner.actor_lacpdu_info.state %d runner.actor_lacpdu_info.system %s "+
				"runner.actor_lacpdu_info.port %d runner.partner_lacpdu_info.state %d runner.partner_lacpdu_info.system %s runner.partner_lacpdu_info.port %d "+
				"runner.selected %s runner.aggregator.selected %s runner.state current link.up true ifinfo.dev_addr %s",
				f.LAG, m, actor, mac, i+1, partner, psys, i+1, sel, sel, mac))
		}
	}
	if f.VLAN != "" {
		vid := f.VLAN[len("Vlan"):]
		config = append(config, fmt.Sprintf("HSET VLAN|%s vlanid %s", f.VLAN, vid))
		config = append(config, fmt.Sprintf("HSET VLAN_MEMBER|%s|%s tagging_mode untagged", f.VLAN, f.VLANMember))
		appl = append(appl, fmt.Sprintf("HSET VLAN_TABLE:%s admin_status up mtu 9100", f.VLAN))
		appl = append(appl, fmt.Sprintf("HSET VLAN_MEMBER_TABLE:%s:%s tagging_mode untagged", f.VLAN, f.VLANMember))
		state = append(state, fmt.Sprintf("HSET VLAN_TABLE|%s state ok", f.VLAN))
		if f.OSIndex != nil {
			if os := f.OSIndex(f.VLAN); os > 0 {
				var n int
				fmt.Sscanf(vid, "%d", &n)
				state = append(state, fmt.Sprintf("HSET PORT_INDEX_TABLE|%s index %d ifindex %d", f.VLAN, 2000+n, os))
			}
		}
	}
	if len(f.Global) > 0 {
		config = append(config, "HSET SFLOW|global "+join(f.Global))
	}
	names := make([]string, 0, len(f.Collectors))
	for n := range f.Collectors {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		config = append(config, fmt.Sprintf("HSET SFLOW_COLLECTOR|%s %s", n, join(f.Collectors[n])))
	}
	if f.MAC != "" {
		config = append(config, fmt.Sprintf("HSET DEVICE_METADATA|localhost hostname sonic mac %s platform x86_64-kvm_x86_64-r0 hwsku Force10-S6000 type LeafRouter", f.MAC))
	}
	config = append(config, "HSET MGMT_VRF_CONFIG|vrf_global mgmtVrfEnabled true")
	if f.Ready {
		state = append(state, "HSET SYSTEM_READY|SYSTEM_STATE Status UP")
	}
	for db, cmds := range map[int][]string{ApplDB: appl, CountersDB: counters, ConfigDB: config, StateDB: state} {
		if len(cmds) > 0 {
			s.Pipe(db, cmds)
		}
	}
}

func join(fv []string) string {
	out := ""
	for i, v := range fv {
		if i > 0 {
			out += " "
		}
		out += v
	}
	return out
}
