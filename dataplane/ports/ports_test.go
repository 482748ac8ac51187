package ports

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// portEvents follows a Watch stream and keeps the state it describes.
type portEvents struct {
	t      *testing.T
	ch     chan Event
	state  map[int]Info
	events []Event
}

// waitFor reads events until cond holds on the state, or fails the test
// after timeout.
func (pe *portEvents) waitFor(what string, timeout time.Duration, cond func() bool) {
	pe.t.Helper()
	deadline := time.After(timeout)
	for !cond() {
		select {
		case ev := <-pe.ch:
			pe.events = append(pe.events, ev)
			switch ev.Kind {
			case Added:
				if _, dup := pe.state[ev.Port.Index]; dup {
					pe.t.Errorf("Added for known port %+v", ev.Port)
				}
				pe.state[ev.Port.Index] = ev.Port
			case Changed:
				if _, ok := pe.state[ev.Port.Index]; !ok {
					pe.t.Errorf("Changed for unknown port %+v", ev.Port)
				}
				pe.state[ev.Port.Index] = ev.Port
			case Removed:
				if _, ok := pe.state[ev.Port.Index]; !ok {
					pe.t.Errorf("Removed for unknown port %+v", ev.Port)
				}
				delete(pe.state, ev.Port.Index)
			default:
				pe.t.Errorf("bad event kind %v", ev.Kind)
			}
		case <-deadline:
			pe.t.Fatalf("timeout waiting for %s; state %v", what, pe.names())
		}
	}
}

func (pe *portEvents) byName(name string) (Info, bool) {
	for _, p := range pe.state {
		if p.Name == name {
			return p, true
		}
	}
	return Info{}, false
}

func (pe *portEvents) names() []string {
	var n []string
	for _, p := range pe.state {
		n = append(n, p.Name)
	}
	slices.Sort(n)
	return n
}

func TestWatchPorts(t *testing.T) {
	lab := netlab.New(t, 2)
	ns := netlab.NsHandle(t, lab.Switch)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pe := &portEvents{t: t, ch: make(chan Event, 16), state: map[int]Info{}}
	errc := make(chan error, 1)
	go func() { errc <- Watch(ctx, ns, pe.ch) }()

	want := []string{"br0", "lo", "mgmt0", "p1", "p2"}
	pe.waitFor("existing ports", 2*time.Second, func() bool { return slices.Equal(pe.names(), want) })
	for _, ev := range pe.events {
		if ev.Kind != Added {
			t.Errorf("initial event %v %s, want only added", ev.Kind, ev.Port.Name)
		}
	}
	br0 := lab.LinkIndex(lab.Switch, "br0")
	for i, name := range []string{"p1", "p2"} {
		p, _ := pe.byName(name)
		if p.Index != lab.LinkIndex(lab.Switch, name) || p.Index == 0 {
			t.Errorf("%s: index %d, want %d", name, p.Index, lab.LinkIndex(lab.Switch, name))
		}
		if p.MAC.String() != netlab.PortMAC(i+1).String() || p.Kind != "veth" || p.MasterIndex != br0 ||
			!p.Up || !p.AdminUp || p.Loopback {
			t.Errorf("%s: got %+v, want veth, MAC %s, master %d, up", name, p, netlab.PortMAC(i+1), br0)
		}
	}
	// veth answers ethtool with 10000 Mb/s; the kernel's own sysfs file
	// (read with /sys of the switch namespace) must agree.
	if p, _ := pe.byName("p1"); p.SpeedMbps != lab.SysfsSpeed(t, "p1") {
		t.Errorf("p1 speed %d, sysfs says %d", p.SpeedMbps, lab.SysfsSpeed(t, "p1"))
	}
	if p, _ := pe.byName("br0"); p.Kind != "bridge" || p.MasterIndex != 0 {
		t.Errorf("br0: %+v", p)
	}
	if p, _ := pe.byName("lo"); !p.Loopback || !p.Up {
		t.Errorf("lo: %+v", p)
	}

	// List sees the same links.
	list, err := List(ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list {
		if got, ok := pe.state[p.Index]; !ok || !got.equal(p) {
			t.Errorf("List %+v, watcher %+v", p, got)
		}
	}
	if len(list) != len(pe.state) {
		t.Errorf("List has %d links, watcher %d", len(list), len(pe.state))
	}

	// Hot-plug: the new port appears, then is enslaved and up.
	n := lab.AddPort(t)
	pe.waitFor("hot-plugged p3", 2*time.Second, func() bool {
		p, ok := pe.byName("p3")
		return ok && p.MasterIndex == br0 && p.Up
	})
	idx3 := lab.LinkIndex(lab.Switch, "p3")
	if p, _ := pe.byName("p3"); p.Index != idx3 {
		t.Errorf("p3 index %d, want %d", p.Index, idx3)
	}

	// Admin down is a change.
	if out, err := lab.Run(lab.Switch, "ip", "link", "set", "p2", "down"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	pe.waitFor("p2 down", 2*time.Second, func() bool {
		p, _ := pe.byName("p2")
		return !p.AdminUp && !p.Up
	})

	// Removal.
	pe.events = nil
	lab.DelPort(t, n)
	pe.waitFor("p3 removed", 2*time.Second, func() bool { _, ok := pe.state[idx3]; return !ok })
	if i := slices.IndexFunc(pe.events, func(e Event) bool { return e.Kind == Removed }); i < 0 ||
		pe.events[i].Port.Index != idx3 || pe.events[i].Port.Name != "p3" {
		t.Errorf("events %+v: want Removed p3 (%d)", pe.events, idx3)
	}

	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Watch returned %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Error("Watch did not return after cancel")
	}
}

// TestWatchPortsResync checks the resync after a lost notification stream:
// links that vanished are reported removed, changed ones changed, and the
// rest added once.
func TestWatchPortsResync(t *testing.T) {
	lab := netlab.New(t, 2)
	ns := netlab.NsHandle(t, lab.Switch)
	events := make(chan Event, 64)
	w, err := newPortWatcher(ns, events)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	p1 := lab.LinkIndex(lab.Switch, "p1")
	const ghost = 1 << 20 // no such ifindex in a fresh namespace
	w.known[ghost] = Info{Index: ghost, Name: "gone0", Kind: "veth"}
	w.known[p1] = Info{Index: p1, Name: "p1", Kind: "veth"} // stale: down, no master
	if err := w.resync(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(events)
	kinds := map[string]EventKind{}
	for ev := range events {
		if _, dup := kinds[ev.Port.Name]; dup {
			t.Errorf("two events for %s", ev.Port.Name)
		}
		kinds[ev.Port.Name] = ev.Kind
	}
	want := map[string]EventKind{"lo": Added, "br0": Added, "mgmt0": Added, "p2": Added,
		"p1": Changed, "gone0": Removed}
	if len(kinds) != len(want) {
		t.Errorf("events %v, want %v", kinds, want)
	}
	for name, k := range want {
		if kinds[name] != k {
			t.Errorf("%s: %v, want %v", name, kinds[name], k)
		}
	}
	if _, ok := w.known[ghost]; ok {
		t.Error("removed link still known")
	}
}

func TestSelectPorts(t *testing.T) {
	ports := []Info{
		{Name: "lo", Loopback: true, Up: true, Kind: "device"},
		{Name: "br0", Up: true, Kind: "bridge"},
		{Name: "mgmt0", Up: true, Kind: "veth"},
		{Name: "p1", Up: true, Kind: "veth", MasterIndex: 2},
		{Name: "p2", Kind: "veth", MasterIndex: 2}, // oper down
		{Name: "p10", Up: true, Kind: "veth", MasterIndex: 2},
		{Name: "eth0", Up: true, Kind: "device"},
	}
	for _, tc := range []struct {
		patterns []string
		want     []string
	}{
		{nil, []string{"mgmt0", "p1", "p10", "eth0"}},
		{[]string{"p*"}, []string{"p1", "p2", "p10"}},
		{[]string{"p?"}, []string{"p1", "p2"}},
		{[]string{"mgmt0", "p1[0-9]"}, []string{"mgmt0", "p10"}},
		{[]string{"eth0"}, []string{"eth0"}},
		{[]string{"nothing"}, nil},
	} {
		sel, err := Select(tc.patterns)
		if err != nil {
			t.Fatalf("%q: %v", tc.patterns, err)
		}
		var got []string
		for _, p := range ports {
			if sel(p) {
				got = append(got, p.Name)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Select(%q) selects %v, want %v", tc.patterns, got, tc.want)
		}
	}
	if _, err := Select([]string{"p1", "p["}); err == nil {
		t.Error("Select accepted the malformed pattern p[")
	}
}

// TestSelectPortsLab applies glob selection to the ports listed in a lab.
func TestSelectPortsLab(t *testing.T) {
	lab := netlab.New(t, 3)
	list, err := List(netlab.NsHandle(t, lab.Switch))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		patterns []string
		want     []string
	}{
		{nil, []string{"mgmt0", "p1", "p2", "p3"}},
		{[]string{"p[13]"}, []string{"p1", "p3"}},
		{[]string{"br*", "lo"}, []string{"br0", "lo"}},
	} {
		sel, err := Select(tc.patterns)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range list {
			if sel(p) {
				got = append(got, p.Name)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Select(%q) on the lab selects %v, want %v", tc.patterns, got, tc.want)
		}
	}
}

// TestWatchPortsOverflow overflows the notification socket while the
// consumer is not reading, so the kernel drops notifications (ENOBUFS),
// and checks that the watcher resubscribes and its resync reports the
// true state: a port deleted and one added during the outage.
func TestWatchPortsOverflow(t *testing.T) {
	lab := netlab.New(t, 2)
	ns := netlab.NsHandle(t, lab.Switch)
	ch := make(chan Event) // unbuffered: the watcher blocks while we do not read
	w, err := newPortWatcher(ns, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	w.rcvbuf = 4096 // the kernel's minimum is about this; a few messages fill it
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- w.run(ctx) }()

	pe := &portEvents{t: t, ch: ch, state: map[int]Info{}}
	pe.waitFor("existing ports", 2*time.Second, func() bool {
		return slices.Equal(pe.names(), []string{"br0", "lo", "mgmt0", "p1", "p2"})
	})
	idx2 := lab.LinkIndex(lab.Switch, "p2")

	// Not reading now. Flap p1 to overflow the socket, remove p2, add p3.
	nl, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	p1, err := nl.LinkByName("p1")
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		if err := nl.LinkSetDown(p1); err != nil {
			t.Fatal(err)
		}
		if err := nl.LinkSetUp(p1); err != nil {
			t.Fatal(err)
		}
	}
	lab.DelPort(t, 2)
	n := lab.AddPort(t) // reuses the number 2, with a new ifindex
	name := fmt.Sprintf("p%d", n)
	idxN := lab.LinkIndex(lab.Switch, name)

	want := []string{"br0", "lo", "mgmt0", "p1", name}
	slices.Sort(want)
	pe.waitFor("state after overflow", 5*time.Second, func() bool {
		p, ok := pe.byName("p1")
		q, okN := pe.state[idxN]
		_, ok2 := pe.state[idx2]
		return ok && p.Up && okN && q.Name == name && q.Up && q.MasterIndex != 0 && !ok2 &&
			slices.Equal(pe.names(), want)
	})
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("run returned %v", err)
	}
	if w.sessions < 2 {
		t.Errorf("%d subscriptions: the socket never overflowed, the test proved nothing", w.sessions)
	}
	t.Logf("%d subscriptions, %d events", w.sessions, len(pe.events))
}

// TestDefaultSelectionSkipsUpperDevices: with no patterns, bridges, bonds
// and 802.1Q devices are not selected (their frames are sampled on the
// ports under them); their members are.
func TestDefaultSelectionSkipsUpperDevices(t *testing.T) {
	sel, err := Select(nil)
	if err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[string]bool{"veth": true, "device": true, "bridge": false, "bond": false, "vlan": false} {
		if got := sel(Info{Name: "x", Up: true, Kind: kind}); got != want {
			t.Errorf("kind %s: selected %v, want %v", kind, got, want)
		}
	}
	sel, _ = Select([]string{"eth1.100"})
	if !sel(Info{Name: "eth1.100", Kind: "vlan"}) {
		t.Errorf("a sub-interface named explicitly is not selected")
	}
}
