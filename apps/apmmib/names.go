package apmmib

import (
	"slices"
	"time"

	"github.com/sflowswitchd/sflowswitchd/apps/apm"
	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
)

// reportMark identifies the content of one kept report: reports are
// immutable, and any change (a new report, an aged-out one, rows removed
// when an application is turned off) replaces the Rows slice.
type reportMark struct {
	control, number uint32
	rows            int
	first           *apm.Row
}

// nameCache is the apmNameTable built from the kept reports it was built
// from (marks).
type nameCache struct {
	marks   []reportMark
	indexes [][]uint32 // sorted
	built   bool
}

// nameTable serves apmNameTable, INDEX { apmNameClientID,
// protocolDirLocalIndex, apmNameClientAddress, apmNameMappingStartTime }:
// columns 4 apmNameMachineName and 5 apmNameUserName (SnmpAdminString),
// both empty (the agent learns no names).
func (h *Handler) nameTable() *table {
	value := func(uint32) (agentx.VarType, any) { return agentx.OctetString, []byte{} }
	return &table{
		entry:  NameEntry,
		cols:   []uint32{4, 5},
		hidden: []uint32{1, 2, 3},
		lookup: func(index []uint32) (rowValue, bool) {
			idx := h.nameIndexes()
			_, found := slices.BinarySearchFunc(idx, index, slices.Compare[[]uint32])
			return value, found
		},
		next: func(after []uint32, inclusive bool) ([]uint32, rowValue, bool) {
			idx := h.nameIndexes()
			i, ok := searchSorted(len(idx), func(i int) []uint32 { return idx[i] }, after, inclusive)
			if !ok {
				return nil, nil, false
			}
			return idx[i], value, true
		},
	}
}

// nameIndexes returns the sorted apmNameTable indexes of the clients in
// the kept reports, rebuilding the cache when the reports changed. The
// result is shared: do not modify it.
func (h *Handler) nameIndexes() [][]uint32 {
	var marks []reportMark
	var reports [][]apm.Report
	for _, c := range h.e.Controls() {
		if c.Aggregation != apm.Flows && c.Aggregation != apm.Clients {
			continue // no client in the rows
		}
		reps, ok := h.e.Reports(c.Index)
		if !ok {
			continue // removed meanwhile
		}
		reports = append(reports, reps)
		for _, r := range reps {
			m := reportMark{control: r.Control, number: r.Number, rows: len(r.Rows)}
			if len(r.Rows) > 0 {
				m.first = &r.Rows[0]
			}
			marks = append(marks, m)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.names.built && slices.Equal(h.names.marks, marks) {
		return h.names.indexes
	}
	ids := map[uint32]struct{}{}
	for _, reps := range reports {
		for _, r := range reps {
			for i := range r.Rows {
				if id := r.Rows[i].ClientID; id != 0 {
					ids[id] = struct{}{}
				}
			}
		}
	}
	start := dateAndTime(h.opts.Start)
	indexes := make([][]uint32, 0, len(ids))
	for id := range ids {
		a, ok := h.e.ClientAddress(id)
		if !ok {
			continue
		}
		proto := h.opts.IPv4ProtocolDirLocalIndex
		if a.Is6() {
			proto = h.opts.IPv6ProtocolDirLocalIndex
		}
		// Both OCTET STRING index components are non-IMPLIED: a length
		// sub-identifier, then one per octet (RFC 2578 section 7.7).
		b := a.AsSlice()
		idx := make([]uint32, 0, 3+len(b)+1+len(start))
		idx = append(idx, id, proto, uint32(len(b)))
		for _, o := range b {
			idx = append(idx, uint32(o))
		}
		idx = append(idx, uint32(len(start)))
		for _, o := range start {
			idx = append(idx, uint32(o))
		}
		indexes = append(indexes, idx)
	}
	slices.SortFunc(indexes, slices.Compare[[]uint32])
	h.names = nameCache{marks: marks, indexes: indexes, built: true}
	return indexes
}

// dateAndTime encodes t as an 11-octet SNMPv2-TC DateAndTime in UTC
// (year high and low octet, month, day, hour, minutes, seconds,
// deci-seconds, '+', 0 hours, 0 minutes from UTC). Years outside
// 0..65535 are clamped.
func dateAndTime(t time.Time) [dateAndTimeOctets]byte {
	t = t.UTC()
	y := min(max(t.Year(), 0), 65535)
	return [dateAndTimeOctets]byte{
		byte(y >> 8), byte(y), byte(t.Month()), byte(t.Day()),
		byte(t.Hour()), byte(t.Minute()), byte(t.Second()), byte(t.Nanosecond() / 100_000_000),
		'+', 0, 0,
	}
}
