// Package apm aggregates application transactions into the periodic
// reports of RFC 3729 (APM-MIB): the apmAppDirTable (per-application
// responsiveness bucket boundaries), the apmReportControlTable (one family
// of reports per control row) and the apmReportTable (one row per
// aggregated flow, client, server or application).
//
// Producers call Engine.Add for every finished (possibly sampled)
// transaction; a clock calls Engine.Tick, which closes the intervals that
// have elapsed and produces the reports. Reports are read with
// Engine.Reports (JSON-ready) or Engine.Walk / Engine.Next (MIB index
// order, for the SNMP layer).
//
// Readings of the MIB this package relies on:
//   - TransactionCount counts all transactions; SuccessfulTransactions,
//     ResponsivenessMean/Min/Max and B1..B7 cover successful ones only
//     (RFC 3729 section 2.1 and the apmReportResponsiveness* objects).
//   - Bucket Bk takes boundary(k-1) <= v < boundary(k): lower boundaries
//     are inclusive, upper ones exclusive.
//   - A sampled transaction of weight N counts N times in every count and
//     bucket and weighs N in the mean.
//   - When a report in progress is full (GrantedSize rows), transactions
//     that need a new row are refused and counted in
//     apmReportControlDeniedInserts; existing rows keep counting. The MIB
//     sets no rule for which entries to omit, and refusing keeps memory
//     bounded during the interval.
//   - The apmReportEntry DESCRIPTION has two slips: entries exist for
//     entries configured on, which is on(2) in apmAppDirConfig, not on(1);
//     and for applications/servers aggregation it is apmNameClientID, not
//     protocolDirLocalIndex, that is 0.
package apm

import (
	"fmt"
	"math"
	"net/netip"
	"time"
)

// ResponsivenessType is apmAppDirResponsivenessType: what the
// responsiveness metric of an application measures, and so its unit.
type ResponsivenessType uint8

// Responsiveness types of APM-MIB apmAppDirResponsivenessType.
const (
	// TransactionOriented: application response time in milliseconds.
	TransactionOriented ResponsivenessType = 1
	// ThroughputOriented: throughput in kilobits per second.
	ThroughputOriented ResponsivenessType = 2
	// StreamingOriented: degraded/interrupted time over total service
	// time, in parts per million.
	StreamingOriented ResponsivenessType = 3
)

var responsivenessNames = [...]string{1: "transactionOriented", 2: "throughputOriented", 3: "streamingOriented"}

// Valid reports whether t is one of the three MIB values.
func (t ResponsivenessType) Valid() bool { return t >= 1 && t <= 3 }

// String returns the MIB enumeration label.
func (t ResponsivenessType) String() string {
	if t.Valid() {
		return responsivenessNames[t]
	}
	return fmt.Sprintf("ResponsivenessType(%d)", uint8(t))
}

// MarshalText encodes the MIB enumeration label (used by JSON).
func (t ResponsivenessType) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("apm: invalid responsiveness type %d", uint8(t))
	}
	return []byte(responsivenessNames[t]), nil
}

// UnmarshalText parses the MIB enumeration label.
func (t *ResponsivenessType) UnmarshalText(b []byte) error {
	for i := 1; i < len(responsivenessNames); i++ {
		if responsivenessNames[i] == string(b) {
			*t = ResponsivenessType(i)
			return nil
		}
	}
	return fmt.Errorf("apm: unknown responsiveness type %q", b)
}

// Aggregation is TransactionAggregationType: which transactions of a
// report share one row.
type Aggregation uint8

// Aggregation types of APM-MIB TransactionAggregationType.
const (
	// Flows: one row per application/server/client 3-tuple.
	Flows Aggregation = 1
	// Clients: one row per application/client.
	Clients Aggregation = 2
	// Servers: one row per application/server.
	Servers Aggregation = 3
	// Applications: one row per application.
	Applications Aggregation = 4
)

var aggregationNames = [...]string{1: "flows", 2: "clients", 3: "servers", 4: "applications"}

// Valid reports whether a is one of the four MIB values.
func (a Aggregation) Valid() bool { return a >= 1 && a <= 4 }

// String returns the MIB enumeration label.
func (a Aggregation) String() string {
	if a.Valid() {
		return aggregationNames[a]
	}
	return fmt.Sprintf("Aggregation(%d)", uint8(a))
}

// MarshalText encodes the MIB enumeration label (used by JSON).
func (a Aggregation) MarshalText() ([]byte, error) {
	if !a.Valid() {
		return nil, fmt.Errorf("apm: invalid aggregation %d", uint8(a))
	}
	return []byte(aggregationNames[a]), nil
}

// UnmarshalText parses the MIB enumeration label.
func (a *Aggregation) UnmarshalText(b []byte) error {
	for i := 1; i < len(aggregationNames); i++ {
		if aggregationNames[i] == string(b) {
			*a = Aggregation(i)
			return nil
		}
	}
	return fmt.Errorf("apm: unknown aggregation %q", b)
}

func (a Aggregation) hasServer() bool { return a == Flows || a == Servers }
func (a Aggregation) hasClient() bool { return a == Flows || a == Clients }

// Transaction is one finished transaction as seen by the agent (RFC 3729
// section 2: identified by application, server and client, with an
// availability and a responsiveness measure).
type Transaction struct {
	// App is the AppLocalIndex of the application (apmAppDirAppLocalIndex).
	App uint32
	// Type selects which apmAppDirTable entry of App this measurement
	// belongs to; its unit is that of Responsiveness. An application
	// measured in two ways is added twice, once per type.
	Type ResponsivenessType
	// Client and Server are the end points. Both must be valid; IPv4
	// addresses in 0.0.0.0/8 are not valid clients (they cannot be a
	// source address, and their client IDs are used for IPv6 clients).
	Client, Server netip.Addr
	// Start is when the user asked for service. It is informational:
	// a transaction is aggregated into the report in progress when it is
	// added (reports summarise transactions that finished in the period,
	// RFC 3729 section 2.5.4).
	Start time.Time
	// Responsiveness is the metric in the unit the MIB gives for Type:
	// milliseconds (use Milliseconds), kilobits per second or parts per
	// million. It is ignored for failed transactions.
	Responsiveness uint32
	// Success is false for a transaction that failed to provide the
	// service (RFC 3729 section 2).
	Success bool
	// Weight is the sampling rate: this transaction stands for Weight
	// transactions. 0 is taken as 1.
	Weight uint64
}

// Milliseconds converts a response time to the unit of TransactionOriented
// responsiveness, rounding to the nearest millisecond and saturating at the
// Unsigned32 range; negative durations become 0.
func Milliseconds(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	ms := (d + time.Millisecond/2) / time.Millisecond
	if ms > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(ms)
}

// AppDirEntry is one apmAppDirTable row: an application (or verb) and one
// responsiveness type, with its bucket boundaries.
type AppDirEntry struct {
	// App is apmAppDirAppLocalIndex (1..2147483647).
	App uint32 `json:"app"`
	// Type is apmAppDirResponsivenessType.
	Type ResponsivenessType `json:"type"`
	// Name is a human readable name (for JSON output only; the MIB
	// names applications through protocolDir or the user-defined tables).
	Name string `json:"name,omitempty"`
	// On is apmAppDirConfig: on(2) when true, off(1) when false.
	// Transactions of an application that is off are not measured.
	On bool `json:"on"`
	// Boundaries are apmAppDirResponsivenessBoundary1..6, in the unit of
	// Type. Bucket k (1..7) counts successful transactions with
	// Boundaries[k-2] <= responsiveness < Boundaries[k-1] (B1: below
	// boundary1, B7: boundary6 or above), as the apmReportResponsivenessBx
	// objects define. They must be non-decreasing.
	Boundaries [6]uint32 `json:"boundaries"`
}

func (d AppDirEntry) validate() error {
	if d.App < 1 || d.App > math.MaxInt32 {
		return fmt.Errorf("apm: app local index %d out of range 1..2147483647", d.App)
	}
	if !d.Type.Valid() {
		return fmt.Errorf("apm: app %d: invalid responsiveness type %d", d.App, d.Type)
	}
	for i := 1; i < len(d.Boundaries); i++ {
		if d.Boundaries[i] < d.Boundaries[i-1] {
			return fmt.Errorf("apm: app %d %v: boundary%d (%d) below boundary%d (%d)",
				d.App, d.Type, i+1, d.Boundaries[i], i, d.Boundaries[i-1])
		}
	}
	return nil
}

// bucket returns the 0-based bucket of responsiveness v: the first bucket
// whose upper boundary is above v (apmReportResponsivenessB1..B7: lower
// boundary inclusive, upper boundary exclusive).
func (d *AppDirEntry) bucket(v uint32) int {
	for i, b := range d.Boundaries {
		if v < b {
			return i
		}
	}
	return 6
}

// ReportControl is one apmReportControlTable row.
type ReportControl struct {
	// Index is apmReportControlIndex (1..65535).
	Index uint32
	// DataSource is apmReportControlDataSource as OID sub-identifiers,
	// e.g. ifIndex.7 = 1.3.6.1.2.1.2.2.1.1.7; nil means 0.0.
	DataSource []uint32
	// Aggregation is apmReportControlAggregationType.
	Aggregation Aggregation
	// Interval is apmReportControlInterval. The MIB counts it in whole
	// seconds, greater than zero.
	Interval time.Duration
	// RequestedSize is apmReportControlRequestedSize (rows per report).
	RequestedSize uint32
	// GrantedSize is apmReportControlGrantedSize; set by the engine.
	GrantedSize uint32
	// RequestedReports is apmReportControlRequestedReports (0..65535).
	RequestedReports uint32
	// GrantedReports is apmReportControlGrantedReports, the number of
	// reports kept; set by the engine.
	GrantedReports uint32
	// Owner is apmReportControlOwner.
	Owner string
}

func (rc ReportControl) validate() error {
	if rc.Index < 1 || rc.Index > 65535 {
		return fmt.Errorf("apm: report control index %d out of range 1..65535", rc.Index)
	}
	if !rc.Aggregation.Valid() {
		return fmt.Errorf("apm: report control %d: invalid aggregation %d", rc.Index, rc.Aggregation)
	}
	if rc.Interval <= 0 || rc.Interval%time.Second != 0 || rc.Interval/time.Second > math.MaxUint32 {
		return fmt.Errorf("apm: report control %d: interval %v is not a positive whole number of seconds", rc.Index, rc.Interval)
	}
	if rc.RequestedReports > 65535 {
		return fmt.Errorf("apm: report control %d: requested reports %d above 65535", rc.Index, rc.RequestedReports)
	}
	return nil
}

// ControlStatus is a ReportControl with the read-only state of its row.
type ControlStatus struct {
	ReportControl
	// StartTime is when the report in progress began
	// (apmReportControlStartTime, to be converted to sysUpTime).
	StartTime time.Time
	// ReportNumber is apmReportControlReportNumber, the number of the
	// report in progress (the first report is 1).
	ReportNumber uint32
	// DeniedInserts is apmReportControlDeniedInserts (Counter32).
	DeniedInserts uint32
}
