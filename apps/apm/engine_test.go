package apm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// oneControl returns an engine with app 10 (transaction-oriented, the
// given boundaries) and one control.
func oneControl(t testing.TB, agg Aggregation, size, reports uint32, bounds [6]uint32) *Engine {
	t.Helper()
	e := NewEngine(Config{})
	if err := e.SetAppDir(AppDirEntry{App: 10, Type: TransactionOriented, Name: "http", On: true, Boundaries: bounds}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddControl(ReportControl{Index: 7, Aggregation: agg, Interval: time.Minute, RequestedSize: size, RequestedReports: reports}, t0); err != nil {
		t.Fatal(err)
	}
	return e
}

func tx(client, server string, ok bool, resp uint32, w uint64) Transaction {
	return Transaction{
		App: 10, Type: TransactionOriented,
		Client: netip.MustParseAddr(client), Server: netip.MustParseAddr(server),
		Responsiveness: resp, Success: ok, Weight: w,
	}
}

func mustAdd(t testing.TB, e *Engine, txs ...Transaction) {
	t.Helper()
	for _, x := range txs {
		if err := e.Add(x); err != nil {
			t.Fatal(err)
		}
	}
}

func onlyReport(t *testing.T, e *Engine, ctl uint32) Report {
	t.Helper()
	reps, ok := e.Reports(ctl)
	if !ok || len(reps) == 0 {
		t.Fatalf("no report for control %d", ctl)
	}
	return reps[len(reps)-1]
}

// TestBucketBoundaries uses the example of the APM-MIB comment above
// apmAppDirTable (12 measurements, expected 2 3 4 0 3 0 0), then the
// exact edges: a value equal to boundaryN belongs to bucket N+1
// (apmReportResponsivenessB2..B7: "greater than or equal to the
// boundaryN value ... and less than the boundaryN+1 value").
func TestBucketBoundaries(t *testing.T) {
	bounds := [6]uint32{500, 1000, 2000, 5000, 15000, 60000}
	e := oneControl(t, Applications, 10, 10, bounds)
	for _, ms := range []uint32{377, 8645, 1300, 487, 1405, 775, 1115, 850, 945, 1054, 7745, 9380} {
		mustAdd(t, e, tx("198.18.0.1", "198.18.0.2", true, ms, 1))
	}
	e.Tick(t0.Add(time.Minute))
	if got, want := onlyReport(t, e, 7).Rows[0].ResponsivenessB, [7]uint32{2, 3, 4, 0, 3, 0, 0}; got != want {
		t.Errorf("MIB example buckets %v, want %v", got, want)
	}

	edges := []struct {
		ms     uint32
		bucket int
	}{
		{0, 0}, {499, 0}, {500, 1}, {999, 1}, {1000, 2}, {1999, 2}, {2000, 3},
		{4999, 3}, {5000, 4}, {14999, 4}, {15000, 5}, {59999, 5}, {60000, 6}, {1 << 31, 6},
	}
	for i, c := range edges {
		mustAdd(t, e, tx("198.18.0.1", "198.18.0.2", true, c.ms, 1))
		e.Tick(t0.Add(time.Duration(i+2) * time.Minute))
		var want [7]uint32
		want[c.bucket] = 1
		if got := onlyReport(t, e, 7).Rows[0].ResponsivenessB; got != want {
			t.Errorf("%d ms: buckets %v, want B%d", c.ms, got, c.bucket+1)
		}
	}

	// Equal boundaries leave the bucket between them empty.
	if err := e.SetAppDir(AppDirEntry{App: 10, Type: TransactionOriented, On: true, Boundaries: [6]uint32{10, 10, 20, 20, 20, 30}}); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, e, tx("198.18.0.1", "198.18.0.2", true, 10, 1), tx("198.18.0.1", "198.18.0.2", true, 25, 1))
	e.Tick(t0.Add(time.Duration(len(edges)+2) * time.Minute))
	if got, want := onlyReport(t, e, 7).Rows[0].ResponsivenessB, [7]uint32{0, 0, 1, 0, 0, 1, 0}; got != want {
		t.Errorf("equal boundaries: %v, want %v", got, want)
	}
	// Decreasing boundaries are refused.
	if err := e.SetAppDir(AppDirEntry{App: 10, Type: TransactionOriented, On: true, Boundaries: [6]uint32{10, 5, 20, 30, 40, 50}}); err == nil {
		t.Error("decreasing boundaries accepted")
	}
}

// TestWeighting: a transaction of weight N counts N times in the counts
// and buckets and weighs N in the mean; min and max are values.
func TestWeighting(t *testing.T) {
	e := oneControl(t, Servers, 10, 10, [6]uint32{200, 1000, 2000, 3000, 4000, 5000})
	mustAdd(t, e,
		tx("198.18.0.1", "198.18.0.9", true, 100, 3),
		tx("198.18.0.2", "198.18.0.9", true, 300, 1),
		tx("198.18.0.3", "198.18.0.9", false, 4500, 2), // failed: counts only
		tx("198.18.0.3", "198.18.0.9", true, 1001, 0),  // weight 0 is 1
	)
	e.Tick(t0.Add(time.Minute))
	r := onlyReport(t, e, 7).Rows[0]
	// count 3+1+2+1; success 3+1+1; mean (3*100+300+1001)/5 = 320.2
	if r.TransactionCount != 7 || r.SuccessfulTransactions != 5 {
		t.Errorf("count %d success %d, want 7 5", r.TransactionCount, r.SuccessfulTransactions)
	}
	if r.ResponsivenessMean != 320 || r.ResponsivenessMin != 100 || r.ResponsivenessMax != 1001 {
		t.Errorf("mean/min/max %d/%d/%d, want 320/100/1001", r.ResponsivenessMean, r.ResponsivenessMin, r.ResponsivenessMax)
	}
	if want := [7]uint32{3, 1, 1, 0, 0, 0, 0}; r.ResponsivenessB != want {
		t.Errorf("buckets %v, want %v", r.ResponsivenessB, want)
	}

	// The mean rounds to nearest: (1+2)/2 = 1.5 -> 2; (1+1+2)/3 = 1.33 -> 1.
	mustAdd(t, e, tx("198.18.0.1", "198.18.0.9", true, 1, 1), tx("198.18.0.1", "198.18.0.9", true, 2, 1))
	e.Tick(t0.Add(2 * time.Minute))
	if m := onlyReport(t, e, 7).Rows[0].ResponsivenessMean; m != 2 {
		t.Errorf("mean of 1,2 = %d, want 2", m)
	}
	mustAdd(t, e, tx("198.18.0.1", "198.18.0.9", true, 1, 2), tx("198.18.0.1", "198.18.0.9", true, 2, 1))
	e.Tick(t0.Add(3 * time.Minute))
	if m := onlyReport(t, e, 7).Rows[0].ResponsivenessMean; m != 1 {
		t.Errorf("mean of 1,1,2 = %d, want 1", m)
	}

	// Huge weights saturate the Unsigned32 columns but keep the mean exact.
	mustAdd(t, e, tx("198.18.0.1", "198.18.0.9", true, 4000000000, 1<<62), tx("198.18.0.1", "198.18.0.9", true, 2000000000, 1<<62))
	e.Tick(t0.Add(4 * time.Minute))
	r = onlyReport(t, e, 7).Rows[0]
	if r.TransactionCount != 1<<32-1 || r.ResponsivenessMean != 3000000000 || r.ResponsivenessB[6] != 1<<32-1 {
		t.Errorf("saturation: count %d mean %d B7 %d", r.TransactionCount, r.ResponsivenessMean, r.ResponsivenessB[6])
	}

	// An interval with failures only: mean/min/max 0.
	mustAdd(t, e, tx("198.18.0.1", "198.18.0.9", false, 50, 4))
	e.Tick(t0.Add(5 * time.Minute))
	r = onlyReport(t, e, 7).Rows[0]
	if r.TransactionCount != 4 || r.SuccessfulTransactions != 0 || r.ResponsivenessMean != 0 || r.ResponsivenessMin != 0 || r.ResponsivenessMax != 0 || r.ResponsivenessB != [7]uint32{} {
		t.Errorf("failures only: %+v", r)
	}
}

// TestReportRotation: the control keeps the newest GrantedReports
// reports, numbered from 1, on a fixed interval grid.
func TestReportRotation(t *testing.T) {
	e := oneControl(t, Applications, 10, 3, [6]uint32{1, 2, 3, 4, 5, 6})
	for i := 1; i <= 5; i++ {
		// i transactions in interval i; Tick a little late: no drift.
		for range i {
			mustAdd(t, e, tx("198.18.0.1", "198.18.0.2", true, 1, 1))
		}
		e.Tick(t0.Add(time.Duration(i)*time.Minute + 7*time.Second))
	}
	reps, _ := e.Reports(7)
	if len(reps) != 3 {
		t.Fatalf("kept %d reports, want 3", len(reps))
	}
	for j, r := range reps {
		n := uint32(j + 3)
		if r.Number != n || !r.Start.Equal(t0.Add(time.Duration(n-1)*time.Minute)) || r.Rows[0].TransactionCount != n {
			t.Errorf("report %d: number %d start %v count %d", j, r.Number, r.Start, r.Rows[0].TransactionCount)
		}
	}
	st, _ := e.Control(7)
	if st.ReportNumber != 6 || !st.StartTime.Equal(t0.Add(5*time.Minute)) || st.GrantedReports != 3 {
		t.Errorf("control state %+v", st)
	}

	// Four intervals pass without a Tick: the data goes to report 6 and
	// reports 7..9 are empty.
	mustAdd(t, e, tx("198.18.0.1", "198.18.0.2", true, 1, 1))
	e.Tick(t0.Add(9*time.Minute + 30*time.Second))
	reps, _ = e.Reports(7)
	var nums []uint32
	for _, r := range reps {
		nums = append(nums, r.Number)
		if !r.Start.Equal(t0.Add(time.Duration(r.Number-1) * time.Minute)) {
			t.Errorf("report %d starts %v", r.Number, r.Start)
		}
		if (r.Number == 6) != (len(r.Rows) == 1) {
			t.Errorf("report %d has %d rows", r.Number, len(r.Rows))
		}
	}
	if fmt.Sprint(nums) != "[7 8 9]" {
		t.Errorf("kept reports %v, want [7 8 9]", nums)
	}

	// Resize down drops the oldest; requests above the engine cap are cut.
	rc, err := e.Resize(7, 10, 1)
	if err != nil || rc.GrantedReports != 1 {
		t.Fatalf("Resize: %+v %v", rc, err)
	}
	if reps, _ = e.Reports(7); len(reps) != 1 || reps[0].Number != 9 {
		t.Errorf("after resize: %d reports", len(reps))
	}
	if rc, _ = e.Resize(7, 1<<30, 60000); rc.GrantedReports != 168 || rc.GrantedSize != 10000 {
		t.Errorf("caps: granted %d reports, %d rows", rc.GrantedReports, rc.GrantedSize)
	}
}

// TestRowLimit: once the report in progress holds GrantedSize rows, new
// rows are denied (apmReportControlDeniedInserts) while existing rows
// keep counting.
func TestRowLimit(t *testing.T) {
	e := oneControl(t, Clients, 2, 2, [6]uint32{1, 2, 3, 4, 5, 6})
	mustAdd(t, e,
		tx("198.18.0.1", "198.18.0.9", true, 1, 1),
		tx("198.18.0.2", "198.18.0.9", true, 1, 1),
		tx("198.18.0.3", "198.18.0.9", true, 1, 1), // denied
		tx("198.18.0.1", "198.18.0.9", true, 1, 1),
		tx("198.18.0.4", "198.18.0.9", true, 1, 5), // denied
	)
	e.Tick(t0.Add(time.Minute))
	rows := onlyReport(t, e, 7).Rows
	if len(rows) != 2 || rows[0].Client != netip.MustParseAddr("198.18.0.1") || rows[0].TransactionCount != 2 ||
		rows[1].Client != netip.MustParseAddr("198.18.0.2") {
		t.Errorf("rows %+v", rows)
	}
	if st, _ := e.Control(7); st.DeniedInserts != 2 || st.GrantedSize != 2 {
		t.Errorf("denied %d granted %d, want 2 2", st.DeniedInserts, st.GrantedSize)
	}
	// The next interval starts empty: new clients fit again.
	mustAdd(t, e, tx("198.18.0.3", "198.18.0.9", true, 1, 1))
	e.Tick(t0.Add(2 * time.Minute))
	if rows = onlyReport(t, e, 7).Rows; len(rows) != 1 || rows[0].Client != netip.MustParseAddr("198.18.0.3") {
		t.Errorf("second interval rows %+v", rows)
	}
}

func TestAddErrors(t *testing.T) {
	e := oneControl(t, Flows, 10, 2, [6]uint32{1, 2, 3, 4, 5, 6})
	cases := []struct {
		name string
		tx   Transaction
		want error
	}{
		{"unknown app", Transaction{App: 99, Type: TransactionOriented, Client: netip.MustParseAddr("198.18.0.1"), Server: netip.MustParseAddr("198.18.0.2")}, ErrUnknownApp},
		{"unknown type", Transaction{App: 10, Type: ThroughputOriented, Client: netip.MustParseAddr("198.18.0.1"), Server: netip.MustParseAddr("198.18.0.2")}, ErrUnknownApp},
		{"no client", Transaction{App: 10, Type: TransactionOriented, Server: netip.MustParseAddr("198.18.0.2")}, ErrInvalidAddress},
		{"no server", Transaction{App: 10, Type: TransactionOriented, Client: netip.MustParseAddr("198.18.0.2")}, ErrInvalidAddress},
		{"client 0/8", tx("0.0.0.5", "198.18.0.2", true, 1, 1), ErrInvalidAddress},
	}
	for _, c := range cases {
		if err := e.Add(c.tx); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if err := e.SetAppDir(AppDirEntry{App: 10, Type: TransactionOriented, On: false, Boundaries: [6]uint32{1, 2, 3, 4, 5, 6}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Add(tx("198.18.0.1", "198.18.0.2", true, 1, 1)); !errors.Is(err, ErrAppOff) {
		t.Errorf("app off: %v", err)
	}
	e.Tick(t0.Add(time.Minute))
	if rep := onlyReport(t, e, 7); len(rep.Rows) != 0 {
		t.Errorf("rejected transactions were counted: %+v", rep.Rows)
	}
}

func TestConfigValidation(t *testing.T) {
	e := NewEngine(Config{})
	bad := []ReportControl{
		{Index: 0, Aggregation: Flows, Interval: time.Second},
		{Index: 65536, Aggregation: Flows, Interval: time.Second},
		{Index: 1, Aggregation: 5, Interval: time.Second},
		{Index: 1, Aggregation: Flows, Interval: 0},
		{Index: 1, Aggregation: Flows, Interval: 1500 * time.Millisecond},
		{Index: 1, Aggregation: Flows, Interval: time.Second, RequestedReports: 65536},
	}
	for _, rc := range bad {
		if _, err := e.AddControl(rc, t0); err == nil {
			t.Errorf("AddControl(%+v) accepted", rc)
		}
	}
	if _, err := e.AddControl(ReportControl{Index: 1, Aggregation: Flows, Interval: time.Second}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddControl(ReportControl{Index: 1, Aggregation: Servers, Interval: time.Second}, t0); err == nil {
		t.Error("duplicate control index accepted")
	}
	for _, d := range []AppDirEntry{
		{App: 0, Type: TransactionOriented},
		{App: 1 << 31, Type: TransactionOriented},
		{App: 5, Type: 0},
		{App: 1, Type: TransactionOriented}, // protocolDirLocalIndex of ip
	} {
		if err := e.SetAppDir(d); err == nil {
			t.Errorf("SetAppDir(%+v) accepted", d)
		}
	}
	if err := e.RemoveControl(1); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveControl(1); err == nil {
		t.Error("removing a missing control succeeded")
	}
	if _, ok := e.Reports(1); ok {
		t.Error("reports of a removed control")
	}
}

// TestDirectoryChanges: a boundary change deletes the apmReportTable
// entries; turning an application off deletes its rows.
func TestDirectoryChanges(t *testing.T) {
	e := oneControl(t, Applications, 10, 5, [6]uint32{1, 2, 3, 4, 5, 6})
	if err := e.SetAppDir(AppDirEntry{App: 20, Type: ThroughputOriented, On: true, Boundaries: [6]uint32{1, 2, 3, 4, 5, 6}}); err != nil {
		t.Fatal(err)
	}
	add2 := func() {
		mustAdd(t, e, tx("198.18.0.1", "198.18.0.2", true, 3, 1))
		x := tx("198.18.0.1", "198.18.0.2", true, 3, 1)
		x.App, x.Type = 20, ThroughputOriented
		mustAdd(t, e, x)
	}
	add2()
	e.Tick(t0.Add(time.Minute))
	add2()
	// Off: app 10's rows go from the kept report and the one in progress.
	if err := e.SetAppDir(AppDirEntry{App: 10, Type: TransactionOriented, On: false, Boundaries: [6]uint32{1, 2, 3, 4, 5, 6}}); err != nil {
		t.Fatal(err)
	}
	e.Tick(t0.Add(2 * time.Minute))
	reps, _ := e.Reports(7)
	if len(reps) != 2 {
		t.Fatalf("%d reports", len(reps))
	}
	for _, r := range reps {
		if len(r.Rows) != 1 || r.Rows[0].App != 20 || r.Rows[0].Type != ThroughputOriented {
			t.Errorf("report %d rows %+v", r.Number, r.Rows)
		}
	}
	// Boundary change of app 20: every kept report is deleted.
	if err := e.SetAppDir(AppDirEntry{App: 20, Type: ThroughputOriented, On: true, Boundaries: [6]uint32{10, 20, 30, 40, 50, 60}}); err != nil {
		t.Fatal(err)
	}
	if reps, _ = e.Reports(7); len(reps) != 0 {
		t.Errorf("%d reports kept after a boundary change", len(reps))
	}
	// Same boundaries again (e.g. name change): reports stay.
	add2x := tx("198.18.0.1", "198.18.0.2", true, 3, 1)
	add2x.App, add2x.Type = 20, ThroughputOriented
	mustAdd(t, e, add2x)
	e.Tick(t0.Add(3 * time.Minute))
	if err := e.SetAppDir(AppDirEntry{App: 20, Type: ThroughputOriented, Name: "ftp", On: true, Boundaries: [6]uint32{10, 20, 30, 40, 50, 60}}); err != nil {
		t.Fatal(err)
	}
	if reps, _ = e.Reports(7); len(reps) != 1 || reps[0].Rows[0].ResponsivenessB[0] != 1 {
		t.Errorf("reports after a no-op change: %+v", reps)
	}
}

// TestIPv6 checks the index encoding of IPv6 servers (ipv6
// protocolDirLocalIndex, 16 octets) and client IDs of IPv6 clients, and
// that IPv4-mapped addresses are IPv4.
func TestIPv6(t *testing.T) {
	e := NewEngine(Config{IPv4ProtocolDirLocalIndex: 8, IPv6ProtocolDirLocalIndex: 9})
	if err := e.SetAppDir(AppDirEntry{App: 10, Type: TransactionOriented, On: true, Boundaries: [6]uint32{1, 2, 3, 4, 5, 6}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddControl(ReportControl{Index: 3, Aggregation: Flows, Interval: time.Minute, RequestedSize: 10, RequestedReports: 1}, t0); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, e,
		tx("2001:db8::1", "2001:db8::80", true, 1, 1),
		tx("2001:db8::2", "2001:db8::80", true, 1, 1),
		tx("::ffff:198.18.0.1", "::ffff:198.18.0.2", true, 1, 1),
		tx("2001:db8::1", "198.18.0.2", true, 1, 1),
	)
	e.Tick(t0.Add(time.Minute))
	var got []string
	e.Walk(func(index []uint32, row Row) bool {
		got = append(got, fmt.Sprint(index))
		return true
	})
	want := []string{
		// ip server 198.18.0.2: IPv6 client ID 1, then IPv4 client.
		"[3 1 10 1 8 4 198 18 0 2 1]",
		"[3 1 10 1 8 4 198 18 0 2 3323068417]",
		"[3 1 10 1 9 16 32 1 13 184 0 0 0 0 0 0 0 0 0 0 0 128 1]",
		"[3 1 10 1 9 16 32 1 13 184 0 0 0 0 0 0 0 0 0 0 0 128 2]",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("indexes\n got  %v\n want %v", got, want)
	}
	for id, addr := range map[uint32]string{1: "2001:db8::1", 2: "2001:db8::2", 3323068417: "198.18.0.1"} {
		if a, ok := e.ClientAddress(id); !ok || a != netip.MustParseAddr(addr) {
			t.Errorf("ClientAddress(%d) = %v %v, want %s", id, a, ok, addr)
		}
	}
	if _, ok := e.ClientAddress(3); ok {
		t.Error("unassigned client ID resolved")
	}
}

// TestIPv6ClientIDExhaustion: rows of IPv6 clients beyond MaxIPv6Clients
// are dropped and counted as denied inserts.
func TestIPv6ClientIDExhaustion(t *testing.T) {
	e := NewEngine(Config{MaxIPv6Clients: 1})
	if err := e.SetAppDir(AppDirEntry{App: 10, Type: TransactionOriented, On: true, Boundaries: [6]uint32{1, 2, 3, 4, 5, 6}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddControl(ReportControl{Index: 1, Aggregation: Clients, Interval: time.Minute, RequestedSize: 10, RequestedReports: 1}, t0); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, e, tx("2001:db8::1", "198.18.0.2", true, 1, 1), tx("2001:db8::2", "198.18.0.2", true, 1, 1), tx("198.18.0.1", "198.18.0.2", true, 1, 1))
	e.Tick(t0.Add(time.Minute))
	rep := onlyReport(t, e, 1)
	st, _ := e.Control(1)
	if len(rep.Rows) != 2 || st.DeniedInserts != 1 {
		t.Errorf("%d rows, %d denied; want 2, 1", len(rep.Rows), st.DeniedInserts)
	}
}

// TestJSON decodes the JSON of a report generically and checks it field
// by field against the MIB names and units.
func TestJSON(t *testing.T) {
	start := time.Date(2026, 3, 30, 12, 0, 0, 0, time.UTC)
	e := exampleEngine(t, start)
	addExampleTransactions(t, e, start)
	e.Tick(start.Add(5 * time.Minute))
	rep := onlyReport(t, e, 1)
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["control"] != 1.0 || m["number"] != 1.0 || m["aggregation"] != "flows" ||
		m["start"] != "2026-03-30T12:00:00Z" || m["intervalSeconds"] != 300.0 {
		t.Errorf("report header %s", b)
	}
	rows, _ := m["rows"].([]any)
	if len(rows) != 8 {
		t.Fatalf("%d rows in %s", len(rows), b)
	}
	r0, _ := rows[0].(map[string]any)
	want := map[string]any{
		"app": 10.0, "appName": "HTTP", "responsivenessType": "transactionOriented",
		"server": "198.18.0.10", "client": "198.18.1.1", "clientID": 3323068673.0,
		"transactionCount": 2.0, "successfulTransactions": 1.0,
		"responsivenessMean": 5000.0, "responsivenessMin": 5000.0, "responsivenessMax": 5000.0,
		"responsivenessB": []any{1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0},
	}
	if fmt.Sprint(r0) != fmt.Sprint(want) {
		t.Errorf("row 0\n got  %v\n want %v", r0, want)
	}

	// Applications rows omit server, client and client ID.
	b, err = json.Marshal(onlyReport(t, e, 4).Rows[0])
	if err != nil {
		t.Fatal(err)
	}
	var ra map[string]any
	if err := json.Unmarshal(b, &ra); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"server", "client", "clientID"} {
		if _, ok := ra[k]; ok {
			t.Errorf("applications row has %q: %s", k, b)
		}
	}

	// Round trip through Report.UnmarshalJSON.
	var back Report
	if err := json.Unmarshal(mustJSON(t, rep), &back); err != nil {
		t.Fatal(err)
	}
	if back.Interval != 5*time.Minute || len(back.Rows) != 8 || back.Rows[3].ResponsivenessB != rep.Rows[3].ResponsivenessB || back.Rows[3].Client != rep.Rows[3].Client {
		t.Errorf("round trip: %+v", back)
	}

	// Control status JSON keeps both the control and its state.
	st, _ := e.Control(2)
	var sm map[string]any
	if err := json.Unmarshal(mustJSON(t, st), &sm); err != nil {
		t.Fatal(err)
	}
	if sm["index"] != 2.0 || sm["aggregation"] != "clients" || sm["intervalSeconds"] != 300.0 || sm["reportNumber"] != 2.0 || sm["grantedReports"] != 4.0 || sm["owner"] != "test" {
		t.Errorf("control JSON %v", sm)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConcurrent adds from several goroutines while others tick, walk and
// reconfigure; every transaction must land in exactly one report. Run
// with -race.
func TestConcurrent(t *testing.T) {
	e := NewEngine(Config{MaxReports: 65535})
	for app := uint32(10); app < 13; app++ {
		if err := e.SetAppDir(AppDirEntry{App: app, Type: TransactionOriented, On: true, Boundaries: [6]uint32{10, 20, 30, 40, 50, 60}}); err != nil {
			t.Fatal(err)
		}
	}
	for i, agg := range []Aggregation{Flows, Clients, Servers, Applications} {
		if _, err := e.AddControl(ReportControl{Index: uint32(i + 1), Aggregation: agg, Interval: time.Second, RequestedSize: 10000, RequestedReports: 65535}, t0); err != nil {
			t.Fatal(err)
		}
	}
	const producers, perProducer = 4, 5000
	var clock sync.Mutex
	now := t0
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range perProducer {
				x := Transaction{
					App: 10 + uint32(i%3), Type: TransactionOriented,
					Client:         netip.AddrFrom4([4]byte{198, 18, 1, byte(i % 50)}),
					Server:         netip.AddrFrom4([4]byte{198, 18, 0, byte(p)}),
					Responsiveness: uint32(i % 70), Success: i%5 != 0, Weight: uint64(1 + i%3),
				}
				if err := e.Add(x); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			clock.Lock()
			now = now.Add(time.Second)
			n := now
			clock.Unlock()
			e.Tick(n)
			e.Walk(func([]uint32, Row) bool { return true })
			_ = e.Controls()
			// A no-op directory write exercises the generation check.
			if err := e.SetAppDir(AppDirEntry{App: 12, Type: TransactionOriented, Name: "x", On: true, Boundaries: [6]uint32{10, 20, 30, 40, 50, 60}}); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	close(stop)
	bg.Wait()
	e.Tick(now.Add(time.Second)) // close the last interval

	var wantCount, wantSuccess uint64
	for range producers {
		for i := range perProducer {
			wantCount += uint64(1 + i%3)
			if i%5 != 0 {
				wantSuccess += uint64(1 + i%3)
			}
		}
	}
	for ctl := uint32(1); ctl <= 4; ctl++ {
		reps, _ := e.Reports(ctl)
		var count, success uint64
		for _, r := range reps {
			for _, row := range r.Rows {
				count += uint64(row.TransactionCount)
				success += uint64(row.SuccessfulTransactions)
			}
		}
		if count != wantCount || success != wantSuccess {
			t.Errorf("control %d: %d transactions (%d successful), want %d (%d)", ctl, count, success, wantCount, wantSuccess)
		}
	}
}

func TestMilliseconds(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want uint32
	}{
		{-time.Second, 0}, {0, 0}, {499 * time.Microsecond, 0}, {500 * time.Microsecond, 1},
		{12 * time.Second, 12000}, {1500*time.Millisecond + 400*time.Microsecond, 1500},
		{time.Duration(1 << 62), 1<<32 - 1},
	} {
		if got := Milliseconds(c.d); got != c.want {
			t.Errorf("Milliseconds(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

func TestEnumText(t *testing.T) {
	for _, a := range []Aggregation{Flows, Clients, Servers, Applications} {
		b, err := a.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Aggregation
		if err := back.UnmarshalText(b); err != nil || back != a {
			t.Errorf("%s: %v %v", b, back, err)
		}
	}
	if _, err := Aggregation(0).MarshalText(); err == nil {
		t.Error("Aggregation(0) marshalled")
	}
	var r ResponsivenessType
	if err := r.UnmarshalText([]byte("streamingOriented")); err != nil || r != StreamingOriented {
		t.Errorf("streamingOriented: %v %v", r, err)
	}
	if err := r.UnmarshalText([]byte("fast")); err == nil {
		t.Error("unknown responsiveness type parsed")
	}
}
