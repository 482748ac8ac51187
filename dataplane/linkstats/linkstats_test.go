package linkstats

import (
	"encoding/json"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// ipLink is the part of `ip -d -s -s -j link show` the test compares.
type ipLink struct {
	IfIndex     int      `json:"ifindex"`
	IfName      string   `json:"ifname"`
	Flags       []string `json:"flags"`
	OperState   string   `json:"operstate"`
	Promiscuity int      `json:"promiscuity"`
	Stats64     struct {
		Rx struct {
			Bytes, Packets, Errors, Dropped, Multicast uint64
		} `json:"rx"`
		Tx struct {
			Bytes, Packets, Errors, Dropped uint64
		} `json:"tx"`
	} `json:"stats64"`
}

func ipShow(t *testing.T, lab *netlab.Lab, ns, name string) ipLink {
	t.Helper()
	out, err := lab.Run(ns, "ip", "-d", "-s", "-s", "-j", "link", "show", "dev", name)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var links []ipLink
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("parse ip -j output (%v): %s", err, out)
	}
	return links[0]
}

// checkAgainstIP compares a reading with ip's at the same moment.
func checkAgainstIP(t *testing.T, c Counters, ip ipLink, kind string) {
	t.Helper()
	s := ip.Stats64
	if kind == "veth" {
		// veth never counts multicast (ip shows 0): unknown, not 0.
		if c.RxMulticast != UnknownCounter || s.Rx.Multicast != 0 {
			t.Errorf("%s: veth multicast %d (ip %d), want UnknownCounter", ip.IfName, c.RxMulticast, s.Rx.Multicast)
		}
		c.RxMulticast = 0
	}
	got := []uint64{c.RxBytes, c.RxPackets, c.RxErrors, c.RxDropped, c.RxMulticast, c.TxBytes, c.TxPackets, c.TxErrors, c.TxDropped}
	want := []uint64{s.Rx.Bytes, s.Rx.Packets, s.Rx.Errors, s.Rx.Dropped, s.Rx.Multicast, s.Tx.Bytes, s.Tx.Packets, s.Tx.Errors, s.Tx.Dropped}
	if !slices.Equal(got, want) {
		t.Errorf("%s: counters (rx bytes,packets,errors,dropped,multicast, tx bytes,packets,errors,dropped) %v, ip says %v", ip.IfName, got, want)
	}
	if c.Index != ip.IfIndex || c.Name != ip.IfName {
		t.Errorf("link %d %s, ip says %d %s", c.Index, c.Name, ip.IfIndex, ip.IfName)
	}
	if c.AdminUp != slices.Contains(ip.Flags, "UP") {
		t.Errorf("%s: AdminUp %v, ip flags %v", c.Name, c.AdminUp, ip.Flags)
	}
	if c.OperUp != (ip.OperState == "UP" || (ip.OperState == "UNKNOWN" && slices.Contains(ip.Flags, "LOWER_UP"))) {
		t.Errorf("%s: OperUp %v, ip operstate %s flags %v", c.Name, c.OperUp, ip.OperState, ip.Flags)
	}
	if c.Promiscuous != (ip.Promiscuity > 0 || slices.Contains(ip.Flags, "PROMISC")) {
		t.Errorf("%s: Promiscuous %v, ip promiscuity %d flags %v", c.Name, c.Promiscuous, ip.Promiscuity, ip.Flags)
	}
	for _, u := range []uint64{c.RxBroadcast, c.TxMulticast, c.TxBroadcast, c.RxUnknownProtos} {
		if u != UnknownCounter {
			t.Errorf("%s: counter Linux does not keep is %d, want UnknownCounter", c.Name, u)
		}
	}
}

func TestReadLinkCounters(t *testing.T) {
	lab := netlab.New(t, 2)
	sw := netlab.NsHandle(t, lab.Switch)
	h1 := netlab.NsHandle(t, lab.Hosts[0])

	// Some traffic first so the counters are not all zero: ping h1 -> h2.
	if err := lab.Ping(0, lab.HostAddrs[1], 2*time.Second); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"p1", "p2", "mgmt0", "br0", "lo"} {
		idx := lab.LinkIndex(lab.Switch, name)
		c, ip := quietReading(t, lab, sw, idx, name)
		checkAgainstIP(t, c, ip, map[string]string{"p1": "veth", "p2": "veth", "mgmt0": "veth"}[name])

		// Speed and duplex as the kernel shows them in that namespace's sysfs.
		wantSpeed := lab.SysfsSpeed(t, name)
		wantDuplex := map[string]Duplex{"full": DuplexFull, "half": DuplexHalf}[netlab.SysfsRead(t, lab.Switch, name, "duplex")]
		if c.SpeedMbps != wantSpeed || c.Duplex != wantDuplex {
			t.Errorf("%s: speed %d duplex %v, sysfs says %d %v", name, c.SpeedMbps, c.Duplex, wantSpeed, wantDuplex)
		}
		t.Logf("%s: speed %d Mb/s, duplex %v, promiscuous %v, rx %d pkts, tx %d pkts", name, c.SpeedMbps, c.Duplex, c.Promiscuous, c.RxPackets, c.TxPackets)

		// The current-namespace path (ns 0) reads the same: compared
		// between two handle readings that agree with each other (a
		// frame arriving between readings, e.g. a late ARP, moves the
		// counters; then read again).
		for try := 0; ; try++ {
			before, err := ReadCounters(sw, idx)
			if err != nil {
				t.Fatal(err)
			}
			var c0 Counters
			if err := lab.Do(lab.Switch, func() error {
				var err error
				c0, err = ReadCounters(0, idx)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			after, err := ReadCounters(sw, idx)
			if err != nil {
				t.Fatal(err)
			}
			if before != after && try < 20 {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if c0 != before {
				t.Errorf("%s: current-namespace reading %+v, handle readings %+v and %+v", name, c0, before, after)
			}
			break
		}
	}
	// A veth reports 10000 Mb/s full duplex (drivers/net/veth.c).
	if c, _ := ReadCounters(sw, lab.LinkIndex(lab.Switch, "p1")); c.SpeedMbps != 10000 || c.Duplex != DuplexFull || !c.Promiscuous {
		t.Errorf("p1: %+v, want 10000 Mb/s full duplex, promiscuous (bridge port)", c)
	}
	// The bridge reports the highest speed of its ports and no duplex
	// (net/bridge/br_device.c); loopback reports nothing.
	if c, _ := ReadCounters(sw, lab.LinkIndex(lab.Switch, "br0")); c.SpeedMbps != 10000 || c.Duplex != DuplexUnknown {
		t.Errorf("br0: speed %d duplex %v, want 10000 and unknown", c.SpeedMbps, c.Duplex)
	}
	if c, _ := ReadCounters(sw, lab.LinkIndex(lab.Switch, "lo")); c.SpeedMbps != 0 || c.Duplex != DuplexUnknown {
		t.Errorf("lo: speed %d duplex %v, want unknown", c.SpeedMbps, c.Duplex)
	}

	// K frames from h1 to a MAC nobody has: p1 receives exactly K frames and
	// their bytes, the bridge floods them out of p2, h1's eth0 sends K.
	const k = 37
	frames := make([][]byte, k)
	var bytes uint64
	for i := range frames {
		frames[i] = netlab.UDPFrame(lab.HostMACs[0], net.HardwareAddr{2, 0, 0, 0xee, 0xee, 0xee},
			netip.AddrPortFrom(lab.HostAddrs[0], 1000), netip.AddrPortFrom(lab.HostAddrs[1], 2000), make([]byte, i*10))
		bytes += uint64(len(frames[i]))
	}
	p1, p2 := lab.LinkIndex(lab.Switch, "p1"), lab.LinkIndex(lab.Switch, "p2")
	eth0 := lab.LinkIndex(lab.Hosts[0], "eth0")
	br0 := lab.LinkIndex(lab.Switch, "br0")
	// The bridge device may send a frame of its own meanwhile (an IGMP
	// report, flooded out of the ports): br0's tx counts it, and the
	// ports' tx may carry it on top of the test's frames.
	read := func() (a, b, c, br Counters) {
		var err error
		if a, err = ReadCounters(sw, p1); err != nil {
			t.Fatal(err)
		}
		if b, err = ReadCounters(sw, p2); err != nil {
			t.Fatal(err)
		}
		if c, err = ReadCounters(h1, eth0); err != nil {
			t.Fatal(err)
		}
		if br, err = ReadCounters(sw, br0); err != nil {
			t.Fatal(err)
		}
		return a, b, c, br
	}
	p1a, p2a, e0a, bra := read()
	lab.SendFrames(t, 0, frames)
	p1b, p2b, e0b, brb := read()
	ownPkts, ownBytes := brb.TxPackets-bra.TxPackets, brb.TxBytes-bra.TxBytes
	if ownPkts > 0 {
		t.Logf("br0 sent %d frames of its own (%d bytes) during the test", ownPkts, ownBytes)
	}
	if p1b.RxPackets-p1a.RxPackets != k || p1b.RxBytes-p1a.RxBytes != bytes {
		t.Errorf("p1 rx +%d packets +%d bytes, want +%d +%d", p1b.RxPackets-p1a.RxPackets, p1b.RxBytes-p1a.RxBytes, k, bytes)
	}
	if dp, db := p2b.TxPackets-p2a.TxPackets, p2b.TxBytes-p2a.TxBytes; dp < k || dp-k > ownPkts || db < bytes || db-bytes > ownBytes {
		t.Errorf("p2 tx +%d packets +%d bytes, want +%d +%d (plus at most br0's own %d, %d)", dp, db, k, bytes, ownPkts, ownBytes)
	}
	if e0b.TxPackets-e0a.TxPackets != k || e0b.TxBytes-e0a.TxBytes != bytes {
		t.Errorf("h1 eth0 tx +%d packets +%d bytes, want +%d +%d", e0b.TxPackets-e0a.TxPackets, e0b.TxBytes-e0a.TxBytes, k, bytes)
	}
	if p1b.TxPackets-p1a.TxPackets > ownPkts || p1b.RxMulticast != p1a.RxMulticast {
		t.Errorf("p1 tx or multicast changed beyond br0's own frames: %+v -> %+v", p1a, p1b)
	}
	// Multicast reaches the bridge device itself, which counts it.
	const m = 5
	mframes := make([][]byte, m)
	for i := range mframes {
		mframes[i] = netlab.UDPFrame(lab.HostMACs[0], net.HardwareAddr{1, 0, 0x5e, 0, 0, 0xfb},
			netip.AddrPortFrom(lab.HostAddrs[0], 1000), netip.MustParseAddrPort("224.0.0.251:5353"), []byte("mc"))
	}
	var err error
	bra, err = ReadCounters(sw, br0)
	if err != nil {
		t.Fatal(err)
	}
	lab.SendFrames(t, 0, mframes)
	brb, err = ReadCounters(sw, br0)
	if err != nil {
		t.Fatal(err)
	}
	if brb.RxMulticast-bra.RxMulticast != m || brb.RxPackets-bra.RxPackets != m {
		t.Errorf("br0 rx multicast +%d packets +%d, want +%d", brb.RxMulticast-bra.RxMulticast, brb.RxPackets-bra.RxPackets, m)
	}
	brc, ip := quietReading(t, lab, sw, br0, "br0")
	checkAgainstIP(t, brc, ip, "bridge")

	// And ip agrees after the traffic too.
	p1c, ip := quietReading(t, lab, sw, p1, "p1")
	checkAgainstIP(t, p1c, ip, "veth")
}

// quietReading reads a link's counters, then ip's, then ours again, and
// returns our reading and ip's from a window in which our two readings
// agree: a link can send a packet of its own at any time (the bridge
// device's IGMP reports after it comes up), which would make a single
// comparison a race. It tries a few windows before it fails.
func quietReading(t *testing.T, lab *netlab.Lab, ns netns.NsHandle, idx int, name string) (Counters, ipLink) {
	t.Helper()
	for try := 0; ; try++ {
		c, err := ReadCounters(ns, idx)
		if err != nil {
			t.Fatal(err)
		}
		ip := ipShow(t, lab, lab.Switch, name)
		c2, err := ReadCounters(ns, idx)
		if err != nil {
			t.Fatal(err)
		}
		if c == c2 {
			return c, ip
		}
		if try == 4 {
			t.Fatalf("%s: counters moved in 5 windows in a row: %+v then %+v", name, c, c2)
		}
		t.Logf("%s: a packet crossed the reading window, reading again", name)
		time.Sleep(200 * time.Millisecond)
	}
}

func TestReadLinkCountersMissingLink(t *testing.T) {
	lab := netlab.New(t, 1)
	if _, err := ReadCounters(netlab.NsHandle(t, lab.Switch), 1<<20); err == nil {
		t.Error("no error for a missing ifindex")
	}
}

func TestReadEthernetCountersVeth(t *testing.T) {
	lab := netlab.New(t, 1)
	sw := netlab.NsHandle(t, lab.Switch)
	for _, name := range []string{"p1", "br0", "lo"} {
		_, ok, err := ReadEthernetCounters(sw, lab.LinkIndex(lab.Switch, name))
		if err != nil || ok {
			t.Errorf("%s: ok %v err %v, want no dot3 counters and no error", name, ok, err)
		}
	}
	// veth has driver statistics, just no dot3 ones.
	r, err := NewReader(sw)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	names, values, err := ethtoolStats(r.ethtool, "p1")
	if err != nil || len(names) == 0 || len(names) != len(values) || !slices.Contains(names, "peer_ifindex") {
		t.Fatalf("veth ethtool stats: %v %v %v", names, values, err)
	}
	// peer_ifindex is the ifindex of the peer (eth0 in h1) — a value we know.
	if v := values[slices.Index(names, "peer_ifindex")]; v != uint64(lab.LinkIndex(lab.Hosts[0], "eth0")) {
		t.Errorf("peer_ifindex %d, want %d", v, lab.LinkIndex(lab.Hosts[0], "eth0"))
	}
}

func TestEthernetFromStats(t *testing.T) {
	// Names as e1000e reports them (ethtool -S), plus unrelated ones.
	names := []string{"rx_packets", "rx_crc_errors", "rx_align_errors", "tx_single_coll_ok", "tx_multi_coll_ok",
		"tx_deferred_ok", "tx_window_errors", "tx_aborted_errors", "tx_carrier_errors", "rx_long_length_errors"}
	values := []uint64{1000, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	c, ok := ethernetFromStats(names, values)
	if !ok {
		t.Fatal("ok = false")
	}
	want := EthernetCounters{
		AlignmentErrors: 2, FCSErrors: 1, SingleCollisionFrames: 3, MultipleCollisionFrames: 4,
		SQETestErrors: UnknownCounter, DeferredTransmissions: 5, LateCollisions: 6, ExcessiveCollisions: 7,
		InternalMacTransmitErrors: UnknownCounter, CarrierSenseErrors: 8, FrameTooLongs: 9,
		InternalMacReceiveErrors: UnknownCounter, SymbolErrors: UnknownCounter,
	}
	if c != want {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
	if _, ok := ethernetFromStats([]string{"peer_ifindex", "rx_queue_0_xdp_packets"}, []uint64{3, 4}); ok {
		t.Error("veth statistics gave dot3 counters")
	}
}

// BenchmarkLinkCounterRead measures one port's counter poll (netlink
// RTM_GETLINK + ethtool GLINKSETTINGS) with a kept reader.
func BenchmarkLinkCounterRead(b *testing.B) {
	lab := netlab.New(b, 1)
	ns, err := netns.GetFromName(lab.Switch)
	if err != nil {
		b.Fatal(err)
	}
	defer ns.Close()
	r, err := NewReader(ns)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	idx := lab.LinkIndex(lab.Switch, "p1")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Read(idx); err != nil {
			b.Fatal(err)
		}
	}
}
