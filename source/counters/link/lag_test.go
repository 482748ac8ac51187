package link

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// lagLab is two namespaces, A and B, each with an 802.3ad bond (lacp_rate
// fast) of two veth members, A's m1/m2 wired to B's m1/m2: LACP runs
// between the two bonds as between two switches.
type lagLab struct {
	a, b string
}

func run(t testing.TB, ns string, args ...string) string {
	t.Helper()
	var cmd *exec.Cmd
	if ns == "" {
		cmd = exec.Command(args[0], args[1:]...)
	} else {
		cmd = netnsutil.Command(context.Background(), ns, args[0], args[1:]...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", ns, args, err, out)
	}
	return string(out)
}

func newLAGLab(t *testing.T) *lagLab {
	t.Helper()
	l := &lagLab{a: fmt.Sprintf("sfl2-%d-a", os.Getpid()), b: fmt.Sprintf("sfl2-%d-b", os.Getpid())}
	for _, ns := range []string{l.a, l.b} {
		run(t, "", "ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	for _, m := range []string{"m1", "m2"} {
		run(t, l.a, "ip", "link", "add", m, "type", "veth", "peer", "name", m, "netns", l.b)
	}
	for i, ns := range []string{l.a, l.b} {
		run(t, ns, "ip", "link", "add", "bond0", "address", fmt.Sprintf("02:00:5f:00:00:%02x", i+1), "type", "bond",
			"mode", "802.3ad", "lacp_rate", "fast", "miimon", "50")
		for _, m := range []string{"m1", "m2"} {
			run(t, ns, "ip", "link", "set", m, "master", "bond0")
		}
		run(t, ns, "ip", "link", "set", "bond0", "up")
	}
	return l
}

// reader opens a Reader in namespace ns.
func reader(t *testing.T, ns string) *Reader {
	t.Helper()
	var r *Reader
	if err := netnsutil.DoNamed(ns, func() error {
		var err error
		r, err = New()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func ifindex(t *testing.T, ns, name string) uint32 {
	t.Helper()
	l, err := netnsutil.Link(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(l.Attrs().Index)
}

func lagOf(recs []sflow.Record) *sflow.LAGPortStats {
	for _, r := range recs {
		if l, ok := r.(*sflow.LAGPortStats); ok {
			c := *l
			return &c
		}
	}
	return nil
}

// procBonding is what /proc/net/bonding/bond0 of a namespace says: the
// bond's system MAC and partner MAC, and per member its aggregator ID and
// its actor's and partner's oper port states.
type procBonding struct {
	system, partner string
	agg             string
	members         map[string]map[string]string
}

func readProcBonding(t *testing.T, ns string) procBonding {
	t.Helper()
	out := run(t, ns, "cat", "/proc/net/bonding/bond0")
	p := procBonding{members: map[string]map[string]string{}}
	var cur map[string]string
	section := ""
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case k == "Slave Interface":
			cur = map[string]string{}
			p.members[v] = cur
		case k == "System MAC address" && cur == nil:
			p.system = v
		case k == "Partner Mac Address" && cur == nil:
			p.partner = v
		case k == "Aggregator ID" && cur == nil:
			p.agg = v
		case k == "Aggregator ID":
			cur["agg"] = v
		case k == "details actor lacp pdu" || k == "details partner lacp pdu":
			section = k
		case k == "port state" && cur != nil:
			cur[section] = v
		}
	}
	return p
}

// lacpTap counts the LACPDUs on the wire of link ifname in namespace ns,
// through an AF_PACKET socket on the link (Slow Protocols EtherType
// 0x8809, subtype 1): the frames the link receives and the frames it
// sends. It is the kernel's figures' independent check: iproute2's `ip
// link xstats type bond|bond_slave`, which prints the driver's LACPDU
// counters, aborts in Debian 12's iproute2 (6.1).
type lacpTap struct {
	fd int
}

const ethPSlow = 0x8809

func newLACPTap(t *testing.T, ns, ifname string) *lacpTap {
	t.Helper()
	idx := int(ifindex(t, ns, ifname))
	var fd int
	if err := netnsutil.DoNamed(ns, func() error {
		var err error
		// ETH_P_ALL: the bonding driver consumes LACPDUs in its receive
		// handler, before protocol-specific taps, after ETH_P_ALL ones.
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: idx})
	}); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &lacpTap{fd: fd}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// count reads what the socket holds (waiting up to 100 ms for more) and
// returns the LACPDUs received and sent by the link.
func (l *lacpTap) count() (rx, tx int) {
	buf := make([]byte, 256)
	for {
		n, from, err := unix.Recvfrom(l.fd, buf, 0)
		if err != nil {
			return rx, tx
		}
		ll, ok := from.(*unix.SockaddrLinklayer)
		if !ok || n < 15 || buf[12] != ethPSlow>>8 || buf[13] != ethPSlow&0xff || buf[14] != 1 { // subtype 1: LACP
			continue
		}
		if ll.Pkttype == unix.PACKET_OUTGOING {
			tx++
		} else {
			rx++
		}
	}
}

const inSync = sflow.LACPStateSynchronization | sflow.LACPStateCollecting | sflow.LACPStateDistributing

// TestLAGPortStats runs LACP between two bonds and checks, for each member
// of bond A, the lag_port_stats the reader sends against
// /proc/net/bonding and the LACPDUs on the wire, through goflow2 (raw record, decoded here by the
// spec's layout) and tshark; then a member failing (link down), leaving
// (nomaster) and joining again, and a bond with no member left.
func TestLAGPortStats(t *testing.T) {
	testskip.Root(t)
	testskip.Feature(t, features.ProbeL2Features(), features.FeatureBonding)
	l := newLAGLab(t)
	r := reader(t, l.a)
	bond := ifindex(t, l.a, "bond0")
	m1, m2 := ifindex(t, l.a, "m1"), ifindex(t, l.a, "m2")

	// LACP converges: both members in sync, collecting and distributing.
	deadline := time.Now().Add(testutil.Scaled(30 * time.Second))
	var got map[uint32]*sflow.LAGPortStats
	for {
		got = map[uint32]*sflow.LAGPortStats{}
		for _, m := range []uint32{m1, m2} {
			recs, err := r.AppendRecords(nil, m)
			if err != nil {
				t.Fatal(err)
			}
			got[m] = lagOf(recs)
			if got[m] == nil {
				t.Fatalf("member %d: no lag_port_stats in %d records", m, len(recs))
			}
		}
		if got[m1].ActorOperState&inSync == inSync && got[m2].ActorOperState&inSync == inSync &&
			got[m1].PartnerOperState&inSync == inSync && got[m2].PartnerOperState&inSync == inSync && got[m1].LACPDUsRx > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("LACP did not converge: m1 %+v m2 %+v\n%s", *got[m1], *got[m2], run(t, l.a, "cat", "/proc/net/bonding/bond0"))
		}
		time.Sleep(200 * time.Millisecond)
	}

	proc := readProcBonding(t, l.a)
	t.Logf("/proc/net/bonding/bond0 in A: system %s partner %s aggregator %s members %v", proc.system, proc.partner, proc.agg, proc.members)
	// The LACPDUs on m1's wire between two reads equal the change of
	// m1's counters (a PDU in flight at a read may fall on either side).
	tap := newLACPTap(t, l.a, "m1")
	tap.count() // what came before
	read1 := func() *sflow.LAGPortStats {
		recs, err := r.AppendRecords(nil, m1)
		if err != nil {
			t.Fatal(err)
		}
		return lagOf(recs)
	}
	a0 := read1()
	time.Sleep(testutil.Scaled(3 * time.Second))
	a1 := read1()
	wrx, wtx := tap.count()
	drx, dtx := int(a1.LACPDUsRx-a0.LACPDUsRx), int(a1.LACPDUsTx-a0.LACPDUsTx)
	if drx < 2 || dtx < 2 || wrx < drx || wrx > drx+1 || wtx < dtx || wtx > dtx+1 {
		t.Errorf("m1: LACPDUs counted rx +%d tx +%d, on the wire rx %d tx %d (lacp_rate fast: one a second)", drx, dtx, wrx, wtx)
	}
	t.Logf("m1: LACPDUs counted rx %d→%d (+%d) tx %d→%d (+%d); on m1's wire meanwhile rx %d tx %d", a0.LACPDUsRx, a1.LACPDUsRx, drx, a0.LACPDUsTx, a1.LACPDUsTx, dtx, wrx, wtx)
	recsOf := map[string][]sflow.Record{}
	for name, m := range map[string]uint32{"m1": m1, "m2": m2} {
		recs, err := r.AppendRecords(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		recsOf[name] = recs
	}
	for name, m := range map[string]uint32{"m1": m1, "m2": m2} {
		recs := recsOf[name]
		g := lagOf(recs)
		pm := proc.members[name]
		if mac := net.HardwareAddr(g.ActorSystemID[:]).String(); mac != proc.system || mac != "02:00:5f:00:00:01" {
			t.Errorf("%s: actor system %s, /proc %s, bond A's MAC 02:00:5f:00:00:01", name, mac, proc.system)
		}
		if mac := net.HardwareAddr(g.PartnerOperSystemID[:]).String(); mac != proc.partner || mac != "02:00:5f:00:00:02" {
			t.Errorf("%s: partner system %s, /proc %s, bond B's MAC 02:00:5f:00:00:02", name, mac, proc.partner)
		}
		if g.AttachedAggID != bond || pm["agg"] != proc.agg {
			t.Errorf("%s: attached aggregator %d (bond %d); /proc member aggregator %s, bond's %s", name, g.AttachedAggID, bond, pm["agg"], proc.agg)
		}
		if s := strconv.Itoa(int(g.ActorOperState)); s != pm["details actor lacp pdu"] {
			t.Errorf("%s: actor oper state %d, /proc %s", name, g.ActorOperState, pm["details actor lacp pdu"])
		}
		if s := strconv.Itoa(int(g.PartnerOperState)); s != pm["details partner lacp pdu"] {
			t.Errorf("%s: partner oper state %d, /proc %s", name, g.PartnerOperState, pm["details partner lacp pdu"])
		}
		if g.ActorAdminState != sflow.LACPStateAggregation|sflow.LACPStateActivity || g.MarkerPDUsRx != 0 || g.IllegalRx != 0 || g.LACPDUsRx == 0 || g.LACPDUsTx == 0 {
			t.Errorf("%s: %+v", name, *g)
		}
		t.Logf("%s (ifIndex %d): lag_port_stats %+v", name, m, *g)
		checkLAGDecoders(t, m, recs)
	}

	// m1 fails: its link goes down (the peer's end, as a cable pulled).
	run(t, l.b, "ip", "link", "set", "m1", "down")
	waitLAG(t, r, m1, "m1 down: not collecting or distributing", func(g *sflow.LAGPortStats) bool {
		return g != nil && g.ActorOperState&(sflow.LACPStateCollecting|sflow.LACPStateDistributing) == 0
	})
	waitLAG(t, r, m2, "m2 carries the LAG", func(g *sflow.LAGPortStats) bool {
		return g != nil && g.ActorOperState&inSync == inSync && g.AttachedAggID == bond
	})
	// m1 comes back.
	run(t, l.b, "ip", "link", "set", "m1", "up")
	waitLAG(t, r, m1, "m1 back in sync", func(g *sflow.LAGPortStats) bool {
		return g != nil && g.ActorOperState&inSync == inSync && g.AttachedAggID == bond
	})
	// m2 leaves the bond: no lag_port_stats any more; it joins again.
	run(t, l.a, "ip", "link", "set", "m2", "nomaster")
	waitLAG(t, r, m2, "m2 left: no lag_port_stats", func(g *sflow.LAGPortStats) bool { return g == nil })
	run(t, l.a, "ip", "link", "set", "m2", "master", "bond0")
	waitLAG(t, r, m2, "m2 joined again", func(g *sflow.LAGPortStats) bool { return g != nil })
	// A bond with no members: its counters read, no lag_port_stats.
	run(t, l.a, "ip", "link", "set", "m1", "nomaster")
	run(t, l.a, "ip", "link", "set", "m2", "nomaster")
	recs, err := r.AppendRecords(nil, bond)
	if err != nil {
		t.Fatalf("bond without members: %v", err)
	}
	if lagOf(recs) != nil || len(recs) == 0 {
		t.Errorf("bond without members: %d records, lag_port_stats %v", len(recs), lagOf(recs))
	}
	for _, m := range []uint32{m1, m2} {
		if recs, err := r.AppendRecords(nil, m); err != nil || lagOf(recs) != nil {
			t.Errorf("former member %d: err %v, lag_port_stats %v", m, err, lagOf(recs))
		}
	}
}

func waitLAG(t *testing.T, r *Reader, m uint32, what string, ok func(*sflow.LAGPortStats) bool) {
	t.Helper()
	deadline := time.Now().Add(testutil.Scaled(20 * time.Second))
	for {
		recs, err := r.AppendRecords(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		g := lagOf(recs)
		if ok(g) {
			if g != nil {
				t.Logf("%s: %+v", what, *g)
			} else {
				t.Logf("%s", what)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached, last %+v", what, g)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkLAGDecoders encodes recs as a counter sample and has goflow2 (which
// keeps 0:7 raw: decoded here by the spec's layout) and tshark read it.
func checkLAGDecoders(t *testing.T, m uint32, recs []sflow.Record) {
	t.Helper()
	want := lagOf(recs)
	d := &sflow.Datagram{AgentAddress: netip.MustParseAddr("198.18.0.1"), SequenceNumber: 1,
		Samples: []sflow.Sample{&sflow.CounterSample{SequenceNumber: 1, Source: sflow.DataSource{Type: sflow.SourceIfIndex, Index: m}, Records: recs}}}
	raw := d.AppendXDR(nil)
	var p goflow.Packet
	if err := goflow.DecodeMessageVersion(bytes.NewBuffer(bytes.Clone(raw)), &p); err != nil {
		t.Fatalf("goflow2: %v", err)
	}
	found := false
	for _, s := range p.Samples {
		cs, ok := s.(goflow.CounterSample)
		if !ok {
			continue
		}
		for _, r := range cs.Records {
			if r.Header.DataFormat != 7 {
				continue
			}
			b := r.Data.(goflow.RawRecord).Data
			if len(b) != 56 {
				t.Fatalf("goflow2: lag_port_stats of %d bytes", len(b))
			}
			be := binary.BigEndian
			if !bytes.Equal(b[0:6], want.ActorSystemID[:]) || !bytes.Equal(b[8:14], want.PartnerOperSystemID[:]) ||
				be.Uint32(b[16:20]) != want.AttachedAggID ||
				!bytes.Equal(b[20:24], []byte{want.ActorAdminState, want.ActorOperState, want.PartnerAdminState, want.PartnerOperState}) ||
				be.Uint32(b[24:28]) != want.LACPDUsRx || be.Uint32(b[44:48]) != want.LACPDUsTx {
				t.Errorf("goflow2's raw lag_port_stats % x does not read as %+v", b, *want)
			}
			found = true
		}
	}
	if !found {
		t.Errorf("goflow2: no lag_port_stats record")
	}
	rows := testutil.TsharkFields(t, []testutil.PcapFrame{testutil.UDPPcapFrame(time.Now(), raw, 6343)}, 6343,
		"sflow.lag_port.actor_system_id", "sflow.lag_port.partner_oper_system_id", "sflow.lag_port.attached_agg_id",
		"sflow.lag_port.state", "sflow.lag_port.lacpdus.rx", "sflow.lag_port.lacpdus.tx")
	if len(rows) != 1 {
		t.Fatalf("tshark: %d packets", len(rows))
	}
	for f, w := range map[string]string{
		"sflow.lag_port.actor_system_id":        net.HardwareAddr(want.ActorSystemID[:]).String(),
		"sflow.lag_port.partner_oper_system_id": net.HardwareAddr(want.PartnerOperSystemID[:]).String(),
		"sflow.lag_port.attached_agg_id":        strconv.Itoa(int(want.AttachedAggID)),
		"sflow.lag_port.state":                  fmt.Sprintf("0x%02x%02x%02x%02x", want.ActorAdminState, want.ActorOperState, want.PartnerAdminState, want.PartnerOperState),
		"sflow.lag_port.lacpdus.rx":             strconv.Itoa(int(want.LACPDUsRx)),
		"sflow.lag_port.lacpdus.tx":             strconv.Itoa(int(want.LACPDUsTx)),
	} {
		if g := strings.Join(rows[0][f], ","); g != w {
			t.Errorf("tshark %s = %q, want %q", f, g, w)
		}
	}
}
