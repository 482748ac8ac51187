package apm

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Errors returned by Engine.Add. They are preallocated so a rejected
// transaction costs no allocation.
var (
	ErrUnknownApp     = errors.New("apm: application/responsiveness type not in the application directory")
	ErrAppOff         = errors.New("apm: application measurement is off")
	ErrInvalidAddress = errors.New("apm: transaction client or server address is not valid")
)

// Config bounds the engine's resources and names the network protocols.
type Config struct {
	// IPv4ProtocolDirLocalIndex and IPv6ProtocolDirLocalIndex are the
	// RMON2 protocolDirLocalIndex values of ip and ipv6, used as the
	// protocolDirLocalIndex component of apmReportTable indexes. They
	// must match the agent's protocolDirTable, and AppLocalIndex values
	// must not reuse them (AppLocalIndex TEXTUAL-CONVENTION). Defaults 1
	// and 2.
	IPv4ProtocolDirLocalIndex uint32
	IPv6ProtocolDirLocalIndex uint32
	// MaxReportSize caps apmReportControlGrantedSize (default 10000).
	MaxReportSize uint32
	// MaxReports caps apmReportControlGrantedReports (default 168: a
	// week of hourly reports).
	MaxReports uint32
	// MaxIPv6Clients caps the IPv6 clients given a client ID (default
	// 1<<20, at most 0x00FFFFFF; see firstIPv4ClientID).
	MaxIPv6Clients uint32
}

func (c Config) withDefaults() Config {
	if c.IPv4ProtocolDirLocalIndex == 0 {
		c.IPv4ProtocolDirLocalIndex = 1
	}
	if c.IPv6ProtocolDirLocalIndex == 0 {
		c.IPv6ProtocolDirLocalIndex = 2
	}
	if c.MaxReportSize == 0 {
		c.MaxReportSize = 10000
	}
	if c.MaxReports == 0 {
		c.MaxReports = 168
	}
	if c.MaxIPv6Clients == 0 {
		c.MaxIPv6Clients = 1 << 20
	}
	if c.MaxIPv6Clients >= firstIPv4ClientID {
		c.MaxIPv6Clients = firstIPv4ClientID - 1
	}
	return c
}

// Engine aggregates transactions into APM reports.
//
// Add may be called from any number of goroutines. Each report control
// has its own lock, held only to update one row; the application
// directory and the list of controls are immutable snapshots behind
// atomic pointers, so Add takes no engine-wide lock. Tick holds a
// control's lock only to swap its interval data out; sorting, client IDs
// and report storage happen outside it.
type Engine struct {
	cfg     Config
	cfgMu   sync.Mutex // serialises configuration changes
	dir     atomic.Pointer[directory]
	ctls    atomic.Pointer[[]*control] // sorted by Index
	clients *clientIDs
}

type appKey struct {
	app uint32
	typ ResponsivenessType
}

// directory is an immutable snapshot of the apmAppDirTable.
type directory struct {
	gen     uint64
	entries map[appKey]*AppDirEntry
}

// NewEngine returns an engine with an empty application directory and no
// report controls.
func NewEngine(cfg Config) *Engine {
	cfg = cfg.withDefaults()
	e := &Engine{cfg: cfg, clients: newClientIDs(cfg.MaxIPv6Clients)}
	e.dir.Store(&directory{entries: map[appKey]*AppDirEntry{}})
	e.ctls.Store(&[]*control{})
	return e
}

// SetAppDir creates or updates an apmAppDirTable entry. As the MIB
// requires, changing a boundary of an existing entry deletes all entries
// of the apmReportTable (all kept reports of all controls; the report in
// progress loses only that application's rows, whose buckets would mix
// two sets of boundaries), and turning an entry off deletes its rows from
// every report.
func (e *Engine) SetAppDir(ent AppDirEntry) error {
	if err := ent.validate(); err != nil {
		return err
	}
	if ent.App == e.cfg.IPv4ProtocolDirLocalIndex || ent.App == e.cfg.IPv6ProtocolDirLocalIndex {
		return fmt.Errorf("apm: app local index %d is the protocolDirLocalIndex of ip/ipv6", ent.App)
	}
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	old := e.dir.Load()
	k := appKey{ent.App, ent.Type}
	prev := old.entries[k]
	next := &directory{gen: old.gen + 1, entries: make(map[appKey]*AppDirEntry, len(old.entries)+1)}
	for kk, v := range old.entries {
		next.entries[kk] = v
	}
	stored := ent
	next.entries[k] = &stored
	e.dir.Store(next)

	boundariesChanged := prev != nil && prev.Boundaries != ent.Boundaries
	turnedOff := prev != nil && prev.On && !ent.On
	for _, c := range *e.ctls.Load() {
		c.dirChanged(next.gen, k, boundariesChanged || turnedOff)
		switch {
		case boundariesChanged:
			c.dropReports()
		case turnedOff:
			c.dropApp(k)
		}
	}
	return nil
}

// AppDir returns the apmAppDirTable in index order.
func (e *Engine) AppDir() []AppDirEntry {
	d := e.dir.Load()
	out := make([]AppDirEntry, 0, len(d.entries))
	for _, v := range d.entries {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].App != out[j].App {
			return out[i].App < out[j].App
		}
		return out[i].Type < out[j].Type
	})
	return out
}

// AddControl creates an active apmReportControlTable row whose first
// report starts at start. Reports then cover [start+k*Interval,
// start+(k+1)*Interval): boundaries never drift (apmReportControlInterval).
// GrantedSize and GrantedReports are computed from the requests and the
// engine limits; the values given are ignored.
func (e *Engine) AddControl(rc ReportControl, start time.Time) (ReportControl, error) {
	if err := rc.validate(); err != nil {
		return ReportControl{}, err
	}
	rc.GrantedSize = min(rc.RequestedSize, e.cfg.MaxReportSize)
	rc.GrantedReports = min(rc.RequestedReports, e.cfg.MaxReports)
	rc.DataSource = slices.Clone(rc.DataSource)
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	old := *e.ctls.Load()
	i, found := slices.BinarySearchFunc(old, rc.Index, cmpControlIndex)
	if found {
		return ReportControl{}, fmt.Errorf("apm: report control %d already exists", rc.Index)
	}
	c := &control{
		rc:     rc,
		keys:   make(map[rowKey]int32),
		start:  start,
		number: 1,
		gen:    e.dir.Load().gen,
	}
	next := slices.Insert(slices.Clone(old), i, c)
	e.ctls.Store(&next)
	return rc, nil
}

// RemoveControl deletes a report control and all its reports.
func (e *Engine) RemoveControl(index uint32) error {
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	old := *e.ctls.Load()
	i := slices.IndexFunc(old, func(c *control) bool { return c.rc.Index == index })
	if i < 0 {
		return fmt.Errorf("apm: report control %d does not exist", index)
	}
	next := slices.Delete(slices.Clone(old), i, i+1)
	e.ctls.Store(&next)
	return nil
}

// Resize sets apmReportControlRequestedSize and
// apmReportControlRequestedReports of an active control (the only columns
// the MIB lets change while active) and returns the updated row. Shrinking
// the granted reports drops the oldest kept reports; the size applies to
// the report in progress from now on.
func (e *Engine) Resize(index, requestedSize, requestedReports uint32) (ReportControl, error) {
	if requestedReports > 65535 {
		return ReportControl{}, fmt.Errorf("apm: report control %d: requested reports %d above 65535", index, requestedReports)
	}
	c := e.control(index)
	if c == nil {
		return ReportControl{}, fmt.Errorf("apm: report control %d does not exist", index)
	}
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	c.mu.Lock()
	c.rc.RequestedSize = requestedSize
	c.rc.GrantedSize = min(requestedSize, e.cfg.MaxReportSize)
	c.rc.RequestedReports = requestedReports
	c.rc.GrantedReports = min(requestedReports, e.cfg.MaxReports)
	rc := c.rc
	c.mu.Unlock()
	c.repMu.Lock()
	c.trim(int(rc.GrantedReports))
	c.repMu.Unlock()
	return rc, nil
}

// Control returns the state of one report control row.
func (e *Engine) Control(index uint32) (ControlStatus, bool) {
	c := e.control(index)
	if c == nil {
		return ControlStatus{}, false
	}
	return c.status(), true
}

// Controls returns all report control rows in index order.
func (e *Engine) Controls() []ControlStatus {
	ctls := *e.ctls.Load()
	out := make([]ControlStatus, len(ctls))
	for i, c := range ctls {
		out[i] = c.status()
	}
	return out
}

// cmpControlIndex orders controls by Index, for binary search.
func cmpControlIndex(c *control, index uint32) int { return cmp.Compare(c.rc.Index, index) }

func (e *Engine) control(index uint32) *control {
	ctls := *e.ctls.Load()
	i, found := slices.BinarySearchFunc(ctls, index, cmpControlIndex)
	if !found {
		return nil
	}
	return ctls[i]
}

// ClientAddress returns the address behind an apmNameClientID (for the
// apmNameTable).
func (e *Engine) ClientAddress(id uint32) (netip.Addr, bool) { return e.clients.addr(id) }

// Add aggregates one transaction into the report in progress of every
// report control. It returns ErrUnknownApp, ErrAppOff or
// ErrInvalidAddress (without counting the transaction) when the
// transaction cannot be measured. A control whose report in progress
// already holds GrantedSize rows does not take a transaction that needs a
// new row; it counts it in DeniedInserts (apmReportControlDeniedInserts).
// Add does not allocate once its rows exist.
func (e *Engine) Add(tx Transaction) error {
	d := e.dir.Load()
	k := appKey{tx.App, tx.Type}
	ent := d.entries[k]
	if ent == nil {
		return ErrUnknownApp
	}
	if !ent.On {
		return ErrAppOff
	}
	client := tx.Client.Unmap().WithZone("")
	server := tx.Server.Unmap().WithZone("")
	if !client.IsValid() || !server.IsValid() || (client.Is4() && client.As4()[0] == 0) {
		return ErrInvalidAddress
	}
	w := tx.Weight
	if w == 0 {
		w = 1
	}
	for _, c := range *e.ctls.Load() {
		c.add(e, d, ent, k, server, client, tx.Success, tx.Responsiveness, w)
	}
	return nil
}

// Tick closes every interval that ended at or before now and produces its
// report. When several intervals elapsed since the last Tick, the data
// goes to the first of them and the others get empty reports, so report
// numbers and start times stay on the fixed interval grid.
func (e *Engine) Tick(now time.Time) {
	for _, c := range *e.ctls.Load() {
		c.tick(e, now)
	}
}

// Reports returns the kept reports of a control, oldest first (at most
// GrantedReports). The reports share their rows with the engine: treat
// them as read-only.
func (e *Engine) Reports(controlIndex uint32) ([]Report, bool) {
	c := e.control(controlIndex)
	if c == nil {
		return nil, false
	}
	c.repMu.RLock()
	defer c.repMu.RUnlock()
	out := make([]Report, len(c.reports))
	for i, r := range c.reports {
		out[i] = *r
	}
	return out, true
}

// Walk calls fn for every apmReportTable row in MIB index order until fn
// returns false. index is the full instance index:
//
//	apmReportControlIndex, apmReportIndex, apmAppDirAppLocalIndex,
//	apmAppDirResponsivenessType, protocolDirLocalIndex,
//	apmReportServerAddress (length, octets...), apmNameClientID
//
// so column c of the row is the OID 1.3.6.1.2.1.16.23.1.10.1.c.<index>.
// index is reused between calls: copy it to keep it.
func (e *Engine) Walk(fn func(index []uint32, row Row) bool) {
	buf := make([]uint32, 0, 32)
	for _, c := range *e.ctls.Load() {
		for _, r := range c.snapshot() {
			for _, row := range r.Rows {
				buf = append(append(buf[:0], c.rc.Index, r.Number), row.index...)
				if !fn(buf, row) {
					return
				}
			}
		}
	}
}

// Next returns the first apmReportTable row whose full index (as in Walk)
// is greater than after, for SNMP get-next. The returned index is fresh.
func (e *Engine) Next(after []uint32) ([]uint32, Row, bool) {
	for _, c := range *e.ctls.Load() {
		for _, r := range c.snapshot() {
			n := len(r.Rows)
			i := sort.Search(n, func(i int) bool {
				return compareFull(c.rc.Index, r.Number, r.Rows[i].index, after) > 0
			})
			if i < n {
				row := r.Rows[i]
				return append([]uint32{c.rc.Index, r.Number}, row.index...), row, true
			}
		}
	}
	return nil, Row{}, false
}

// Lookup returns the apmReportTable row with exactly this full index.
func (e *Engine) Lookup(index []uint32) (Row, bool) {
	if len(index) < 2 {
		return Row{}, false
	}
	c := e.control(index[0])
	if c == nil {
		return Row{}, false
	}
	for _, r := range c.snapshot() {
		if r.Number != index[1] {
			continue
		}
		i, found := slices.BinarySearchFunc(r.Rows, index[2:], func(row Row, t []uint32) int {
			return compareIndex(row.index, t)
		})
		if found {
			return r.Rows[i], true
		}
	}
	return Row{}, false
}

func compareFull(ctl, num uint32, rowIdx, t []uint32) int {
	head := [2]uint32{ctl, num}
	for i := range 2 {
		if i >= len(t) {
			return 1
		}
		if head[i] != t[i] {
			if head[i] < t[i] {
				return -1
			}
			return 1
		}
	}
	return compareIndex(rowIdx, t[2:])
}

// control is one report control with its interval in progress and its
// kept reports.
type control struct {
	tickMu sync.Mutex // serialises tick and Resize, so reports are stored in order

	mu sync.Mutex // guards the fields below, except rc's Index,
	// Aggregation, Interval, DataSource and Owner, which never change
	// after AddControl and are read without it
	rc     ReportControl
	keys   map[rowKey]int32 // row -> position in acc
	acc    []accum
	spare  map[rowKey]int32 // cleared map of the previous interval, for reuse
	spareA []accum
	start  time.Time // start of the report in progress
	number uint32    // number of the report in progress
	denied uint32
	gen    uint64 // directory generation the interval data agrees with

	repMu   sync.RWMutex
	reports []*Report // oldest first
}

func (c *control) add(e *Engine, d *directory, ent *AppDirEntry, k appKey, server, client netip.Addr, success bool, resp uint32, w uint64) {
	key := rowKey{app: k.app, typ: k.typ}
	if c.rc.Aggregation.hasServer() {
		key.server = toKeyAddr(server)
	}
	if c.rc.Aggregation.hasClient() {
		key.client = toKeyAddr(client)
	}
	c.mu.Lock()
	if d.gen < c.gen {
		// The directory changed after this Add read it and this control
		// has already dropped data measured with the old entry: measure
		// with the current one.
		if ent = e.dir.Load().entries[k]; ent == nil || !ent.On {
			c.mu.Unlock()
			return
		}
	}
	i, ok := c.keys[key]
	if !ok {
		if uint32(len(c.keys)) >= c.rc.GrantedSize || len(c.acc) >= math.MaxInt32 {
			c.denied++
			c.mu.Unlock()
			return
		}
		i = int32(len(c.acc))
		c.acc = append(c.acc, accum{})
		c.keys[key] = i
	}
	c.acc[i].add(success, resp, ent.bucket(resp), w)
	c.mu.Unlock()
}

func (c *control) status() ControlStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	rc := c.rc
	rc.DataSource = slices.Clone(rc.DataSource)
	return ControlStatus{ReportControl: rc, StartTime: c.start, ReportNumber: c.number, DeniedInserts: c.denied}
}

func (c *control) snapshot() []*Report {
	c.repMu.RLock()
	defer c.repMu.RUnlock()
	return slices.Clone(c.reports)
}

func (c *control) tick(e *Engine, now time.Time) {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()

	c.mu.Lock()
	interval := c.rc.Interval
	if now.Before(c.start.Add(interval)) {
		c.mu.Unlock()
		return
	}
	elapsed := uint64(now.Sub(c.start) / interval)
	keys, acc := c.keys, c.acc
	if c.spare != nil {
		c.keys, c.acc = c.spare, c.spareA
		c.spare, c.spareA = nil, nil
	} else {
		c.keys, c.acc = make(map[rowKey]int32, len(keys)), nil
	}
	start, number := c.start, c.number
	c.start = c.start.Add(time.Duration(elapsed) * interval)
	c.number += uint32(elapsed)
	agg, granted := c.rc.Aggregation, int(c.rc.GrantedReports)
	c.mu.Unlock()

	rows, denied := e.buildRows(agg, keys, acc)

	clear(keys)
	c.mu.Lock()
	c.denied += denied
	c.spare, c.spareA = keys, acc[:0]
	c.mu.Unlock()

	c.repMu.Lock()
	defer c.repMu.Unlock()
	c.reports = append(c.reports, &Report{
		Control: c.rc.Index, Number: number, Aggregation: agg,
		Start: start, Interval: interval, Rows: rows,
	})
	// Empty reports for intervals that passed without a Tick; only the
	// last granted ones can be kept.
	firstEmpty := uint64(1)
	if elapsed > uint64(granted)+1 {
		firstEmpty = elapsed - uint64(granted)
	}
	for i := firstEmpty; i < elapsed; i++ {
		c.reports = append(c.reports, &Report{
			Control: c.rc.Index, Number: number + uint32(i), Aggregation: agg,
			Start: start.Add(time.Duration(i) * interval), Interval: interval, Rows: []Row{},
		})
	}
	c.trim(granted)
}

// trim keeps the newest n reports. Caller holds repMu.
func (c *control) trim(n int) {
	if len(c.reports) > n {
		drop := len(c.reports) - n
		clear(c.reports[:drop])
		c.reports = slices.Clone(c.reports[drop:])
	}
}

// dirChanged records a directory generation and, if drop, deletes the
// in-progress rows of application k.
func (c *control) dirChanged(gen uint64, k appKey, drop bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen = gen
	if drop {
		for key := range c.keys {
			if key.app == k.app && key.typ == k.typ {
				delete(c.keys, key) // its acc slot stays unused until the interval closes
			}
		}
	}
}

func (c *control) dropReports() {
	c.repMu.Lock()
	defer c.repMu.Unlock()
	c.reports = nil
}

// dropApp removes application k's rows from the kept reports (copying the
// reports, which readers may still hold).
func (c *control) dropApp(k appKey) {
	c.repMu.Lock()
	defer c.repMu.Unlock()
	for i, r := range c.reports {
		keep := make([]Row, 0, len(r.Rows))
		for _, row := range r.Rows {
			if row.App != k.app || row.Type != k.typ {
				keep = append(keep, row)
			}
		}
		nr := *r
		nr.Rows = keep
		c.reports[i] = &nr
	}
}

// buildRows turns one interval's accumulators into sorted report rows. It
// returns the number of rows dropped because an IPv6 client could not get
// a client ID (counted as denied inserts).
func (e *Engine) buildRows(agg Aggregation, keys map[rowKey]int32, acc []accum) ([]Row, uint32) {
	d := e.dir.Load()
	rows := make([]Row, 0, len(keys))
	for k, i := range keys {
		a := &acc[i]
		row := Row{
			App: k.app, Type: k.typ, Server: k.server.addr(), Client: k.client.addr(),
			TransactionCount:       sat32(a.count),
			SuccessfulTransactions: sat32(a.success),
			ResponsivenessMean:     a.mean(),
			ResponsivenessMin:      a.min,
			ResponsivenessMax:      a.max,
		}
		for b := range a.buckets {
			row.ResponsivenessB[b] = sat32(a.buckets[b])
		}
		if ent := d.entries[appKey{k.app, k.typ}]; ent != nil {
			row.AppName = ent.Name
		}
		rows = append(rows, row)
	}
	var denied uint32
	if agg.hasClient() {
		// New IPv6 clients get their IDs in address order, so the IDs do
		// not depend on map iteration order.
		rows = sortRows(rows, func(a, b *Row) int { return a.Client.Compare(b.Client) })
		kept := rows[:0]
		for _, row := range rows {
			id, ok := e.clients.id(row.Client)
			if !ok {
				denied++
				continue
			}
			row.ClientID = id
			kept = append(kept, row)
		}
		rows = kept
	}
	for i := range rows {
		r := &rows[i]
		proto := e.cfg.IPv4ProtocolDirLocalIndex
		if r.Server.Is6() {
			proto = e.cfg.IPv6ProtocolDirLocalIndex
		}
		r.index = rowIndex(make([]uint32, 0, 23), r.App, r.Type, proto, r.Server, r.ClientID)
	}
	return sortRows(rows, func(a, b *Row) int { return compareIndex(a.index, b.index) }), denied
}

// sortRows returns rows sorted by cmp. It sorts pointers and copies once:
// Rows are large, and swapping them directly dominated report production.
func sortRows(rows []Row, cmp func(a, b *Row) int) []Row {
	ptrs := make([]*Row, len(rows))
	for i := range rows {
		ptrs[i] = &rows[i]
	}
	slices.SortFunc(ptrs, cmp)
	out := make([]Row, len(rows))
	for i, p := range ptrs {
		out[i] = *p
	}
	return out
}
