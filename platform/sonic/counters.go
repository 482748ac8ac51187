package sonic

import (
	"strconv"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// The SAI port statistics read from COUNTERS:<oid> (SAI saiport.h
// sai_port_stat_t, as SONiC's flex counters name them in COUNTERS_DB).
const (
	statInOctets = iota
	statInUcast
	statInNonUcast
	statInMulticast
	statInBroadcast
	statInDiscards
	statInErrors
	statInUnknownProtos
	statOutOctets
	statOutUcast
	statOutNonUcast
	statOutMulticast
	statOutBroadcast
	statOutDiscards
	statOutErrors
	statAlignment
	statFCS
	statSingleCollision
	statMultipleCollision
	statSQETest
	statDeferred
	statLateCollision
	statExcessiveCollision
	statMACTxErrors
	statCarrierSense
	statFrameTooLong
	statMACRxErrors
	statSymbolErrors
	numStats
	firstDot3 = statAlignment
)

// statNames are the COUNTERS_DB field names, by stat.
var statNames = [numStats]string{
	"SAI_PORT_STAT_IF_IN_OCTETS",
	"SAI_PORT_STAT_IF_IN_UCAST_PKTS",
	"SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS",
	"SAI_PORT_STAT_IF_IN_MULTICAST_PKTS",
	"SAI_PORT_STAT_IF_IN_BROADCAST_PKTS",
	"SAI_PORT_STAT_IF_IN_DISCARDS",
	"SAI_PORT_STAT_IF_IN_ERRORS",
	"SAI_PORT_STAT_IF_IN_UNKNOWN_PROTOS",
	"SAI_PORT_STAT_IF_OUT_OCTETS",
	"SAI_PORT_STAT_IF_OUT_UCAST_PKTS",
	"SAI_PORT_STAT_IF_OUT_NON_UCAST_PKTS",
	"SAI_PORT_STAT_IF_OUT_MULTICAST_PKTS",
	"SAI_PORT_STAT_IF_OUT_BROADCAST_PKTS",
	"SAI_PORT_STAT_IF_OUT_DISCARDS",
	"SAI_PORT_STAT_IF_OUT_ERRORS",
	"SAI_PORT_STAT_DOT3_STATS_ALIGNMENT_ERRORS",
	"SAI_PORT_STAT_DOT3_STATS_FCS_ERRORS",
	"SAI_PORT_STAT_DOT3_STATS_SINGLE_COLLISION_FRAMES",
	"SAI_PORT_STAT_DOT3_STATS_MULTIPLE_COLLISION_FRAMES",
	"SAI_PORT_STAT_DOT3_STATS_SQE_TEST_ERRORS",
	"SAI_PORT_STAT_DOT3_STATS_DEFERRED_TRANSMISSIONS",
	"SAI_PORT_STAT_DOT3_STATS_LATE_COLLISIONS",
	"SAI_PORT_STAT_DOT3_STATS_EXCESSIVE_COLLISIONS",
	"SAI_PORT_STAT_DOT3_STATS_INTERNAL_MAC_TRANSMIT_ERRORS",
	"SAI_PORT_STAT_DOT3_STATS_CARRIER_SENSE_ERRORS",
	"SAI_PORT_STAT_DOT3_STATS_FRAME_TOO_LONGS",
	"SAI_PORT_STAT_DOT3_STATS_INTERNAL_MAC_RECEIVE_ERRORS",
	"SAI_PORT_STAT_DOT3_STATS_SYMBOL_ERRORS",
}

// statByName maps a field name to its stat.
var statByName = func() map[string]int {
	m := make(map[string]int, numStats)
	for i, n := range statNames {
		m[n] = i
	}
	return m
}()

// Counters are one port's SAI statistics as last read.
type Counters struct {
	v   [numStats]uint64
	has uint64 // bit i: stat i was read
}

func (c *Counters) get(i int) (uint64, bool) { return c.v[i], c.has&(1<<i) != 0 }

// Get returns the value of the COUNTERS_DB field name, and whether the
// port has it.
func (c *Counters) Get(name string) (uint64, bool) {
	i, ok := statByName[name]
	if !ok {
		return 0, false
	}
	return c.get(i)
}

// parseCounters reads COUNTERS:<oid>; a field that is not a number is
// reported and left unavailable.
func parseCounters(key string, h map[string]string, ps *problems) *Counters {
	c := &Counters{}
	for f, v := range h {
		i, ok := statByName[f]
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			ps.add(CountersDB, key, f, v, "not a counter; sent as unavailable")
			continue
		}
		c.v[i], c.has = n, c.has|1<<i
	}
	return c
}

// Packets returns the packets the port received (in) and sent (out), the
// unicast, multicast and broadcast counts summed (non-unicast where the
// ASIC keeps no separate multicast and broadcast counts): the pool of its
// flow samples.
func (c *Counters) Packets() (in, out uint64) {
	sum := func(u, nu, mc, bc int) uint64 {
		t, _ := c.get(u)
		m, okm := c.get(mc)
		b, okb := c.get(bc)
		if okm || okb {
			return t + m + b
		}
		n, _ := c.get(nu)
		return t + n
	}
	return sum(statInUcast, statInNonUcast, statInMulticast, statInBroadcast),
		sum(statOutUcast, statOutNonUcast, statOutMulticast, statOutBroadcast)
}

// sumCounters adds members' counters: a stat is in the sum when every
// member has it (a LAG's counters, sflow_version_5.txt "if_counters" of an
// aggregate: the sum of its members').
func sumCounters(ms []*Counters) *Counters {
	s := &Counters{}
	if len(ms) == 0 {
		return s
	}
	s.has = ^uint64(0) >> (64 - numStats)
	for _, m := range ms {
		s.has &= m.has
		for i := range s.v {
			s.v[i] += m.v[i]
		}
	}
	for i := range s.v {
		if s.has&(1<<i) == 0 {
			s.v[i] = 0
		}
	}
	return s
}

// IfCounters fills if_counters of port p from its counters c: the
// descriptive fields from p (SONiC's ifIndex, speed, status), every count
// from c, unavailable where the ASIC has none.
func IfCounters(p *Port, c *Counters, out *sflow.IfCounters) {
	*out = sflow.IfCounters{IfIndex: p.Index, IfType: 6, IfSpeed: p.SpeedMbps * 1_000_000,
		IfDirection: sflow.IfDirectionFullDuplex, IfStatus: sflow.IfStatusBits(p.AdminUp, p.OperUp),
		IfPromiscuousMode: sflow.IfPromiscuousFalse}
	if p.IsLAG() {
		out.IfType = 161 // ieee8023adLag (IANAifType-MIB)
	}
	out.SetUnavailable()
	c64 := func(i int, dst *uint64) {
		if v, ok := c.get(i); ok {
			*dst = v
		}
	}
	c32 := func(i int, dst *uint32) {
		if v, ok := c.get(i); ok {
			*dst = uint32(v) // a 32-bit counter wraps (RFC 2233)
		}
	}
	c64(statInOctets, &out.IfInOctets)
	c32(statInUcast, &out.IfInUcastPkts)
	c32(statInMulticast, &out.IfInMulticastPkts)
	c32(statInBroadcast, &out.IfInBroadcastPkts)
	c32(statInDiscards, &out.IfInDiscards)
	c32(statInErrors, &out.IfInErrors)
	c32(statInUnknownProtos, &out.IfInUnknownProtos)
	c64(statOutOctets, &out.IfOutOctets)
	c32(statOutUcast, &out.IfOutUcastPkts)
	c32(statOutMulticast, &out.IfOutMulticastPkts)
	c32(statOutBroadcast, &out.IfOutBroadcastPkts)
	c32(statOutDiscards, &out.IfOutDiscards)
	c32(statOutErrors, &out.IfOutErrors)
}

// EthernetCounters fills ethernet_counters from c, and tells whether the
// ASIC keeps any dot3 statistic (none: no record is sent).
func EthernetCounters(c *Counters, out *sflow.EthernetCounters) bool {
	if c.has>>firstDot3 == 0 {
		return false
	}
	dst := [...]*uint32{&out.Dot3StatsAlignmentErrors, &out.Dot3StatsFCSErrors, &out.Dot3StatsSingleCollisionFrames,
		&out.Dot3StatsMultipleCollisionFrames, &out.Dot3StatsSQETestErrors, &out.Dot3StatsDeferredTransmissions,
		&out.Dot3StatsLateCollisions, &out.Dot3StatsExcessiveCollisions, &out.Dot3StatsInternalMacTransmitErrors,
		&out.Dot3StatsCarrierSenseErrors, &out.Dot3StatsFrameTooLongs, &out.Dot3StatsInternalMacReceiveErrors,
		&out.Dot3StatsSymbolErrors}
	for k, d := range dst {
		*d = sflow.CounterUnavailable32
		if v, ok := c.get(firstDot3 + k); ok {
			*d = uint32(v)
		}
	}
	return true
}
