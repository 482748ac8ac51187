package forwarding

// VLANs of a sampled frame (extended_switch, sflow_version_5.txt "Extended
// Switch Data"), as the kernel's bridge classifies and forwards it.
//
// On a VLAN-filtering bridge (vlan_filtering 1) a frame belongs to the
// VLAN the bridge assigns at ingress (br_allowed_ingress): the VID of its
// outer tag when that tag is of the bridge's protocol (vlan_protocol,
// 802.1Q by default, 802.1ad for a QinQ bridge) and not 0; otherwise
// (untagged, priority-tagged with VID 0, or tagged with another
// protocol, which the bridge treats as payload) the ingress port's PVID.
// A port without a PVID drops untagged frames, and a port that is not a
// member of the VLAN drops the frame (ingress filtering): the bridge
// discards them, and the sample says so (output "discarded").
//
// The Linux bridge does not translate VLANs, so a bridged frame leaves in
// the VLAN it was assigned: dst_vlan = src_vlan, tagged or untagged on the
// egress port alike (extended_switch has no field for the tagging; a
// collector reads the VLAN, not what the wire carried). The priorities are
// the tag's PCP, or 0, the default priority (the Linux bridge has no
// per-port default priority; 802.1Q's default is 0). The output port is
// the FDB entry of that VLAN; a frame to an unknown or group MAC is
// flooded to the VLAN's other member ports (format 2 with their count).
//
// A frame routed by the switch (sent to its own MAC) leaves in the VLAN
// of its output interface when that is an 802.1Q device (eth1.200 or
// br0.200); such a device's frames cross its lower port, which the sample
// names as the output when the lower device is a port (not a bridge).
// Off a VLAN-filtering bridge, a tagged frame reports its outer tag as
// both VLANs (a non-filtering bridge and a plain port do not change it).

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sflowswitchd/sflowswitchd/internal/bridgeattr"
	"github.com/sflowswitchd/sflowswitchd/internal/ethernet"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TPIDs of the bridge's vlan_protocol.
const (
	tpid8021Q  uint16 = 0x8100
	tpid8021AD uint16 = 0x88a8
)

// DiscardVLAN is the flow_sample output's discard reason (format 1) of a
// frame the bridge drops at ingress for VLAN membership: the port has no
// PVID for an untagged frame, or is not a member of the frame's VLAN.
// sflow_version_5.txt lists ICMP codes and 256-262 for the reason;
// none names VLAN filtering, so it is 256 ("unknown"), as the spec says
// for any other reason. The drop notification carries the kernel's own
// reason.
const DiscardVLAN = 256

// vlanBridge is a VLAN-filtering bridge.
type vlanBridge struct {
	proto uint16 // vlan_protocol: tpid8021Q or tpid8021AD
}

// vlanKey is a port's (or the bridge's own) membership in a VLAN.
type vlanKey struct {
	port uint32
	vid  uint16
}

// vlanDev is an 802.1Q/802.1ad device (eth1.100): its lower device and
// VID.
type vlanDev struct {
	lower uint32
	vid   uint16
	// lowerIsPort tells the lower device is a port (not a bridge): a frame
	// sent through the VLAN device crosses it.
	lowerIsPort bool
}

// Forward returns the egress of a frame that arrived on port in (as
// Output) and fills sw with its VLANs and priorities where they are known
// (swOK). It does not allocate.
func (t *Table) Forward(in uint32, header []byte, sw *sflow.ExtendedSwitch) (out sflow.Interface, swOK bool) {
	if len(header) < 14 {
		return sflow.Interface{}, false
	}
	s := t.snap.Load()
	eh, _ := ethernet.Parse(header)
	bridge := s.bridgeOf[in]
	if vb, ok := s.vlanBridges[bridge]; ok && bridge != 0 {
		return s.forwardVLAN(in, bridge, vb, header, &eh, sw)
	}
	out = s.output(in, bridge, 0, header)
	if eh.Tags == 0 {
		return out, false
	}
	vid, prio := uint32(eh.Outer.VID()), uint32(eh.Outer.PCP())
	*sw = sflow.ExtendedSwitch{SrcVLAN: vid, SrcPriority: prio, DstVLAN: vid, DstPriority: prio}
	if s.ownMACs[[6]byte(header[0:6])] {
		// Routed: it leaves in the VLAN of its output device, if any.
		sw.DstVLAN = 0
		out = s.lowerPort(out, sw)
	}
	return out, true
}

// forwardVLAN is Forward on a VLAN-filtering bridge.
func (s *snapshot) forwardVLAN(in, bridge uint32, vb vlanBridge, h []byte, eh *ethernet.Header, sw *sflow.ExtendedSwitch) (sflow.Interface, bool) {
	var vid uint16
	var prio uint8
	tagged := eh.Tags > 0 && eh.Outer.TPID == vb.proto
	if tagged {
		vid, prio = eh.Outer.VID(), eh.Outer.PCP()
	}
	if vid == 0 { // untagged, priority-tagged, or a tag of another protocol
		pvid, ok := s.pvid[in]
		if !ok {
			// No PVID: the bridge drops the frame; no VLAN was assigned.
			return sflow.Interface{Format: sflow.InterfaceDiscarded, Value: DiscardVLAN}, false
		}
		vid = pvid
	}
	*sw = sflow.ExtendedSwitch{SrcVLAN: uint32(vid), SrcPriority: uint32(prio), DstVLAN: uint32(vid), DstPriority: uint32(prio)}
	if _, member := s.member[vlanKey{in, vid}]; !member {
		return sflow.Interface{Format: sflow.InterfaceDiscarded, Value: DiscardVLAN}, true
	}
	dst := [6]byte(h[0:6])
	if s.ownMACs[dst] {
		sw.DstVLAN = 0
		return s.lowerPort(s.routed(h), sw), true
	}
	return s.output(in, bridge, vid, h), true
}

// output is Output's lookup in VLAN vid of bridge (0: not VLAN-filtering).
func (s *snapshot) output(in, bridge uint32, vid uint16, h []byte) sflow.Interface {
	dst := [6]byte(h[0:6])
	if dst[0]&1 != 0 { // group address
		return s.floodVLAN(bridge, vid)
	}
	if s.ownMACs[dst] {
		return s.routed(h)
	}
	if bridge == 0 {
		return sflow.Interface{}
	}
	if port, ok := s.fdb[fdbKey{bridge, vid, dst}]; ok {
		return sflow.IfIndex(port)
	}
	return s.floodVLAN(bridge, vid)
}

// floodVLAN is a flood in VLAN vid of bridge (vid 0: the whole bridge).
func (s *snapshot) floodVLAN(bridge uint32, vid uint16) sflow.Interface {
	if vid == 0 {
		return s.flood(bridge)
	}
	var n uint32
	if c := s.floodVLANPorts[vlanKey{bridge, vid}]; c > 1 {
		n = c - 1 // every other up member port of the VLAN
	}
	return sflow.Interface{Format: sflow.InterfaceMultiple, Value: n}
}

// lowerPort turns a routed output through an 802.1Q device into its VLAN
// (sw.DstVLAN) and, when the device sits on a port, that port: the frame
// crosses the port, tagged.
func (s *snapshot) lowerPort(out sflow.Interface, sw *sflow.ExtendedSwitch) sflow.Interface {
	if out.Format != sflow.InterfaceSingle {
		return out
	}
	d, ok := s.vlanDevs[out.Value]
	if !ok {
		return out
	}
	sw.DstVLAN = uint32(d.vid)
	if d.lowerIsPort {
		return sflow.IfIndex(d.lower)
	}
	return out
}

// EgressSwitch fills sw for a frame sampled leaving port out (egress
// sampling): the VLAN of its outer tag; an untagged frame leaving a port
// of a VLAN-filtering bridge left in the port's one egress-untagged VLAN,
// when the port has exactly one (usually its PVID). Otherwise swOK is
// false: the VLAN is not known.
func (t *Table) EgressSwitch(out uint32, header []byte, sw *sflow.ExtendedSwitch) (swOK bool) {
	s := t.snap.Load()
	eh, _ := ethernet.Parse(header)
	if eh.Tags > 0 {
		vid, prio := uint32(eh.Outer.VID()), uint32(eh.Outer.PCP())
		*sw = sflow.ExtendedSwitch{SrcVLAN: vid, SrcPriority: prio, DstVLAN: vid, DstPriority: prio}
		return true
	}
	vid, ok := s.untaggedVLAN[out]
	if !ok {
		return false
	}
	*sw = sflow.ExtendedSwitch{SrcVLAN: uint32(vid), DstVLAN: uint32(vid)}
	return true
}

// readVLANs reads the VLAN state of the namespace into s: the
// VLAN-filtering bridges and their protocols, the ports' VLANs (the
// library's BridgeVlanList: `bridge vlan show`) and the 802.1Q devices.
func (s *snapshot) readVLANs(h *netlink.Handle, ns netns.NsHandle, links []netlink.Link) error {
	s.vlanBridges = map[uint32]vlanBridge{}
	s.pvid = map[uint32]uint16{}
	s.member = map[vlanKey]bool{}
	s.floodVLANPorts = map[vlanKey]uint32{}
	s.untaggedVLAN = map[uint32]uint16{}
	s.vlanDevs = map[uint32]vlanDev{}
	attrs, err := bridgeattr.Read(ns)
	if err != nil {
		return fmt.Errorf("forwarding: %w", err)
	}
	filtering := false
	for idx, ba := range attrs {
		if ba.VLANFiltering {
			s.vlanBridges[idx] = vlanBridge{proto: ba.VLANProtocol}
			filtering = true
		}
	}
	byIndex := map[uint32]netlink.Link{}
	for _, l := range links {
		byIndex[uint32(l.Attrs().Index)] = l
	}
	for _, l := range links {
		v, ok := l.(*netlink.Vlan)
		if !ok {
			continue
		}
		d := vlanDev{lower: uint32(v.ParentIndex), vid: uint16(v.VlanId)}
		if lower, ok := byIndex[d.lower]; ok {
			_, isBridge := lower.(*netlink.Bridge)
			d.lowerIsPort = !isBridge
		}
		s.vlanDevs[uint32(v.Index)] = d
	}
	if !filtering {
		return nil
	}
	vl, err := h.BridgeVlanList()
	if err != nil {
		return fmt.Errorf("forwarding: listing bridge VLANs: %w", err)
	}
	untagged := map[uint32]int{}
	for idx, infos := range vl {
		port := uint32(idx)
		l := byIndex[port]
		if l == nil {
			continue
		}
		bridge := uint32(l.Attrs().MasterIndex)
		if _, isBridge := l.(*netlink.Bridge); isBridge {
			bridge = port // the bridge's own VLANs (its "self" port)
		}
		if _, ok := s.vlanBridges[bridge]; !ok {
			continue
		}
		up := l.Attrs().Flags&net.FlagUp != 0 && bridge != port
		for _, vi := range infos {
			vid := vi.Vid
			s.member[vlanKey{port, vid}] = vi.EngressUntag()
			if vi.PortVID() {
				s.pvid[port] = vid
			}
			if vi.EngressUntag() {
				untagged[port]++
				s.untaggedVLAN[port] = vid
			}
			if up {
				s.floodVLANPorts[vlanKey{bridge, vid}]++
			}
		}
	}
	for port, n := range untagged {
		if n != 1 {
			delete(s.untaggedVLAN, port)
		}
	}
	return nil
}
