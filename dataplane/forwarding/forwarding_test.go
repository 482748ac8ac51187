package forwarding

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestOutputFromKernelTables builds a 3-port bridged lab, lets the bridge
// learn host 2's MAC from a real frame, and checks the output port the
// table derives from the kernel's FDB and FIB for bridged, flooded,
// broadcast, routed and local frames.
func TestOutputFromKernelTables(t *testing.T) {
	netlab.RequireRoot(t)
	l := netlab.New(t, 3)
	ns, err := netns.GetFromName(l.Switch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	p1, p2 := uint32(l.LinkIndex(l.Switch, "p1")), uint32(l.LinkIndex(l.Switch, "p2"))
	mgmt := uint32(l.LinkIndex(l.Switch, "mgmt0"))

	// Host 2 sends one frame: the bridge learns its MAC on p2.
	learn := netlab.UDPFrame(l.HostMACs[1], l.HostMACs[0],
		netip.AddrPortFrom(l.HostAddrs[1], 4000), netip.AddrPortFrom(l.HostAddrs[0], 4000), []byte("learn"))
	l.SendFrames(t, 1, [][]byte{learn})

	tab := New(ns, nil)
	deadline := time.Now().Add(2 * time.Second)
	toH2 := netlab.UDPFrame(l.HostMACs[0], l.HostMACs[1],
		netip.AddrPortFrom(l.HostAddrs[0], 4000), netip.AddrPortFrom(l.HostAddrs[1], 4000), []byte("x"))
	for {
		if err := tab.Refresh(); err != nil {
			t.Fatal(err)
		}
		if got := tab.Output(p1, toH2); got == sflow.IfIndex(p2) {
			break
		} else if time.Now().After(deadline) {
			out, _ := l.Run(l.Switch, "bridge", "fdb", "show", "br", "br0")
			t.Fatalf("frame to host 2's MAC: output %+v, want ifIndex %d (p2)\n%s", got, p2, out)
		}
		time.Sleep(50 * time.Millisecond)
	}

	bcast := bytes.Clone(toH2)
	copy(bcast, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	if got := tab.Output(p1, bcast); got != (sflow.Interface{Format: sflow.InterfaceMultiple, Value: 2}) {
		t.Errorf("broadcast: %+v, want 2 other ports", got)
	}
	unknown := bytes.Clone(toH2)
	copy(unknown, []byte{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee})
	if got := tab.Output(p1, unknown); got != (sflow.Interface{Format: sflow.InterfaceMultiple, Value: 2}) {
		t.Errorf("unlearned unicast: %+v, want flooded to 2 ports", got)
	}

	// A frame addressed to the switch's own MAC is routed: its output is
	// the FIB's port for the destination IP, or "internal" for the
	// switch's own address.
	brMAC := mac(t, ns, "br0")
	routed := netlab.UDPFrame(l.HostMACs[0], brMAC,
		netip.AddrPortFrom(l.HostAddrs[0], 4000), netip.AddrPortFrom(l.CollectorAddr, 6343), []byte("r"))
	if got := tab.Output(p1, routed); got != sflow.IfIndex(mgmt) {
		t.Errorf("routed to the collector: %+v, want mgmt0 (%d)", got, mgmt)
	}
	local := netlab.UDPFrame(l.HostMACs[0], brMAC,
		netip.AddrPortFrom(l.HostAddrs[0], 4000), netip.AddrPortFrom(l.AgentAddr, 161), []byte("l"))
	if got := tab.Output(p1, local); got != sflow.IfIndex(sflow.IfIndexInternal) {
		t.Errorf("to the switch itself: %+v, want internal", got)
	}
	if got := tab.Output(p1, toH2[:10]); got != (sflow.Interface{}) {
		t.Errorf("short header: %+v, want unknown", got)
	}
	if n := testing.AllocsPerRun(100, func() { tab.Output(p1, toH2) }); n != 0 {
		t.Errorf("Output allocates %.0f times per call", n)
	}
}

// mac returns the MAC of link name in the switch namespace.
func mac(t *testing.T, ns netns.NsHandle, name string) net.HardwareAddr {
	t.Helper()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	link, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return link.Attrs().HardwareAddr
}

func BenchmarkOutput(b *testing.B) {
	s := &snapshot{
		fdb:      map[fdbKey]uint32{{1, 0, [6]byte{2, 0, 0, 0, 0, 0x12}}: 5},
		bridgeOf: map[uint32]uint32{4: 1, 5: 1},
	}
	tab := New(netns.None(), nil)
	tab.snap.Store(s)
	h := make([]byte, 64)
	copy(h, []byte{2, 0, 0, 0, 0, 0x12})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		tab.Output(4, h)
	}
}

// TestRunFollowsChanges runs the table against a lab switch, adds an FDB
// entry and checks that Run picks it up without an explicit Refresh, then
// that Run returns once its context ends.
func TestRunFollowsChanges(t *testing.T) {
	netlab.RequireRoot(t)
	l := netlab.New(t, 2)
	ns, err := netns.GetFromName(l.Switch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	p1, p2 := uint32(l.LinkIndex(l.Switch, "p1")), uint32(l.LinkIndex(l.Switch, "p2"))

	tab := New(ns, nil)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- tab.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-ran
	})

	dst := net.HardwareAddr{0x02, 0x5e, 0x00, 0x00, 0x00, 0x42}
	frame := netlab.UDPFrame(l.HostMACs[0], dst,
		netip.AddrPortFrom(l.HostAddrs[0], 4000), netip.AddrPortFrom(l.HostAddrs[1], 4000), []byte("x"))
	if out, err := l.Run(l.Switch, "bridge", "fdb", "add", dst.String(), "dev", "p2", "master", "static"); err != nil {
		t.Fatalf("bridge fdb add: %v\n%s", err, out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for got := tab.Output(p1, frame); got != sflow.IfIndex(p2); got = tab.Output(p1, frame) {
		if time.Now().After(deadline) {
			t.Fatalf("after bridge fdb add: output %+v, want ifIndex %d (p2)", got, p2)
		}
		time.Sleep(20 * time.Millisecond)
	}

	cancel()
	select {
	case err := <-ran:
		ran <- err // for the cleanup
		if err != nil {
			t.Errorf("Run after cancel: %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
