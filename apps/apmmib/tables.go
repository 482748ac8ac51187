package apmmib

import (
	"slices"
	"time"

	"github.com/sflowswitchd/sflowswitchd/apps/apm"
	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
)

// Enumerated values served (APM-MIB, SNMPv2-TC).
const (
	appDirOff         = 1 // apmAppDirConfig off(1)
	appDirOn          = 2 // apmAppDirConfig on(2)
	storagePermanent  = 4 // StorageType permanent(4)
	rowStatusActive   = 1 // RowStatus active(1)
	maxTimeTicks      = 1 << 32
	centisecondTick   = 10 * time.Millisecond
	dateAndTimeOctets = 11 // DateAndTime with UTC offset
)

// appDirTable serves apmAppDirTable, INDEX { apmAppDirAppLocalIndex,
// apmAppDirResponsivenessType }: columns 3 apmAppDirConfig (INTEGER
// off(1)/on(2)) and 4..9 apmAppDirResponsivenessBoundary1..6 (Unsigned32).
func (h *Handler) appDirTable() *table {
	value := func(d apm.AppDirEntry) rowValue {
		return func(col uint32) (agentx.VarType, any) {
			if col == 3 {
				if d.On {
					return agentx.Integer, int32(appDirOn)
				}
				return agentx.Integer, int32(appDirOff)
			}
			return agentx.Gauge32, d.Boundaries[col-4]
		}
	}
	return &table{
		entry:  AppDirEntry,
		cols:   []uint32{3, 4, 5, 6, 7, 8, 9},
		hidden: []uint32{1, 2},
		lookup: func(index []uint32) (rowValue, bool) {
			if len(index) != 2 {
				return nil, false
			}
			for _, d := range h.e.AppDir() {
				if d.App == index[0] && uint32(d.Type) == index[1] {
					return value(d), true
				}
			}
			return nil, false
		},
		next: func(after []uint32, inclusive bool) ([]uint32, rowValue, bool) {
			dir := h.e.AppDir() // sorted by App, Type: the index order
			i, ok := searchSorted(len(dir), func(i int) []uint32 {
				return []uint32{dir[i].App, uint32(dir[i].Type)}
			}, after, inclusive)
			if !ok {
				return nil, nil, false
			}
			return []uint32{dir[i].App, uint32(dir[i].Type)}, value(dir[i]), true
		},
	}
}

// controlTable serves apmReportControlTable, INDEX {
// apmReportControlIndex }, columns 2..15.
func (h *Handler) controlTable() *table {
	return &table{
		entry:  ReportControlEntry,
		cols:   []uint32{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
		hidden: []uint32{1},
		lookup: func(index []uint32) (rowValue, bool) {
			if len(index) != 1 {
				return nil, false
			}
			c, ok := h.e.Control(index[0])
			if !ok {
				return nil, false
			}
			return h.controlValue(c), true
		},
		next: func(after []uint32, inclusive bool) ([]uint32, rowValue, bool) {
			ctls := h.e.Controls() // sorted by Index
			i, ok := searchSorted(len(ctls), func(i int) []uint32 { return []uint32{ctls[i].Index} }, after, inclusive)
			if !ok {
				return nil, nil, false
			}
			return []uint32{ctls[i].Index}, h.controlValue(ctls[i]), true
		},
	}
}

func (h *Handler) controlValue(c apm.ControlStatus) rowValue {
	return func(col uint32) (agentx.VarType, any) {
		switch col {
		case 2: // apmReportControlDataSource, DataSourceOrZero
			if len(c.DataSource) == 0 {
				return agentx.ObjectIdentifier, agentx.OID{0, 0}
			}
			return agentx.ObjectIdentifier, agentx.OID(slices.Clone(c.DataSource))
		case 3: // apmReportControlAggregationType
			return agentx.Integer, int32(c.Aggregation)
		case 4: // apmReportControlInterval, Unsigned32 seconds
			return agentx.Gauge32, uint32(c.Interval / time.Second)
		case 5:
			return agentx.Gauge32, c.RequestedSize
		case 6:
			return agentx.Gauge32, c.GrantedSize
		case 7:
			return agentx.Gauge32, c.RequestedReports
		case 8:
			return agentx.Gauge32, c.GrantedReports
		case 9: // apmReportControlStartTime, TimeStamp
			return agentx.TimeTicks, h.timeStamp(c.StartTime)
		case 10:
			return agentx.Gauge32, c.ReportNumber
		case 11: // apmReportControlDeniedInserts
			return agentx.Counter32, c.DeniedInserts
		case 12: // apmReportControlDroppedFrames: the engine drops none
			return agentx.Counter32, uint32(0)
		case 13: // apmReportControlOwner, OwnerString
			return agentx.OctetString, []byte(c.Owner)
		case 14: // apmReportControlStorageType
			return agentx.Integer, int32(storagePermanent)
		default: // 15, apmReportControlStatus
			return agentx.Integer, int32(rowStatusActive)
		}
	}
}

// timeStamp converts an instant to sysUpTime hundredths of a second since
// Options.Start (TimeStamp, RFC 2579), wrapping like sysUpTime.
func (h *Handler) timeStamp(t time.Time) uint32 {
	d := t.Sub(h.opts.Start)
	if d <= 0 {
		return 0
	}
	return uint32(uint64(d/centisecondTick) % maxTimeTicks)
}

// reportTable serves apmReportTable, with the index apm.Engine.Walk
// documents, columns 3..14 (all Unsigned32).
func (h *Handler) reportTable() *table {
	value := func(r apm.Row) rowValue {
		return func(col uint32) (agentx.VarType, any) {
			switch col {
			case 3:
				return agentx.Gauge32, r.TransactionCount
			case 4:
				return agentx.Gauge32, r.SuccessfulTransactions
			case 5:
				return agentx.Gauge32, r.ResponsivenessMean
			case 6:
				return agentx.Gauge32, r.ResponsivenessMin
			case 7:
				return agentx.Gauge32, r.ResponsivenessMax
			default: // 8..14, B1..B7
				return agentx.Gauge32, r.ResponsivenessB[col-8]
			}
		}
	}
	return &table{
		entry:  ReportEntry,
		cols:   []uint32{3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
		hidden: []uint32{1, 2},
		lookup: func(index []uint32) (rowValue, bool) {
			r, ok := h.e.Lookup(index)
			if !ok {
				return nil, false
			}
			return value(r), true
		},
		next: func(after []uint32, inclusive bool) ([]uint32, rowValue, bool) {
			if inclusive {
				if r, ok := h.e.Lookup(after); ok {
					return slices.Clone(after), value(r), true
				}
			}
			idx, r, ok := h.e.Next(after)
			if !ok {
				return nil, nil, false
			}
			return idx, value(r), true
		},
	}
}
