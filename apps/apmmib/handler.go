package apmmib

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sflowswitchd/sflowswitchd/apps/apm"
	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
)

// OID is the APM-MIB module identity, apm = rmon 23 (RFC 3729): the
// subtree to register with the master agent.
var OID = agentx.OID{1, 3, 6, 1, 2, 1, 16, 23}

// Entry OIDs of the served tables (apmMibObjects = apm.1).
var (
	AppDirEntry        = OID.Append(1, 1, 1)  // apmAppDirEntry
	NameEntry          = OID.Append(1, 8, 1)  // apmNameEntry
	ReportControlEntry = OID.Append(1, 9, 1)  // apmReportControlEntry
	ReportEntry        = OID.Append(1, 10, 1) // apmReportEntry
)

// Options configures a Handler.
type Options struct {
	// Start is the instant the agent's sysUpTime counts from; TimeStamp
	// objects (apmReportControlStartTime) are measured from it.
	Start time.Time
	// IPv4ProtocolDirLocalIndex and IPv6ProtocolDirLocalIndex are the
	// RMON2 protocolDirLocalIndex values of ip and ipv6, as in the
	// engine's apm.Config (defaults 1 and 2, like apm.Config); they index
	// apmNameTable addresses.
	IPv4ProtocolDirLocalIndex uint32
	IPv6ProtocolDirLocalIndex uint32
}

// Handler is a read-only agentx.Handler for the APM-MIB subtree of one
// apm.Engine. It keeps no copy of the engine's data except a cache of the
// apmNameTable, rebuilt when the kept reports change. Safe for concurrent
// use.
type Handler struct {
	e      *apm.Engine
	opts   Options
	tables []*table // in OID order

	mu    sync.Mutex // guards the name cache
	names nameCache
}

// New returns a Handler serving e.
func New(e *apm.Engine, opts Options) *Handler {
	if opts.IPv4ProtocolDirLocalIndex == 0 {
		opts.IPv4ProtocolDirLocalIndex = 1
	}
	if opts.IPv6ProtocolDirLocalIndex == 0 {
		opts.IPv6ProtocolDirLocalIndex = 2
	}
	h := &Handler{e: e, opts: opts}
	h.tables = []*table{h.appDirTable(), h.nameTable(), h.controlTable(), h.reportTable()}
	return h
}

// rowValue returns the type and value of column col of a row; callers
// pass only the table's accessible columns (table.cols).
type rowValue func(col uint32) (t agentx.VarType, v any)

// table is one conceptual table: its entry OID, its columns in order and
// how to find rows by index.
type table struct {
	entry agentx.OID
	// cols are the accessible columns, ascending; hidden are the
	// not-accessible (index) columns.
	cols, hidden []uint32
	// lookup returns the row with exactly this index.
	lookup func(index []uint32) (rowValue, bool)
	// next returns the first row whose index is > after (>= when
	// inclusive), with its index.
	next func(after []uint32, inclusive bool) ([]uint32, rowValue, bool)
}

func (t *table) accessible(col uint32) bool { return slices.Contains(t.cols, col) }

// Get implements agentx.Handler.
func (h *Handler) Get(oid agentx.OID) (agentx.Variable, error) {
	for _, t := range h.tables {
		if !oid.HasPrefix(t.entry) || len(oid) == len(t.entry) {
			continue
		}
		col := oid[len(t.entry)]
		if !t.accessible(col) {
			break
		}
		r, ok := t.lookup(oid[len(t.entry)+1:])
		if !ok {
			return agentx.Variable{Name: oid, Type: agentx.NoSuchInstance}, nil
		}
		typ, v := r(col)
		return agentx.Variable{Name: oid, Type: typ, Value: v}, nil
	}
	return agentx.Variable{Name: oid, Type: agentx.NoSuchObject}, nil
}

// GetNext implements agentx.Handler: tables in OID order, inside a table
// column by column, rows in index order.
func (h *Handler) GetNext(from agentx.OID, include bool, end agentx.OID) (agentx.Variable, error) {
	for _, t := range h.tables {
		v, ok := t.nextObject(from, include)
		if !ok {
			continue
		}
		if len(end) > 0 && v.Name.Compare(end) >= 0 {
			break
		}
		return v, nil
	}
	return agentx.Variable{Name: from, Type: agentx.EndOfMibView}, nil
}

// nextObject returns the first object of t after from (at or after when
// include).
func (t *table) nextObject(from agentx.OID, include bool) (agentx.Variable, bool) {
	var (
		startCol uint32
		after    []uint32
		inCol    bool // from names a column of t (and maybe a row)
	)
	switch {
	case from.HasPrefix(t.entry) && len(from) > len(t.entry):
		startCol, after, inCol = from[len(t.entry)], from[len(t.entry)+1:], true
	case from.Compare(t.entry) <= 0:
		// Every object of t follows from.
	default:
		return agentx.Variable{}, false // from is past t
	}
	for _, col := range t.cols {
		if col < startCol {
			continue
		}
		var (
			idx []uint32
			r   rowValue
			ok  bool
		)
		if inCol && col == startCol {
			idx, r, ok = t.next(after, include)
		} else {
			idx, r, ok = t.next(nil, true)
		}
		if ok {
			typ, v := r(col)
			name := make(agentx.OID, 0, len(t.entry)+1+len(idx))
			name = append(append(append(name, t.entry...), col), idx...)
			return agentx.Variable{Name: name, Type: typ, Value: v}, true
		}
	}
	return agentx.Variable{}, false
}

// TestSet implements agentx.Handler: every object is read-only to SNMP.
// noAccess for not-accessible index columns, notWritable otherwise (RFC
// 3416 section 4.2.5), for the first varbind.
func (h *Handler) TestSet(_ uint32, vbs []agentx.Variable) (agentx.ErrorStatus, int) {
	if len(vbs) == 0 {
		return agentx.NoError, 0
	}
	return h.setError(vbs[0].Name), 1
}

func (h *Handler) setError(oid agentx.OID) agentx.ErrorStatus {
	for _, t := range h.tables {
		if oid.HasPrefix(t.entry) && len(oid) > len(t.entry) && slices.Contains(t.hidden, oid[len(t.entry)]) {
			return agentx.NoAccess
		}
	}
	return agentx.NotWritable
}

// CommitSet implements agentx.Handler. TestSet lets only an empty set
// through, so there is never anything to apply.
func (h *Handler) CommitSet(uint32) (agentx.ErrorStatus, int) { return agentx.NoError, 0 }

// UndoSet implements agentx.Handler; nothing is ever committed.
func (h *Handler) UndoSet(uint32) (agentx.ErrorStatus, int) { return agentx.NoError, 0 }

// CleanupSet implements agentx.Handler; nothing is reserved.
func (h *Handler) CleanupSet(uint32) {}

// searchSorted returns the position of the first of n rows (sorted by
// index) whose index is > after (>= when inclusive); ok is false when
// there is none.
func searchSorted(n int, index func(i int) []uint32, after []uint32, inclusive bool) (int, bool) {
	i := sort.Search(n, func(i int) bool {
		c := slices.Compare(index(i), after)
		return c > 0 || (c == 0 && inclusive)
	})
	return i, i < n
}
