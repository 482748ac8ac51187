package mib

import (
	"net/netip"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
)

// pending is the set transaction between TestSet and CleanupSet.
type pending struct {
	tx        uint32
	vbs       []agentx.Variable
	gen       uint64 // generation of the state next was staged from
	next      *state
	prev      *state // the state before CommitSet, for UndoSet
	committed bool
}

// edit is one validated varbind of a SET: the object instance and its
// value (already adjusted to the closest supported value).
type edit struct {
	k   key
	pos int // 1-based position in the request
	n   int32
	b   []byte
}

// TestSet implements agentx.Handler: it validates every varbind and stages
// the resulting state; nothing changes until CommitSet.
func (m *MIB) TestSet(tx uint32, vbs []agentx.Variable) (agentx.ErrorStatus, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pend = nil
	next, st, pos := m.stage(m.cur, vbs)
	if st != agentx.NoError {
		return st, pos
	}
	m.pend = &pending{tx: tx, vbs: slices.Clone(vbs), gen: m.gen, next: next}
	return agentx.NoError, 0
}

// CommitSet implements agentx.Handler: it installs the staged state and
// applies it to the agent. If the state changed since TestSet (a timeout
// expired, ports changed), the SET is staged again against the new state.
// If that or Config.Apply fails, the previous state is restored and the
// result is commitFailed.
func (m *MIB) CommitSet(tx uint32) (agentx.ErrorStatus, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pend
	if p == nil || p.tx != tx || p.committed {
		return agentx.CommitFailed, 0
	}
	if p.gen != m.gen {
		next, st, pos := m.stage(m.cur, p.vbs)
		if st != agentx.NoError {
			return agentx.CommitFailed, pos
		}
		p.next = next
	}
	prev := m.cur
	if err := m.install(p.next, false); err != nil {
		m.cfg.Logger.Warn("SNMP SET: applying the configuration failed; rolled back", "err", err)
		if rerr := m.install(prev, false); rerr != nil {
			m.cfg.Logger.Error("SNMP SET: restoring the previous configuration failed", "err", rerr)
		}
		return agentx.CommitFailed, 1
	}
	p.prev, p.committed = prev, true
	return agentx.NoError, 0
}

// UndoSet implements agentx.Handler: it restores the state before
// CommitSet (another subagent's part of the SET failed).
func (m *MIB) UndoSet(tx uint32) (agentx.ErrorStatus, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pend
	if p == nil || p.tx != tx {
		return agentx.UndoFailed, 0
	}
	if !p.committed {
		return agentx.NoError, 0
	}
	p.committed = false
	if err := m.install(p.prev, false); err != nil {
		m.cfg.Logger.Error("SNMP SET undo: applying the previous configuration failed", "err", err)
		return agentx.UndoFailed, 1
	}
	return agentx.NoError, 0
}

// CleanupSet implements agentx.Handler.
func (m *MIB) CleanupSet(tx uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pend != nil && m.pend.tx == tx {
		m.pend = nil
	}
}

// stage validates vbs against base and returns the state after the SET.
// Checks follow RFC 3416 section 4.2.5: first each varbind on its own
// (notWritable/noCreation by name, then wrongType, wrongLength,
// wrongValue), then the consistency of the whole request with the
// ownership rules (inconsistentValue).
func (m *MIB) stage(base *state, vbs []agentx.Variable) (*state, agentx.ErrorStatus, int) {
	edits := make([]edit, 0, len(vbs))
	for i, vb := range vbs {
		k, st := m.resolve(base, vb.Name)
		if st == agentx.NoError {
			var e edit
			e, st = checkValue(k, vb, len(base.rcv))
			e.k, e.pos = k, i+1
			edits = append(edits, e)
		}
		if st != agentx.NoError {
			return nil, st, i + 1
		}
	}
	next := base.clone()
	if st, pos := m.stageReceivers(base, next, edits); st != agentx.NoError {
		return nil, st, pos
	}
	if st, pos := stageRows(next, edits); st != agentx.NoError {
		return nil, st, pos
	}
	// A timeout set to 0 ends the ownership at once, like its expiry.
	for _, e := range edits {
		if e.k.tab == tRcvr && e.k.col == colRcvrTimeout && e.n == 0 && next.rcv[e.k.row-1].owner != "" &&
			lastEdit(edits, e.k.oid) == e.pos {
			next.release(int32(e.k.row))
		}
	}
	return next, agentx.NoError, 0
}

// resolve finds the writable object instance name, or the error for a
// name that is not one: notWritable for read-only objects, for names
// outside the writable columns and for rows owned by the config file;
// noCreation for rows that do not exist.
func (m *MIB) resolve(s *state, name agentx.OID) (key, agentx.ErrorStatus) {
	i := m.find(name)
	if i < 0 {
		if underAny(name, writableColumns) {
			return key{}, agentx.NoCreation
		}
		return key{}, agentx.NotWritable
	}
	k := m.keys[i]
	switch k.tab {
	case tScalar:
		return k, agentx.NotWritable
	case tRcvr:
		if s.rcv[k.row-1].static {
			return k, agentx.NotWritable
		}
	case tFs:
		if r := s.src[k.row].fs[k.inst-1].receiver; r != 0 && s.rcv[r-1].static {
			return k, agentx.NotWritable
		}
	case tCp:
		if r := s.src[k.row].cp[k.inst-1].receiver; r != 0 && s.rcv[r-1].static {
			return k, agentx.NotWritable
		}
	}
	return k, agentx.NoError
}

// checkValue checks the type, length and range of one value for column
// k and returns it adjusted to the closest supported value.
func checkValue(k key, vb agentx.Variable, receivers int) (edit, agentx.ErrorStatus) {
	var e edit
	octets := k.tab == tRcvr && (k.col == colRcvrOwner || k.col == colRcvrAddress)
	if octets {
		b, ok := vb.Value.([]byte)
		if vb.Type != agentx.OctetString || (!ok && vb.Value != nil) {
			return e, agentx.WrongType
		}
		e.b = slices.Clone(b)
		if k.col == colRcvrOwner {
			if len(b) > maxOwnerLength {
				return e, agentx.WrongLength
			}
			// OwnerString: NVT ASCII or UTF-8 (RMON-MIB).
			if !utf8.Valid(b) {
				return e, agentx.WrongValue
			}
			return e, agentx.NoError
		}
		// InetAddress of a supported type (ipv4, ipv6) is 4 or 16 octets.
		if len(b) != 4 && len(b) != 16 {
			return e, agentx.WrongLength
		}
		return e, agentx.NoError
	}
	n, ok := vb.Value.(int32)
	if vb.Type != agentx.Integer || !ok {
		return e, agentx.WrongType
	}
	e.n = n
	bad := false
	switch {
	case k.tab == tRcvr:
		switch k.col {
		case colRcvrTimeout:
			bad = n < 0
		case colRcvrMaxSize:
			bad = n < minDatagramSize || n > maxDatagramSize
		case colRcvrAddrTyp:
			bad = n != inetAddressTypeV4 && n != inetAddressTypeV6
		case colRcvrPort:
			bad = n < 1 || n > 65535
		case colRcvrVersion:
			// "adjust the value to the highest supported value less than
			// the requested value, or return ... bad value if no such
			// value exists": 5 is the only version we send.
			bad = n < defDatagramVersion
			e.n = defDatagramVersion
		}
	case k.col == colFsReceiver: // == colCpReceiver
		bad = n < 0 || int(n) > receivers
	case k.tab == tFs && k.col == colFsHeader:
		bad = n < 0
		e.n = min(max(n, minHeaderSize), maxHeaderSize)
	default: // sFlowFsPacketSamplingRate, sFlowCpInterval
		bad = n < 0
	}
	if bad {
		return e, agentx.WrongValue
	}
	return e, agentx.NoError
}

// lastEdit returns the position of the last edit of oid (the one whose
// value stays when a request sets an object twice).
func lastEdit(edits []edit, oid agentx.OID) int {
	pos := 0
	for _, e := range edits {
		if e.k.oid.Equal(oid) {
			pos = e.pos
		}
	}
	return pos
}

// rcvrFinal is a receiver row as it will be after the SET.
type rcvrFinal struct {
	owner    string
	ownerSet bool
	timeout  int32
	timedSet bool
	addrType int32
	addr     []byte
	port     int32
	addrPos  int // position of the last address or port edit (0: none)
}

// stageReceivers checks and applies the receiver table edits.
func (m *MIB) stageReceivers(base, next *state, edits []edit) (agentx.ErrorStatus, int) {
	final := map[int]*rcvrFinal{}
	for _, e := range edits {
		if e.k.tab != tRcvr {
			continue
		}
		f := final[e.k.row]
		if f == nil {
			r := base.rcv[e.k.row-1]
			f = &rcvrFinal{owner: r.owner, addrType: r.addrType, addr: r.addr, port: r.port}
			final[e.k.row] = f
		}
		switch e.k.col {
		case colRcvrOwner:
			f.owner, f.ownerSet = string(e.b), true
		case colRcvrTimeout:
			f.timeout, f.timedSet = e.n, true
		case colRcvrAddrTyp:
			f.addrType, f.addrPos = e.n, e.pos
		case colRcvrAddress:
			f.addr, f.addrPos = e.b, e.pos
		case colRcvrPort:
			f.port, f.addrPos = e.n, e.pos
		}
	}
	for _, e := range edits {
		if e.k.tab != tRcvr {
			continue
		}
		cur, f := base.rcv[e.k.row-1].owner, final[e.k.row]
		switch {
		case e.k.col == colRcvrOwner:
			nw := string(e.b)
			if nw != "" && cur != "" && nw != cur {
				return agentx.InconsistentValue, e.pos // held by another owner
			}
			// sFlowRcvrOwner: "the entity taking control ... must set both
			// the owner and a value for sFlowRcvrTimeout in the same SNMP
			// set request."
			if nw != "" && cur == "" && (!f.timedSet || f.timeout <= 0) {
				return agentx.InconsistentValue, e.pos
			}
		case f.owner == "":
			// "The entry must be claimed before any changes can be made."
			return agentx.InconsistentValue, e.pos
		case e.k.col == colRcvrAddrTyp || e.k.col == colRcvrAddress:
			if len(f.addr) != addressLength(f.addrType) {
				return agentx.InconsistentValue, e.pos // INET-ADDRESS-MIB InetAddress
			}
		}
	}
	// A collector must be unicast and not this host's SNMP/AgentX port
	// (0.0.0.0 and :: stay allowed: they mean "send nothing").
	for _, f := range final {
		if f.addrPos == 0 || f.owner == "" {
			continue
		}
		a, ok := netip.AddrFromSlice(f.addr)
		if !ok || a.IsUnspecified() {
			continue
		}
		if agent.CheckCollectorAddress(netip.AddrPortFrom(a, uint16(f.port))) != nil {
			return agentx.InconsistentValue, f.addrPos
		}
	}
	now := m.cfg.Now()
	for _, e := range edits {
		if e.k.tab != tRcvr {
			continue
		}
		r := &next.rcv[e.k.row-1]
		switch e.k.col {
		case colRcvrOwner:
			if string(e.b) == "" {
				next.release(int32(e.k.row))
			} else {
				r.owner = string(e.b)
			}
		case colRcvrTimeout:
			r.deadline = now.Add(time.Duration(e.n) * time.Second)
		case colRcvrMaxSize:
			r.maxSize = e.n
		case colRcvrAddrTyp:
			r.addrType = e.n
		case colRcvrAddress:
			r.addr = e.b
		case colRcvrPort:
			r.port = e.n
		case colRcvrVersion:
			r.version = e.n
		}
	}
	return agentx.NoError, 0
}

func addressLength(addrType int32) int {
	if addrType == inetAddressTypeV6 {
		return 16
	}
	return 4
}

// stageRows checks and applies the sampler and poller edits against next,
// in which the receiver edits are already applied.
func stageRows(next *state, edits []edit) (agentx.ErrorStatus, int) {
	type rowID struct {
		tab       table
		row, inst int
	}
	finalRcvr := map[rowID]int32{}
	for _, e := range edits {
		if (e.k.tab == tFs || e.k.tab == tCp) && e.k.col == colFsReceiver {
			finalRcvr[rowID{e.k.tab, e.k.row, e.k.inst}] = e.n
		}
	}
	bound := func(tab table, row, inst int) int32 {
		if tab == tFs {
			return next.src[row].fs[inst-1].receiver
		}
		return next.src[row].cp[inst-1].receiver
	}
	for _, e := range edits {
		if e.k.tab != tFs && e.k.tab != tCp {
			continue
		}
		id := rowID{e.k.tab, e.k.row, e.k.inst}
		cur := bound(id.tab, id.row, id.inst)
		if e.k.col == colFsReceiver {
			v := e.n
			// SFlowReceiver: "If the value is not zero then a set to
			// anything other than zero or its current value will result
			// in an SNMP error"; a new value must be an active receiver.
			if cur != 0 && v != 0 && v != cur {
				return agentx.InconsistentValue, e.pos
			}
			if v != 0 && v != cur {
				if r := next.rcv[v-1]; r.owner == "" || r.static {
					return agentx.InconsistentValue, e.pos
				}
			}
			continue
		}
		f, ok := finalRcvr[id]
		if !ok {
			f = cur
		}
		if f == 0 {
			// A free resource must be acquired (bound to the manager's
			// receiver) before, or in the same request as, any change.
			return agentx.InconsistentValue, e.pos
		}
	}
	for _, e := range edits {
		switch e.k.tab {
		case tFs:
			f := &next.src[e.k.row].fs[e.k.inst-1]
			switch e.k.col {
			case colFsReceiver:
				if e.n == 0 {
					*f = defaultSampler()
				} else {
					f.receiver = e.n
				}
			case colFsRate:
				f.rate = e.n
			case colFsHeader:
				f.header = e.n
			}
		case tCp:
			p := &next.src[e.k.row].cp[e.k.inst-1]
			switch e.k.col {
			case colCpReceiver:
				if e.n == 0 {
					*p = poller{}
				} else {
					p.receiver = e.n
				}
			case colCpInterval:
				p.interval = e.n
			}
		}
	}
	return agentx.NoError, 0
}
