package sflow

// FormatLAGPortStats is lag_port_stats (counter format 7; sFlow LAG
// Counters Structure, sflow.org/sflow_lag.txt, 2012): the IEEE8023-LAG-MIB
// dot3adAggPortTable and dot3adAggPortStatsTable values of one member
// port. It is sent, with an if_counters record for the same ifIndex, in
// the counters sample of each port that belongs to a LAG; hsflowd sends it
// for bond members only ("used to send for bond-master too, but that was a
// mis-reading of the standard", hsflowd.c).
//
// Layout: hsflowd's sflow.h SFLLACP_counters (XDRSIZ_LACP_COUNTERS 56) and
// sflowtool's readCounters_LACP:
//
//	mac          actorSystemID        6 bytes + 2 of padding
//	mac          partnerSystemID      6 bytes + 2 of padding
//	unsigned int attachedAggID
//	opaque       portState[4]         actorAdmin, actorOper, partnerAdmin, partnerOper
//	unsigned int LACPDUsRx, markerPDUsRx, markerResponsePDUsRx, unknownRx,
//	             illegalRx, LACPDUsTx, markerPDUsTx, markerResponsePDUsTx
//
// The port state is four bytes in that order (the spec's
// "opaque dot3adAggPortState[4]", byte 0 = dot3adAggPortActorAdminState).
// sflowtool reads them so on any host (getData32_nobswap into a union of
// four uint8). hsflowd writes the union's uint32 through htonl, which on a
// little-endian host puts them in the reverse order (partnerOper first);
// it never shows because hsflowd sets all four to the same value (2 or 0,
// from /proc/net/bonding). This encoder follows the spec and sflowtool.
// Wireshark 4.0 shows the four bytes as one big-endian word whose bits 0-3
// it labels actor admin/oper and partner admin/oper (a misreading).
var FormatLAGPortStats = Format(0, 7)

func init() {
	registerCounter(FormatLAGPortStats, "lag_port_stats", decodeLAGPortStats)
}

// Bits of an LACP port state byte (IEEE 802.1AX Actor_State /
// Partner_State, as in dot3adAggPortActorOperState). The kernel's bonding
// driver reports a member's states in the same bits:
// IFLA_BOND_SLAVE_AD_ACTOR_OPER_PORT_STATE (u8) and
// IFLA_BOND_SLAVE_AD_PARTNER_OPER_PORT_STATE (a u16 attribute holding the
// byte).
const (
	LACPStateActivity        uint8 = 1 << 0 // LACP_Activity: active
	LACPStateTimeout         uint8 = 1 << 1 // LACP_Timeout: short
	LACPStateAggregation     uint8 = 1 << 2 // Aggregation: aggregatable
	LACPStateSynchronization uint8 = 1 << 3 // Synchronization: in sync
	LACPStateCollecting      uint8 = 1 << 4 // Collecting enabled
	LACPStateDistributing    uint8 = 1 << 5 // Distributing enabled
	LACPStateDefaulted       uint8 = 1 << 6 // Defaulted: using default partner info
	LACPStateExpired         uint8 = 1 << 7 // Expired
)

// LAGPortStats is lag_port_stats (counter format 7). The LACPDU and marker
// counters are sent as CounterUnavailable32 where the device does not keep
// them (see SetUnavailable).
type LAGPortStats struct {
	// ActorSystemID is dot3adAggPortActorSystemID, the MAC part of this
	// system's LACP system ID.
	ActorSystemID [6]byte `json:"actor_system_id"`
	// PartnerOperSystemID is dot3adAggPortPartnerOperSystemID.
	PartnerOperSystemID [6]byte `json:"partner_oper_system_id"`
	// AttachedAggID is dot3adAggPortAttachedAggID: the ifIndex of the
	// aggregator (the bond) the port is attached to, 0 if none.
	AttachedAggID uint32 `json:"attached_agg_id"`
	// The dot3adAggPort*State bytes (LACPState* bits), wire bytes 0-3.
	ActorAdminState   uint8 `json:"actor_admin_state"`
	ActorOperState    uint8 `json:"actor_oper_state"`
	PartnerAdminState uint8 `json:"partner_admin_state"`
	PartnerOperState  uint8 `json:"partner_oper_state"`
	// dot3adAggPortStats* counters.
	LACPDUsRx            uint32 `json:"lacpdus_rx"`
	MarkerPDUsRx         uint32 `json:"marker_pdus_rx"`
	MarkerResponsePDUsRx uint32 `json:"marker_response_pdus_rx"`
	UnknownRx            uint32 `json:"unknown_rx"`
	IllegalRx            uint32 `json:"illegal_rx"`
	LACPDUsTx            uint32 `json:"lacpdus_tx"`
	MarkerPDUsTx         uint32 `json:"marker_pdus_tx"`
	MarkerResponsePDUsTx uint32 `json:"marker_response_pdus_tx"`
}

// Format implements Record.
func (*LAGPortStats) Format() DataFormat { return FormatLAGPortStats }

// Name implements Record.
func (*LAGPortStats) Name() string { return "lag_port_stats" }

// counters returns pointers to the eight PDU counters in wire order.
func (c *LAGPortStats) counters() [8]*uint32 {
	return [8]*uint32{&c.LACPDUsRx, &c.MarkerPDUsRx, &c.MarkerResponsePDUsRx, &c.UnknownRx,
		&c.IllegalRx, &c.LACPDUsTx, &c.MarkerPDUsTx, &c.MarkerResponsePDUsTx}
}

// SetUnavailable marks the eight PDU counters as not available; the system
// IDs, aggregator and port states are kept.
func (c *LAGPortStats) SetUnavailable() {
	for _, p := range c.counters() {
		*p = CounterUnavailable32
	}
}

// AppendXDR implements Record.
func (c *LAGPortStats) AppendXDR(b []byte) []byte {
	b = appendMAC(b, c.ActorSystemID)
	b = appendMAC(b, c.PartnerOperSystemID)
	b = appendUint32(b, c.AttachedAggID)
	b = append(b, c.ActorAdminState, c.ActorOperState, c.PartnerAdminState, c.PartnerOperState)
	for _, p := range c.counters() {
		b = appendUint32(b, *p)
	}
	return b
}

func decodeLAGPortStats(r *reader) Record {
	c := &LAGPortStats{}
	c.ActorSystemID = r.mac()
	c.PartnerOperSystemID = r.mac()
	c.AttachedAggID = r.uint32()
	if s := r.bytes(4); s != nil {
		c.ActorAdminState, c.ActorOperState, c.PartnerAdminState, c.PartnerOperState = s[0], s[1], s[2], s[3]
	}
	for _, p := range c.counters() {
		*p = r.uint32()
	}
	return c
}
