package sflow

// Counter record formats of the generic interface structures
// (spec/sflow_version_5.txt, "Counter Data Types").
var (
	FormatIfCounters       = Format(0, 1)
	FormatEthernetCounters = Format(0, 2)
)

func init() {
	registerCounter(FormatIfCounters, "if_counters", decodeIfCounters)
	registerCounter(FormatEthernetCounters, "ethernet_counters", decodeEthernetCounters)
}

// Values for counters that are not available. The spec ("Enterprise = 0
// refers to standard sFlow structures") says: "Use the maximum counter
// value to indicate that the counter is not available. Within any given
// sFlow session a particular counter must be always available, or always
// unavailable."
const (
	CounterUnavailable32 uint32 = 0xFFFFFFFF
	CounterUnavailable64 uint64 = 0xFFFFFFFFFFFFFFFF
)

// IfDirection is if_counters.ifDirection, derived from the MAU MIB
// (RFC 2668).
type IfDirection uint32

// ifDirection values (spec "struct if_counters").
const (
	IfDirectionUnknown    IfDirection = 0
	IfDirectionFullDuplex IfDirection = 1
	IfDirectionHalfDuplex IfDirection = 2
	IfDirectionIn         IfDirection = 3
	IfDirectionOut        IfDirection = 4
)

// Bits of if_counters.ifStatus (spec "struct if_counters"): a set bit means
// up, a clear bit down.
const (
	IfStatusAdminUp uint32 = 1 << 0 // bit 0: ifAdminStatus
	IfStatusOperUp  uint32 = 1 << 1 // bit 1: ifOperStatus
)

// IfStatusBits returns the ifStatus bit field for the given administrative
// and operational states.
func IfStatusBits(adminUp, operUp bool) uint32 {
	var s uint32
	if adminUp {
		s |= IfStatusAdminUp
	}
	if operUp {
		s |= IfStatusOperUp
	}
	return s
}

// ifPromiscuousMode values. The spec copies the IF-MIB object, whose syntax
// is TruthValue (true(1), false(2)); 0 is the spec's "unknown integer
// value". Some agents send 0 for "not promiscuous"; decoders carry any value
// unchanged.
const (
	IfPromiscuousUnknown uint32 = 0
	IfPromiscuousTrue    uint32 = 1
	IfPromiscuousFalse   uint32 = 2
)

// IfCounters is if_counters (counter format 1), the generic interface
// counters of RFC 2233. Every counter that the interface does not keep is
// sent as CounterUnavailable32 / CounterUnavailable64 (SetUnavailable sets
// them all); ifIndex, ifType and ifSpeed are integers whose unknown value
// is 0.
type IfCounters struct {
	IfIndex uint32 `json:"if_index"`
	// IfType is the IANAifType (e.g. 6 = ethernetCsmacd); 0 = unknown.
	IfType uint32 `json:"if_type"`
	// IfSpeed is the interface speed in bits per second, 64 bits wide (so
	// it does not saturate like IF-MIB ifSpeed); 0 = unknown.
	IfSpeed uint64 `json:"if_speed"`
	// IfDirection is the duplex / direction, 0 = unknown.
	IfDirection IfDirection `json:"if_direction"`
	// IfStatus has ifAdminStatus in bit 0 and ifOperStatus in bit 1 (see
	// IfStatusBits).
	IfStatus           uint32 `json:"if_status"`
	IfInOctets         uint64 `json:"if_in_octets"`
	IfInUcastPkts      uint32 `json:"if_in_ucast_pkts"`
	IfInMulticastPkts  uint32 `json:"if_in_multicast_pkts"`
	IfInBroadcastPkts  uint32 `json:"if_in_broadcast_pkts"`
	IfInDiscards       uint32 `json:"if_in_discards"`
	IfInErrors         uint32 `json:"if_in_errors"`
	IfInUnknownProtos  uint32 `json:"if_in_unknown_protos"`
	IfOutOctets        uint64 `json:"if_out_octets"`
	IfOutUcastPkts     uint32 `json:"if_out_ucast_pkts"`
	IfOutMulticastPkts uint32 `json:"if_out_multicast_pkts"`
	IfOutBroadcastPkts uint32 `json:"if_out_broadcast_pkts"`
	IfOutDiscards      uint32 `json:"if_out_discards"`
	IfOutErrors        uint32 `json:"if_out_errors"`
	// IfPromiscuousMode is an IF-MIB TruthValue (IfPromiscuousTrue /
	// IfPromiscuousFalse), 0 = unknown.
	IfPromiscuousMode uint32 `json:"if_promiscuous_mode"`
}

// Format implements Record.
func (*IfCounters) Format() DataFormat { return FormatIfCounters }

// Name implements Record.
func (*IfCounters) Name() string { return "if_counters" }

// SetUnavailable marks every counter (the octet, packet, discard and error
// counts) as not available; the descriptive fields are left unchanged.
// A poller can call it and then fill in the counters it has.
func (c *IfCounters) SetUnavailable() {
	c.IfInOctets = CounterUnavailable64
	c.IfInUcastPkts = CounterUnavailable32
	c.IfInMulticastPkts = CounterUnavailable32
	c.IfInBroadcastPkts = CounterUnavailable32
	c.IfInDiscards = CounterUnavailable32
	c.IfInErrors = CounterUnavailable32
	c.IfInUnknownProtos = CounterUnavailable32
	c.IfOutOctets = CounterUnavailable64
	c.IfOutUcastPkts = CounterUnavailable32
	c.IfOutMulticastPkts = CounterUnavailable32
	c.IfOutBroadcastPkts = CounterUnavailable32
	c.IfOutDiscards = CounterUnavailable32
	c.IfOutErrors = CounterUnavailable32
}

// AppendXDR implements Record.
func (c *IfCounters) AppendXDR(b []byte) []byte {
	b = appendUint32(b, c.IfIndex)
	b = appendUint32(b, c.IfType)
	b = appendUint64(b, c.IfSpeed)
	b = appendUint32(b, uint32(c.IfDirection))
	b = appendUint32(b, c.IfStatus)
	b = appendUint64(b, c.IfInOctets)
	b = appendUint32(b, c.IfInUcastPkts)
	b = appendUint32(b, c.IfInMulticastPkts)
	b = appendUint32(b, c.IfInBroadcastPkts)
	b = appendUint32(b, c.IfInDiscards)
	b = appendUint32(b, c.IfInErrors)
	b = appendUint32(b, c.IfInUnknownProtos)
	b = appendUint64(b, c.IfOutOctets)
	b = appendUint32(b, c.IfOutUcastPkts)
	b = appendUint32(b, c.IfOutMulticastPkts)
	b = appendUint32(b, c.IfOutBroadcastPkts)
	b = appendUint32(b, c.IfOutDiscards)
	b = appendUint32(b, c.IfOutErrors)
	return appendUint32(b, c.IfPromiscuousMode)
}

func decodeIfCounters(r *reader) Record {
	return &IfCounters{
		IfIndex:            r.uint32(),
		IfType:             r.uint32(),
		IfSpeed:            r.uint64(),
		IfDirection:        IfDirection(r.uint32()),
		IfStatus:           r.uint32(),
		IfInOctets:         r.uint64(),
		IfInUcastPkts:      r.uint32(),
		IfInMulticastPkts:  r.uint32(),
		IfInBroadcastPkts:  r.uint32(),
		IfInDiscards:       r.uint32(),
		IfInErrors:         r.uint32(),
		IfInUnknownProtos:  r.uint32(),
		IfOutOctets:        r.uint64(),
		IfOutUcastPkts:     r.uint32(),
		IfOutMulticastPkts: r.uint32(),
		IfOutBroadcastPkts: r.uint32(),
		IfOutDiscards:      r.uint32(),
		IfOutErrors:        r.uint32(),
		IfPromiscuousMode:  r.uint32(),
	}
}

// EthernetCounters is ethernet_counters (counter format 2), the dot3Stats
// counters of RFC 2358. A counter the driver does not keep is sent as
// CounterUnavailable32 (see SetUnavailable).
type EthernetCounters struct {
	Dot3StatsAlignmentErrors           uint32 `json:"dot3_stats_alignment_errors"`
	Dot3StatsFCSErrors                 uint32 `json:"dot3_stats_fcs_errors"`
	Dot3StatsSingleCollisionFrames     uint32 `json:"dot3_stats_single_collision_frames"`
	Dot3StatsMultipleCollisionFrames   uint32 `json:"dot3_stats_multiple_collision_frames"`
	Dot3StatsSQETestErrors             uint32 `json:"dot3_stats_sqe_test_errors"`
	Dot3StatsDeferredTransmissions     uint32 `json:"dot3_stats_deferred_transmissions"`
	Dot3StatsLateCollisions            uint32 `json:"dot3_stats_late_collisions"`
	Dot3StatsExcessiveCollisions       uint32 `json:"dot3_stats_excessive_collisions"`
	Dot3StatsInternalMacTransmitErrors uint32 `json:"dot3_stats_internal_mac_transmit_errors"`
	Dot3StatsCarrierSenseErrors        uint32 `json:"dot3_stats_carrier_sense_errors"`
	Dot3StatsFrameTooLongs             uint32 `json:"dot3_stats_frame_too_longs"`
	Dot3StatsInternalMacReceiveErrors  uint32 `json:"dot3_stats_internal_mac_receive_errors"`
	Dot3StatsSymbolErrors              uint32 `json:"dot3_stats_symbol_errors"`
}

// Format implements Record.
func (*EthernetCounters) Format() DataFormat { return FormatEthernetCounters }

// Name implements Record.
func (*EthernetCounters) Name() string { return "ethernet_counters" }

// SetUnavailable marks every counter as not available.
func (e *EthernetCounters) SetUnavailable() {
	for _, p := range e.fields() {
		*p = CounterUnavailable32
	}
}

// fields returns pointers to the counters in wire order.
func (e *EthernetCounters) fields() [13]*uint32 {
	return [13]*uint32{
		&e.Dot3StatsAlignmentErrors,
		&e.Dot3StatsFCSErrors,
		&e.Dot3StatsSingleCollisionFrames,
		&e.Dot3StatsMultipleCollisionFrames,
		&e.Dot3StatsSQETestErrors,
		&e.Dot3StatsDeferredTransmissions,
		&e.Dot3StatsLateCollisions,
		&e.Dot3StatsExcessiveCollisions,
		&e.Dot3StatsInternalMacTransmitErrors,
		&e.Dot3StatsCarrierSenseErrors,
		&e.Dot3StatsFrameTooLongs,
		&e.Dot3StatsInternalMacReceiveErrors,
		&e.Dot3StatsSymbolErrors,
	}
}

// AppendXDR implements Record.
func (e *EthernetCounters) AppendXDR(b []byte) []byte {
	for _, p := range e.fields() {
		b = appendUint32(b, *p)
	}
	return b
}

func decodeEthernetCounters(r *reader) Record {
	e := &EthernetCounters{}
	for _, p := range e.fields() {
		*p = r.uint32()
	}
	return e
}
