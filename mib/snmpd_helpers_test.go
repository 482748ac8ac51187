package mib

import (
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"

	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/snmptest"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// mibsDir is the repository's MIB directory (SFLOW-MIB and its imports) for
// net-snmp's tools.
var mibsDir = testutil.MIBDir()

// newTestSnmpd starts a real net-snmp snmpd (see internal/testkit/snmptest) set up
// as mib/README.md recommends: communities "private" (read-write) and
// "public" (read-only), both limited to the sFlow enterprise subtree by a
// view, and SFLOW-MIB available to the tools.
func newTestSnmpd(tb testing.TB) *snmptest.Snmpd {
	tb.Helper()
	return snmptest.Start(tb, snmptest.Options{RWCommunity: "private", ROCommunity: "public",
		View: ".1.3.6.1.4.1.14706", MIBDirs: mibsDir})
}

// tool runs a net-snmp command-line tool (snmpwalk, snmpset, ...) against
// s with the SFLOW-MIB loaded from the shared MIB directory, so names
// resolve both ways.
func tool(s *snmptest.Snmpd, name string, args ...string) (string, error) {
	return s.Tool(name, append([]string{"-v2c", "-c", "private", "-M", mibsDir, "-m", "SFLOW-MIB", "-t", "3", "-r", "1",
		s.UDPAddr}, args...)...)
}

// runSubagent serves h to s from this process until the test ends.
func runSubagent(tb testing.TB, s *snmptest.Snmpd, h agentx.Handler) *agentx.Subagent {
	tb.Helper()
	sa, err := agentx.New(agentx.Config{Address: s.SocketPath, Subtree: Subtree, Description: "sflowswitchd mib test",
		Handler: h, Timeout: 2 * time.Second, PingInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	s.Serve(tb, sa)
	return sa
}

// pdu converts a test varbind to a gosnmp one.
func pdu(v agentx.Variable) gosnmp.SnmpPDU {
	p := gosnmp.SnmpPDU{Name: "." + v.Name.String()}
	switch v.Type {
	case agentx.Integer:
		p.Type, p.Value = gosnmp.Integer, int(v.Value.(int32))
	case agentx.OctetString:
		p.Type, p.Value = gosnmp.OctetString, v.Value.([]byte)
	case agentx.Gauge32:
		p.Type, p.Value = gosnmp.Gauge32, uint(v.Value.(uint32))
	case agentx.IPAddress:
		p.Type, p.Value = gosnmp.IPAddress, net.IP(v.Value.([]byte)).String()
	default:
		panic(fmt.Sprintf("test varbind type %s not converted", v.Type))
	}
	return p
}

// snmpSet sends one SET through snmpd and returns its error status and
// index (transport errors fail the test).
func snmpSet(tb testing.TB, g *gosnmp.GoSNMP, vbs ...agentx.Variable) (agentx.ErrorStatus, int) {
	tb.Helper()
	pdus := make([]gosnmp.SnmpPDU, len(vbs))
	for i, v := range vbs {
		pdus[i] = pdu(v)
	}
	res, err := g.Set(pdus)
	if err != nil {
		tb.Fatalf("SET %v: %v", vbs, err)
	}
	return agentx.ErrorStatus(res.Error), int(res.ErrorIndex)
}

func mustSNMPSet(tb testing.TB, g *gosnmp.GoSNMP, vbs ...agentx.Variable) {
	tb.Helper()
	if st, i := snmpSet(tb, g, vbs...); st != agentx.NoError {
		tb.Fatalf("SET %v: %s at %d", vbs, st, i)
	}
}

// snmpWalk walks the whole SFLOW-MIB through snmpd with GETBULK and
// renders it as name=value lines.
func snmpWalk(tb testing.TB, g *gosnmp.GoSNMP) []gosnmp.SnmpPDU {
	tb.Helper()
	res, err := g.BulkWalkAll(".1.3.6.1.4.1.14706")
	if err != nil {
		tb.Fatalf("walk: %v", err)
	}
	return res
}

func dumpPDUs(ps []gosnmp.SnmpPDU) string {
	s := ""
	for _, p := range ps {
		s += fmt.Sprintf("%s=%v\n", p.Name, p.Value)
	}
	return s
}
