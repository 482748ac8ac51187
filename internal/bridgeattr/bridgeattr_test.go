package bridgeattr

import (
	"encoding/binary"
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// newLink builds an RTM_NEWLINK message body for ifindex 7 of kind with
// the given IFLA_INFO_DATA attributes, as the kernel sends it.
func newLink(kind string, data ...*nl.RtAttr) []byte {
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = 7
	b := msg.Serialize()
	info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	info.AddRtAttr(unix.IFLA_INFO_KIND, append([]byte(kind), 0))
	d := info.AddRtAttr(unix.IFLA_INFO_DATA, nil)
	for _, a := range data {
		d.AddChild(a)
	}
	return append(b, info.Serialize()...)
}

func TestParseBridgeLink(t *testing.T) {
	proto := make([]byte, 2)
	binary.BigEndian.PutUint16(proto, 0x88a8) // __be16, as the kernel puts it
	idx, ba, ok := parseBridgeLink(newLink("bridge",
		nl.NewRtAttr(nl.IFLA_BR_VLAN_FILTERING, []byte{1}),
		nl.NewRtAttr(nl.IFLA_BR_VLAN_PROTOCOL, proto),
		nl.NewRtAttr(nl.IFLA_BR_VLAN_STATS_ENABLED, []byte{1}),
		nl.NewRtAttr(unix.IFLA_BR_VLAN_STATS_PER_PORT, []byte{0})))
	want := Attrs{VLANFiltering: true, VLANProtocol: 0x88a8, VLANStats: true}
	if !ok || idx != 7 || ba != want {
		t.Errorf("802.1ad bridge: %d %+v %v, want 7 %+v", idx, ba, ok, want)
	}
	if _, ba, ok := parseBridgeLink(newLink("bridge")); !ok || ba != (Attrs{VLANProtocol: 0x8100}) {
		t.Errorf("bridge without attributes: %+v %v, want 802.1Q, no filtering", ba, ok)
	}
	if _, _, ok := parseBridgeLink(newLink("bond")); ok {
		t.Errorf("a bond read as a bridge")
	}
	for n := 0; n < 40; n++ { // truncated messages never panic
		b := newLink("bridge", nl.NewRtAttr(nl.IFLA_BR_VLAN_PROTOCOL, proto))
		parseBridgeLink(b[:min(n, len(b))])
	}
}
