package apm

import (
	"encoding/json"
	"fmt"
	"time"
)

// JSON forms count intervals in seconds, the unit of
// apmReportControlInterval, instead of Go's nanosecond durations.

type reportJSON struct {
	Control         uint32      `json:"control"`
	Number          uint32      `json:"number"`
	Aggregation     Aggregation `json:"aggregation"`
	Start           time.Time   `json:"start"`
	IntervalSeconds uint64      `json:"intervalSeconds"`
	Rows            []Row       `json:"rows"`
}

// MarshalJSON encodes a report with its interval in seconds and rows in
// MIB index order.
func (r Report) MarshalJSON() ([]byte, error) {
	rows := r.Rows
	if rows == nil {
		rows = []Row{}
	}
	return json.Marshal(reportJSON{
		Control: r.Control, Number: r.Number, Aggregation: r.Aggregation,
		Start: r.Start, IntervalSeconds: uint64(r.Interval / time.Second), Rows: rows,
	})
}

// UnmarshalJSON decodes the form MarshalJSON writes. The rows it yields
// carry no MIB index (they are for display, not for Walk).
func (r *Report) UnmarshalJSON(b []byte) error {
	var j reportJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("apm: decode report: %w", err)
	}
	*r = Report{
		Control: j.Control, Number: j.Number, Aggregation: j.Aggregation,
		Start: j.Start, Interval: time.Duration(j.IntervalSeconds) * time.Second, Rows: j.Rows,
	}
	return nil
}

type controlJSON struct {
	Index            uint32      `json:"index"`
	DataSource       []uint32    `json:"dataSource,omitempty"`
	Aggregation      Aggregation `json:"aggregation"`
	IntervalSeconds  uint64      `json:"intervalSeconds"`
	RequestedSize    uint32      `json:"requestedSize"`
	GrantedSize      uint32      `json:"grantedSize"`
	RequestedReports uint32      `json:"requestedReports"`
	GrantedReports   uint32      `json:"grantedReports"`
	Owner            string      `json:"owner,omitempty"`
}

func (rc ReportControl) toJSON() controlJSON {
	return controlJSON{
		Index: rc.Index, DataSource: rc.DataSource, Aggregation: rc.Aggregation,
		IntervalSeconds: uint64(rc.Interval / time.Second),
		RequestedSize:   rc.RequestedSize, GrantedSize: rc.GrantedSize,
		RequestedReports: rc.RequestedReports, GrantedReports: rc.GrantedReports,
		Owner: rc.Owner,
	}
}

// MarshalJSON encodes a report control with its interval in seconds.
func (rc ReportControl) MarshalJSON() ([]byte, error) { return json.Marshal(rc.toJSON()) }

// MarshalJSON encodes a report control and its state. (Defined so the
// embedded ReportControl's MarshalJSON does not hide the state fields.)
func (s ControlStatus) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		controlJSON
		StartTime     time.Time `json:"startTime"`
		ReportNumber  uint32    `json:"reportNumber"`
		DeniedInserts uint32    `json:"deniedInserts"`
	}{s.toJSON(), s.StartTime, s.ReportNumber, s.DeniedInserts})
}
