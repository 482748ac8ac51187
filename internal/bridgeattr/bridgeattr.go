// Package bridgeattr reads what the agent needs of a Linux bridge beyond
// what the netlink library (v1.3.1) decodes: VLAN filtering, the VLAN
// protocol and the per-VLAN statistics switches. The forwarding lookup
// (VLAN classification) and the VLAN counters both use it.
package bridgeattr

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Attrs is what the agent reads of a bridge beyond what the netlink
// library decodes: whether it filters VLANs (IFLA_BR_VLAN_FILTERING), its
// VLAN protocol (IFLA_BR_VLAN_PROTOCOL: 0x8100, or 0x88a8 for an 802.1ad
// bridge) and whether it keeps per-VLAN statistics
// (IFLA_BR_VLAN_STATS_ENABLED).
type Attrs struct {
	VLANFiltering bool
	VLANProtocol  uint16
	VLANStats     bool
	// VLANStatsPerPort (IFLA_BR_VLAN_STATS_PER_PORT): each port's VLAN
	// entry counts its own frames; off (the default), every port's entry
	// of a VLAN shares the VLAN's one set of counters.
	VLANStatsPerPort bool
}

// Read dumps the links of namespace ns (netns.None(): the
// calling thread's) and returns the attributes above for each bridge, by
// ifindex. The library (v1.3.1) parses IFLA_BR_VLAN_FILTERING but neither
// of the two others, so this is a plain RTM_GETLINK dump through its
// socket type.
func Read(ns netns.NsHandle) (map[uint32]Attrs, error) {
	sock, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("bridge attributes: netlink socket: %w", err)
	}
	defer sock.Close()
	return Dump(sock)
}

// Dump is Read on an open netlink route socket (its namespace).
func Dump(sock *nl.NetlinkSocket) (map[uint32]Attrs, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_DUMP)
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
	if err := sock.Send(req); err != nil {
		return nil, fmt.Errorf("bridge attributes: link dump: %w", err)
	}
	out := map[uint32]Attrs{}
	for {
		msgs, _, err := sock.Receive()
		if err != nil {
			return nil, fmt.Errorf("bridge attributes: link dump: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
						return nil, fmt.Errorf("bridge attributes: link dump: %w", syscall.Errno(-e))
					}
				}
				return out, nil
			case unix.RTM_NEWLINK:
				if idx, ba, ok := parseBridgeLink(m.Data); ok {
					out[idx] = ba
				}
			}
		}
	}
}

// parseBridgeLink reads an RTM_NEWLINK message's bridge attributes; ok is
// false for a link that is not a bridge.
func parseBridgeLink(b []byte) (idx uint32, ba Attrs, ok bool) {
	if len(b) < unix.SizeofIfInfomsg {
		return 0, ba, false
	}
	msg := nl.DeserializeIfInfomsg(b)
	attrs, err := nl.ParseRouteAttr(b[unix.SizeofIfInfomsg:])
	if err != nil {
		return 0, ba, false
	}
	ba.VLANProtocol = 0x8100 // the default, IEEE 802.1Q
	for _, a := range attrs {
		if a.Attr.Type != unix.IFLA_LINKINFO {
			continue
		}
		info, err := nl.ParseRouteAttr(a.Value)
		if err != nil {
			return 0, ba, false
		}
		var data []byte
		for _, i := range info {
			switch i.Attr.Type {
			case unix.IFLA_INFO_KIND:
				ok = string(trimNul(i.Value)) == "bridge"
			case unix.IFLA_INFO_DATA:
				data = i.Value
			}
		}
		if !ok {
			return 0, ba, false
		}
		br, err := nl.ParseRouteAttr(data)
		if err != nil {
			return 0, ba, false
		}
		for _, d := range br {
			switch d.Attr.Type {
			case nl.IFLA_BR_VLAN_PROTOCOL: // __be16
				if len(d.Value) >= 2 {
					ba.VLANProtocol = binary.BigEndian.Uint16(d.Value)
				}
			case nl.IFLA_BR_VLAN_STATS_ENABLED:
				ba.VLANStats = len(d.Value) >= 1 && d.Value[0] != 0
			case unix.IFLA_BR_VLAN_STATS_PER_PORT:
				ba.VLANStatsPerPort = len(d.Value) >= 1 && d.Value[0] != 0
			case nl.IFLA_BR_VLAN_FILTERING:
				ba.VLANFiltering = len(d.Value) >= 1 && d.Value[0] != 0
			}
		}
	}
	return uint32(msg.Index), ba, ok
}

func trimNul(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}
