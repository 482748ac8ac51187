// Package link reads the counters of switch ports for the counter
// pollers: Linux link statistics (netlink) as if_counters, ethtool dot3
// statistics as ethernet_counters (sflow_version_5.txt, "struct
// if_counters", "struct ethernet_counters") and the interface's name as
// port_name (0:1005, as the host agent hsflowd sends it). It is the
// port-side sibling of counters/host.
package link

import (
	"sync"

	"github.com/vishvananda/netns"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Reader reads port counters. Polls are rare (every 20 s per port), so one
// netlink/ethtool reader behind a mutex serves all workers; the sample path
// never comes here.
type Reader struct {
	mu    sync.Mutex
	links *dataplane.LinkCounterReader
	ifc   map[uint32]*sflow.IfCounters
	ethc  map[uint32]*sflow.EthernetCounters
	names map[uint32]*sflow.PortName
}

// New opens a reader in the calling thread's network namespace.
func New() (*Reader, error) {
	r, err := dataplane.NewLinkCounterReader(netns.None())
	if err != nil {
		return nil, err
	}
	return &Reader{links: r, ifc: map[uint32]*sflow.IfCounters{}, ethc: map[uint32]*sflow.EthernetCounters{},
		names: map[uint32]*sflow.PortName{}}, nil
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
	pn := c.names[ifindex]
	if pn == nil {
		pn = new(sflow.PortName)
		c.names[ifindex] = pn
	}
	pn.PortName = lc.Name
	recs = append(recs, pn)
	return recs, nil
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
func ifCounters(lc dataplane.LinkCounters) sflow.IfCounters {
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
	if lc.RxMulticast != dataplane.UnknownCounter {
		// rx_packets counts every frame; unicast is what is left after the
		// multicast (broadcast included) frames.
		c.IfInUcastPkts = uint32(lc.RxPackets - min(lc.RxMulticast, lc.RxPackets))
		c.IfInMulticastPkts = uint32(lc.RxMulticast)
	}
	if lc.Promiscuous {
		c.IfPromiscuousMode = 1
	}
	switch lc.Duplex {
	case dataplane.DuplexFull:
		c.IfDirection = sflow.IfDirectionFullDuplex
	case dataplane.DuplexHalf:
		c.IfDirection = sflow.IfDirectionHalfDuplex
	}
	return c
}

// ethernetCounters maps ethtool dot3 statistics to ethernet_counters.
func ethernetCounters(e dataplane.EthernetCounters) sflow.EthernetCounters {
	c32 := func(v uint64) uint32 {
		if v == dataplane.UnknownCounter {
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
