package apmmib

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"

	"github.com/sflowswitchd/sflowswitchd/apps/apm"
	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/apmtest"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/snmptest"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// mibDir holds APM-MIB and its imports for net-snmp's tools.
var mibDir = testutil.MIBDir()

// startSnmpd starts a real net-snmp snmpd (see internal/testkit/snmptest) with
// communities "public" (read-only) and "private" (read-write) and APM-MIB
// available to the tools.
func startSnmpd(tb testing.TB) *snmptest.Snmpd {
	tb.Helper()
	return snmptest.Start(tb, snmptest.Options{ROCommunity: "public", RWCommunity: "private", MIBDirs: mibDir})
}

// client returns a gosnmp session with community "public" and a 5 s
// timeout (walks of large reports through snmpd are slow on a busy host).
func client(tb testing.TB, s *snmptest.Snmpd) *gosnmp.GoSNMP {
	tb.Helper()
	g := s.Client(tb, "public")
	g.Timeout = 5 * time.Second
	return g
}

// runSubagent registers h for subtree on s until the test ends.
func runSubagent(tb testing.TB, s *snmptest.Snmpd, subtree agentx.OID, h agentx.Handler) {
	tb.Helper()
	sa, err := agentx.New(agentx.Config{Address: s.SocketPath, Subtree: subtree,
		Description: "apmmib test " + subtree.String(), Handler: h, Timeout: 5 * time.Second,
		PingInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	s.Serve(tb, sa)
}

// scalarHandler serves one read-only Integer scalar: a stand-in for the
// SFLOW-MIB session the daemon runs next to the APM-MIB one.
type scalarHandler struct{ name agentx.OID }

func (s scalarHandler) Get(o agentx.OID) (agentx.Variable, error) {
	if o.Equal(s.name) {
		return agentx.Variable{Name: o, Type: agentx.Integer, Value: int32(42)}, nil
	}
	return agentx.Variable{Name: o, Type: agentx.NoSuchObject}, nil
}

func (s scalarHandler) GetNext(from agentx.OID, include bool, end agentx.OID) (agentx.Variable, error) {
	if c := from.Compare(s.name); (c < 0 || (c == 0 && include)) && (len(end) == 0 || s.name.Compare(end) < 0) {
		return agentx.Variable{Name: s.name, Type: agentx.Integer, Value: int32(42)}, nil
	}
	return agentx.Variable{Name: from, Type: agentx.EndOfMibView}, nil
}

func (scalarHandler) TestSet(uint32, []agentx.Variable) (agentx.ErrorStatus, int) {
	return agentx.NotWritable, 1
}
func (scalarHandler) CommitSet(uint32) (agentx.ErrorStatus, int) { return agentx.CommitFailed, 1 }
func (scalarHandler) UndoSet(uint32) (agentx.ErrorStatus, int)   { return agentx.NoError, 0 }
func (scalarHandler) CleanupSet(uint32)                          {}

// gosnmpValue converts a gosnmp PDU to the snmpd type and value the
// handler would produce, for comparison.
func gosnmpValue(t *testing.T, p gosnmp.SnmpPDU) (agentx.VarType, string) {
	t.Helper()
	switch p.Type {
	case gosnmp.Gauge32:
		return agentx.Gauge32, fmt.Sprint(p.Value)
	case gosnmp.Counter32:
		return agentx.Counter32, fmt.Sprint(p.Value)
	case gosnmp.TimeTicks:
		return agentx.TimeTicks, fmt.Sprint(p.Value)
	case gosnmp.Integer:
		return agentx.Integer, fmt.Sprint(p.Value)
	case gosnmp.OctetString:
		return agentx.OctetString, fmt.Sprint(p.Value.([]byte))
	case gosnmp.ObjectIdentifier:
		return agentx.ObjectIdentifier, strings.TrimPrefix(p.Value.(string), ".")
	}
	t.Fatalf("%s: unexpected type %v", p.Name, p.Type)
	return 0, ""
}

func expectedValue(v agentx.Variable) string {
	switch x := v.Value.(type) {
	case agentx.OID:
		return x.String()
	case int32:
		return fmt.Sprint(int(x))
	case uint32:
		return fmt.Sprint(uint(x))
	}
	return fmt.Sprint(v.Value)
}

func TestIntegrationSnmpd(t *testing.T) {
	e := populatedEngine(t)
	start := exampleStart.Add(-time.Minute)
	s := startSnmpd(t)
	sflow := agentx.MustParseOID("1.3.6.1.4.1.14706.1.1.1.0")
	runSubagent(t, s, agentx.MustParseOID("1.3.6.1.4.1.14706"), scalarHandler{name: sflow})
	runSubagent(t, s, OID, New(e, Options{Start: start}))
	g := client(t, s)
	want := expectedObjects(t, e, start)

	t.Run("BulkWalk", func(t *testing.T) {
		pdus, err := g.BulkWalkAll("." + OID.String())
		if err != nil {
			t.Fatal(err)
		}
		if len(pdus) != len(want) {
			t.Errorf("walked %d objects, want %d", len(pdus), len(want))
		}
		names := sortedNames(want)
		for i, p := range pdus {
			name := agentx.MustParseOID(p.Name)
			if i < len(names) && !name.Equal(names[i]) {
				t.Fatalf("object #%d is %s, want %s", i, name, names[i])
			}
			w := want[name.String()]
			typ, val := gosnmpValue(t, p)
			if typ != w.Type || val != expectedValue(w) {
				t.Errorf("%s = %v %s, want %v %s", name, typ, val, w.Type, expectedValue(w))
			}
		}
	})

	t.Run("OtherSession", func(t *testing.T) {
		res, err := g.Get([]string{"." + sflow.String(), ".1.3.6.1.2.1.16.23.1.9.1.10.1"})
		if err != nil {
			t.Fatal(err)
		}
		if v := res.Variables; v[0].Type != gosnmp.Integer || v[0].Value.(int) != 42 ||
			v[1].Type != gosnmp.Gauge32 || v[1].Value.(uint) != 3 {
			t.Errorf("get across both sessions: %+v", v)
		}
	})

	t.Run("Snmpwalk", func(t *testing.T) {
		out, err := s.Tool("snmpwalk", "-v2c", "-c", "public", "-t", "5", "-r", "1",
			"-Ob", "-M", mibDir, "-m", "APM-MIB", s.UDPAddr, "apmReportTable")
		if err != nil {
			t.Fatalf("snmpwalk: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if n := len(lines); n != 38*12 {
			t.Errorf("snmpwalk printed %d lines, want %d:\n%s", n, 38*12, out)
		}
		// RFC 3729 section 2.1 flows table, HTTP Jim->CallCtr: count 2,
		// successful 1, mean 5 s; the applications report: HTTP B1 = 3.
		for _, l := range []string{
			`APM-MIB::apmReportTransactionCount.1.1.10.1.1.4.198.18.0.10.3323068673 = Gauge32: 2`,
			`APM-MIB::apmReportSuccessfulTransactions.1.1.10.1.1.4.198.18.0.10.3323068673 = Gauge32: 1`,
			`APM-MIB::apmReportResponsivenessMean.1.1.10.1.1.4.198.18.0.10.3323068673 = Gauge32: 5000`,
			`APM-MIB::apmReportResponsivenessB1.4.1.10.1.0.0.0 = Gauge32: 3`,
		} {
			if !strings.Contains(out, l+"\n") {
				t.Errorf("snmpwalk output lacks %q:\n%s", l, head(out, 20))
			}
		}
	})

	t.Run("SnmpwalkTypes", func(t *testing.T) {
		// net-snmp checks every value against the SYNTAX it parsed from
		// the MIB and prints "Wrong Type" on a mismatch.
		out, err := s.Tool("snmpwalk", "-v2c", "-c", "public", "-t", "5", "-r", "1",
			"-M", mibDir, "-m", "APM-MIB", s.UDPAddr, "apm")
		if err != nil {
			t.Fatalf("snmpwalk: %v\n%s", err, out)
		}
		if n := strings.Count(out, "\n"); n != len(want) {
			t.Errorf("snmpwalk printed %d lines, want %d", n, len(want))
		}
		if strings.Contains(out, "Wrong Type") || strings.Contains(out, "No more variables") {
			t.Errorf("snmpwalk output:\n%s", out)
		}
		for _, l := range []string{
			"APM-MIB::apmAppDirConfig.20.streamingOriented = INTEGER: off(1)",
			"APM-MIB::apmAppDirResponsivenessBoundary6.20.throughputOriented = Gauge32: 600",
			"APM-MIB::apmReportControlDataSource.1 = OID: IF-MIB::ifIndex.7",
			"APM-MIB::apmReportControlDataSource.2 = OID: SNMPv2-SMI::zeroDotZero",
			"APM-MIB::apmReportControlAggregationType.3 = INTEGER: servers(3)",
			"APM-MIB::apmReportControlInterval.1 = Gauge32: 300 Seconds",
			// Report 3 began 10 min after exampleStart, 11 min after Start.
			"APM-MIB::apmReportControlStartTime.1 = Timeticks: (66000) 0:11:00.00",
			"APM-MIB::apmReportControlDeniedInserts.4 = Counter32: 0",
			`APM-MIB::apmReportControlOwner.2 = STRING: "owner-2"`,
			"APM-MIB::apmReportControlStorageType.1 = INTEGER: permanent(4)",
			"APM-MIB::apmReportControlStatus.4 = INTEGER: active(1)",
			"APM-MIB::apmReportResponsivenessMax.2.1.10.transactionOriented.0.\"\".3323068673 = Gauge32: 12000",
		} {
			if !strings.Contains(out, l+"\n") {
				t.Errorf("snmpwalk output lacks %q", l)
			}
		}
		if strings.Count(out, "APM-MIB::apmNameMachineName.") != 6 {
			t.Errorf("snmpwalk apmNameTable:\n%s", out)
		}
	})

	t.Run("SetRefused", func(t *testing.T) {
		rw := client(t, s)
		rw.Community = "private"
		owner := gosnmp.SnmpPDU{Name: ".1.3.6.1.2.1.16.23.1.9.1.13.1", Type: gosnmp.OctetString, Value: []byte("me")}
		index := gosnmp.SnmpPDU{Name: ".1.3.6.1.2.1.16.23.1.9.1.1.1", Type: gosnmp.Gauge32, Value: uint(1)}
		for _, c := range []struct {
			pdus []gosnmp.SnmpPDU
			want gosnmp.SNMPError
		}{
			{[]gosnmp.SnmpPDU{owner}, gosnmp.NotWritable},
			{[]gosnmp.SnmpPDU{index, owner}, gosnmp.NoAccess},
		} {
			res, err := rw.Set(c.pdus)
			if err != nil {
				t.Fatal(err)
			}
			if res.Error != c.want || res.ErrorIndex != 1 {
				t.Errorf("set %s: %v index %d, want %v index 1", c.pdus[0].Name, res.Error, res.ErrorIndex, c.want)
			}
		}
		res, err := g.Get([]string{owner.Name})
		if err != nil || string(res.Variables[0].Value.([]byte)) != "owner-1" {
			t.Fatalf("owner after refused sets: %v %+v", err, res)
		}
	})
}

func head(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// bigEngine returns an engine with one flows report of n rows (n clients
// of one HTTP server).
func bigEngine(tb testing.TB, n int) *apm.Engine {
	tb.Helper()
	e := apm.NewEngine(apm.Config{})
	if err := e.SetAppDir(apm.AppDirEntry{App: apmtest.AppHTTP, Type: apm.TransactionOriented, On: true, Boundaries: apmtest.Boundaries}); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.AddControl(apm.ReportControl{Index: 1, Aggregation: apm.Flows, Interval: time.Minute,
		RequestedSize: uint32(n), RequestedReports: 1}, exampleStart); err != nil {
		tb.Fatal(err)
	}
	server := netip.MustParseAddr("198.18.0.80")
	for i := range n {
		client := netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)})
		if err := e.Add(apm.Transaction{App: apmtest.AppHTTP, Type: apm.TransactionOriented, Client: client, Server: server,
			Responsiveness: uint32(i * 37 % 70000), Success: true, Weight: 1}); err != nil {
			tb.Fatal(err)
		}
	}
	e.Tick(exampleStart.Add(time.Minute))
	return e
}

// BenchmarkWalkReportThroughSnmpd measures a GETBULK walk (gosnmp,
// max-repetitions 50) of apmReportTable holding one report of 1000 rows
// (12 columns: 12000 objects) through net-snmp snmpd and AgentX.
func BenchmarkWalkReportThroughSnmpd(b *testing.B) {
	const rows = 1000
	e := bigEngine(b, rows)
	s := startSnmpd(b)
	runSubagent(b, s, OID, New(e, Options{Start: exampleStart}))
	g := client(b, s)
	table := "." + OID.Append(1, 10).String()
	b.ResetTimer()
	for b.Loop() {
		pdus, err := g.BulkWalkAll(table)
		if err != nil || len(pdus) != rows*12 {
			b.Fatalf("walk: %d objects, %v", len(pdus), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(rows*12), "ns/object")
}

// BenchmarkGetNextReport measures the handler alone: one GetNext inside a
// 1000-row report.
func BenchmarkGetNextReport(b *testing.B) {
	e := bigEngine(b, 1000)
	h := New(e, Options{Start: exampleStart})
	from := ReportEntry.Append(3)
	b.ResetTimer()
	for b.Loop() {
		v, err := h.GetNext(from, false, nil)
		if err != nil || v.Type != agentx.Gauge32 {
			b.Fatal(err)
		}
		from = v.Name
		if !from.HasPrefix(ReportEntry.Append(3)) {
			from = ReportEntry.Append(3)
		}
	}
}
