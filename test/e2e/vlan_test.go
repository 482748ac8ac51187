package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/dataplane/forwarding"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// tagged returns f with VLAN tags (TPID, TCI) inserted after the MACs.
func tagged(f []byte, tags ...[2]uint16) []byte {
	out := append([]byte{}, f[:12]...)
	for _, tg := range tags {
		out = binary.BigEndian.AppendUint16(out, tg[0])
		out = binary.BigEndian.AppendUint16(out, tg[1])
	}
	return append(out, f[12:]...)
}

// vlanCase is a kind of frame sent into the VLAN lab and what its flow
// samples must say.
type vlanCase struct {
	name  string
	from  int    // host index
	frame []byte // marker in its payload: "vlancase-<i>"
	in    string // ingress port
	out   sflow.Interface
	sw    *sflow.ExtendedSwitch
	drop  bool // the bridge drops it: a drop notification is due
}

// TestVLANBridge runs the daemon on a VLAN-filtering bridge (Debian's
// kernels; this one needs CONFIG_BRIDGE_VLAN_FILTERING): p1 an access
// port of VLAN 100 (PVID 100, untagged), p2 a trunk (VLANs 100 and 200
// tagged, native VLAN 300 as its PVID), p3 an access port of VLAN 200.
// At sampling rate 1 every frame is sampled; at each hook (XDP and TC,
// where the kernel has taken the tag out of the frame) every flow sample
// must carry the VLANs the bridge assigned:
//   - an untagged frame on p1: src_vlan = dst_vlan = 100 (the PVID), the
//     output p2 from the FDB entry of VLAN 100 (untagged frames
//     once had no extended_switch);
//   - priority-tagged (VID 0, PCP 5) on p1: VLAN 100, priority 5;
//   - tagged 200 PCP 3 on the trunk: VLAN 200, priority 3, output p3;
//   - untagged on the trunk: its native VLAN 300, flooded to no other port;
//   - untagged on p3: VLAN 200, output p2 (FDB of VLAN 200, where the
//     same MAC was learned as in VLAN 100 on p2: per-VLAN FDB);
//   - tagged 200 on p1 (not a member): output "discarded", and a drop
//     notification with the kernel's reason;
//   - broadcast tagged 100 on the trunk: flooded to p1 (format 2, 1).
//
// goflow2 and tshark read the same extended_switch records.
func TestVLANBridge(t *testing.T) {
	testskip.Root(t)
	testskip.Feature(t, features.ProbeL2Features(), features.FeatureBridgeVLANFiltering)
	for _, hook := range []string{"xdp", "tc"} {
		t.Run(hook, func(t *testing.T) { testVLANBridge(t, hook) })
	}
}

func testVLANBridge(t *testing.T, hook string) {
	lab := newLab(t, 3)
	sw := lab.Switch
	for _, c := range [][]string{
		{"ip", "link", "set", "br0", "type", "bridge", "vlan_filtering", "1"},
		{"bridge", "vlan", "del", "dev", "p1", "vid", "1"},
		{"bridge", "vlan", "add", "dev", "p1", "vid", "100", "pvid", "untagged"},
		{"bridge", "vlan", "del", "dev", "p2", "vid", "1"},
		{"bridge", "vlan", "add", "dev", "p2", "vid", "100"},
		{"bridge", "vlan", "add", "dev", "p2", "vid", "200"},
		{"bridge", "vlan", "add", "dev", "p2", "vid", "300", "pvid", "untagged"},
		{"bridge", "vlan", "del", "dev", "p3", "vid", "1"},
		{"bridge", "vlan", "add", "dev", "p3", "vid", "200", "pvid", "untagged"},
	} {
		if out, err := lab.Run(sw, c[0], c[1:]...); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	h1, h2, h3 := lab.HostMACs[0], lab.HostMACs[1], lab.HostMACs[2]
	idx := func(name string) uint32 { return uint32(lab.LinkIndex(sw, name)) }
	q := func(pcp, vid uint16) [2]uint16 { return [2]uint16{0x8100, pcp<<13 | vid} }
	udp := func(src, dst net.HardwareAddr, i int) []byte {
		return netlab.UDPFrame(src, dst, netip.AddrPortFrom(netip.MustParseAddr("198.18.0.200"), 4000),
			netip.AddrPortFrom(netip.MustParseAddr("198.18.0.201"), 4000), []byte(fmt.Sprintf("vlancase-%02d", i)))
	}
	// The bridge learns host 2's MAC in VLANs 100 and 200 on p2, host 1's
	// in VLAN 100 on p1 and host 3's in VLAN 200 on p3.
	learn := udp(h2, h1, 99)
	lab.SendFrames(t, 1, [][]byte{tagged(learn, q(0, 100)), tagged(learn, q(0, 200))})
	lab.SendFrames(t, 0, [][]byte{udp(h1, h2, 98)})
	lab.SendFrames(t, 2, [][]byte{udp(h3, h2, 97)})
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	unknown := net.HardwareAddr{0x02, 0xaa, 0, 0, 0, 1}
	swv := func(sv, sp, dv, dp uint32) *sflow.ExtendedSwitch {
		return &sflow.ExtendedSwitch{SrcVLAN: sv, SrcPriority: sp, DstVLAN: dv, DstPriority: dp}
	}
	cases := []vlanCase{
		{name: "untagged on access port p1 (PVID 100)", from: 0, frame: udp(h1, h2, 0), in: "p1", out: sflow.IfIndex(idx("p2")), sw: swv(100, 0, 100, 0)},
		{name: "priority-tagged on p1", from: 0, frame: tagged(udp(h1, h2, 1), q(5, 0)), in: "p1", out: sflow.IfIndex(idx("p2")), sw: swv(100, 5, 100, 5)},
		{name: "tagged 200 on the trunk", from: 1, frame: tagged(udp(h2, h3, 2), q(3, 200)), in: "p2", out: sflow.IfIndex(idx("p3")), sw: swv(200, 3, 200, 3)},
		{name: "untagged on the trunk: native VLAN 300", from: 1, frame: udp(h2, unknown, 3), in: "p2", out: sflow.Interface{Format: sflow.InterfaceMultiple, Value: 0}, sw: swv(300, 0, 300, 0)},
		{name: "untagged on p3 (PVID 200)", from: 2, frame: udp(h3, h2, 4), in: "p3", out: sflow.IfIndex(idx("p2")), sw: swv(200, 0, 200, 0)},
		{name: "tagged 200 on p1: not a member", from: 0, frame: tagged(udp(h1, h3, 5), q(0, 200)), in: "p1",
			out: sflow.Interface{Format: sflow.InterfaceDiscarded, Value: forwarding.DiscardVLAN}, sw: swv(200, 0, 200, 0), drop: true},
		{name: "broadcast tagged 100 on the trunk", from: 1, frame: tagged(udp(h2, bcast, 6), q(0, 100)), in: "p2", out: sflow.Interface{Format: sflow.InterfaceMultiple, Value: 1}, sw: swv(100, 0, 100, 0)},
	}

	if out, err := lab.Run(sw, "bridge", "vlan", "show"); err == nil {
		t.Logf("bridge vlan show:\n%s", out)
	}
	fdb, _ := lab.Run(sw, "bridge", "fdb", "show", "br", "br0", "dynamic")
	t.Logf("bridge fdb show br br0 dynamic:\n%s", fdb)
	for _, want := range []string{h2.String() + " dev p2 vlan 100", h2.String() + " dev p2 vlan 200", h3.String() + " dev p3 vlan 200"} {
		if !strings.Contains(string(fdb), want) {
			t.Fatalf("the kernel's FDB lacks %q", want)
		}
	}

	col, _ := runVLANCases(t, lab, hook, []string{"p1", "p2", "p3"}, cases)
	marker := caseMarker(len(cases))
	const copies = 5
	// The frames the bridge dropped for VLAN membership are notified
	// with the kernel's reason.
	dgs := col.waitFor(t, testutil.Scaled(30*time.Second), "drop notifications of the non-member frames", func(dgs []datagram) bool {
		n := 0
		for _, r := range dropSamplesOf(dgs) {
			if r.header != nil && marker(r.header.Header) == 5 {
				n++
			}
		}
		return n >= copies
	})
	reasons := map[string]int{}
	for _, r := range dropSamplesOf(dgs) {
		if r.header == nil || marker(r.header.Header) != 5 {
			continue
		}
		reasons[fmt.Sprintf("%s/%s/code %d/in %d", r.linux, r.symbol, r.s.Reason, r.s.Input)]++
		if r.s.Input != idx("p1") {
			t.Errorf("drop notification of a non-member frame: input %d, want p1 (%d)", r.s.Input, idx("p1"))
		}
	}
	t.Logf("drop notifications of the frames tagged 200 on p1 (kernel reason/function/sFlow code/input): %v", reasons)
}

// caseMarker returns the case number a sampled header carries in its
// payload ("vlancase-NN"), -1 for none.
func caseMarker(ncases int) func(h []byte) int {
	return func(h []byte) int {
		j := bytes.Index(h, []byte("vlancase-"))
		if j < 0 || j+11 > len(h) {
			return -1
		}
		n, err := strconv.Atoi(string(h[j+9 : j+11]))
		if err != nil || n >= ncases {
			return -1
		}
		return n
	}
}

// runVLANCases starts the daemon at hook on ports (rate 1, drop
// notifications on), sends 5 copies of each case's frame and checks every
// flow sample of them: data source and input, output, extended_switch,
// the sampled header equal to the frame sent; then that goflow2 and
// tshark read the same extended_switch records.
func runVLANCases(t *testing.T, lab *netlab.Lab, hook string, ports []string, cases []vlanCase) (*collector, []datagram) {
	t.Helper()
	sw := lab.Switch
	idx := func(name string) uint32 { return uint32(lab.LinkIndex(sw, name)) }
	col := listen(t, lab, collectorPort)
	conf := filepath.Join(t.TempDir(), "sflowswitchd.conf")
	body := fmt.Sprintf("sampling = 1\npolling = 0\nports = [\"%s\"]\nhook = %q\ndrops = \"on\"\ndrops_header_bytes = 128\n\n[[collector]]\naddress = \"%s:%d\"\n",
		strings.Join(ports, "\", \""), hook, lab.CollectorAddr, collectorPort)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, lab, "-config", conf)
	d.waitReady(t, lab, ports...)
	if !strings.Contains(d.log(), "hook="+hook) {
		t.Logf("daemon log does not name hook=%s:\n%s", hook, d.log())
	}

	const copies = 5
	total := 0
	for i := range cases {
		frames := make([][]byte, copies)
		for k := range frames {
			frames[k] = cases[i].frame
		}
		lab.SendFrames(t, cases[i].from, frames)
		total += copies
	}
	marker := caseMarker(len(cases))
	count := func(dgs []datagram) (n int) {
		for _, f := range flowSamplesOf(dgs, 0) {
			if f.header != nil && marker(f.header.Header) >= 0 {
				n++
			}
		}
		return n
	}
	dgs := col.waitFor(t, testutil.Scaled(30*time.Second), "every case frame sampled", func(dgs []datagram) bool {
		return count(dgs) >= total
	})

	got := make([]int, len(cases))
	var ours []sflow.ExtendedSwitch
	for _, dg := range dgs {
		for _, s := range dg.our.Samples {
			fs, ok := s.(*sflow.FlowSample)
			if !ok {
				continue
			}
			var hdr *sflow.SampledHeader
			var esw *sflow.ExtendedSwitch
			for _, r := range fs.Records {
				switch r := r.(type) {
				case *sflow.SampledHeader:
					hdr = r
				case *sflow.ExtendedSwitch:
					esw = r
				}
			}
			if esw != nil {
				ours = append(ours, *esw)
			}
			if hdr == nil {
				continue
			}
			i := marker(hdr.Header)
			if i < 0 {
				continue
			}
			c := cases[i]
			got[i]++
			if fs.Source.Index != idx(c.in) || fs.Input != sflow.IfIndex(idx(c.in)) {
				t.Errorf("%s: sampled on source %d input %+v, want %s (%d)", c.name, fs.Source.Index, fs.Input, c.in, idx(c.in))
			}
			if fs.Output != c.out {
				t.Errorf("%s: output %+v, want %+v", c.name, fs.Output, c.out)
			}
			switch {
			case esw == nil && c.sw != nil:
				t.Errorf("%s: no extended_switch, want %+v", c.name, *c.sw)
			case esw != nil && c.sw == nil:
				t.Errorf("%s: extended_switch %+v, want none", c.name, *esw)
			case esw != nil && *esw != *c.sw:
				t.Errorf("%s: extended_switch %+v, want %+v", c.name, *esw, *c.sw)
			}
			// The sampled header is the frame as it came in: the TC
			// sampler put the tag the kernel took out back in.
			if !bytes.Equal(hdr.Header, c.frame[:min(len(c.frame), len(hdr.Header))]) {
				t.Errorf("%s: sampled header differs from the frame sent\n got % x\nwant % x", c.name, hdr.Header, c.frame)
			}
		}
	}
	for i, c := range cases {
		if got[i] != copies {
			t.Errorf("%s: %d flow samples, want %d (rate 1)", c.name, got[i], copies)
		}
		t.Logf("%s: %d samples, output %+v, extended_switch %+v", c.name, got[i], c.out, *c.sw)
	}

	// goflow2 and tshark read the same extended_switch records, in order.
	var gf []sflow.ExtendedSwitch
	for _, dg := range dgs {
		for _, s := range dg.gf.Samples {
			var recs []goflow.FlowRecord
			switch fs := s.(type) {
			case goflow.FlowSample:
				recs = fs.Records
			case goflow.ExpandedFlowSample:
				recs = fs.Records
			}
			for _, r := range recs {
				if g, ok := r.Data.(goflow.ExtendedSwitch); ok {
					gf = append(gf, sflow.ExtendedSwitch{SrcVLAN: g.SrcVlan, SrcPriority: g.SrcPriority, DstVLAN: g.DstVlan, DstPriority: g.DstPriority})
				}
			}
		}
	}
	if fmt.Sprint(gf) != fmt.Sprint(ours) {
		t.Errorf("goflow2's extended_switch records differ from ours:\n goflow2 %v\n ours    %v", gf, ours)
	}
	var ts []sflow.ExtendedSwitch
	for _, row := range tsharkFields(t, dgs, collectorPort, "sflow_245.vlan.in", "sflow_245.pri.in", "sflow_245.vlan.out", "sflow_245.pri.out") {
		for j := range row["sflow_245.vlan.in"] {
			if j >= len(row["sflow_245.pri.in"]) || j >= len(row["sflow_245.vlan.out"]) || j >= len(row["sflow_245.pri.out"]) {
				t.Fatalf("tshark row with uneven extended_switch fields: %v", row)
			}
			ts = append(ts, sflow.ExtendedSwitch{SrcVLAN: parseU32(t, row["sflow_245.vlan.in"][j]), SrcPriority: parseU32(t, row["sflow_245.pri.in"][j]),
				DstVLAN: parseU32(t, row["sflow_245.vlan.out"][j]), DstPriority: parseU32(t, row["sflow_245.pri.out"][j])})
		}
	}
	if fmt.Sprint(ts) != fmt.Sprint(ours) {
		t.Errorf("tshark's extended_switch records differ from ours:\n tshark %v\n ours   %v", ts, ours)
	}
	t.Logf("%d extended_switch records, goflow2 %d, tshark %d", len(ours), len(gf), len(ts))

	return col, dgs
}

// TestQinQBridge runs the daemon on an 802.1ad (QinQ) bridge
// (vlan_protocol 802.1ad): p1 a customer port of S-VLAN 1000 (PVID 1000,
// untagged), p2 a provider trunk (S-VLAN 1000 tagged). At XDP, and at TC
// where the kernel has taken the S-tag out of the frame:
//   - a customer frame C-tagged 10 PCP 4 on p1: the C-tag is payload to
//     the S-bridge, so src_vlan = dst_vlan = 1000 (the PVID), priority 0,
//     output p2 (FDB of S-VLAN 1000);
//   - a provider frame S-tagged 1000 PCP 2 over C-tag 10 on p2: VLAN 1000,
//     priority 2 (the S-tag's), output p1.
func TestQinQBridge(t *testing.T) {
	testskip.Root(t)
	testskip.Feature(t, features.ProbeL2Features(), features.FeatureBridgeVLANFiltering)
	for _, hook := range []string{"xdp", "tc"} {
		t.Run(hook, func(t *testing.T) {
			lab := newLab(t, 2)
			sw := lab.Switch
			for _, c := range [][]string{
				{"ip", "link", "set", "br0", "type", "bridge", "vlan_filtering", "1", "vlan_protocol", "802.1ad"},
				{"bridge", "vlan", "del", "dev", "p1", "vid", "1"},
				{"bridge", "vlan", "add", "dev", "p1", "vid", "1000", "pvid", "untagged"},
				{"bridge", "vlan", "del", "dev", "p2", "vid", "1"},
				{"bridge", "vlan", "add", "dev", "p2", "vid", "1000"},
			} {
				if out, err := lab.Run(sw, c[0], c[1:]...); err != nil {
					t.Fatalf("%v: %v\n%s", c, err, out)
				}
			}
			h1, h2 := lab.HostMACs[0], lab.HostMACs[1]
			idx := func(name string) uint32 { return uint32(lab.LinkIndex(sw, name)) }
			q := func(pcp, vid uint16) [2]uint16 { return [2]uint16{0x8100, pcp<<13 | vid} }
			ad := func(pcp, vid uint16) [2]uint16 { return [2]uint16{0x88a8, pcp<<13 | vid} }
			udp := func(src, dst net.HardwareAddr, i int) []byte {
				return netlab.UDPFrame(src, dst, netip.AddrPortFrom(netip.MustParseAddr("198.18.0.200"), 4000),
					netip.AddrPortFrom(netip.MustParseAddr("198.18.0.201"), 4000), []byte(fmt.Sprintf("vlancase-%02d", i)))
			}
			lab.SendFrames(t, 1, [][]byte{tagged(udp(h2, h1, 99), ad(0, 1000), q(0, 10))})
			lab.SendFrames(t, 0, [][]byte{tagged(udp(h1, h2, 98), q(0, 10))})
			fdb, _ := lab.Run(sw, "bridge", "fdb", "show", "br", "br0", "dynamic")
			t.Logf("bridge fdb show br br0 dynamic:\n%s", fdb)
			cases := []vlanCase{
				{name: "C-tagged 10 on the customer port", from: 0, frame: tagged(udp(h1, h2, 0), q(4, 10)), in: "p1",
					out: sflow.IfIndex(idx("p2")), sw: &sflow.ExtendedSwitch{SrcVLAN: 1000, DstVLAN: 1000}},
				{name: "S-tagged 1000 over C-tag 10 on the trunk", from: 1, frame: tagged(udp(h2, h1, 1), ad(2, 1000), q(4, 10)), in: "p2",
					out: sflow.IfIndex(idx("p1")), sw: &sflow.ExtendedSwitch{SrcVLAN: 1000, SrcPriority: 2, DstVLAN: 1000, DstPriority: 2}},
			}
			runVLANCases(t, lab, hook, []string{"p1", "p2"}, cases)
		})
	}
}

// TestSubInterfaces routes between two 802.1Q sub-interfaces, p1.100
// (198.18.1.1/24) and p2.200 (198.18.2.1/24), with the daemon sampling
// p1 and p2 (the physical ports): a frame from host 1 tagged 100 PCP 3,
// addressed to the switch and routed to 198.18.2.2, is sampled on p1
// (input p1: the port it crossed, not p1.100) with output p2 (the port
// under p2.200, which it leaves by) and extended_switch 100 → 200,
// priority 3, at XDP and at TC. The sub-interfaces are not data sources:
// no sample names them.
func TestSubInterfaces(t *testing.T) {
	testskip.Root(t)
	testskip.Feature(t, features.ProbeL2Features(), features.Feature8021Q)
	for _, hook := range []string{"xdp", "tc"} {
		t.Run(hook, func(t *testing.T) {
			lab := newLab(t, 2)
			sw := lab.Switch
			h1, h2 := lab.HostMACs[0], lab.HostMACs[1]
			for _, c := range [][]string{
				{"ip", "link", "set", "p1", "nomaster"},
				{"ip", "link", "set", "p2", "nomaster"},
				{"ip", "link", "add", "link", "p1", "name", "p1.100", "type", "vlan", "id", "100"},
				{"ip", "link", "add", "link", "p2", "name", "p2.200", "type", "vlan", "id", "200"},
				{"ip", "addr", "add", "198.18.1.1/24", "dev", "p1.100"},
				{"ip", "addr", "add", "198.18.2.1/24", "dev", "p2.200"},
				{"ip", "link", "set", "p1.100", "up"},
				{"ip", "link", "set", "p2.200", "up"},
				{"ip", "neigh", "replace", "198.18.1.2", "lladdr", h1.String(), "dev", "p1.100", "nud", "permanent"},
				{"ip", "neigh", "replace", "198.18.2.2", "lladdr", h2.String(), "dev", "p2.200", "nud", "permanent"},
				{"sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
			} {
				if out, err := lab.Run(sw, c[0], c[1:]...); err != nil {
					t.Fatalf("%v: %v\n%s", c, err, out)
				}
			}
			idx := func(name string) uint32 { return uint32(lab.LinkIndex(sw, name)) }
			p1link, err := netnsutil.Link(sw, "p1")
			if err != nil {
				t.Fatal(err)
			}
			mac := p1link.Attrs().HardwareAddr
			q := func(pcp, vid uint16) [2]uint16 { return [2]uint16{0x8100, pcp<<13 | vid} }
			frame := tagged(netlab.UDPFrame(h1, mac, netip.AddrPortFrom(netip.MustParseAddr("198.18.1.2"), 4000),
				netip.AddrPortFrom(netip.MustParseAddr("198.18.2.2"), 4000), []byte("vlancase-00")), q(3, 100))
			if out, err := lab.Run(sw, "ip", "-d", "link", "show", "p2.200"); err == nil {
				t.Logf("ip -d link show p2.200:\n%s", out)
			}
			h2rx := lab.RxPackets(t, lab.Hosts[1], "eth0")
			_, dgs := runVLANCases(t, lab, hook, []string{"p1", "p2"}, []vlanCase{{name: "tagged 100 on p1, routed out of p2.200", from: 0, frame: frame, in: "p1",
				out: sflow.IfIndex(idx("p2")), sw: &sflow.ExtendedSwitch{SrcVLAN: 100, SrcPriority: 3, DstVLAN: 200, DstPriority: 3}}})
			for _, f := range flowSamplesOf(dgs, 0) {
				if f.source.Index == idx("p1.100") || f.source.Index == idx("p2.200") || f.output == sflow.IfIndex(idx("p2.200")) || f.input == idx("p1.100") {
					t.Errorf("a sample names a sub-interface: %+v", f)
				}
			}
			t.Logf("host 2 received %d frames (routed out of p2.200)", lab.RxPackets(t, lab.Hosts[1], "eth0")-h2rx)
		})
	}
}
