package forwarding

import (
	"net/netip"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestRoutedTags checks that a routed frame's destination is found behind
// any stack of VLAN tags (802.1Q, 802.1ad, 0x9100), and that a frame whose
// header ends inside a tag or its IP header is reported unknown.
func TestRoutedTags(t *testing.T) {
	pfx := netip.MustParsePrefix("198.18.7.0/24")
	s := &snapshot{
		ownAddrs: map[netip.Addr]bool{},
		fib4:     fib{routes: map[netip.Prefix]*route{pfx: {prefix: pfx, ifindex: 7}}, lens: []int{24}},
	}
	ipv4 := make([]byte, 20)
	ipv4[0] = 0x45
	copy(ipv4[16:], []byte{198, 18, 7, 9})
	mk := func(words ...byte) []byte {
		f := append(make([]byte, 12), words...)
		return append(f, ipv4...)
	}
	want := sflow.IfIndex(7)
	for name, f := range map[string][]byte{
		"untagged":           mk(0x08, 0x00),
		"802.1Q":             mk(0x81, 0x00, 0, 5, 0x08, 0x00),
		"802.1ad+802.1Q":     mk(0x88, 0xa8, 0, 5, 0x81, 0x00, 0, 6, 0x08, 0x00),
		"0x9100+802.1Q":      mk(0x91, 0x00, 0, 5, 0x81, 0x00, 0, 6, 0x08, 0x00),
		"three stacked tags": mk(0x88, 0xa8, 0, 5, 0x91, 0x00, 0, 6, 0x81, 0x00, 0, 7, 0x08, 0x00),
	} {
		if got := s.routed(f); got != want {
			t.Errorf("%s: routed = %+v, want %+v", name, got, want)
		}
	}
	tagged := mk(0x91, 0x00, 0, 5, 0x08, 0x00)
	for _, n := range []int{0, 13, 16, 18 + 19} {
		if got := s.routed(tagged[:n]); got != (sflow.Interface{}) {
			t.Errorf("header cut at %d bytes: routed = %+v, want unknown", n, got)
		}
	}
}
