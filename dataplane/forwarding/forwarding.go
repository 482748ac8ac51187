// Package forwarding tells the egress port of a sampled frame, for the
// flow_sample output field (sflow_version_5.txt, "interface"): the bridge
// forwarding database (FDB) for bridged frames, the FIB for routed ones.
//
// The tables are read from the kernel over netlink into an immutable
// snapshot, rebuilt when netlink reports a change (neighbours, links,
// addresses, routes). Workers look frames up in the current snapshot
// without locks, system calls or allocation.
package forwarding

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/ethernet"
	"github.com/sflowswitchd/sflowswitchd/internal/ratelog"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Table answers output-port lookups from a snapshot of the kernel's
// forwarding state.
type Table struct {
	ns   netns.NsHandle
	log  *slog.Logger
	snap atomic.Pointer[snapshot]
	// hist holds snap and the copies before it (router.go).
	hist atomic.Pointer[history]
	// gen reads the FIB generation (SetGen); nil: unknown.
	gen func() (uint32, bool)
	// dirty asks Run to re-read the tables (a sample saw a newer FIB).
	dirty chan struct{}
	// readFailed logs a failed read of the tables: the first one, then at
	// most one line a minute with the number left out (a read fails at
	// every change while no descriptor is left, EMFILE); its Total counts
	// every failure (ReadErrors).
	readFailed *ratelog.Limiter
}

// readErrorsEvery is the interval between two lines of failed reads.
var readErrorsEvery = time.Minute

// fdbKey is a learned MAC on a bridge, in a VLAN of a VLAN-filtering
// bridge (vid 0 on a bridge without VLAN filtering).
type fdbKey struct {
	bridge uint32
	vid    uint16
	mac    [6]byte
}

// route is a FIB entry.
type route struct {
	prefix netip.Prefix
	// ifindex is the output port; 0 for a multipath route, whose nexthop
	// count is in paths.
	ifindex uint32
	paths   uint32
	// hops are its next hops (one, or the multipath ones); none for a
	// route of another type (blackhole, unreachable, ...) or one whose
	// next hops are nexthop objects.
	hops []nexthop
	// priority is the route's metric (the lowest wins among routes of one
	// prefix).
	priority int
	// src is its preferred source (RTA_PREFSRC), the zero Addr for none.
	src netip.Addr
}

type snapshot struct {
	fdb        map[fdbKey]uint32         // learned MAC -> bridge port
	bridgeOf   map[uint32]uint32         // bridge port -> bridge
	ownMACs    map[[6]byte]bool          // MACs of this host's interfaces
	ownAddrs   map[netip.Addr]bool       // IP addresses of this host
	fib4, fib6 fib                       // unicast routes of the main table (router.go)
	floodPorts map[uint32]uint32         // bridge -> number of its ports
	tunnels    map[uint32]*tunnelDev     // tunnel devices by ifindex, with their FDB (tunnel.go)
	linkAddrs  map[uint32][]netip.Prefix // addresses of each link, in the kernel's order (tunnel.go: a source address)
	// VLANs (vlan.go): the VLAN-filtering bridges, each port's PVID and
	// VLAN memberships, the up member ports of each VLAN of a bridge
	// (keyed by bridge and VID), the one egress-untagged VLAN of a port
	// that has exactly one, and the 802.1Q devices.
	vlanBridges    map[uint32]vlanBridge
	pvid           map[uint32]uint16
	member         map[vlanKey]bool // value: egress untagged
	floodVLANPorts map[vlanKey]uint32
	untaggedVLAN   map[uint32]uint16
	vlanDevs       map[uint32]vlanDev
	// gen is the FIB generation the routes were read at, when genOK
	// (read before and after, equal).
	gen   uint32
	genOK bool
}

// New returns a table for network namespace ns (netns.None() for the
// current one). Lookups report unknown until Run has read the kernel.
func New(ns netns.NsHandle, log *slog.Logger) *Table {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Table{ns: ns, log: log, dirty: make(chan struct{}, 1),
		readFailed: ratelog.New(log, slog.LevelWarn, "reading forwarding tables; lookups use the tables read before", readErrorsEvery)}
	t.store(&snapshot{})
	return t
}

// Output returns the egress of a frame that arrived on port in, whose
// first bytes are header:
//   - multicast / broadcast destination: format 2 (several ports), the
//     number of other ports of the bridge when in is bridged, else 0
//     (unknown number);
//   - a unicast MAC learned on the bridge of port in: that port;
//   - a unicast MAC not learned: flooded, as for broadcast;
//   - a frame addressed to this host's own MAC: routed, the FIB's output
//     port for its destination IP, or 0x3FFFFFFF when the IP is this host's
//     (the packet terminates in the device);
//   - otherwise 0 (unknown).
//
// On a VLAN-filtering bridge the lookups are those of the frame's VLAN
// (Forward, vlan.go).
func (t *Table) Output(in uint32, header []byte) sflow.Interface {
	if len(header) < 14 {
		return sflow.Interface{}
	}
	var sw sflow.ExtendedSwitch
	out, _ := t.Forward(in, header, &sw)
	return out
}

func (s *snapshot) flood(bridge uint32) sflow.Interface {
	var n uint32
	if c := s.floodPorts[bridge]; c > 1 {
		n = c - 1 // every other up port of the bridge
	}
	return sflow.Interface{Format: sflow.InterfaceMultiple, Value: n}
}

// routed looks up the destination IP of a frame addressed to this host.
func (s *snapshot) routed(h []byte) sflow.Interface {
	eh, ok := ethernet.Parse(h)
	if !ok {
		return sflow.Interface{}
	}
	off := eh.Len
	var dst netip.Addr
	switch {
	case eh.EtherType == ethernet.TypeIPv4 && len(h) >= off+20:
		dst = netip.AddrFrom4([4]byte(h[off+16 : off+20]))
	case eh.EtherType == ethernet.TypeIPv6 && len(h) >= off+40:
		dst = netip.AddrFrom16([16]byte(h[off+24 : off+40]))
	default:
		return sflow.Interface{}
	}
	if s.ownAddrs[dst] {
		return sflow.IfIndex(sflow.IfIndexInternal)
	}
	f := &s.fib4
	if dst.Is6() {
		f = &s.fib6
	}
	if r := f.match(dst); r != nil {
		if r.ifindex == 0 {
			return sflow.Interface{Format: sflow.InterfaceMultiple, Value: r.paths}
		}
		return sflow.IfIndex(r.ifindex)
	}
	return sflow.Interface{}
}

// Run keeps the snapshot current until ctx ends: it reads the kernel's
// tables, then rebuilds them (at most every 100 ms) whenever netlink
// reports a change of neighbours, links, addresses or routes. When a
// subscription ends (the library closes its channel after a receive
// error, such as ENOBUFS after a burst of events), Run subscribes again
// and re-reads the tables. It returns an error only if the first
// subscription fails.
func (t *Table) Run(ctx context.Context) error {
	for first := true; ; first = false {
		subscribed, err := t.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if first && !subscribed {
			return err
		}
		t.log.Warn("forwarding table subscription ended; subscribing again", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// errSubscriptionEnded reports that the library closed an update channel.
var errSubscriptionEnded = errors.New("forwarding: a netlink subscription ended")

// follow subscribes, reads the tables and rebuilds them on changes until
// ctx ends or a subscription ends. subscribed reports whether all the
// subscriptions were made.
func (t *Table) follow(ctx context.Context) (subscribed bool, err error) {
	done := make(chan struct{})
	// The library's receivers close their channels once done has closed
	// their sockets, but one may be blocked sending an update: drain the
	// channels of the subscriptions that were made.
	var drains []func()
	defer func() {
		close(done)
		for _, d := range drains {
			go d()
		}
	}()
	dirty := t.dirty
	onErr := func(err error) {
		select {
		case <-done:
			return // our own close of the sockets
		default:
		}
		t.log.Warn("forwarding table subscription; re-reading the tables", "err", err)
		select {
		case dirty <- struct{}{}:
		default:
		}
	}
	ns := t.ns
	neighCh := make(chan netlink.NeighUpdate, 256)
	linkCh := make(chan netlink.LinkUpdate, 64)
	addrCh := make(chan netlink.AddrUpdate, 64)
	routeCh := make(chan netlink.RouteUpdate, 256)
	if err := netlink.NeighSubscribeWithOptions(neighCh, done, netlink.NeighSubscribeOptions{Namespace: &ns, ErrorCallback: onErr}); err != nil {
		return false, fmt.Errorf("forwarding: neighbour subscription: %w", err)
	}
	drains = append(drains, func() { drain(neighCh) })
	if err := netlink.LinkSubscribeWithOptions(linkCh, done, netlink.LinkSubscribeOptions{Namespace: &ns, ErrorCallback: onErr}); err != nil {
		return false, fmt.Errorf("forwarding: link subscription: %w", err)
	}
	drains = append(drains, func() { drain(linkCh) })
	if err := netlink.AddrSubscribeWithOptions(addrCh, done, netlink.AddrSubscribeOptions{Namespace: &ns, ErrorCallback: onErr}); err != nil {
		return false, fmt.Errorf("forwarding: address subscription: %w", err)
	}
	drains = append(drains, func() { drain(addrCh) })
	if err := netlink.RouteSubscribeWithOptions(routeCh, done, netlink.RouteSubscribeOptions{Namespace: &ns, ErrorCallback: onErr}); err != nil {
		return false, fmt.Errorf("forwarding: route subscription: %w", err)
	}
	drains = append(drains, func() { drain(routeCh) })
	t.refresh()
	// Changes are coalesced: the first one arms a 100 ms timer, the
	// tables are re-read when it fires. No timer runs while nothing
	// changes (an idle daemon sleeps).
	var settle <-chan time.Time
	for {
		open := true
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case _, open = <-neighCh:
		case _, open = <-linkCh:
		case _, open = <-addrCh:
		case _, open = <-routeCh:
		case <-dirty:
		case <-settle:
			settle = nil
			t.refresh()
			continue
		}
		if !open {
			return true, errSubscriptionEnded
		}
		if settle == nil {
			settle = time.After(100 * time.Millisecond)
		}
	}
}

// drain discards the updates left in ch until the library closes it.
func drain[T any](ch <-chan T) {
	for range ch {
	}
}

// store installs s as the current snapshot, keeping the previous ones.
func (t *Table) store(s *snapshot) {
	var h history
	if old := t.hist.Load(); old != nil {
		copy(h.snaps[1:], old.snaps[:historyLen-1])
	}
	h.snaps[0] = s
	t.hist.Store(&h)
	t.snap.Store(s)
}

// refresh is Refresh for Run: a failure is counted and logged (rate
// limited), and the tables read before stay.
func (t *Table) refresh() {
	if err := t.Refresh(); err != nil {
		t.readFailed.Log("err", err)
	}
}

// ReadErrors returns the number of reads of the tables that failed
// since New (Run's reads; the lookups kept the tables read before).
func (t *Table) ReadErrors() uint64 { return t.readFailed.Total.Load() }

// Refresh reads the kernel's tables now and installs a new snapshot,
// recording the FIB generation it was read at: read before and after,
// equal (a change during the dump is retried a few times, then the copy
// is kept without a generation).
func (t *Table) Refresh() error {
	for try := 0; ; try++ {
		var g1, g2 uint32
		var ok1, ok2 bool
		if t.gen != nil {
			g1, ok1 = t.gen()
		}
		s, err := t.read()
		if err != nil {
			return err
		}
		if t.gen != nil {
			g2, ok2 = t.gen()
		}
		if ok1 && ok2 && g1 == g2 {
			s.gen, s.genOK = g1, true
		}
		if s.genOK || t.gen == nil || try == 2 {
			t.store(s)
			return nil
		}
	}
}

// read reads the kernel's tables into a new snapshot.
func (t *Table) read() (*snapshot, error) {
	h, err := netlink.NewHandleAt(t.ns)
	if err != nil {
		return nil, fmt.Errorf("forwarding: netlink handle: %w", err)
	}
	defer h.Close()
	s := &snapshot{
		fdb:        map[fdbKey]uint32{},
		bridgeOf:   map[uint32]uint32{},
		ownMACs:    map[[6]byte]bool{},
		ownAddrs:   map[netip.Addr]bool{},
		floodPorts: map[uint32]uint32{},
		tunnels:    map[uint32]*tunnelDev{},
		linkAddrs:  map[uint32][]netip.Prefix{},
	}
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("forwarding: listing links: %w", err)
	}
	bridges := map[int]bool{}
	for _, l := range links {
		if _, ok := l.(*netlink.Bridge); ok {
			bridges[l.Attrs().Index] = true
		}
	}
	for _, l := range links {
		a := l.Attrs()
		if td := tunnelOf(l); td != nil {
			s.tunnels[uint32(a.Index)] = td
		}
		if len(a.HardwareAddr) == 6 {
			s.ownMACs[[6]byte(a.HardwareAddr)] = true
		}
		if bridges[a.MasterIndex] {
			s.bridgeOf[uint32(a.Index)] = uint32(a.MasterIndex)
			if a.Flags&net.FlagUp != 0 {
				s.floodPorts[uint32(a.MasterIndex)]++
			}
		}
	}
	if err := s.readVLANs(h, t.ns, links); err != nil {
		return nil, err
	}
	neighs, err := h.NeighList(0, unix.AF_BRIDGE)
	if err != nil {
		return nil, fmt.Errorf("forwarding: listing bridge FDB: %w", err)
	}
	for _, n := range neighs {
		addTunnelFDB(s.tunnels, &n)
		if len(n.HardwareAddr) != 6 || n.MasterIndex == 0 || n.State&netlink.NUD_PERMANENT != 0 {
			continue // not learned on a bridge (own MACs are in ownMACs)
		}
		var vid uint16
		if _, ok := s.vlanBridges[uint32(n.MasterIndex)]; ok {
			vid = uint16(n.Vlan)
		}
		s.fdb[fdbKey{uint32(n.MasterIndex), vid, [6]byte(n.HardwareAddr)}] = uint32(n.LinkIndex)
	}
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("forwarding: listing addresses: %w", err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			s.ownAddrs[ip.Unmap()] = true
			if a.IPNet != nil {
				ones, _ := a.Mask.Size()
				s.linkAddrs[uint32(a.LinkIndex)] = append(s.linkAddrs[uint32(a.LinkIndex)], netip.PrefixFrom(ip.Unmap(), ones))
			}
		}
	}
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("forwarding: listing routes: %w", err)
	}
	s.fib4.routes, s.fib6.routes = map[netip.Prefix]*route{}, map[netip.Prefix]*route{}
	for _, r := range routes {
		var p netip.Prefix
		if r.Dst == nil {
			if r.Family == unix.AF_INET6 {
				p = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
			} else {
				p = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
			}
		} else {
			ip, ok := netip.AddrFromSlice(r.Dst.IP)
			if !ok {
				continue
			}
			ones, _ := r.Dst.Mask.Size()
			p = netip.PrefixFrom(ip.Unmap(), ones).Masked()
		}
		rt := &route{prefix: p, ifindex: uint32(r.LinkIndex), src: gateway(r.Src)}
		if len(r.MultiPath) > 0 {
			rt.ifindex, rt.paths = 0, uint32(len(r.MultiPath))
		}
		if r.Type == unix.RTN_UNICAST {
			if len(r.MultiPath) == 0 && r.LinkIndex != 0 {
				rt.hops = append(rt.hops, nexthop{oif: uint32(r.LinkIndex), gw: gateway(r.Gw)})
			}
			for _, m := range r.MultiPath {
				rt.hops = append(rt.hops, nexthop{oif: uint32(m.LinkIndex), gw: gateway(m.Gw)})
			}
		}
		f := &s.fib4
		if p.Addr().Is6() {
			f = &s.fib6
		}
		// Several routes of one prefix (metrics): the kernel uses the
		// first it lists, of the lowest metric.
		if old := f.routes[p]; old == nil || r.Priority < old.priority {
			rt.priority = r.Priority
			f.routes[p] = rt
		}
	}
	for _, f := range []*fib{&s.fib4, &s.fib6} {
		seen := map[int]bool{}
		for p := range f.routes {
			if !seen[p.Bits()] {
				seen[p.Bits()] = true
				f.lens = append(f.lens, p.Bits())
			}
		}
		sort.Sort(sort.Reverse(sort.IntSlice(f.lens)))
	}
	return s, nil
}

// gateway is a route's gateway address, the zero Addr for none.
func gateway(ip net.IP) netip.Addr {
	if a, ok := netip.AddrFromSlice(ip); ok && !a.IsUnspecified() {
		return a.Unmap()
	}
	return netip.Addr{}
}
