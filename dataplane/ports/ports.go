package ports

// Port discovery and hot-plug: which links exist in the switch namespace,
// their state, and a stream of changes (netlink RTNLGRP_LINK).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/linkstats"
	"github.com/sflowswitchd/sflowswitchd/internal/bridgeattr"
)

// Info describes one network link as the watcher sees it.
type Info struct {
	Index       int              // ifindex
	Name        string           // interface name
	MAC         net.HardwareAddr // hardware address (nil for devices without one)
	Up          bool             // oper up: operstate UP, or UNKNOWN with carrier
	AdminUp     bool             // IFF_UP
	Loopback    bool             // IFF_LOOPBACK
	MasterIndex int              // ifindex of the bridge (or other master) it is enslaved to, 0 if none
	Kind        string           // link kind from netlink: "veth", "bridge", "device" (plain NIC or lo), ...
	SpeedMbps   uint64           // ethtool link speed in Mb/s, 0 = unknown
}

// Selector decides whether a link is a switch port to sample.
type Selector func(Info) bool

// Select returns a selector for ports whose name equals, or matches as
// a shell glob (path.Match), one of patterns. With patterns the selection
// is by name only: a named port is selected even while it is down, so
// sampling starts when it comes up. With no patterns it selects every
// oper-up, non-loopback link that is not itself a bridge, a bond or an
// 802.1Q device (bridge and bond members are selected). A malformed pattern is an error.
func Select(patterns []string) (Selector, error) {
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("ports: bad port pattern %q: %w", p, err)
		}
	}
	if len(patterns) == 0 {
		return func(p Info) bool {
			// Not a bridge, bond or 802.1Q device: their frames are
			// sampled on the ports under them (a bond is a counter
			// data source of its own; docs/ARCHITECTURE.md "Ports, LAGs
			// and VLANs").
			return p.Up && !p.Loopback && p.Kind != "bridge" && p.Kind != "bond" && p.Kind != "vlan"
		}, nil
	}
	pats := slices.Clone(patterns)
	return func(p Info) bool {
		for _, pat := range pats {
			if ok, _ := path.Match(pat, p.Name); ok { // patterns checked above
				return true
			}
		}
		return false
	}, nil
}

// EventKind says what happened to a port.
type EventKind int

// Port event kinds.
const (
	Added   EventKind = iota + 1 // the link appeared (or was there when watching began)
	Changed                      // a Info field changed
	Removed                      // the link is gone (deleted or moved to another namespace)
)

// String returns "added", "changed" or "removed".
func (k EventKind) String() string {
	switch k {
	case Added:
		return "added"
	case Changed:
		return "changed"
	case Removed:
		return "removed"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one change of the set of links. For Removed, Port is
// the last state seen.
type Event struct {
	Kind EventKind
	Port Info
}

// List returns every link of namespace ns (ns <= 0: the calling
// thread's namespace), loopback and bridges included, in ifindex order.
func List(ns netns.NsHandle) ([]Info, error) {
	w, err := newPortWatcher(ns, nil)
	if err != nil {
		return nil, err
	}
	defer w.close()
	links, err := w.nl.LinkList()
	if err != nil {
		return nil, fmt.Errorf("ports: list links: %w", err)
	}
	ports := make([]Info, 0, len(links))
	for _, l := range links {
		ports = append(ports, w.portInfo(l))
	}
	slices.SortFunc(ports, func(a, b Info) int { return a.Index - b.Index })
	return ports, nil
}

// Watch reports the links of namespace ns (ns <= 0: the calling
// thread's namespace) on events until ctx is done: first Added for
// every existing link, then Added, Changed and Removed as links
// come, change and go. Every link is reported, loopback and bridges
// included; filter with a Selector.
//
// Netlink notifications are only a trigger: each one is answered by asking
// the kernel for the link's current state, so a late or reordered
// notification never reports a stale state, and a Changed is sent only
// when a Info field really changed (bridge-family notifications and
// statistics-only updates produce none).
//
// If the notification socket fails (for example ENOBUFS when events
// overflowed it) or a dump was interrupted, Watch subscribes again and
// lists all links again, and reports the difference to what it had
// reported, removals included. It never stops silently: it retries with
// back-off until ctx is done. It subscribes before listing (rather than
// using LinkSubscribeOptions.ListExisting) so that it knows when the list
// is complete and can report links that vanished during an outage.
//
// Sends on events block; the consumer must keep reading. Watch
// returns ctx.Err() when ctx is done, or an error if the first
// subscription fails (for example an invalid namespace).
func Watch(ctx context.Context, ns netns.NsHandle, events chan<- Event) error {
	w, err := newPortWatcher(ns, events)
	if err != nil {
		return err
	}
	defer w.close()
	return w.run(ctx)
}

// run follows the links until ctx is done, resubscribing after failures.
func (w *portWatcher) run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for {
		err := w.session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if w.sessions == 0 {
			return err // could not even subscribe once
		}
		if w.sessionOK {
			backoff = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// portWatcher holds the sockets and the reported state of Watch.
type portWatcher struct {
	ns      netns.NsHandle
	nl      *netlink.Handle
	ethtool int
	events  chan<- Event
	known   map[int]Info // what was reported, by ifindex
	rcvbuf  int          // notification socket receive buffer (bytes)

	sessions  int  // subscriptions that succeeded
	sessionOK bool // the last session listed successfully
}

func newPortWatcher(ns netns.NsHandle, events chan<- Event) (*portWatcher, error) {
	h, ethtool, err := linkstats.OpenSockets(ns)
	if err != nil {
		return nil, fmt.Errorf("ports: %w", err)
	}
	return &portWatcher{ns: ns, nl: h, ethtool: ethtool, events: events, known: map[int]Info{}, rcvbuf: 1 << 20}, nil
}

func (w *portWatcher) close() {
	w.nl.Close()
	unix.Close(w.ethtool) // nothing to report: read-only ioctl socket
}

// session subscribes, resyncs and follows notifications until the
// subscription fails or ctx is done.
func (w *portWatcher) session(ctx context.Context) error {
	w.sessionOK = false
	updates := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	defer func() {
		// Closing done closes the socket; the library's receiver then
		// closes updates, but it may be blocked sending one: drain.
		close(done)
		go func() {
			for range updates {
			}
		}()
	}()
	failed := make(chan error, 1)
	opts := netlink.LinkSubscribeOptions{
		ErrorCallback: func(err error) {
			select {
			case failed <- err:
			default:
			}
		},
		ReceiveBufferSize: w.rcvbuf,
	}
	if w.ns > 0 {
		ns := w.ns
		opts.Namespace = &ns
	}
	if err := netlink.LinkSubscribeWithOptions(updates, done, opts); err != nil {
		return fmt.Errorf("ports: subscribe to link notifications: %w", err)
	}
	w.sessions++
	if err := w.resync(ctx); err != nil {
		return err
	}
	w.sessionOK = true
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-failed:
			// The library reports a receive failure and closes updates;
			// other callbacks (bad sender, error messages, an interrupted
			// dump, which our subscription never asks for) leave it
			// running but may hide lost events: resync either way.
			return fmt.Errorf("ports: link notifications: %w", err)
		case u, ok := <-updates:
			if !ok {
				return errors.New("ports: link notification socket closed")
			}
			if err := w.refresh(ctx, int(u.Index)); err != nil {
				return err
			}
		}
	}
}

// resync lists all links and reports the difference to w.known:
// removals first (so a consumer never sees two links with one name when
// a name was reused during an outage), then additions and changes, in
// ifindex order.
func (w *portWatcher) resync(ctx context.Context) error {
	links, err := w.nl.LinkList()
	if err != nil {
		return fmt.Errorf("ports: list links: %w", err)
	}
	seen := make(map[int]bool, len(links))
	for _, l := range links {
		seen[l.Attrs().Index] = true
	}
	var gone []int
	for idx := range w.known {
		if !seen[idx] {
			gone = append(gone, idx)
		}
	}
	slices.Sort(gone)
	for _, idx := range gone {
		if err := w.remove(ctx, idx); err != nil {
			return err
		}
	}
	slices.SortFunc(links, func(a, b netlink.Link) int { return a.Attrs().Index - b.Attrs().Index })
	for _, l := range links {
		if err := w.report(ctx, w.portInfo(l)); err != nil {
			return err
		}
	}
	return nil
}

// refresh asks for the current state of link ifindex and reports it.
func (w *portWatcher) refresh(ctx context.Context, ifindex int) error {
	l, err := w.nl.LinkByIndex(ifindex)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) || errors.Is(err, unix.ENODEV) {
		return w.remove(ctx, ifindex)
	}
	if err != nil {
		return fmt.Errorf("ports: query link %d: %w", ifindex, err)
	}
	return w.report(ctx, w.portInfo(l))
}

// report sends Added or Changed if p differs from what was reported.
func (w *portWatcher) report(ctx context.Context, p Info) error {
	old, ok := w.known[p.Index]
	kind := Added
	if ok {
		if old.equal(p) {
			return nil
		}
		kind = Changed
	}
	if err := w.send(ctx, Event{Kind: kind, Port: p}); err != nil {
		return err
	}
	w.known[p.Index] = p
	return nil
}

func (w *portWatcher) remove(ctx context.Context, ifindex int) error {
	old, ok := w.known[ifindex]
	if !ok {
		return nil
	}
	if err := w.send(ctx, Event{Kind: Removed, Port: old}); err != nil {
		return err
	}
	delete(w.known, ifindex)
	return nil
}

func (w *portWatcher) send(ctx context.Context, ev Event) error {
	select {
	case w.events <- ev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *portWatcher) portInfo(l netlink.Link) Info {
	a := l.Attrs()
	p := Info{
		Index:       a.Index,
		Name:        a.Name,
		MAC:         slices.Clone(a.HardwareAddr),
		Up:          linkstats.OperUp(a),
		AdminUp:     a.Flags&net.FlagUp != 0,
		Loopback:    a.Flags&net.FlagLoopback != 0,
		MasterIndex: a.MasterIndex,
		Kind:        l.Type(),
	}
	if !p.Loopback {
		if speed, _, err := linkstats.EthtoolLinkSettings(w.ethtool, a.Name); err == nil {
			p.SpeedMbps = speed
		}
	}
	return p
}

func (p Info) equal(q Info) bool {
	return p.Index == q.Index && p.Name == q.Name && slices.Equal(p.MAC, q.MAC) &&
		p.Up == q.Up && p.AdminUp == q.AdminUp && p.Loopback == q.Loopback &&
		p.MasterIndex == q.MasterIndex && p.Kind == q.Kind && p.SpeedMbps == q.SpeedMbps
}

// StatsVLANs returns the VLANs that are VLAN data sources for the selected
// ports, in the calling thread's namespace: every VLAN a selected port is
// a member of on a VLAN-filtering bridge that keeps per-VLAN statistics
// (vlan_stats_enabled 1), sorted. A bridge without statistics gives none:
// the kernel has no counters to send.
func StatsVLANs(selected []Info) ([]uint16, error) {
	attrs, err := bridgeattr.Read(netns.None())
	if err != nil {
		return nil, err
	}
	want := map[int]bool{}
	for _, p := range selected {
		if ba, ok := attrs[uint32(p.MasterIndex)]; ok && ba.VLANFiltering && ba.VLANStats {
			want[p.Index] = true
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("VLAN data sources: netlink: %w", err)
	}
	defer h.Close()
	vl, err := h.BridgeVlanList()
	if err != nil {
		return nil, fmt.Errorf("VLAN data sources: listing bridge VLANs: %w", err)
	}
	seen := map[uint16]bool{}
	var out []uint16
	for idx, infos := range vl {
		if !want[int(idx)] {
			continue
		}
		for _, vi := range infos {
			if !seen[vi.Vid] {
				seen[vi.Vid] = true
				out = append(out, vi.Vid)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
