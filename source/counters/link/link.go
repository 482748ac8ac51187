// Package link reads the counters of switch ports for the counter
// pollers: Linux link statistics (netlink) as if_counters, ethtool dot3
// statistics as ethernet_counters (sflow_version_5.txt, "struct
// if_counters", "struct ethernet_counters") and the interface's name as
// port_name (0:1005, as the host agent hsflowd sends it). It is the
// port-side sibling of source/counters/host.
package link

import (
	"fmt"
	"sync"

	"github.com/vishvananda/netns"

	"github.com/sflowswitchd/sflowswitchd/dataplane/linkstats"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Reader reads port counters. Polls are rare (every 20 s per port), so one
// netlink/ethtool reader behind a mutex serves all workers; the sample path
// never comes here.
type Reader struct {
	mu    sync.Mutex
	links *linkstats.Reader
	ifc   map[uint32]*sflow.IfCounters
	ethc  map[uint32]*sflow.EthernetCounters
	names map[uint32]*sflow.PortName
	lags  map[uint32]*sflow.LAGPortStats
	vlans map[uint32]*sflow.VLANCounters
}

// New opens a reader in the calling thread's network namespace.
func New() (*Reader, error) {
	r, err := linkstats.NewReader(netns.None())
	if err != nil {
		return nil, err
	}
	return &Reader{links: r, ifc: map[uint32]*sflow.IfCounters{}, ethc: map[uint32]*sflow.EthernetCounters{},
		names: map[uint32]*sflow.PortName{}, lags: map[uint32]*sflow.LAGPortStats{},
		vlans: map[uint32]*sflow.VLANCounters{}}, nil
}

// AppendRecords appends port ifindex's if_counters, its
// ethernet_counters where the driver has dot3 counters, and its
// port_name (the name at the time of the poll, so a renamed port reports
// its new name). The records are
// owned by the reader and reused per port; the caller encodes them before
// the next poll of the same port (a port belongs to exactly one worker).
func (c *Reader) AppendRecords(recs []sflow.Record, ifindex uint32) ([]sflow.Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lc, err := c.links.Read(int(ifindex))
	if err != nil {
		return recs, err
	}
	ifc := c.ifc[ifindex]
	if ifc == nil {
		ifc = new(sflow.IfCounters)
		c.ifc[ifindex] = ifc
	}
	*ifc = ifCounters(lc)
	recs = append(recs, ifc)
	ec, ok, err := c.links.Ethernet(int(ifindex))
	if err == nil && ok {
		e := c.ethc[ifindex]
		if e == nil {
			e = new(sflow.EthernetCounters)
			c.ethc[ifindex] = e
		}
		*e = ethernetCounters(ec)
		recs = append(recs, e)
	}
	m, member, err := c.links.LAGMember(int(ifindex))
	if member {
		// A bond member: lag_port_stats (0:7) with its if_counters, as
		// sflow_lag.txt asks; a PDU counter error leaves them unavailable
		// (the rest is sent). Before port_name: Wireshark 4.0 (Debian
		// 12) stops reading a counter sample at a record it does not
		// know, and port_name (0:1005) is one.
		lr := c.lags[ifindex]
		if lr == nil {
			lr = new(sflow.LAGPortStats)
			c.lags[ifindex] = lr
		}
		*lr = lagPortStats(m)
		recs = append(recs, lr)
	}
	pn := c.names[ifindex]
	if pn == nil {
		pn = new(sflow.PortName)
		c.names[ifindex] = pn
	}
	pn.PortName = lc.Name
	recs = append(recs, pn)
	if err != nil {
		return recs, err
	}
	return recs, nil
}

// lagPortStats maps a bond member's kernel state to lag_port_stats
// (sflow_lag.txt; IEEE8023-LAG-MIB dot3adAggPortTable):
//   - actor system: the bond's LACP system MAC (ad_actor_system, or the
//     bond's MAC), partner system: the partner of the bond's active
//     aggregator for a member attached to it, else zero (the kernel keeps
//     no per-member partner in netlink);
//   - attached aggregator: the bond's ifIndex (as hsflowd sends it) for a
//     member in the bond's active aggregator, 0 for one in another
//     aggregator (802.1AX: 0 = not attached to the aggregator);
//   - port states (802.1AX bits): oper states from
//     IFLA_BOND_SLAVE_AD_{ACTOR,PARTNER}_OPER_PORT_STATE, the actor's
//     without Synchronization, Collecting and Distributing while the
//     member's link is down (IFLA_BOND_SLAVE_MII_STATUS); the actor admin
//     state is what the driver configures (bond_3ad.c
//     ad_initialize_port: Aggregation | LACP_Activity, lacp_active being
//     the default the library cannot read), the partner admin state 0
//     (the driver's partner_admin template since Linux 5.15);
//   - PDU counters from the member's 802.3ad statistics: LACPDUs and
//     markers as counted, unknownRx = the driver's lacpdu_unknown_rx
//     (unknown Slow Protocols subtype), illegalRx = lacpdu_illegal_rx +
//     marker_unknown_rx (a malformed LACPDU or marker PDU).
//
// Outside 802.3ad (active-backup, balance-*, broadcast) there is no LACP:
// system IDs are zero and the states describe a static aggregation
// member: Aggregation, plus Synchronization, Collecting and Distributing
// when the member is active with its link up (what 802.1AX says of a port
// carrying the aggregation's traffic); the PDU counters are unavailable.
func lagPortStats(m linkstats.LAGMember) sflow.LAGPortStats {
	l := sflow.LAGPortStats{}
	if !m.LACP {
		l.AttachedAggID = uint32(m.Bond)
		st := sflow.LACPStateAggregation
		if m.Active && m.MIIUp {
			st |= sflow.LACPStateSynchronization | sflow.LACPStateCollecting | sflow.LACPStateDistributing
		}
		l.ActorAdminState, l.ActorOperState, l.PartnerOperState = sflow.LACPStateAggregation, st, 0
		l.SetUnavailable()
		return l
	}
	l.ActorSystemID, l.PartnerOperSystemID = m.ActorSystem, m.PartnerSystem
	if m.ActiveAggregator {
		l.AttachedAggID = uint32(m.Bond)
	}
	l.ActorAdminState = sflow.LACPStateAggregation | sflow.LACPStateActivity
	l.ActorOperState, l.PartnerOperState = m.ActorOper, m.PartnerOper
	if !m.MIIUp {
		// The driver stops a member's LACP machines when its link goes
		// down and leaves its state byte as it was (63 after a failure,
		// seen on 6.1); a port without a link is neither in sync nor
		// collecting nor distributing (802.1AX), so those bits go.
		l.ActorOperState &^= sflow.LACPStateSynchronization | sflow.LACPStateCollecting | sflow.LACPStateDistributing
	}
	if !m.StatsOK {
		l.SetUnavailable()
		return l
	}
	s := m.Stats
	l.LACPDUsRx, l.MarkerPDUsRx, l.MarkerResponsePDUsRx = uint32(s.LACPDURx), uint32(s.MarkerRx), uint32(s.MarkerRespRx)
	l.UnknownRx, l.IllegalRx = uint32(s.LACPDUUnknownRx), uint32(s.LACPDUIllegalRx+s.MarkerUnknownRx)
	l.LACPDUsTx, l.MarkerPDUsTx, l.MarkerResponsePDUsTx = uint32(s.LACPDUTx), uint32(s.MarkerTx), uint32(s.MarkerRespTx)
	return l
}

// AppendVLANRecords appends vlan_counters (0:5) of VLAN vid, the data
// source smonVlanDataSource.<vid>: the kernel's per-VLAN statistics of
// the VLAN-filtering bridges that keep them (vlan_stats_enabled 1),
// summed over the bridges that have the VLAN (sFlow's VLAN ID is global
// to the switch). The bridge counts, per VLAN, the frames and bytes it
// received in it (at whichever port, each frame once) and sent in it:
//   - octets: the bytes received in the VLAN (its traffic, each frame
//     once; RMON-style, as the spec's VLAN counters are);
//   - ucastPkts: the frames received in the VLAN, multicast and
//     broadcast included: the kernel does not tell them apart (as
//     if_counters' ifInUcastPkts on Linux);
//   - multicastPkts, broadcastPkts, discards: not kept per VLAN,
//     sent as unavailable.
//
// A VLAN the bridges no longer have (or whose statistics were turned
// off) is an error, with no record.
func (c *Reader) AppendVLANRecords(recs []sflow.Record, vid uint32) ([]sflow.Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if vid == 0 || vid > 4094 {
		return recs, fmt.Errorf("vlan_counters: VLAN %d out of range", vid)
	}
	s, ok, err := c.links.VLANCounters(uint16(vid))
	if err != nil {
		return recs, err
	}
	if !ok {
		return recs, fmt.Errorf("vlan_counters: no VLAN-filtering bridge keeps statistics of VLAN %d", vid)
	}
	v := c.vlans[vid]
	if v == nil {
		v = new(sflow.VLANCounters)
		c.vlans[vid] = v
	}
	*v = sflow.VLANCounters{VLANID: vid}
	v.SetUnavailable()
	v.Octets, v.UcastPkts = s.RxBytes, uint32(s.RxPackets)
	return append(recs, v), nil
}

// Forget drops the cached records of ports not in keep.
func (c *Reader) Forget(keep map[uint32]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for idx := range c.ifc {
		if !keep[idx] {
			delete(c.ifc, idx)
			delete(c.ethc, idx)
			delete(c.names, idx)
			delete(c.lags, idx)
		}
	}
}

// Close releases the reader's netlink and ethtool sockets. Pollers must
// have stopped.
func (c *Reader) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.links.Close()
}

// ifCounters maps Linux link statistics to if_counters
// (sflow_version_5.txt "struct if_counters"). Linux keeps one multicast
// counter for received frames (broadcast included; veth keeps none) and none for sent
// multicast or broadcast, nor unknown protocols: those are sent as the
// spec's "not available" value. ifOutUcastPkts carries tx_packets, which
// includes the few multicast and broadcast frames sent, as other Linux
// agents do.
func ifCounters(lc linkstats.Counters) sflow.IfCounters {
	c := sflow.IfCounters{
		IfIndex:            uint32(lc.Index),
		IfType:             6, // ethernetCsmacd (IANAifType-MIB)
		IfSpeed:            lc.SpeedMbps * 1_000_000,
		IfStatus:           sflow.IfStatusBits(lc.AdminUp, lc.OperUp),
		IfInOctets:         lc.RxBytes,
		IfInUcastPkts:      uint32(lc.RxPackets),
		IfInMulticastPkts:  sflow.CounterUnavailable32,
		IfInBroadcastPkts:  sflow.CounterUnavailable32,
		IfInDiscards:       uint32(lc.RxDropped),
		IfInErrors:         uint32(lc.RxErrors),
		IfInUnknownProtos:  sflow.CounterUnavailable32,
		IfOutOctets:        lc.TxBytes,
		IfOutUcastPkts:     uint32(lc.TxPackets),
		IfOutMulticastPkts: sflow.CounterUnavailable32,
		IfOutBroadcastPkts: sflow.CounterUnavailable32,
		IfOutDiscards:      uint32(lc.TxDropped),
		IfOutErrors:        uint32(lc.TxErrors),
		IfPromiscuousMode:  2, // TruthValue false
	}
	if lc.RxMulticast != linkstats.UnknownCounter {
		// rx_packets counts every frame; unicast is what is left after the
		// multicast (broadcast included) frames.
		c.IfInUcastPkts = uint32(lc.RxPackets - min(lc.RxMulticast, lc.RxPackets))
		c.IfInMulticastPkts = uint32(lc.RxMulticast)
	}
	if lc.Promiscuous {
		c.IfPromiscuousMode = 1
	}
	switch lc.Duplex {
	case linkstats.DuplexFull:
		c.IfDirection = sflow.IfDirectionFullDuplex
	case linkstats.DuplexHalf:
		c.IfDirection = sflow.IfDirectionHalfDuplex
	}
	return c
}

// ethernetCounters maps ethtool dot3 statistics to ethernet_counters.
func ethernetCounters(e linkstats.EthernetCounters) sflow.EthernetCounters {
	c32 := func(v uint64) uint32 {
		if v == linkstats.UnknownCounter {
			return sflow.CounterUnavailable32
		}
		return uint32(v)
	}
	return sflow.EthernetCounters{
		Dot3StatsAlignmentErrors:           c32(e.AlignmentErrors),
		Dot3StatsFCSErrors:                 c32(e.FCSErrors),
		Dot3StatsSingleCollisionFrames:     c32(e.SingleCollisionFrames),
		Dot3StatsMultipleCollisionFrames:   c32(e.MultipleCollisionFrames),
		Dot3StatsSQETestErrors:             c32(e.SQETestErrors),
		Dot3StatsDeferredTransmissions:     c32(e.DeferredTransmissions),
		Dot3StatsLateCollisions:            c32(e.LateCollisions),
		Dot3StatsExcessiveCollisions:       c32(e.ExcessiveCollisions),
		Dot3StatsInternalMacTransmitErrors: c32(e.InternalMacTransmitErrors),
		Dot3StatsCarrierSenseErrors:        c32(e.CarrierSenseErrors),
		Dot3StatsFrameTooLongs:             c32(e.FrameTooLongs),
		Dot3StatsInternalMacReceiveErrors:  c32(e.InternalMacReceiveErrors),
		Dot3StatsSymbolErrors:              c32(e.SymbolErrors),
	}
}
