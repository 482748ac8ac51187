package forwarding

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// routerTable is a Table with one copy of the routes, of generation 7:
// 198.18.64.0/20 via 198.18.2.2 on port 5, 198.18.1.0/24 connected on
// port 4; the host owns MAC 02:00:00:00:00:01 and 198.18.1.1.
func routerTable(t *testing.T) (*Table, [6]byte) {
	t.Helper()
	own := [6]byte{2, 0, 0, 0, 0, 1}
	s := &snapshot{
		ownMACs:  map[[6]byte]bool{own: true},
		ownAddrs: map[netip.Addr]bool{netip.MustParseAddr("198.18.1.1"): true},
		gen:      7, genOK: true,
	}
	s.fib4.routes = map[netip.Prefix]*route{
		netip.MustParsePrefix("198.18.64.0/20"): {prefix: netip.MustParsePrefix("198.18.64.0/20"), ifindex: 5,
			hops: []nexthop{{oif: 5, gw: netip.MustParseAddr("198.18.2.2")}}},
		netip.MustParsePrefix("198.18.1.0/24"): {prefix: netip.MustParsePrefix("198.18.1.0/24"), ifindex: 4,
			hops: []nexthop{{oif: 4}}},
	}
	s.fib4.lens = []int{24, 20}
	tb := New(0, nil)
	tb.store(s)
	return tb, own
}

// ipv4Frame is an Ethernet + IPv4 header from src to dst, to MAC dstMAC
// from srcMAC.
func ipv4Frame(dstMAC, srcMAC [6]byte, src, dst string) []byte {
	h := make([]byte, 34)
	copy(h[0:6], dstMAC[:])
	copy(h[6:12], srcMAC[:])
	binary.BigEndian.PutUint16(h[12:], 0x0800)
	h[14] = 0x45
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(h[26:30], s[:])
	copy(h[30:34], d[:])
	return h
}

// TestRouter: the record is filled only when the sample's generation has
// a copy and the copy's longest matches have the kernel's next hops; a
// directly connected destination gets the unspecified next hop; every
// other case says why not, and none allocates.
func TestRouter(t *testing.T) {
	tb, own := routerTable(t)
	other := [6]byte{2, 0, 0, 0, 0, 9}
	gw := netip.MustParseAddr("198.18.2.2")
	src, dst := netip.MustParseAddr("198.18.1.2"), netip.MustParseAddr("198.18.64.5")
	ok := RouterQuery{Asked: true, Gen: 7, GenOK: true,
		Dst: Answer{Found: true, Oif: 5, Via: gw}, Src: Answer{Found: true, Oif: 4, Via: src}}
	routedIn := ipv4Frame(own, other, src.String(), dst.String())
	for _, c := range []struct {
		name   string
		header []byte
		q      RouterQuery
		want   RouterResult
		rec    sflow.ExtendedRouter
	}{
		{"routed", routedIn, ok, RouterOK, sflow.ExtendedRouter{NextHop: gw, SrcMaskLen: 24, DstMaskLen: 20}},
		{"bridged (not our MAC)", ipv4Frame(other, other, src.String(), dst.String()), ok, RouterNotRouted, sflow.ExtendedRouter{}},
		{"to this host", ipv4Frame(own, other, src.String(), "198.18.1.1"), ok, RouterNotRouted, sflow.ExtendedRouter{}},
		{"no route", routedIn, func() RouterQuery { q := ok; q.Dst.Found = false; return q }(), RouterNoRoute, sflow.ExtendedRouter{}},
		{"no generation", routedIn, func() RouterQuery { q := ok; q.GenOK = false; return q }(), RouterNoGen, sflow.ExtendedRouter{}},
		{"newer generation", routedIn, func() RouterQuery { q := ok; q.Gen = 8; return q }(), RouterStale, sflow.ExtendedRouter{}},
		{"another gateway", routedIn, func() RouterQuery { q := ok; q.Dst.Via = netip.MustParseAddr("198.18.2.3"); return q }(), RouterMismatch, sflow.ExtendedRouter{}},
		{"another port", routedIn, func() RouterQuery { q := ok; q.Dst.Oif = 6; return q }(), RouterMismatch, sflow.ExtendedRouter{}},
		{"egress, routed here", ipv4Frame(other, own, src.String(), dst.String()),
			func() RouterQuery { q := ok; q.Egress, q.In = true, 4; return q }(), RouterOK, sflow.ExtendedRouter{NextHop: gw, SrcMaskLen: 24, DstMaskLen: 20}},
		{"egress, made here", ipv4Frame(other, own, src.String(), dst.String()),
			func() RouterQuery { q := ok; q.Egress = true; return q }(), RouterNotRouted, sflow.ExtendedRouter{}},
		{"connected destination", ipv4Frame(own, other, "198.18.64.9", src.String()),
			RouterQuery{Asked: true, Gen: 7, GenOK: true, Dst: Answer{Found: true, Oif: 4, Via: src},
				Src: Answer{Found: true, Oif: 5, Via: gw}}, RouterOK,
			sflow.ExtendedRouter{NextHop: netip.IPv4Unspecified(), SrcMaskLen: 20, DstMaskLen: 24}},
	} {
		var r sflow.ExtendedRouter
		if got := tb.Router(c.header, &c.q, &r); got != c.want || r != c.rec {
			t.Errorf("%s: %v %+v, want %v %+v", c.name, got, r, c.want, c.rec)
		}
	}
	var r sflow.ExtendedRouter
	if a := testing.AllocsPerRun(100, func() { tb.Router(routedIn, &ok, &r) }); a != 0 {
		t.Errorf("%.1f allocations per Router", a)
	}
}
