package mib

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gosnmp/gosnmp"

	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/snmptest"
)

// newSnmpdMIB serves a MIB with nports fake ports (ifIndex 3, 40, 77, ...)
// and one static receiver to a real snmpd through the AgentX subagent.
func newSnmpdMIB(tb testing.TB, nports int) (*snmptest.Snmpd, *MIB, *recorder) {
	tb.Helper()
	s := newTestSnmpd(tb)
	rec := &recorder{}
	m, err := New(Config{Revision: "test", Apply: rec.Apply})
	if err != nil {
		tb.Fatal(err)
	}
	if err := m.SetStatic(Static{Receivers: []StaticReceiver{{Address: netip.MustParseAddrPort("198.18.0.100:6343")}}, HeaderBytes: 128}); err != nil {
		tb.Fatal(err)
	}
	var ports []Port
	for i := range nports {
		ports = append(ports, Port{IfIndex: uint32(3 + 37*i), StaticRate: 1000})
	}
	if err := m.SetPorts(ports); err != nil {
		tb.Fatal(err)
	}
	if err := m.SetAgentAddress(netip.MustParseAddr("198.19.255.1")); err != nil {
		tb.Fatal(err)
	}
	runSubagent(tb, s, m)
	return s, m, rec
}

// TestSnmpdWalk64Ports walks the MIB of 64 ports through a real snmpd
// (GETBULK by gosnmp, GETNEXT by net-snmp's snmpwalk with the SFLOW-MIB
// loaded) and compares with the MIB's own rows. The 64 ports are fake
// (no lab): the walk exercises the MIB and AgentX, not the dataplane, and
// a 64-port lab would take longer to build than the whole test.
func TestSnmpdWalk64Ports(t *testing.T) {
	s, m, _ := newSnmpdMIB(t, 64)
	g := s.Client(t, "public")
	got := snmpWalk(t, g)
	want := (&testMIB{MIB: m, t: t}).walk()
	if len(got) != len(want) {
		t.Fatalf("snmpd walk %d objects, MIB has %d", len(got), len(want))
	}
	// 3 scalars, 7 columns x 10 receivers, 3 columns x 64 ports x 3
	// instances, 2 columns x 65 data sources x 3 instances.
	if n := 3 + 7*10 + 3*64*3 + 2*65*3; len(got) != n {
		t.Fatalf("walk %d objects, want %d", len(got), n)
	}
	for i, p := range got {
		if p.Name != "."+want[i].Name.String() {
			t.Fatalf("walk position %d: %s, want %s", i, p.Name, want[i].Name)
		}
		if i > 0 && agentx.MustParseOID(p.Name).Compare(agentx.MustParseOID(got[i-1].Name)) <= 0 {
			t.Fatalf("walk not increasing at %s", p.Name)
		}
	}
	out, err := tool(s, "snmpwalk", "-Oq", "SFLOW-MIB::sFlowAgent")
	if err != nil {
		t.Fatalf("snmpwalk: %v\n%s", err, out)
	}
	// snmpwalk ends with a note that the view is exhausted (our subtree
	// is the last one in it); that line is no object.
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.Contains(l, "No more variables left") {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(want) {
		t.Fatalf("snmpwalk printed %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	// Names resolve through the MIB, OID indexes included.
	for _, w := range []string{
		`SFLOW-MIB::sFlowVersion.0 1.3;sflowswitchd;test`,
		`SFLOW-MIB::sFlowAgentAddressType.0 ipv4`,
		`SFLOW-MIB::sFlowRcvrOwner.1 "sflowswitchd.conf"`,
		`SFLOW-MIB::sFlowRcvrTimeout.1 2147483647`,
		// The OID index with its length prefix (RFC 2578 section 7.7).
		`SFLOW-MIB::sFlowFsPacketSamplingRate.11.1.3.6.1.2.1.2.2.1.1.3.1 1000`,
		`SFLOW-MIB::sFlowFsPacketSamplingRate.11.1.3.6.1.2.1.2.2.1.1.3.2 0`,
		`SFLOW-MIB::sFlowCpInterval.11.1.3.6.1.2.1.2.2.1.1.2334.3 0`,
		`SFLOW-MIB::sFlowCpReceiver.12.1.3.6.1.2.1.47.1.1.1.1.1.1 1`,
	} {
		if !slices.Contains(lines, w) {
			t.Errorf("snmpwalk output lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("snmpwalk output (head):\n%s", strings.Join(lines[:min(40, len(lines))], "\n"))
	}
}

// TestSnmpdBadSets sends every bad-SET case through snmpd: each comes back
// with its error status and the index of the bad varbind in the manager's
// request, and the MIB is unchanged afterwards.
func TestSnmpdBadSets(t *testing.T) {
	s, m, rec := newSnmpdMIB(t, 4)
	// newSnmpdMIB's ports are 3, 40, 77, 114; the cases use 1..4.
	if err := m.SetPorts([]Port{{IfIndex: 1, StaticRate: 1000}, {IfIndex: 2, StaticRate: 1000}, {IfIndex: 3, StaticRate: 1000}, {IfIndex: 4, StaticRate: 1000}}); err != nil {
		t.Fatal(err)
	}
	g := s.Client(t, "private")
	for _, vbs := range badSetSetup() {
		mustSNMPSet(t, g, vbs...)
	}
	before, applied := dumpPDUs(snmpWalk(t, g)), rec.count()
	for _, c := range badSets() {
		st, idx := snmpSet(t, g, integer(rcvrOID(colRcvrPort, 2), 7777), c.vb)
		if st != c.want || idx != 2 {
			t.Errorf("%s: %s at %d, want %s at 2", c.name, st, idx, c.want)
		}
	}
	// Timeouts count down between the walks; mask them.
	mask := func(s string) string {
		var b strings.Builder
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, "."+rcvrOID(colRcvrTimeout, 1).String()[:len(rcvrOID(colRcvrTimeout, 1).String())-1]) {
				continue
			}
			fmt.Fprintln(&b, l)
		}
		return b.String()
	}
	if after := dumpPDUs(snmpWalk(t, g)); mask(after) != mask(before) || rec.count() != applied {
		t.Fatalf("failed SETs changed the MIB:\nbefore\n%s\nafter\n%s", before, after)
	}

	// One bad varbind among valid ones: nothing changes.
	st, idx := snmpSet(t, g, octets(rcvrOID(colRcvrOwner, 3), "mgr-x"), integer(rcvrOID(colRcvrTimeout, 3), 60),
		octets(rcvrOID(colRcvrAddress, 3), "\xc6\x13\xff\x02"), integer(fsOID(colFsReceiver, 2, 3), 3),
		integer(fsOID(colFsRate, 2, 3), 10), integer(fsOID(colFsHeader, 2, 3), -1))
	if st != agentx.WrongValue || idx != 6 {
		t.Fatalf("multi-varbind SET: %s at %d, want wrongValue at 6", st, idx)
	}
	res, err := g.Get([]string{"." + rcvrOID(colRcvrOwner, 3).String(), "." + fsOID(colFsRate, 2, 3).String()})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Variables[0].Value.([]byte)) != "" || gosnmp.ToBigInt(res.Variables[1].Value).Int64() != 0 || rec.count() != applied {
		t.Fatalf("multi-varbind SET with a bad varbind changed something: %+v", res.Variables)
	}
}
