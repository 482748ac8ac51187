package apm

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"
	"time"
)

// The worked example of RFC 3729 section 2.1: nine transactions in a
// 5 minute period, aggregated four ways. Names stand for hosts; we give
// them addresses. Responsiveness is in seconds in the RFC and in
// milliseconds (the MIB unit) here.

const (
	appHTTP  = 10
	appEmail = 11
	appSAP   = 12
)

var (
	exampleHosts = map[string]netip.Addr{
		"Jim":     netip.MustParseAddr("198.18.1.1"),
		"Jane":    netip.MustParseAddr("198.18.1.2"),
		"Joe":     netip.MustParseAddr("198.18.1.3"),
		"CallCtr": netip.MustParseAddr("198.18.0.10"),
		"HR":      netip.MustParseAddr("198.18.0.11"),
		"Sales":   netip.MustParseAddr("198.18.0.12"),
		"Pop3":    netip.MustParseAddr("198.18.0.13"),
		"Finance": netip.MustParseAddr("198.18.0.14"),
	}
	exampleApps = map[string]uint32{"HTTP": appHTTP, "Email": appEmail, "SAP/R3": appSAP}
)

// exampleBoundaries put 3, 5 and 7 s in B1 and 12..19 s in B2, as the
// RFC's RspB1/RspB2 columns imply.
var exampleBoundaries = [6]uint32{10000, 20000, 30000, 40000, 50000, 60000}

func exampleEngine(t testing.TB, start time.Time) *Engine {
	t.Helper()
	e := NewEngine(Config{})
	for name, idx := range exampleApps {
		if err := e.SetAppDir(AppDirEntry{App: idx, Type: TransactionOriented, Name: name, On: true, Boundaries: exampleBoundaries}); err != nil {
			t.Fatal(err)
		}
	}
	for i, agg := range []Aggregation{Flows, Clients, Servers, Applications} {
		_, err := e.AddControl(ReportControl{
			Index: uint32(i + 1), Aggregation: agg, Interval: 5 * time.Minute,
			RequestedSize: 100, RequestedReports: 4, Owner: "test",
		}, start)
		if err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func addExampleTransactions(t *testing.T, e *Engine, start time.Time) {
	t.Helper()
	// # App Client Server Successful Responsiveness
	txs := []struct {
		app, client, server string
		ok                  bool
		sec                 uint32
	}{
		// #1 failed: the RFC shows "-". A large value checks that it
		// does not reach mean, min, max or the buckets.
		{"HTTP", "Jim", "CallCtr", false, 99},
		{"HTTP", "Jim", "HR", true, 12},
		{"HTTP", "Jim", "Sales", true, 7},
		{"HTTP", "Jim", "CallCtr", true, 5},
		{"Email", "Jim", "Pop3", true, 12},
		{"HTTP", "Jane", "CallCtr", true, 3},
		{"SAP/R3", "Jane", "Finance", true, 19},
		{"Email", "Jane", "Pop3", true, 16},
		{"HTTP", "Joe", "HR", true, 18},
	}
	for i, tx := range txs {
		err := e.Add(Transaction{
			App: exampleApps[tx.app], Type: TransactionOriented,
			Client: exampleHosts[tx.client], Server: exampleHosts[tx.server],
			Start:          start.Add(time.Duration(i) * time.Second),
			Responsiveness: tx.sec * 1000, Success: tx.ok, Weight: 1,
		})
		if err != nil {
			t.Fatalf("transaction #%d: %v", i+1, err)
		}
	}
}

// exampleRow is one line of an RFC table: App Client Server Count
// Successful RspMean RspMin RspMax RspB1 RspB2 (seconds), B3..B7 zero.
type exampleRow struct {
	app, client, server               string
	count, ok, mean, min, max, b1, b2 uint32
}

func (r exampleRow) key() string { return r.app + "/" + r.client + "/" + r.server }

func (r exampleRow) want() Row {
	w := Row{
		App: exampleApps[r.app], AppName: r.app, Type: TransactionOriented,
		TransactionCount: r.count, SuccessfulTransactions: r.ok,
		ResponsivenessMean: r.mean * 1000, ResponsivenessMin: r.min * 1000, ResponsivenessMax: r.max * 1000,
		ResponsivenessB: [7]uint32{r.b1, r.b2},
	}
	if r.server != "" {
		w.Server = exampleHosts[r.server]
	}
	if r.client != "" {
		w.Client = exampleHosts[r.client]
		a := w.Client.As4()
		w.ClientID = uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	}
	return w
}

// Tables copied from RFC 3729 section 2.1.
var exampleTables = map[Aggregation][]exampleRow{
	Flows: {
		{"HTTP", "Jim", "CallCtr", 2, 1, 5, 5, 5, 1, 0},
		{"HTTP", "Jim", "HR", 1, 1, 12, 12, 12, 0, 1},
		{"HTTP", "Jim", "Sales", 1, 1, 7, 7, 7, 1, 0},
		{"Email", "Jim", "Pop3", 1, 1, 12, 12, 12, 0, 1},
		{"HTTP", "Jane", "CallCtr", 1, 1, 3, 3, 3, 1, 0},
		{"SAP/R3", "Jane", "Finance", 1, 1, 19, 19, 19, 0, 1},
		{"Email", "Jane", "Pop3", 1, 1, 16, 16, 16, 0, 1},
		{"HTTP", "Joe", "HR", 1, 1, 18, 18, 18, 0, 1},
	},
	Clients: {
		{"HTTP", "Jim", "", 4, 3, 8, 5, 12, 2, 1},
		{"Email", "Jim", "", 1, 1, 12, 12, 12, 0, 1},
		{"HTTP", "Jane", "", 1, 1, 3, 3, 3, 1, 0},
		{"SAP/R3", "Jane", "", 1, 1, 19, 19, 19, 0, 1},
		{"Email", "Jane", "", 1, 1, 16, 16, 16, 0, 1},
		{"HTTP", "Joe", "", 1, 1, 18, 18, 18, 0, 1},
	},
	Servers: {
		{"HTTP", "", "CallCtr", 3, 2, 4, 3, 5, 2, 0},
		{"HTTP", "", "HR", 2, 2, 15, 12, 18, 0, 2},
		{"HTTP", "", "Sales", 1, 1, 7, 7, 7, 1, 0},
		{"Email", "", "Pop3", 2, 2, 14, 12, 16, 0, 2},
		{"SAP/R3", "", "Finance", 1, 1, 19, 19, 19, 0, 1},
	},
	Applications: {
		{"HTTP", "", "", 6, 5, 9, 3, 18, 3, 2},
		{"Email", "", "", 2, 2, 14, 12, 16, 0, 2},
		{"SAP/R3", "", "", 1, 1, 19, 19, 19, 0, 1},
	},
}

func rowKeyString(r Row) string {
	name := func(a netip.Addr) string {
		for n, h := range exampleHosts {
			if a.IsValid() && h == a {
				return n
			}
		}
		if a.IsValid() {
			return a.String()
		}
		return ""
	}
	return r.AppName + "/" + name(r.Client) + "/" + name(r.Server)
}

func TestRFC3729WorkedExample(t *testing.T) {
	start := time.Date(2026, 3, 30, 12, 0, 0, 0, time.UTC)
	e := exampleEngine(t, start)
	addExampleTransactions(t, e, start)

	// Not yet closed: no report.
	e.Tick(start.Add(5*time.Minute - time.Nanosecond))
	if reps, _ := e.Reports(1); len(reps) != 0 {
		t.Fatalf("report before the interval ended: %+v", reps)
	}
	e.Tick(start.Add(5 * time.Minute))

	for ctl, agg := range []Aggregation{Flows, Clients, Servers, Applications} {
		t.Run(agg.String(), func(t *testing.T) {
			reps, ok := e.Reports(uint32(ctl + 1))
			if !ok || len(reps) != 1 {
				t.Fatalf("want 1 report, got %d (ok=%v)", len(reps), ok)
			}
			rep := reps[0]
			if rep.Number != 1 || !rep.Start.Equal(start) || rep.Aggregation != agg || rep.Interval != 5*time.Minute {
				t.Errorf("report header: number %d start %v aggregation %v interval %v", rep.Number, rep.Start, rep.Aggregation, rep.Interval)
			}
			want := exampleTables[agg]
			if len(rep.Rows) != len(want) {
				t.Errorf("got %d rows, want %d", len(rep.Rows), len(want))
			}
			got := map[string]Row{}
			for _, r := range rep.Rows {
				r.index = nil
				got[rowKeyString(r)] = r
			}
			for _, w := range want {
				g, ok := got[w.key()]
				if !ok {
					t.Errorf("missing row %s", w.key())
					continue
				}
				if !reflect.DeepEqual(g, w.want()) {
					t.Errorf("row %s:\n got  %+v\n want %+v", w.key(), g, w.want())
				}
			}
		})
	}
}

// TestWalkIndex checks the apmReportEntry INDEX encoding against indexes
// written out by hand from the MIB's INDEX clause, and that Walk yields
// them in increasing OID order.
func TestWalkIndex(t *testing.T) {
	start := time.Date(2026, 3, 30, 12, 0, 0, 0, time.UTC)
	e := exampleEngine(t, start)
	addExampleTransactions(t, e, start)
	e.Tick(start.Add(5 * time.Minute))

	var all [][]uint32
	var rows []Row
	e.Walk(func(index []uint32, row Row) bool {
		all = append(all, append([]uint32(nil), index...))
		rows = append(rows, row)
		return true
	})
	if len(all) != 8+6+5+3 {
		t.Fatalf("walked %d rows, want 22", len(all))
	}
	for i := 1; i < len(all); i++ {
		if compareIndex(all[i-1], all[i]) >= 0 {
			t.Fatalf("index %v not after %v", all[i], all[i-1])
		}
	}
	jim := uint32(198)<<24 | 18<<16 | 1<<8 | 1 // 3323068673
	// First flows row: HTTP(10), transaction(1), ip(1), 4.198.18.0.10
	// (CallCtr, the lowest HTTP server), client Jim (the lowest client).
	wantFirst := []uint32{1, 1, 10, 1, 1, 4, 198, 18, 0, 10, jim}
	if fmt.Sprint(all[0]) != fmt.Sprint(wantFirst) {
		t.Errorf("first index %v, want %v", all[0], wantFirst)
	}
	if rowKeyString(rows[0]) != "HTTP/Jim/CallCtr" {
		t.Errorf("first row %s", rowKeyString(rows[0]))
	}
	// First clients row: server parts are protocolDirLocalIndex 0 and a
	// zero-length address.
	wantClients := []uint32{2, 1, 10, 1, 0, 0, jim}
	if fmt.Sprint(all[8]) != fmt.Sprint(wantClients) {
		t.Errorf("first clients index %v, want %v", all[8], wantClients)
	}
	// First servers row: client ID 0.
	wantServers := []uint32{3, 1, 10, 1, 1, 4, 198, 18, 0, 10, 0}
	if fmt.Sprint(all[14]) != fmt.Sprint(wantServers) {
		t.Errorf("first servers index %v, want %v", all[14], wantServers)
	}
	// Last row: applications, SAP/R3 (12).
	wantLast := []uint32{4, 1, 12, 1, 0, 0, 0}
	if fmt.Sprint(all[len(all)-1]) != fmt.Sprint(wantLast) {
		t.Errorf("last index %v, want %v", all[len(all)-1], wantLast)
	}

	// Next from the empty index visits the same rows; Lookup finds each.
	var after []uint32
	for i := 0; ; i++ {
		idx, row, ok := e.Next(after)
		if !ok {
			if i != len(all) {
				t.Fatalf("Next stopped after %d rows, want %d", i, len(all))
			}
			break
		}
		if i >= len(all) || fmt.Sprint(idx) != fmt.Sprint(all[i]) {
			t.Fatalf("Next #%d = %v, want %v", i, idx, all[i])
		}
		if got, ok := e.Lookup(idx); !ok || rowKeyString(got) != rowKeyString(row) {
			t.Fatalf("Lookup(%v) = %v, %v", idx, got, ok)
		}
		after = idx
	}
	// Next from inside a gap and from a prefix.
	if idx, _, ok := e.Next([]uint32{2}); !ok || fmt.Sprint(idx) != fmt.Sprint(wantClients) {
		t.Errorf("Next([2]) = %v %v, want %v", idx, ok, wantClients)
	}
	if _, ok := e.Lookup([]uint32{1, 2, 10}); ok {
		t.Error("Lookup of a missing row succeeded")
	}
}
