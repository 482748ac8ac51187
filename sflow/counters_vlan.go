package sflow

// FormatVLANCounters is vlan_counters (counter format 5;
// docs/spec/sflow_version_5.txt "VLAN Counters"), sent by a data source
// of type SourceSmonVlan (1) whose index is the VLAN ID. hsflowd's sflow.h
// (SFLVlan_counters) and sflowtool (readCounters_vlan) have the same
// layout; hsflowd never fills it.
var FormatVLANCounters = Format(0, 5)

func init() {
	registerCounter(FormatVLANCounters, "vlan_counters", decodeVLANCounters)
}

// VLANCounters is vlan_counters (counter format 5): the traffic of one
// VLAN. A counter the device does not keep is sent as CounterUnavailable32
// / CounterUnavailable64 (see SetUnavailable).
type VLANCounters struct {
	VLANID        uint32 `json:"vlan_id"`
	Octets        uint64 `json:"octets"`
	UcastPkts     uint32 `json:"ucast_pkts"`
	MulticastPkts uint32 `json:"multicast_pkts"`
	BroadcastPkts uint32 `json:"broadcast_pkts"`
	Discards      uint32 `json:"discards"`
}

// Format implements Record.
func (*VLANCounters) Format() DataFormat { return FormatVLANCounters }

// Name implements Record.
func (*VLANCounters) Name() string { return "vlan_counters" }

// SetUnavailable marks every counter as not available; VLANID is kept.
func (c *VLANCounters) SetUnavailable() {
	c.Octets = CounterUnavailable64
	c.UcastPkts = CounterUnavailable32
	c.MulticastPkts = CounterUnavailable32
	c.BroadcastPkts = CounterUnavailable32
	c.Discards = CounterUnavailable32
}

// AppendXDR implements Record.
func (c *VLANCounters) AppendXDR(b []byte) []byte {
	b = appendUint32(b, c.VLANID)
	b = appendUint64(b, c.Octets)
	b = appendUint32(b, c.UcastPkts)
	b = appendUint32(b, c.MulticastPkts)
	b = appendUint32(b, c.BroadcastPkts)
	return appendUint32(b, c.Discards)
}

func decodeVLANCounters(r *reader) Record {
	return &VLANCounters{
		VLANID:        r.uint32(),
		Octets:        r.uint64(),
		UcastPkts:     r.uint32(),
		MulticastPkts: r.uint32(),
		BroadcastPkts: r.uint32(),
		Discards:      r.uint32(),
	}
}
