package apm

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/apmtest"
)

// The worked example of RFC 3729 section 2.1 (package apmtest): nine
// transactions in a 5 minute period, aggregated four ways.

func exampleEngine(t testing.TB, start time.Time) *Engine {
	t.Helper()
	e := NewEngine(Config{})
	for name, idx := range apmtest.Apps {
		if err := e.SetAppDir(AppDirEntry{App: idx, Type: TransactionOriented, Name: name, On: true, Boundaries: apmtest.Boundaries}); err != nil {
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

// addExampleTransactions adds the RFC transactions one second apart from
// start, responsiveness in milliseconds (the MIB unit).
func addExampleTransactions(t *testing.T, e *Engine, start time.Time) {
	t.Helper()
	for i, tx := range apmtest.Transactions {
		err := e.Add(Transaction{
			App: apmtest.Apps[tx.App], Type: TransactionOriented,
			Client: apmtest.Hosts[tx.Client], Server: apmtest.Hosts[tx.Server],
			Start:          start.Add(time.Duration(i) * time.Second),
			Responsiveness: tx.Seconds * 1000, Success: tx.Successful, Weight: 1,
		})
		if err != nil {
			t.Fatalf("transaction #%d: %v", i+1, err)
		}
	}
}

// wantRow is the report Row of an RFC table line (seconds to
// milliseconds).
func wantRow(r apmtest.Row) Row {
	w := Row{
		App: apmtest.Apps[r.App], AppName: r.App, Type: TransactionOriented,
		TransactionCount: r.Count, SuccessfulTransactions: r.Successful,
		ResponsivenessMean: r.Mean * 1000, ResponsivenessMin: r.Min * 1000, ResponsivenessMax: r.Max * 1000,
		ResponsivenessB: [7]uint32{r.B1, r.B2},
	}
	if r.Server != "" {
		w.Server = apmtest.Hosts[r.Server]
	}
	if r.Client != "" {
		w.Client = apmtest.Hosts[r.Client]
		w.ClientID = apmtest.ClientID(r.Client)
	}
	return w
}

// exampleTables are the RFC tables by aggregation type.
var exampleTables = map[Aggregation][]apmtest.Row{
	Flows: apmtest.Flows, Clients: apmtest.Clients, Servers: apmtest.Servers, Applications: apmtest.Applications,
}

func rowKeyString(r Row) string {
	name := func(a netip.Addr) string {
		for n, h := range apmtest.Hosts {
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
				g, ok := got[w.Key()]
				if !ok {
					t.Errorf("missing row %s", w.Key())
					continue
				}
				if !reflect.DeepEqual(g, wantRow(w)) {
					t.Errorf("row %s:\n got  %+v\n want %+v", w.Key(), g, wantRow(w))
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
