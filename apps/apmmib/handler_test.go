package apmmib

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/apps/apm"
	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/apmtest"
)

// The worked example of RFC 3729 section 2.1 (package apmtest): nine
// transactions in a 5 minute period, aggregated four ways; responsiveness
// in milliseconds.

var (
	exampleStart = time.Date(2026, 3, 30, 12, 0, 0, 0, time.UTC)
	aggregations = []apm.Aggregation{apm.Flows, apm.Clients, apm.Servers, apm.Applications}
	ifIndex7     = []uint32{1, 3, 6, 1, 2, 1, 2, 2, 1, 1, 7}
)

// exampleEngine returns an engine with the RFC applications and one
// control per aggregation type (index 1..4, in the order of aggregations),
// whose first report starts at exampleStart.
func exampleEngine(t testing.TB) *apm.Engine {
	t.Helper()
	e := apm.NewEngine(apm.Config{})
	for name, idx := range apmtest.Apps {
		if err := e.SetAppDir(apm.AppDirEntry{App: idx, Type: apm.TransactionOriented, Name: name, On: true, Boundaries: apmtest.Boundaries}); err != nil {
			t.Fatal(err)
		}
	}
	for i, agg := range aggregations {
		rc := apm.ReportControl{
			Index: uint32(i + 1), Aggregation: agg, Interval: 5 * time.Minute,
			RequestedSize: 100, RequestedReports: 4, Owner: fmt.Sprintf("owner-%d", i+1),
		}
		if i == 0 {
			rc.DataSource = ifIndex7
		}
		if _, err := e.AddControl(rc, exampleStart); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func addExampleTransactions(t testing.TB, e *apm.Engine) {
	t.Helper()
	for i, tx := range apmtest.Transactions {
		err := e.Add(apm.Transaction{
			App: apmtest.Apps[tx.App], Type: apm.TransactionOriented,
			Client: apmtest.Hosts[tx.Client], Server: apmtest.Hosts[tx.Server],
			Responsiveness: tx.Seconds * 1000, Success: tx.Successful, Weight: 1,
		})
		if err != nil {
			t.Fatalf("transaction #%d: %v", i+1, err)
		}
	}
}

// exampleTables are the RFC tables by aggregation type.
var exampleTables = map[apm.Aggregation][]apmtest.Row{
	apm.Flows: apmtest.Flows, apm.Clients: apmtest.Clients, apm.Servers: apmtest.Servers, apm.Applications: apmtest.Applications,
}

// exampleIndex writes the apmReportEntry instance index of an RFC row by
// hand from the MIB's INDEX clause (ip is protocolDirLocalIndex 1, the
// engine default; an IPv4 client's ID is its address as a number).
func exampleIndex(ctl, report uint32, r apmtest.Row) []uint32 {
	idx := []uint32{ctl, report, apmtest.Apps[r.App], 1}
	if r.Server == "" {
		idx = append(idx, 0, 0)
	} else {
		a := apmtest.Hosts[r.Server].As4()
		idx = append(idx, 1, 4, uint32(a[0]), uint32(a[1]), uint32(a[2]), uint32(a[3]))
	}
	if r.Client == "" {
		return append(idx, 0)
	}
	return append(idx, apmtest.ClientID(r.Client))
}

func oid(s string) agentx.OID { return agentx.MustParseOID(s) }

// TestRFC3729ExampleThroughHandler reads the RFC section 2.1 tables back
// through Get, and checks a walk of each report finds exactly those rows.
func TestRFC3729ExampleThroughHandler(t *testing.T) {
	e := exampleEngine(t)
	addExampleTransactions(t, e)
	e.Tick(exampleStart.Add(5 * time.Minute))
	h := New(e, Options{Start: exampleStart})

	for i, agg := range aggregations {
		ctl := uint32(i + 1)
		t.Run(agg.String(), func(t *testing.T) {
			want := map[string]bool{}
			for _, r := range exampleTables[agg] {
				idx := exampleIndex(ctl, 1, r)
				want[agentx.OID(idx).String()] = true
				cols := []uint32{r.Count, r.Successful, r.Mean * 1000, r.Min * 1000, r.Max * 1000, r.B1, r.B2, 0, 0, 0, 0, 0}
				for c, w := range cols {
					name := oid("1.3.6.1.2.1.16.23.1.10.1").Append(uint32(c + 3)).Append(idx...)
					v, err := h.Get(name)
					if err != nil {
						t.Fatal(err)
					}
					if v.Type != agentx.Gauge32 || v.Value != w {
						t.Errorf("%s/%s/%s column %d (%s) = %v %v, want Gauge32 %d", r.App, r.Client, r.Server, c+3, name, v.Type, v.Value, w)
					}
				}
			}
			// Walk column 3 of this control's report 1: exactly the RFC rows.
			col := oid("1.3.6.1.2.1.16.23.1.10.1.3").Append(ctl, 1)
			got := map[string]bool{}
			for from := col; ; {
				v, err := h.GetNext(from, false, nil)
				if err != nil {
					t.Fatal(err)
				}
				if v.Type == agentx.EndOfMibView || !v.Name.HasPrefix(col) {
					break
				}
				got[agentx.OID(v.Name[len(col)-2:]).String()] = true
				from = v.Name
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("walked rows %v\nwant %v", slices.Sorted(mapKeys(got)), slices.Sorted(mapKeys(want)))
			}
		})
	}
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// populatedEngine is the RFC example plus a second interval with IPv6
// transactions, a streaming-oriented application that is off, and a tick
// that closes both intervals.
func populatedEngine(t testing.TB) *apm.Engine {
	t.Helper()
	e := exampleEngine(t)
	if err := e.SetAppDir(apm.AppDirEntry{App: 20, Type: apm.StreamingOriented, On: false, Boundaries: [6]uint32{1, 2, 3, 4, 5, 6}}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetAppDir(apm.AppDirEntry{App: 20, Type: apm.ThroughputOriented, On: true, Boundaries: [6]uint32{100, 200, 300, 400, 500, 600}}); err != nil {
		t.Fatal(err)
	}
	addExampleTransactions(t, e)
	e.Tick(exampleStart.Add(5 * time.Minute))
	for i, c := range []string{"2001:db8::1", "2001:db8::2", "198.18.5.5"} {
		for _, app := range []struct {
			idx uint32
			typ apm.ResponsivenessType
		}{{apmtest.AppHTTP, apm.TransactionOriented}, {20, apm.ThroughputOriented}} {
			err := e.Add(apm.Transaction{App: app.idx, Type: app.typ, Client: netip.MustParseAddr(c),
				Server: netip.MustParseAddr("2001:db8::80"), Responsiveness: uint32(150 * (i + 1)), Success: i != 1, Weight: uint64(i + 1)})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	e.Tick(exampleStart.Add(10 * time.Minute))
	return e
}

// expectedObjects lists every object the handler must serve for e, built
// from the engine's API and the MIB by hand (not from the handler's code).
func expectedObjects(t testing.TB, e *apm.Engine, start time.Time) map[string]agentx.Variable {
	t.Helper()
	out := map[string]agentx.Variable{}
	add := func(name agentx.OID, typ agentx.VarType, v any) {
		if _, dup := out[name.String()]; dup {
			t.Fatalf("duplicate expected object %s", name)
		}
		out[name.String()] = agentx.Variable{Name: name, Type: typ, Value: v}
	}
	for _, d := range e.AppDir() {
		cfg := int32(1)
		if d.On {
			cfg = 2
		}
		add(oid("1.3.6.1.2.1.16.23.1.1.1.3").Append(d.App, uint32(d.Type)), agentx.Integer, cfg)
		for b := range 6 {
			add(oid("1.3.6.1.2.1.16.23.1.1.1").Append(uint32(4+b), d.App, uint32(d.Type)), agentx.Gauge32, d.Boundaries[b])
		}
	}
	for _, c := range e.Controls() {
		col := func(n uint32) agentx.OID { return oid("1.3.6.1.2.1.16.23.1.9.1").Append(n, c.Index) }
		ds := agentx.OID{0, 0}
		if c.DataSource != nil {
			ds = agentx.OID(c.DataSource)
		}
		add(col(2), agentx.ObjectIdentifier, ds)
		add(col(3), agentx.Integer, int32(c.Aggregation))
		add(col(4), agentx.Gauge32, uint32(c.Interval/time.Second))
		add(col(5), agentx.Gauge32, c.RequestedSize)
		add(col(6), agentx.Gauge32, c.GrantedSize)
		add(col(7), agentx.Gauge32, c.RequestedReports)
		add(col(8), agentx.Gauge32, c.GrantedReports)
		add(col(9), agentx.TimeTicks, uint32(c.StartTime.Sub(start).Milliseconds()/10))
		add(col(10), agentx.Gauge32, c.ReportNumber)
		add(col(11), agentx.Counter32, c.DeniedInserts)
		add(col(12), agentx.Counter32, uint32(0))
		add(col(13), agentx.OctetString, []byte(c.Owner))
		add(col(14), agentx.Integer, int32(4)) // permanent
		add(col(15), agentx.Integer, int32(1)) // active
	}
	clients := map[uint32]bool{}
	e.Walk(func(index []uint32, r apm.Row) bool {
		vals := append([]uint32{r.TransactionCount, r.SuccessfulTransactions, r.ResponsivenessMean,
			r.ResponsivenessMin, r.ResponsivenessMax}, r.ResponsivenessB[:]...)
		for i, v := range vals {
			add(oid("1.3.6.1.2.1.16.23.1.10.1").Append(uint32(3+i)).Append(index...), agentx.Gauge32, v)
		}
		if r.ClientID != 0 {
			clients[r.ClientID] = true
		}
		return true
	})
	st := start.UTC()
	dt := []uint32{11, uint32(st.Year() >> 8), uint32(st.Year() & 0xff), uint32(st.Month()), uint32(st.Day()),
		uint32(st.Hour()), uint32(st.Minute()), uint32(st.Second()), uint32(st.Nanosecond() / 1e8), '+', 0, 0}
	for id := range clients {
		a, ok := e.ClientAddress(id)
		if !ok {
			t.Fatalf("client ID %d has no address", id)
		}
		idx := []uint32{id, 1, 4}
		if a.Is6() {
			idx = []uint32{id, 2, 16}
		}
		for _, b := range a.AsSlice() {
			idx = append(idx, uint32(b))
		}
		idx = append(idx, dt...)
		add(oid("1.3.6.1.2.1.16.23.1.8.1.4").Append(idx...), agentx.OctetString, []byte{})
		add(oid("1.3.6.1.2.1.16.23.1.8.1.5").Append(idx...), agentx.OctetString, []byte{})
	}
	return out
}

func sortedNames(objs map[string]agentx.Variable) []agentx.OID {
	var names []agentx.OID
	for _, v := range objs {
		names = append(names, v.Name)
	}
	slices.SortFunc(names, agentx.OID.Compare)
	return names
}

func sameValue(a, b agentx.Variable) bool {
	return a.Type == b.Type && a.Name.Equal(b.Name) && fmt.Sprint(a.Value) == fmt.Sprint(b.Value) &&
		fmt.Sprintf("%T", a.Value) == fmt.Sprintf("%T", b.Value)
}

// TestWalkServesEveryObjectOnce walks the whole subtree with GetNext: the
// names strictly increase, every expected object appears exactly once
// with its type and value, and Get returns the same variable.
func TestWalkServesEveryObjectOnce(t *testing.T) {
	e := populatedEngine(t)
	start := exampleStart.Add(-100 * time.Second)
	h := New(e, Options{Start: start})
	want := expectedObjects(t, e, start)
	// Sanity of the fixture: 5 directory rows, 4 controls, 2 reports each.
	if n := len(want); n != 5*7+4*14+(22+6+6+2+2)*12+6*2 {
		t.Fatalf("fixture has %d objects", n)
	}

	seen := map[string]bool{}
	var prev agentx.OID
	for from := OID; ; {
		v, err := h.GetNext(from, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v.Type == agentx.EndOfMibView {
			break
		}
		if prev != nil && v.Name.Compare(prev) <= 0 {
			t.Fatalf("walk not increasing: %s after %s", v.Name, prev)
		}
		w, ok := want[v.Name.String()]
		if !ok {
			t.Fatalf("unexpected object %s = %v %v", v.Name, v.Type, v.Value)
		}
		if !sameValue(v, w) {
			t.Errorf("%s = %v %T %v, want %v %T %v", v.Name, v.Type, v.Value, v.Value, w.Type, w.Value, w.Value)
		}
		if g, err := h.Get(v.Name); err != nil || !sameValue(g, w) {
			t.Errorf("Get(%s) = %+v %v", v.Name, g, err)
		}
		seen[v.Name.String()] = true
		prev, from = v.Name, v.Name
	}
	if len(seen) != len(want) {
		for k := range want {
			if !seen[k] {
				t.Errorf("not walked: %s", k)
			}
		}
	}

	// A few hand-written values: control 1's data source is ifIndex.7 and
	// its report in progress (number 3) started 10 min after exampleStart,
	// i.e. 700 s after sysUpTime zero.
	checks := []struct {
		name string
		typ  agentx.VarType
		val  any
	}{
		{"1.3.6.1.2.1.16.23.1.9.1.2.1", agentx.ObjectIdentifier, agentx.OID(ifIndex7)},
		{"1.3.6.1.2.1.16.23.1.9.1.2.2", agentx.ObjectIdentifier, agentx.OID{0, 0}},
		{"1.3.6.1.2.1.16.23.1.9.1.9.1", agentx.TimeTicks, uint32(70000)},
		{"1.3.6.1.2.1.16.23.1.9.1.10.1", agentx.Gauge32, uint32(3)},
		{"1.3.6.1.2.1.16.23.1.9.1.4.4", agentx.Gauge32, uint32(300)},
		{"1.3.6.1.2.1.16.23.1.9.1.13.3", agentx.OctetString, []byte("owner-3")},
		{"1.3.6.1.2.1.16.23.1.1.1.3.20.3", agentx.Integer, int32(1)},
		{"1.3.6.1.2.1.16.23.1.1.1.3.20.2", agentx.Integer, int32(2)},
		{"1.3.6.1.2.1.16.23.1.1.1.9.20.2", agentx.Gauge32, uint32(600)},
		// The 2001:db8::1 client got ID 1, the first IPv6 ID.
		{"1.3.6.1.2.1.16.23.1.8.1.5.1.2.16.32.1.13.184.0.0.0.0.0.0.0.0.0.0.0.1.11.7.234.3.30.11.58.20.0.43.0.0", agentx.OctetString, []byte{}},
	}
	for _, c := range checks {
		v, err := h.Get(oid(c.name))
		if err != nil || v.Type != c.typ || fmt.Sprint(v.Value) != fmt.Sprint(c.val) {
			t.Errorf("Get(%s) = %v %v %v, want %v %v", c.name, v.Type, v.Value, err, c.typ, c.val)
		}
	}
}

// TestGetNextFromAnyName compares GetNext from arbitrary names (prefixes,
// gaps between rows and columns, names past a table, exact objects with
// and without include, with an end bound) with a brute-force search of the
// expected objects.
func TestGetNextFromAnyName(t *testing.T) {
	e := populatedEngine(t)
	h := New(e, Options{Start: exampleStart})
	names := sortedNames(expectedObjects(t, e, exampleStart))

	var froms []agentx.OID
	for _, n := range names {
		froms = append(froms, n, n[:len(n)-1], n.Append(0), append(slices.Clone(n[:len(n)-1]), n[len(n)-1]+1))
	}
	for _, s := range []string{"1", "1.3.6.1.2.1.16.23", "1.3.6.1.2.1.16.23.0", "1.3.6.1.2.1.16.23.1.1",
		"1.3.6.1.2.1.16.23.1.1.1.1", "1.3.6.1.2.1.16.23.1.1.1.10", "1.3.6.1.2.1.16.23.1.2.0",
		"1.3.6.1.2.1.16.23.1.8.1.3.99", "1.3.6.1.2.1.16.23.1.9.1.16", "1.3.6.1.2.1.16.23.1.10.1.2.4294967295",
		"1.3.6.1.2.1.16.23.1.10.1.14.4.2.12.1.0.0.0", "1.3.6.1.2.1.16.23.1.10.1.15", "1.3.6.1.2.1.16.23.2", "2"} {
		froms = append(froms, oid(s))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, from := range froms {
		for _, include := range []bool{false, true} {
			i := firstAfter(names, from, include)
			end := agentx.OID(nil)
			if rng.IntN(3) == 0 && len(names) > 0 {
				end = names[rng.IntN(len(names))]
			}
			v, err := h.GetNext(from, include, end)
			if err != nil {
				t.Fatal(err)
			}
			wantEnd := i == len(names) || (end != nil && names[i].Compare(end) >= 0)
			switch {
			case wantEnd && v.Type != agentx.EndOfMibView:
				t.Errorf("GetNext(%s, %v, %s) = %s, want endOfMibView", from, include, end, v.Name)
			case !wantEnd && !v.Name.Equal(names[i]):
				t.Errorf("GetNext(%s, %v, %s) = %s %v, want %s", from, include, end, v.Name, v.Type, names[i])
			}
		}
	}
}

// firstAfter returns the position of the first name > from (>= when include).
func firstAfter(names []agentx.OID, from agentx.OID, include bool) int {
	for i, n := range names {
		if c := n.Compare(from); c > 0 || (c == 0 && include) {
			return i
		}
	}
	return len(names)
}

func TestGetMissing(t *testing.T) {
	e := populatedEngine(t)
	h := New(e, Options{Start: exampleStart})
	cases := []struct {
		name string
		want agentx.VarType
	}{
		{"1.3.6.1.2.1.16.23.1.2.0", agentx.NoSuchObject},                     // apmBucketBoundaryLastChange: not served
		{"1.3.6.1.2.1.16.23.1.1.1.1.10.1", agentx.NoSuchObject},              // not-accessible index column
		{"1.3.6.1.2.1.16.23.1.10.1.2.1.1", agentx.NoSuchObject},              // apmReportServerAddress
		{"1.3.6.1.2.1.16.23.1.10.1.15.1.1", agentx.NoSuchObject},             // no column 15
		{"1.3.6.1.2.1.16.23.1.1.1.3.10.2", agentx.NoSuchInstance},            // HTTP has no throughput entry
		{"1.3.6.1.2.1.16.23.1.9.1.3.9", agentx.NoSuchInstance},               // no control 9
		{"1.3.6.1.2.1.16.23.1.9.1.3", agentx.NoSuchInstance},                 // column without index
		{"1.3.6.1.2.1.16.23.1.10.1.3.1.1.10.1.0.0.0", agentx.NoSuchInstance}, // flows row needs a server
		{"1.3.6.1.2.1.16.23.1.8.1.4.1", agentx.NoSuchInstance},
		{"1.3.6.1.2.1.16.23", agentx.NoSuchObject},
	}
	for _, c := range cases {
		v, err := h.Get(oid(c.name))
		if err != nil || v.Type != c.want || !v.Name.Equal(oid(c.name)) {
			t.Errorf("Get(%s) = %v %v, want %v", c.name, v.Type, err, c.want)
		}
	}
}

func TestSetRefused(t *testing.T) {
	h := New(populatedEngine(t), Options{Start: exampleStart})
	cases := []struct {
		names []string
		want  agentx.ErrorStatus
	}{
		{[]string{"1.3.6.1.2.1.16.23.1.1.1.3.10.1"}, agentx.NotWritable}, // apmAppDirConfig (read-write)
		{[]string{"1.3.6.1.2.1.16.23.1.9.1.13.1"}, agentx.NotWritable},   // apmReportControlOwner (read-create)
		{[]string{"1.3.6.1.2.1.16.23.1.9.1.15.9"}, agentx.NotWritable},   // row creation
		{[]string{"1.3.6.1.2.1.16.23.1.10.1.3.1.1.10.1.0.0.0"}, agentx.NotWritable},
		{[]string{"1.3.6.1.2.1.16.23.1.9.1.1.1", "1.3.6.1.2.1.16.23.1.9.1.13.1"}, agentx.NoAccess}, // index column first
		{[]string{"1.3.6.1.2.1.16.23.1.8.1.2.1"}, agentx.NoAccess},
		{[]string{"1.3.6.1.2.1.16.23.1.3.0"}, agentx.NotWritable}, // apmAppDirID: not served
	}
	for i, c := range cases {
		var vbs []agentx.Variable
		for _, n := range c.names {
			vbs = append(vbs, agentx.Variable{Name: oid(n), Type: agentx.Integer, Value: int32(1)})
		}
		st, idx := h.TestSet(uint32(i), vbs)
		if st != c.want || idx != 1 {
			t.Errorf("TestSet(%s) = %v index %d, want %v index 1", strings.Join(c.names, " "), st, idx, c.want)
		}
		h.CleanupSet(uint32(i))
	}
}

// TestNameTableFollowsReports checks the apmNameTable cache is rebuilt
// when reports change: turning an application off removes its rows and
// so clients only it referenced.
func TestNameTableFollowsReports(t *testing.T) {
	e := exampleEngine(t)
	h := New(e, Options{Start: exampleStart})
	count := func() int {
		n := 0
		col := NameEntry.Append(4)
		for from := col; ; n++ {
			v, _ := h.GetNext(from, false, nil)
			if v.Type == agentx.EndOfMibView || !v.Name.HasPrefix(col) {
				return n
			}
			from = v.Name
		}
	}
	if n := count(); n != 0 {
		t.Fatalf("%d names before any report", n)
	}
	addExampleTransactions(t, e)
	e.Tick(exampleStart.Add(5 * time.Minute))
	if n := count(); n != 3 {
		t.Fatalf("%d names, want 3 (Jim, Jane, Joe)", n)
	}
	// Joe used only HTTP; Jim and Jane also Email.
	if err := e.SetAppDir(apm.AppDirEntry{App: apmtest.AppHTTP, Type: apm.TransactionOriented, On: false, Boundaries: apmtest.Boundaries}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d names after HTTP off, want 2", n)
	}
}

// TestWalkWhileEngineChanges walks the subtree while transactions are
// added and reports produced (run with -race): every walk stays strictly
// increasing.
func TestWalkWhileEngineChanges(t *testing.T) {
	e := exampleEngine(t)
	h := New(e, Options{Start: exampleStart})
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 1; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			for c := range 50 {
				err := e.Add(apm.Transaction{App: apmtest.AppHTTP, Type: apm.TransactionOriented,
					Client: netip.AddrFrom4([4]byte{198, 18, 9, byte(c)}), Server: apmtest.Hosts["HR"],
					Responsiveness: uint32(c * 1000), Success: true})
				if err != nil {
					t.Error(err) // not Fatal: this is not the test goroutine
					return
				}
			}
			e.Tick(exampleStart.Add(time.Duration(i) * 5 * time.Minute))
		}
	}()
	for range 20 {
		var prev agentx.OID
		for from := OID; ; {
			v, err := h.GetNext(from, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if v.Type == agentx.EndOfMibView {
				break
			}
			if prev != nil && v.Name.Compare(prev) <= 0 {
				t.Fatalf("walk not increasing: %s after %s", v.Name, prev)
			}
			prev, from = v.Name, v.Name
		}
	}
	close(done)
	<-stopped
}
