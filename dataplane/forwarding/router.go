package forwarding

// extended_router (sflow_version_5.txt, "IP Route Next Hop"): the next
// hop and the prefix lengths of the routes matching a routed packet's
// destination and source.
//
// The kernel answers the sampler at sample time (dataplane/bpf/route.h,
// bpf_fib_lookup): for each of the packet's addresses, whether a route
// matched, its output port and its gateway (or the address itself for a
// directly connected route). It does not tell the prefix length. That
// comes from this table's copy of the routes, under two conditions that
// keep a sample from naming a route that was not in force when it was
// taken:
//
//   - the copy was read at the FIB generation the sample saw (the count of
//     FIB changes in the namespace, dataplane/bpf/fibgen.c; read before and after
//     the dump, equal); the last few copies are kept for samples taken
//     just before a change;
//   - the copy's longest match for each address has a next hop equal to
//     the kernel's answer (same output port, same gateway or none).
//
// Otherwise the sample goes without extended_router and the reason is
// counted (RouterResult).

import (
	"net/netip"

	"github.com/sflowswitchd/sflowswitchd/internal/ethernet"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// nexthop is one next hop of a route: its output port and gateway (the
// zero Addr for a directly connected route).
type nexthop struct {
	oif uint32
	gw  netip.Addr
}

// fib is one family's unicast routes of the main table for longest-prefix
// matching: by prefix, with the prefix lengths present, longest first.
type fib struct {
	routes map[netip.Prefix]*route
	lens   []int
}

// match returns the longest route containing a, nil if none. No
// allocation: a masked netip.Prefix is a map key by value.
func (f *fib) match(a netip.Addr) *route {
	for _, l := range f.lens {
		p, err := a.Prefix(l)
		if err != nil {
			continue
		}
		if r := f.routes[p]; r != nil {
			return r
		}
	}
	return nil
}

// Answer is the kernel's answer to one route lookup of a sampled packet
// (dataplane/bpf/route.h): whether a route with a next hop matched, its output
// port, and its gateway or, for a directly connected route, the looked-up
// address itself.
type Answer struct {
	Found bool
	Oif   uint32
	Via   netip.Addr
}

// RouterQuery is what a sample tells of its packet's routes: the kernel's
// answers for its destination and source, and the FIB generation both
// lookups saw (GenOK false: unknown).
type RouterQuery struct {
	Asked  bool   // the sampler asked the FIB (an IPv4 or IPv6 packet)
	Egress bool   // sampled leaving the port (its source MAC is then ours)
	In     uint32 // the port it came in on (0: made on this host)
	Gen    uint32
	GenOK  bool
	Dst    Answer
	Src    Answer
}

// RouterResult says what became of a sample's extended_router.
type RouterResult int

// Router results: RouterOK filled the record; the others say why not.
const (
	RouterOK        RouterResult = iota
	RouterNotRouted              // not an IP packet this host routes (bridged, local, non-IP)
	RouterNoRoute                // the kernel found no route with a next hop (to the destination or back to the source)
	RouterNoGen                  // the sample's FIB generation is unknown (a change during its lookups, or no counter)
	RouterStale                  // no copy of the routes at the sample's generation (a change not read yet)
	RouterMismatch               // the copy's longest match disagrees with the kernel's answer
	// RouterResultCount is the number of results (for arrays of counters).
	RouterResultCount
)

// String names the result (metric label values).
func (r RouterResult) String() string {
	switch r {
	case RouterOK:
		return "ok"
	case RouterNotRouted:
		return "not_routed"
	case RouterNoRoute:
		return "no_route"
	case RouterNoGen:
		return "no_generation"
	case RouterStale:
		return "stale"
	case RouterMismatch:
		return "mismatch"
	}
	return "unknown"
}

// RouterResults lists every result, for metrics.
func RouterResults() []RouterResult {
	out := make([]RouterResult, RouterResultCount)
	for i := range out {
		out[i] = RouterResult(i)
	}
	return out
}

// history is the current copy of the tables and the few before it.
type history struct {
	snaps [historyLen]*snapshot // [0] current
}

// historyLen copies are kept: a sample taken just before a change and
// read after the table was re-read still finds its generation's copy.
const historyLen = 4

// Router fills r with the extended_router of a packet whose first bytes
// are header, sampled as q says, when this host routed it: received for
// one of its own MACs (ingress) or sent with one of them as source after
// coming in on a port (egress), an IPv4 or IPv6 packet not addressed to
// this host. It does not allocate.
func (t *Table) Router(header []byte, q *RouterQuery, r *sflow.ExtendedRouter) RouterResult {
	s := t.snap.Load()
	src, dst, ok := ipAddrs(header)
	if !ok || len(header) < 12 {
		return RouterNotRouted
	}
	if q.Egress {
		if q.In == 0 || !s.ownMACs[[6]byte(header[6:12])] {
			return RouterNotRouted
		}
	} else if !s.ownMACs[[6]byte(header[0:6])] || s.ownAddrs[dst] {
		return RouterNotRouted
	}
	if !q.Dst.Found || !q.Src.Found {
		return RouterNoRoute
	}
	if !q.GenOK {
		return RouterNoGen
	}
	h := t.hist.Load()
	var at *snapshot
	for _, c := range h.snaps {
		if c != nil && c.genOK && c.gen == q.Gen {
			at = c
			break
		}
	}
	if at == nil {
		if cur := h.snaps[0]; cur == nil || !cur.genOK || int32(q.Gen-cur.gen) > 0 {
			t.poke() // a change the table has not read yet
		}
		return RouterStale
	}
	f := &at.fib4
	if dst.Is6() {
		f = &at.fib6
	}
	dr, sr := f.match(dst), f.match(src)
	if dr == nil || sr == nil || !dr.agrees(dst, q.Dst) || !sr.agrees(src, q.Src) {
		return RouterMismatch
	}
	// The next hop is the gateway; a directly connected route has none:
	// the unspecified address of the family (RFC 2096 ipForwardNextHop
	// "0.0.0.0" for a local route; never the UNKNOWN address type, which
	// common decoders refuse).
	r.NextHop = q.Dst.Via
	if !dr.viaGateway(dst, q.Dst) {
		r.NextHop = netip.IPv4Unspecified()
		if dst.Is6() {
			r.NextHop = netip.IPv6Unspecified()
		}
	}
	r.DstMaskLen = uint32(dr.prefix.Bits())
	r.SrcMaskLen = uint32(sr.prefix.Bits())
	return RouterOK
}

// agrees reports whether route r has the next hop the kernel answered
// for address a: the same output port, and the gateway it gave (or none,
// when it gave a itself).
func (r *route) agrees(a netip.Addr, ans Answer) bool {
	for _, h := range r.hops {
		if h.oif != ans.Oif {
			continue
		}
		if h.gw.IsValid() && h.gw == ans.Via || !h.gw.IsValid() && ans.Via == a {
			return true
		}
	}
	return false
}

// viaGateway reports whether the kernel's answer for a went through one
// of r's gateways (not a directly connected next hop).
func (r *route) viaGateway(a netip.Addr, ans Answer) bool {
	for _, h := range r.hops {
		if h.oif == ans.Oif && h.gw.IsValid() && h.gw == ans.Via {
			return true
		}
	}
	return false
}

// ipAddrs returns the source and destination of an Ethernet frame's IPv4
// or IPv6 packet (after any VLAN tags).
func ipAddrs(h []byte) (src, dst netip.Addr, ok bool) {
	eh, ok := ethernet.Parse(h)
	if !ok {
		return src, dst, false
	}
	off := eh.Len
	switch {
	case eh.EtherType == ethernet.TypeIPv4 && len(h) >= off+20 && h[off]>>4 == 4:
		return netip.AddrFrom4([4]byte(h[off+12 : off+16])), netip.AddrFrom4([4]byte(h[off+16 : off+20])), true
	case eh.EtherType == ethernet.TypeIPv6 && len(h) >= off+40 && h[off]>>4 == 6:
		return netip.AddrFrom16([16]byte(h[off+8 : off+24])), netip.AddrFrom16([16]byte(h[off+24 : off+40])), true
	}
	return src, dst, false
}

// SetGen gives the table the FIB generation counter (dataplane.FIBGen):
// each copy of the routes records the generation it was read at. Call it
// before Run. Without it no sample gets extended_router (RouterStale).
func (t *Table) SetGen(gen func() (uint32, bool)) { t.gen = gen }

// poke asks Run to re-read the tables soon (non-blocking).
func (t *Table) poke() {
	select {
	case t.dirty <- struct{}{}:
	default:
	}
}
