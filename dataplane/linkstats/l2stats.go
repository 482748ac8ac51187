package linkstats

// Layer-2 statistics the netlink library (v1.3.1) does not read: a bond
// member's LACP PDU counters and a bridge's per-VLAN counters. Both are
// RTM_GETSTATS extended statistics (IFLA_STATS_LINK_XSTATS_SLAVE with
// LINK_XSTATS_TYPE_BOND, IFLA_STATS_LINK_XSTATS with
// LINK_XSTATS_TYPE_BRIDGE; include/uapi/linux/if_link.h), which the
// library has no request for, so this file sends the request on the
// library's netlink socket type and parses the attributes with its
// helpers.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"syscall"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/bridgeattr"
)

// RTM_GETSTATS attributes and nested types (include/uapi/linux/if_link.h).
const (
	iflaStatsLinkXstats      = 2 // IFLA_STATS_LINK_XSTATS
	iflaStatsLinkXstatsSlave = 3 // IFLA_STATS_LINK_XSTATS_SLAVE
	linkXstatsTypeBridge     = 1 // LINK_XSTATS_TYPE_BRIDGE
	linkXstatsTypeBond       = 2 // LINK_XSTATS_TYPE_BOND
	bridgeXstatsVLAN         = 1 // BRIDGE_XSTATS_VLAN: struct bridge_vlan_xstats
	bondXstats3AD            = 1 // BOND_XSTATS_3AD: nested BOND_3AD_STAT_* (u64)
	// bridgeVLANXstatsLen is sizeof(struct bridge_vlan_xstats): rx_bytes,
	// rx_packets, tx_bytes, tx_packets (u64), vid, flags (u16), pad (u32).
	bridgeVLANXstatsLen = 40
)

// BOND_3AD_STAT_* (struct bond_3ad_stats), in attribute order.
const (
	bond3ADLACPDURx = iota
	bond3ADLACPDUTx
	bond3ADLACPDUUnknownRx
	bond3ADLACPDUIllegalRx
	bond3ADMarkerRx
	bond3ADMarkerTx
	bond3ADMarkerRespRx
	bond3ADMarkerRespTx
	bond3ADMarkerUnknownRx
	bond3ADStatCount
)

// LACPStats are a bond member's LACP and marker PDU counters, as the
// bonding driver counts them (struct bond_3ad_stats, Linux 4.20).
type LACPStats struct {
	LACPDURx, LACPDUTx, LACPDUUnknownRx, LACPDUIllegalRx            uint64
	MarkerRx, MarkerTx, MarkerRespRx, MarkerRespTx, MarkerUnknownRx uint64
}

// LAGMember is what the kernel tells of a bond member (IFLA_BOND_SLAVE_*,
// the bond's IFLA_BOND_* with IFLA_BOND_AD_INFO, which the library does
// not decode, and the member's 802.3ad statistics).
type LAGMember struct {
	Bond     int              // the bond's ifindex
	BondName string           // its name
	Mode     netlink.BondMode // the bond's mode
	// LACP is true in 802.3ad mode: the LACP fields below mean something.
	LACP bool
	// ActorSystem is the LACP system ID's MAC: the bond's ad_actor_system,
	// or its MAC when that is unset (the kernel's rule, bond_3ad.c). Zero
	// outside 802.3ad.
	ActorSystem [6]byte
	// PartnerSystem is the partner's system MAC of the bond's active
	// aggregator (IFLA_BOND_AD_INFO_PARTNER_MAC), for a member attached to
	// it; zero otherwise (the kernel reports no partner per member).
	PartnerSystem [6]byte
	// Aggregator is the member's aggregator ID, ActiveAggregator whether
	// it is the bond's active one (802.3ad).
	Aggregator       int
	ActiveAggregator bool
	// ActorOper and PartnerOper are the LACP port states
	// (IFLA_BOND_SLAVE_AD_ACTOR_OPER_PORT_STATE and ..._PARTNER_...).
	ActorOper, PartnerOper uint8
	// LACPFast is the bond's lacp_rate fast.
	LACPFast bool
	// Active is the member's IFLA_BOND_SLAVE_STATE (active, not backup)
	// and MIIUp its IFLA_BOND_SLAVE_MII_STATUS.
	Active, MIIUp bool
	// Stats are its PDU counters, where StatsOK (802.3ad mode).
	Stats   LACPStats
	StatsOK bool
}

// LAGMember returns the bond membership of link ifindex; ok is false for
// a link that is not a bond member (or not a link any more: err).
func (r *Reader) LAGMember(ifindex int) (m LAGMember, ok bool, err error) {
	link, err := r.nl.LinkByIndex(ifindex)
	if err != nil {
		return m, false, fmt.Errorf("linkstats: link %d: %w", ifindex, err)
	}
	a := link.Attrs()
	bs, isBond := a.Slave.(*netlink.BondSlave)
	if !isBond || a.MasterIndex == 0 {
		return m, false, nil
	}
	ml, err := r.nl.LinkByIndex(a.MasterIndex)
	if err != nil {
		// Left the bond between the two reads.
		return m, false, nil
	}
	bond, isBond := ml.(*netlink.Bond)
	if !isBond {
		return m, false, nil
	}
	m = LAGMember{Bond: a.MasterIndex, BondName: bond.Name, Mode: bond.Mode,
		Active: bs.State == netlink.BondStateActive, MIIUp: bs.MiiStatus == netlink.BondLinkUp,
		Aggregator: int(bs.AggregatorId), LACPFast: bond.LacpRate == netlink.BOND_LACP_RATE_FAST}
	if bond.Mode != netlink.BOND_MODE_802_3AD {
		return m, true, nil
	}
	m.LACP = true
	m.ActorOper, m.PartnerOper = bs.AdActorOperPortState, uint8(bs.AdPartnerOperPortState)
	sys := bond.AdActorSystem
	if len(sys) != 6 || isZeroMAC(sys) {
		sys = bond.HardwareAddr
	}
	if len(sys) == 6 {
		m.ActorSystem = [6]byte(sys)
	}
	agg, partner, ok, err := r.bondADInfo(a.MasterIndex)
	if err != nil {
		return m, true, err
	}
	if ok && agg != 0 && int(agg) == m.Aggregator {
		m.ActiveAggregator, m.PartnerSystem = true, partner
	}
	m.Stats, m.StatsOK, err = r.lacpStats(ifindex)
	return m, true, err
}

func isZeroMAC(m net.HardwareAddr) bool {
	for _, b := range m {
		if b != 0 {
			return false
		}
	}
	return true
}

// lacpStats reads a bond member's 802.3ad PDU counters.
func (r *Reader) lacpStats(ifindex int) (s LACPStats, ok bool, err error) {
	attrs, err := r.getStats(ifindex, iflaStatsLinkXstatsSlave)
	if err != nil {
		return s, false, err
	}
	for _, a := range attrs {
		if a.Attr.Type&nl.NLA_TYPE_MASK != iflaStatsLinkXstatsSlave {
			continue
		}
		for _, x := range nested(a.Value, linkXstatsTypeBond) {
			for _, ad := range nested(x, bondXstats3AD) {
				v, err := nl.ParseRouteAttr(ad)
				if err != nil {
					return s, false, fmt.Errorf("linkstats: bond 3ad stats: %w", err)
				}
				var c [bond3ADStatCount]uint64
				for _, st := range v {
					if t := int(st.Attr.Type & nl.NLA_TYPE_MASK); t < bond3ADStatCount && len(st.Value) >= 8 {
						c[t] = binary.NativeEndian.Uint64(st.Value)
					}
				}
				return LACPStats{LACPDURx: c[bond3ADLACPDURx], LACPDUTx: c[bond3ADLACPDUTx],
					LACPDUUnknownRx: c[bond3ADLACPDUUnknownRx], LACPDUIllegalRx: c[bond3ADLACPDUIllegalRx],
					MarkerRx: c[bond3ADMarkerRx], MarkerTx: c[bond3ADMarkerTx], MarkerRespRx: c[bond3ADMarkerRespRx],
					MarkerRespTx: c[bond3ADMarkerRespTx], MarkerUnknownRx: c[bond3ADMarkerUnknownRx]}, true, nil
			}
		}
	}
	return s, false, nil
}

// VLANStats are the counters of one VLAN of a bridge (struct
// bridge_vlan_xstats): frames and bytes received and sent in the VLAN,
// as one VLAN entry of a port (or the bridge) counts them.
type VLANStats struct {
	VID                uint16
	RxBytes, RxPackets uint64
	TxBytes, TxPackets uint64
}

// PortVLANStats returns the per-VLAN counters of bridge port ifindex (or
// of the bridge itself, its own VLAN entries), which the kernel keeps
// only with vlan_stats_enabled 1 (otherwise it reports none). A port's
// are bridge extended statistics of a slave
// (IFLA_STATS_LINK_XSTATS_SLAVE), the bridge's its own
// (IFLA_STATS_LINK_XSTATS); both hold BRIDGE_XSTATS_VLAN entries.
func (r *Reader) PortVLANStats(ifindex int, isBridge bool) ([]VLANStats, error) {
	attr := uint32(iflaStatsLinkXstatsSlave)
	if isBridge {
		attr = iflaStatsLinkXstats
	}
	attrs, err := r.getStats(ifindex, attr)
	if err != nil {
		return nil, err
	}
	var out []VLANStats
	for _, a := range attrs {
		if uint32(a.Attr.Type&nl.NLA_TYPE_MASK) != attr {
			continue
		}
		for _, br := range nested(a.Value, linkXstatsTypeBridge) {
			for _, v := range nested(br, bridgeXstatsVLAN) {
				if len(v) < bridgeVLANXstatsLen {
					continue
				}
				e := binary.NativeEndian
				out = append(out, VLANStats{RxBytes: e.Uint64(v[0:8]), RxPackets: e.Uint64(v[8:16]),
					TxBytes: e.Uint64(v[16:24]), TxPackets: e.Uint64(v[24:32]), VID: e.Uint16(v[32:34])})
			}
		}
	}
	return out, nil
}

// nested returns the values of the attributes of type typ in b.
func nested(b []byte, typ uint16) [][]byte {
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return nil
	}
	var out [][]byte
	for _, a := range attrs {
		if a.Attr.Type&nl.NLA_TYPE_MASK == typ {
			out = append(out, a.Value)
		}
	}
	return out
}

// ifStatsMsg is struct if_stats_msg, RTM_GETSTATS's header.
type ifStatsMsg struct {
	Family     uint8
	_          uint8
	_          uint16
	IfIndex    uint32
	FilterMask uint32
}

func (m *ifStatsMsg) Len() int { return int(unsafe.Sizeof(*m)) }

func (m *ifStatsMsg) Serialize() []byte {
	return (*(*[unsafe.Sizeof(ifStatsMsg{})]byte)(unsafe.Pointer(m)))[:]
}

// getStats sends RTM_GETSTATS for ifindex asking for attribute attr and
// returns the reply's attributes.
func (r *Reader) getStats(ifindex int, attr uint32) ([]syscall.NetlinkRouteAttr, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETSTATS, 0)
	req.AddData(&ifStatsMsg{IfIndex: uint32(ifindex), FilterMask: 1 << (attr - 1)})
	return r.request(req, unix.RTM_NEWSTATS, int(unsafe.Sizeof(ifStatsMsg{})), ifindex)
}

// getLink sends RTM_GETLINK for ifindex and returns the reply's
// attributes.
func (r *Reader) getLink(ifindex int) ([]syscall.NetlinkRouteAttr, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, 0)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(ifindex)
	req.AddData(msg)
	return r.request(req, unix.RTM_NEWLINK, unix.SizeofIfInfomsg, ifindex)
}

// request sends req on the reader's raw socket and returns the
// attributes after the hdr-byte header of its answer of type resType.
func (r *Reader) request(req *nl.NetlinkRequest, resType uint16, hdr, ifindex int) ([]syscall.NetlinkRouteAttr, error) {
	if err := r.raw.Send(req); err != nil {
		return nil, fmt.Errorf("linkstats: netlink request for link %d: %w", ifindex, err)
	}
	for {
		msgs, _, err := r.raw.Receive()
		if err != nil {
			return nil, fmt.Errorf("linkstats: netlink answer for link %d: %w", ifindex, err)
		}
		for _, m := range msgs {
			if m.Header.Seq != req.Seq {
				continue // a late answer to an earlier request
			}
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
						return nil, fmt.Errorf("linkstats: netlink request for link %d: %w", ifindex, syscall.Errno(-e))
					}
				}
				return nil, errors.New("linkstats: netlink: empty answer")
			case resType:
				if len(m.Data) < hdr {
					return nil, errors.New("linkstats: netlink: short answer")
				}
				return nl.ParseRouteAttr(m.Data[hdr:])
			}
		}
	}
}

// bondADInfo reads a bond's IFLA_BOND_AD_INFO (its active aggregator
// and that aggregator's partner), which the netlink library (v1.3.1)
// leaves undecoded; ok is false when the kernel sends none (not 802.3ad,
// or no active aggregator).
func (r *Reader) bondADInfo(bond int) (agg uint16, partner [6]byte, ok bool, err error) {
	attrs, err := r.getLink(bond)
	if err != nil {
		return 0, partner, false, err
	}
	for _, a := range attrs {
		if a.Attr.Type&nl.NLA_TYPE_MASK != unix.IFLA_LINKINFO {
			continue
		}
		for _, data := range nested(a.Value, unix.IFLA_INFO_DATA) {
			for _, ai := range nested(data, unix.IFLA_BOND_AD_INFO) {
				fields, err := nl.ParseRouteAttr(ai)
				if err != nil {
					return 0, partner, false, fmt.Errorf("linkstats: bond %d AD info: %w", bond, err)
				}
				for _, f := range fields {
					switch f.Attr.Type & nl.NLA_TYPE_MASK {
					case unix.IFLA_BOND_AD_INFO_AGGREGATOR:
						if len(f.Value) >= 2 {
							agg, ok = binary.NativeEndian.Uint16(f.Value), true
						}
					case unix.IFLA_BOND_AD_INFO_PARTNER_MAC:
						if len(f.Value) >= 6 {
							partner = [6]byte(f.Value[:6])
						}
					}
				}
			}
		}
	}
	return agg, partner, ok, nil
}

// BridgeAttrs returns the bridges' attributes in the reader's namespace
// (internal/bridgeattr).
func (r *Reader) BridgeAttrs() (map[uint32]bridgeattr.Attrs, error) {
	return bridgeattr.Dump(r.raw)
}

// VLANCounters returns the counters of VLAN vid of the VLAN-filtering
// bridges of the reader's namespace that keep per-VLAN statistics
// (vlan_stats_enabled 1) and have the VLAN; ok is false when none has (the
// VLAN is gone, or its statistics are off). The kernel keeps a VLAN's
// counters in its bridge-wide entry, which every port's entry of the VLAN
// shares unless vlan_stats_per_port is on; the bridge reports that entry
// for itself only when it is a member of the VLAN (`bridge vlan add ...
// self`), so it is read through a member port: one port's entry, or with
// per-port statistics the sum of every member's (each frame is received
// by one port) and the bridge's own. Bridges with the VLAN add up.
func (r *Reader) VLANCounters(vid uint16) (s VLANStats, ok bool, err error) {
	attrs, err := r.BridgeAttrs()
	if err != nil {
		return s, false, err
	}
	s.VID = vid
	var links []netlink.Link
	for idx, ba := range attrs {
		if !ba.VLANFiltering || !ba.VLANStats {
			continue
		}
		if links == nil {
			if links, err = r.nl.LinkList(); err != nil {
				return s, false, fmt.Errorf("linkstats: listing links: %w", err)
			}
		}
		found := false
		for _, l := range links {
			a := l.Attrs()
			self := uint32(a.Index) == idx
			if uint32(a.MasterIndex) != idx && !self {
				continue
			}
			vs, err := r.PortVLANStats(a.Index, self)
			if err != nil {
				return s, false, err
			}
			for _, v := range vs {
				if v.VID != vid {
					continue
				}
				if !ba.VLANStatsPerPort && found {
					break // the shared entry, already counted
				}
				s.RxBytes += v.RxBytes
				s.RxPackets += v.RxPackets
				s.TxBytes += v.TxBytes
				s.TxPackets += v.TxPackets
				found, ok = true, true
			}
		}
	}
	return s, ok, nil
}
