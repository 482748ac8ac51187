package forwarding

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Ports of the synthetic VLAN bridge 1: 2 is an access port of VLAN 100
// (PVID 100 untagged), 3 a trunk (VLANs 100 and 200 tagged, native VLAN
// 300 as PVID untagged), 4 an access port of VLAN 200, 5 a port with no
// PVID (tagged 100 only). Bridge 6 is an 802.1ad (QinQ) bridge with ports
// 7 (PVID 1000, the customer port) and 8 (S-VLAN 1000 tagged). 9 is
// eth9, 10 its 802.1Q device eth9.42.
func vlanSnapshot() *snapshot {
	hostA := [6]byte{2, 0, 0, 0, 0, 0xa}
	hostB := [6]byte{2, 0, 0, 0, 0, 0xb}
	s := &snapshot{
		fdb: map[fdbKey]uint32{
			{1, 100, hostA}:  3, // A reached over the trunk in VLAN 100
			{1, 200, hostA}:  4, // the same MAC in VLAN 200: another port
			{1, 100, hostB}:  2,
			{6, 1000, hostB}: 8,
		},
		bridgeOf:    map[uint32]uint32{2: 1, 3: 1, 4: 1, 5: 1, 7: 6, 8: 6},
		ownMACs:     map[[6]byte]bool{{2, 0, 0, 0, 0, 0x01}: true},
		ownAddrs:    map[netip.Addr]bool{},
		floodPorts:  map[uint32]uint32{1: 4, 6: 2},
		vlanBridges: map[uint32]vlanBridge{1: {proto: tpid8021Q}, 6: {proto: tpid8021AD}},
		pvid:        map[uint32]uint16{2: 100, 3: 300, 4: 200, 7: 1000},
		member: map[vlanKey]bool{
			{2, 100}: true, {3, 100}: false, {3, 200}: false, {3, 300}: true,
			{4, 200}: true, {5, 100}: false, {7, 1000}: true, {8, 1000}: false,
		},
		floodVLANPorts: map[vlanKey]uint32{{1, 100}: 3, {1, 200}: 2, {1, 300}: 1, {6, 1000}: 2},
		untaggedVLAN:   map[uint32]uint16{2: 100, 3: 300, 4: 200, 7: 1000},
		vlanDevs:       map[uint32]vlanDev{10: {lower: 9, vid: 42, lowerIsPort: true}},
	}
	s.fib4.routes = map[netip.Prefix]*route{netip.MustParsePrefix("198.18.42.0/24"): {ifindex: 10}}
	s.fib4.lens = []int{24}
	return s
}

// frame is an IPv4 frame to dst with the given tags (TPID, TCI) in front.
func frame(dst [6]byte, tags ...[2]uint16) []byte {
	h := append([]byte{}, dst[:]...)
	h = append(h, 2, 0, 0, 0, 0, 0xee)
	for _, tg := range tags {
		h = binary.BigEndian.AppendUint16(h, tg[0])
		h = binary.BigEndian.AppendUint16(h, tg[1])
	}
	h = binary.BigEndian.AppendUint16(h, 0x0800)
	ip := make([]byte, 20)
	ip[0] = 0x45
	copy(ip[16:], []byte{198, 18, 42, 7})
	return append(h, ip...)
}

func TestForwardVLANs(t *testing.T) {
	tab := New(netns.None(), nil)
	tab.store(vlanSnapshot())
	hostA := [6]byte{2, 0, 0, 0, 0, 0xa}
	hostB := [6]byte{2, 0, 0, 0, 0, 0xb}
	unknown := [6]byte{2, 0, 0, 0, 0, 0xc}
	bcast := [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	own := [6]byte{2, 0, 0, 0, 0, 0x01}
	q := func(pcp, vid uint16) [2]uint16 { return [2]uint16{0x8100, pcp<<13 | vid} }
	ad := func(pcp, vid uint16) [2]uint16 { return [2]uint16{0x88a8, pcp<<13 | vid} }
	sw := func(sv, sp, dv, dp uint32) *sflow.ExtendedSwitch {
		return &sflow.ExtendedSwitch{SrcVLAN: sv, SrcPriority: sp, DstVLAN: dv, DstPriority: dp}
	}
	discarded := sflow.Interface{Format: sflow.InterfaceDiscarded, Value: DiscardVLAN}
	multi := func(n uint32) sflow.Interface { return sflow.Interface{Format: sflow.InterfaceMultiple, Value: n} }
	for _, c := range []struct {
		name   string
		in     uint32
		header []byte
		out    sflow.Interface
		sw     *sflow.ExtendedSwitch // nil: no extended_switch
	}{
		{"untagged on access port PVID 100", 2, frame(hostA), sflow.IfIndex(3), sw(100, 0, 100, 0)},
		{"priority-tagged (VID 0, PCP 5) on access port", 2, frame(hostA, q(5, 0)), sflow.IfIndex(3), sw(100, 5, 100, 5)},
		{"tagged 200 on the trunk: FDB of VLAN 200", 3, frame(hostA, q(3, 200)), sflow.IfIndex(4), sw(200, 3, 200, 3)},
		{"tagged 100 on the trunk", 3, frame(hostB, q(0, 100)), sflow.IfIndex(2), sw(100, 0, 100, 0)},
		{"untagged on the trunk: native VLAN 300", 3, frame(unknown), multi(0), sw(300, 0, 300, 0)},
		{"untagged on access port 200: flood in VLAN 200", 4, frame(unknown), multi(1), sw(200, 0, 200, 0)},
		{"broadcast in VLAN 100", 2, frame(bcast), multi(2), sw(100, 0, 100, 0)},
		{"802.1ad tag on an 802.1Q bridge: payload, PVID", 2, frame(hostA, ad(6, 7)), sflow.IfIndex(3), sw(100, 0, 100, 0)},
		{"tagged 200 on access port 100: not a member, dropped", 2, frame(hostA, q(0, 200)), discarded, sw(200, 0, 200, 0)},
		{"untagged on a port without PVID: dropped, no VLAN", 5, frame(hostA), discarded, nil},
		{"QinQ: S-tag 1000 over C-tag 10 on the 802.1ad bridge", 8, frame(unknown, ad(2, 1000), q(4, 10)), multi(1), sw(1000, 2, 1000, 2)},
		{"QinQ: C-tagged frame on the customer port takes the PVID", 7, frame(hostB, q(4, 10)), sflow.IfIndex(8), sw(1000, 0, 1000, 0)},
		{"routed from VLAN 100 out of eth9.42: eth9, VLAN 42", 2, frame(own), sflow.IfIndex(9), sw(100, 0, 42, 0)},
		{"tagged frame off any bridge", 9, frame(hostA, q(1, 42)), sflow.Interface{}, sw(42, 1, 42, 1)},
		{"untagged frame off any bridge", 9, frame(hostA), sflow.Interface{}, nil},
	} {
		var got sflow.ExtendedSwitch
		out, ok := tab.Forward(c.in, c.header, &got)
		if out != c.out {
			t.Errorf("%s: output %+v, want %+v", c.name, out, c.out)
		}
		switch {
		case c.sw == nil && ok:
			t.Errorf("%s: extended_switch %+v, want none", c.name, got)
		case c.sw != nil && !ok:
			t.Errorf("%s: no extended_switch, want %+v", c.name, *c.sw)
		case c.sw != nil && got != *c.sw:
			t.Errorf("%s: extended_switch %+v, want %+v", c.name, got, *c.sw)
		}
		if o := tab.Output(c.in, c.header); o != c.out {
			t.Errorf("%s: Output %+v, Forward %+v", c.name, o, c.out)
		}
	}

	var got sflow.ExtendedSwitch
	if !tab.EgressSwitch(2, frame(hostA), &got) || got != *sw(100, 0, 100, 0) {
		t.Errorf("egress untagged on access port 100: %+v", got)
	}
	if !tab.EgressSwitch(3, frame(hostA, q(2, 200)), &got) || got != *sw(200, 2, 200, 2) {
		t.Errorf("egress tagged 200 on the trunk: %+v", got)
	}
	if tab.EgressSwitch(9, frame(hostA), &got) {
		t.Errorf("egress untagged off a bridge: %+v, want none", got)
	}
	h := frame(hostA, q(3, 200))
	if n := testing.AllocsPerRun(100, func() { tab.Forward(3, h, &got) }); n != 0 {
		t.Errorf("Forward allocates %.0f times per call", n)
	}
}

// BenchmarkForwardVLAN is the per-sample lookup on a VLAN-filtering
// bridge: a tagged frame on a trunk, FDB hit in its VLAN.
func BenchmarkForwardVLAN(b *testing.B) {
	tab := New(netns.None(), nil)
	tab.store(vlanSnapshot())
	h := frame([6]byte{2, 0, 0, 0, 0, 0xa}, [2]uint16{0x8100, 3<<13 | 200})
	var sw sflow.ExtendedSwitch
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		tab.Forward(3, h, &sw)
	}
}
