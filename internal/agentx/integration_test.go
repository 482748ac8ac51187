package agentx

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/snmptest"
)

// runSubagent runs a Subagent serving h against s until the test ends.
func runSubagent(tb testing.TB, s *snmptest.Snmpd, h Handler) *Subagent {
	tb.Helper()
	sa, err := New(Config{Address: s.SocketPath, Subtree: MustParseOID("1.3.6.1.4.1.14706"),
		Description: "sflowswitchd snmpd test", Handler: h, Timeout: 2 * time.Second,
		PingInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	s.Serve(tb, sa)
	return sa
}

// tool runs a net-snmp command line tool against s with numeric OID
// output.
func tool(s *snmptest.Snmpd, name string, oids ...string) (string, error) {
	return s.Tool(name, append([]string{"-v2c", "-c", "private", "-On", "-t", "2", "-r", "1", s.UDPAddr}, oids...)...)
}

func dot(o OID) string { return "." + o.String() }

func TestIntegrationSnmpd(t *testing.T) {
	s := snmptest.Start(t, snmptest.Options{})
	h := newMemHandler()
	sa := runSubagent(t, s, h)
	g := s.Client(t, "private")

	t.Run("Get", func(t *testing.T) {
		res, err := g.Get([]string{dot(oidName), dot(oidCount), dot(oidOctets), dot(oidAddr),
			dot(oidRateCol.Append(2)), dot(oidRateCol.Append(9)), dot(testBase.Append(9, 0))})
		if err != nil {
			t.Fatal(err)
		}
		v := res.Variables
		if len(v) != 7 {
			t.Fatalf("%d varbinds", len(v))
		}
		if v[0].Type != gosnmp.OctetString || string(v[0].Value.([]byte)) != "sflowswitchd-test" {
			t.Errorf("name = %v %v", v[0].Type, v[0].Value)
		}
		if v[1].Type != gosnmp.Integer || v[1].Value.(int) != 5 {
			t.Errorf("count = %v %v", v[1].Type, v[1].Value)
		}
		if v[2].Type != gosnmp.Counter64 || v[2].Value.(uint64) != 1<<40 {
			t.Errorf("octets = %v %v", v[2].Type, v[2].Value)
		}
		if v[3].Type != gosnmp.IPAddress || v[3].Value.(string) != "198.18.0.1" {
			t.Errorf("addr = %v %v", v[3].Type, v[3].Value)
		}
		if v[4].Type != gosnmp.Integer || v[4].Value.(int) != 20 {
			t.Errorf("rate.2 = %v %v", v[4].Type, v[4].Value)
		}
		if v[5].Type != gosnmp.NoSuchInstance {
			t.Errorf("rate.9 = %v, want NoSuchInstance", v[5].Type)
		}
		if v[6].Type != gosnmp.NoSuchObject {
			t.Errorf("base.9.0 = %v, want NoSuchObject", v[6].Type)
		}
	})

	t.Run("GetNext", func(t *testing.T) {
		res, err := g.GetNext([]string{dot(testBase), dot(oidRateCol.Append(3)), dot(oidBulkCol.Append(bulkRows))})
		if err != nil {
			t.Fatal(err)
		}
		v := res.Variables
		if v[0].Name != dot(oidName) {
			t.Errorf("next(base) = %s", v[0].Name)
		}
		if v[1].Name != dot(oidOwnerCol.Append(1)) || string(v[1].Value.([]byte)) != "owner-1" {
			t.Errorf("next(rate.3) = %s %v", v[1].Name, v[1].Value)
		}
		// Past our last object the master continues in its own MIB view
		// or reports endOfMibView; it must not be one of ours.
		if strings.HasPrefix(v[2].Name, dot(testBase)+".") {
			t.Errorf("next(last) = %s, still in our subtree", v[2].Name)
		}
	})

	t.Run("GetBulk", func(t *testing.T) {
		res, err := g.GetBulk([]string{dot(testBase), dot(oidRateCol)}, 1, 3)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range res.Variables {
			got = append(got, v.Name)
		}
		want := []string{dot(oidName), dot(oidRateCol.Append(1)), dot(oidRateCol.Append(2)), dot(oidRateCol.Append(3))}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("bulk = %v, want %v", got, want)
		}
	})

	t.Run("BulkWalk", func(t *testing.T) {
		pdus, err := g.BulkWalkAll(dot(testBase))
		if err != nil {
			t.Fatal(err)
		}
		if want := 4 + 6 + bulkRows; len(pdus) != want {
			t.Fatalf("walked %d objects, want %d", len(pdus), want)
		}
		for i, p := range pdus[10:] {
			if p.Name != dot(oidBulkCol.Append(uint32(i+1))) || gosnmp.ToBigInt(p.Value).Int64() != int64(i+1) {
				t.Fatalf("walk row %d = %s %v", i+1, p.Name, p.Value)
			}
		}
		var n int
		if err := g.Walk(dot(oidRateCol), func(gosnmp.SnmpPDU) error { n++; return nil }); err != nil || n != 3 {
			t.Errorf("walk of rate column: %d objects, %v", n, err)
		}
	})

	t.Run("Set", func(t *testing.T) {
		res, err := g.Set([]gosnmp.SnmpPDU{
			{Name: dot(oidRateCol.Append(1)), Type: gosnmp.Integer, Value: 777},
			{Name: dot(oidOwnerCol.Append(1)), Type: gosnmp.OctetString, Value: []byte("collector-a")},
		})
		if err != nil || res.Error != gosnmp.NoError {
			t.Fatalf("set: %v %v", err, res)
		}
		if h.value(oidRateCol.Append(1)) != int32(777) || string(h.value(oidOwnerCol.Append(1)).([]byte)) != "collector-a" {
			t.Fatal("set not applied")
		}
		res, err = g.Get([]string{dot(oidRateCol.Append(1))})
		if err != nil || res.Variables[0].Value.(int) != 777 {
			t.Fatalf("get after set: %v %v", err, res)
		}
	})

	t.Run("SetErrors", func(t *testing.T) {
		good := []gosnmp.SnmpPDU{
			{Name: dot(oidRateCol.Append(2)), Type: gosnmp.Integer, Value: 111},
			{Name: dot(oidOwnerCol.Append(2)), Type: gosnmp.OctetString, Value: []byte("x")},
			{Name: dot(oidRateCol.Append(3)), Type: gosnmp.Integer, Value: 333},
		}
		cases := []struct {
			name string
			bad  gosnmp.SnmpPDU
			at   int // 0-based position to put the bad varbind at
			want gosnmp.SNMPError
		}{
			{"wrongValue", gosnmp.SnmpPDU{Name: dot(oidRateCol.Append(1)), Type: gosnmp.Integer, Value: 5000}, 1, gosnmp.WrongValue},
			{"wrongType", gosnmp.SnmpPDU{Name: dot(oidRateCol.Append(1)), Type: gosnmp.OctetString, Value: []byte("5")}, 2, gosnmp.WrongType},
			{"notWritable", gosnmp.SnmpPDU{Name: dot(oidCount), Type: gosnmp.Integer, Value: 6}, 3, gosnmp.NotWritable},
			{"wrongLength", gosnmp.SnmpPDU{Name: dot(oidOwnerCol.Append(3)), Type: gosnmp.OctetString, Value: make([]byte, 40)}, 0, gosnmp.WrongLength},
		}
		before := map[string]any{}
		for _, p := range good {
			oid := MustParseOID(p.Name)
			before[p.Name] = h.value(oid)
		}
		for _, c := range cases {
			pdus := append([]gosnmp.SnmpPDU(nil), good[:c.at]...)
			pdus = append(pdus, c.bad)
			pdus = append(pdus, good[c.at:]...)
			res, err := g.Set(pdus)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if res.Error != c.want || int(res.ErrorIndex) != c.at+1 {
				t.Errorf("%s: got %v index %d, want %v index %d", c.name, res.Error, res.ErrorIndex, c.want, c.at+1)
			}
			for _, p := range good {
				if got := h.value(MustParseOID(p.Name)); fmt.Sprint(got) != fmt.Sprint(before[p.Name]) {
					t.Errorf("%s: %s changed to %v by a failed set", c.name, p.Name, got)
				}
			}
		}
		if h.value(oidCount) != int32(5) {
			t.Error("read-only scalar changed")
		}
	})

	t.Run("NetSnmpTools", func(t *testing.T) {
		out, err := tool(s, "snmpget", dot(oidCount), dot(oidName))
		if err != nil {
			t.Fatalf("snmpget: %v\n%s", err, out)
		}
		want := dot(oidCount) + " = INTEGER: 5\n" + dot(oidName) + ` = STRING: "sflowswitchd-test"`
		if !strings.Contains(out, want) {
			t.Errorf("snmpget output:\n%s\nwant:\n%s", out, want)
		}
		out, err = tool(s, "snmpwalk", dot(oidRateCol))
		if err != nil {
			t.Fatalf("snmpwalk: %v\n%s", err, out)
		}
		if n := strings.Count(out, "INTEGER:"); n != 3 || !strings.Contains(out, dot(oidRateCol.Append(1))+" = INTEGER: 777") {
			t.Errorf("snmpwalk output (%d rows):\n%s", n, out)
		}
	})

	t.Run("MasterRestart", func(t *testing.T) {
		before := sa.Reconnects()
		s.Kill()
		// The subagent notices the loss (EOF) promptly.
		deadline := time.Now().Add(3 * time.Second)
		for sa.Connected() {
			if time.Now().After(deadline) {
				t.Fatal("subagent still connected after snmpd was killed")
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Second) // let the backoff grow a little
		s.Restart(t)
		started := time.Now()
		s.WaitConnected(t, sa, 5*time.Second)
		t.Logf("re-registered %v after snmpd restart", time.Since(started))
		if sa.Reconnects() != before+1 {
			t.Errorf("reconnects = %d, want %d", sa.Reconnects(), before+1)
		}
		g := s.Client(t, "private")
		res, err := g.Get([]string{dot(oidRateCol.Append(1))})
		if err != nil || res.Variables[0].Type != gosnmp.Integer || res.Variables[0].Value.(int) != 777 {
			t.Fatalf("get after restart: %v %+v", err, res)
		}
	})
}

// BenchmarkGetThroughSnmpd measures one SNMP GET (two scalars) from gosnmp
// through snmpd and AgentX to the subagent and back.
func BenchmarkGetThroughSnmpd(b *testing.B) {
	s := snmptest.Start(b, snmptest.Options{})
	runSubagent(b, s, newMemHandler())
	g := s.Client(b, "private")
	oids := []string{dot(oidCount), dot(oidRateCol.Append(1))}
	b.ResetTimer()
	for b.Loop() {
		res, err := g.Get(oids)
		if err != nil || res.Variables[0].Type != gosnmp.Integer {
			b.Fatalf("get: %v %+v", err, res)
		}
	}
}

// BenchmarkWalkThroughSnmpd measures a GETBULK walk (max-repetitions 50) of
// the 1000-row test column through snmpd.
func BenchmarkWalkThroughSnmpd(b *testing.B) {
	s := snmptest.Start(b, snmptest.Options{})
	runSubagent(b, s, newMemHandler())
	g := s.Client(b, "private")
	b.ResetTimer()
	for b.Loop() {
		pdus, err := g.BulkWalkAll(dot(oidBulkCol))
		if err != nil || len(pdus) != bulkRows {
			b.Fatalf("walk: %d objects, %v", len(pdus), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/bulkRows, "ns/object")
}
