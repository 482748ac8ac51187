package mib

import (
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Subtree is the OID the subagent registers: sFlow.org's enterprise,
// 1.3.6.1.4.1.14706 (sFlowMIB is .1 below it).
var Subtree = agentx.OID{1, 3, 6, 1, 4, 1, 14706}

// sFlowAgent is 1.3.6.1.4.1.14706.1.1, the root of every object.
var sFlowAgent = agentx.OID{1, 3, 6, 1, 4, 1, 14706, 1, 1}

// Object identifiers below sFlowAgent (SFLOW-MIB).
const (
	oidVersion          = 1 // sFlowVersion
	oidAgentAddressType = 2 // sFlowAgentAddressType
	oidAgentAddress     = 3 // sFlowAgentAddress
	oidRcvrTable        = 4 // sFlowRcvrTable; entry .1
	oidFsTable          = 5 // sFlowFsTable; entry .1
	oidCpTable          = 6 // sFlowCpTable; entry .1
)

// Columns of sFlowRcvrEntry.
const (
	colRcvrIndex   = 1 // not-accessible
	colRcvrOwner   = 2
	colRcvrTimeout = 3
	colRcvrMaxSize = 4
	colRcvrAddrTyp = 5
	colRcvrAddress = 6
	colRcvrPort    = 7
	colRcvrVersion = 8
)

// Columns of sFlowFsEntry and sFlowCpEntry (1 and 2 are the
// not-accessible indexes).
const (
	colFsReceiver = 3
	colFsRate     = 4
	colFsHeader   = 5
	colCpReceiver = 3
	colCpInterval = 4
)

// Data source OIDs (SFLOW-MIB SFlowDataSource): ifIndex.<I>,
// smonVlanDataSource.<V> and entPhysicalEntry.<N>. ifIndex is IF-MIB's
// 1.3.6.1.2.1.2.2.1.1; smonVlanDataSource is SMON-MIB's (RFC 2613)
// smonRegistrationPoints.1, 1.3.6.1.2.1.16.22.1.4.1; entPhysicalEntry is
// ENTITY-MIB's 1.3.6.1.2.1.47.1.1.1.1, so the host's entPhysicalEntry.1
// is 1.3.6.1.2.1.47.1.1.1.1.1.
var (
	ifIndexOID            = agentx.OID{1, 3, 6, 1, 2, 1, 2, 2, 1, 1}
	smonVlanDataSourceOID = agentx.OID{1, 3, 6, 1, 2, 1, 16, 22, 1, 4, 1}
	entPhysicalEntryOID   = agentx.OID{1, 3, 6, 1, 2, 1, 47, 1, 1, 1, 1}
)

// encodeSource returns the table index of data source ds: sFlowFsDataSource
// and sFlowCpDataSource are OBJECT IDENTIFIER indexes without IMPLIED, so
// RFC 2578 section 7.7 encodes them with their length first.
func encodeSource(ds sflow.DataSource) agentx.OID {
	base := ifIndexOID
	switch ds.Type {
	case sflow.SourceEntPhysicalEntry:
		base = entPhysicalEntryOID
	case sflow.SourceSmonVlan:
		base = smonVlanDataSourceOID
	}
	o := make(agentx.OID, 0, len(base)+2)
	o = append(o, uint32(len(base)+1))
	o = append(o, base...)
	return append(o, ds.Index)
}

// table tells which object a key names.
type table uint8

const (
	tScalar table = iota
	tRcvr
	tFs
	tCp
)

// key is one object instance of the MIB. row is the receiver index
// (1-based) or the position of the data source in state.src; inst is the
// 1-based instance.
type key struct {
	oid  agentx.OID
	tab  table
	col  uint32
	row  int
	inst int
}

// buildKeys lists every object instance of s in lexicographic order:
// scalars, then each table column by column, rows in index order (the
// order in which SNMP walks a table).
func buildKeys(s *state) []key {
	var ks []key
	for _, c := range []uint32{oidVersion, oidAgentAddressType, oidAgentAddress} {
		ks = append(ks, key{oid: sFlowAgent.Append(c, 0), tab: tScalar, col: c})
	}
	for c := uint32(colRcvrOwner); c <= colRcvrVersion; c++ {
		for r := range s.rcv {
			ks = append(ks, key{oid: sFlowAgent.Append(oidRcvrTable, 1, c, uint32(r+1)), tab: tRcvr, col: c, row: r + 1})
		}
	}
	for c := uint32(colFsReceiver); c <= colFsHeader; c++ {
		for i, src := range s.src {
			for j := range src.fs {
				ks = append(ks, key{oid: rowOID(oidFsTable, c, src.index, j+1), tab: tFs, col: c, row: i, inst: j + 1})
			}
		}
	}
	for c := uint32(colCpReceiver); c <= colCpInterval; c++ {
		for i, src := range s.src {
			for j := range src.cp {
				ks = append(ks, key{oid: rowOID(oidCpTable, c, src.index, j+1), tab: tCp, col: c, row: i, inst: j + 1})
			}
		}
	}
	return ks
}

func rowOID(tab, col uint32, index agentx.OID, inst int) agentx.OID {
	o := make(agentx.OID, 0, len(sFlowAgent)+3+len(index)+1)
	o = append(o, sFlowAgent...)
	o = append(o, tab, 1, col)
	o = append(o, index...)
	return append(o, uint32(inst))
}

// objectTypes are the OIDs of every accessible object type; an OID below
// one of them that is not an instance is noSuchInstance, anything else
// noSuchObject.
var objectTypes = []agentx.OID{
	sFlowAgent.Append(oidVersion), sFlowAgent.Append(oidAgentAddressType), sFlowAgent.Append(oidAgentAddress),
	sFlowAgent.Append(oidRcvrTable, 1, colRcvrOwner), sFlowAgent.Append(oidRcvrTable, 1, colRcvrTimeout),
	sFlowAgent.Append(oidRcvrTable, 1, colRcvrMaxSize), sFlowAgent.Append(oidRcvrTable, 1, colRcvrAddrTyp),
	sFlowAgent.Append(oidRcvrTable, 1, colRcvrAddress), sFlowAgent.Append(oidRcvrTable, 1, colRcvrPort),
	sFlowAgent.Append(oidRcvrTable, 1, colRcvrVersion),
	sFlowAgent.Append(oidFsTable, 1, colFsReceiver), sFlowAgent.Append(oidFsTable, 1, colFsRate),
	sFlowAgent.Append(oidFsTable, 1, colFsHeader),
	sFlowAgent.Append(oidCpTable, 1, colCpReceiver), sFlowAgent.Append(oidCpTable, 1, colCpInterval),
}

// writableColumns are the read-write column OIDs (objectTypes minus the
// three read-only scalars).
var writableColumns = objectTypes[3:]

func underAny(o agentx.OID, types []agentx.OID) bool {
	for _, t := range types {
		if len(o) > len(t) && o.HasPrefix(t) {
			return true
		}
	}
	return false
}

// find returns the position of oid in m.keys, or -1.
func (m *MIB) find(oid agentx.OID) int {
	i, ok := slices.BinarySearchFunc(m.keys, oid, func(k key, o agentx.OID) int { return k.oid.Compare(o) })
	if !ok {
		return -1
	}
	return i
}

// Get implements agentx.Handler.
func (m *MIB) Get(oid agentx.OID) (agentx.Variable, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i := m.find(oid); i >= 0 {
		return m.value(m.keys[i]), nil
	}
	if underAny(oid, objectTypes) {
		return agentx.Variable{Name: oid, Type: agentx.NoSuchInstance}, nil
	}
	return agentx.Variable{Name: oid, Type: agentx.NoSuchObject}, nil
}

// GetNext implements agentx.Handler.
func (m *MIB) GetNext(from agentx.OID, include bool, end agentx.OID) (agentx.Variable, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, found := slices.BinarySearchFunc(m.keys, from, func(k key, o agentx.OID) int { return k.oid.Compare(o) })
	if found && !include {
		i++
	}
	if i >= len(m.keys) || (len(end) > 0 && m.keys[i].oid.Compare(end) >= 0) {
		return agentx.Variable{Name: from, Type: agentx.EndOfMibView}, nil
	}
	return m.value(m.keys[i]), nil
}

// value reads the object instance k from the current state.
func (m *MIB) value(k key) agentx.Variable {
	v := agentx.Variable{Name: k.oid, Type: agentx.Integer}
	s := m.cur
	switch k.tab {
	case tScalar:
		switch k.col {
		case oidVersion:
			v.Type, v.Value = agentx.OctetString, []byte(m.version)
		case oidAgentAddressType:
			v.Value = agentAddressType(m.agentAddr)
		case oidAgentAddress:
			v.Type = agentx.OctetString
			v.Value = []byte{}
			if m.agentAddr.IsValid() {
				v.Value = m.agentAddr.Unmap().AsSlice()
			}
		}
	case tRcvr:
		r := s.rcv[k.row-1]
		switch k.col {
		case colRcvrOwner:
			v.Type, v.Value = agentx.OctetString, []byte(r.owner)
		case colRcvrTimeout:
			v.Value = m.remaining(r)
		case colRcvrMaxSize:
			v.Value = r.maxSize
		case colRcvrAddrTyp:
			v.Value = r.addrType
		case colRcvrAddress:
			v.Type, v.Value = agentx.OctetString, slices.Clone(r.addr)
		case colRcvrPort:
			v.Value = r.port
		case colRcvrVersion:
			v.Value = r.version
		}
	case tFs:
		f := s.src[k.row].fs[k.inst-1]
		switch k.col {
		case colFsReceiver:
			v.Value = f.receiver
		case colFsRate:
			v.Value = f.rate
			// A port the kernel does not sample reads 0 (off), whatever
			// was configured: the MIB shows what really happens.
			if _, bad := m.failed[s.src[k.row].ds.Index]; bad && s.src[k.row].ds.Type == sflow.SourceIfIndex {
				v.Value = int32(0)
			}
		case colFsHeader:
			v.Value = f.header
		}
	case tCp:
		p := s.src[k.row].cp[k.inst-1]
		switch k.col {
		case colCpReceiver:
			v.Value = p.receiver
		case colCpInterval:
			v.Value = p.interval
		}
	}
	return v
}

// remaining is sFlowRcvrTimeout as read: whole seconds left, rounded up so
// that an owned receiver never reads 0 before it is released.
func (m *MIB) remaining(r receiver) int32 {
	switch {
	case r.static:
		return staticTimeout
	case r.owner == "":
		return 0
	}
	d := r.deadline.Sub(m.cfg.Now())
	if d <= 0 {
		return 0
	}
	return int32(min((d+time.Second-1)/time.Second, math.MaxInt32))
}

func agentAddressType(a netip.Addr) int32 {
	switch {
	case !a.IsValid():
		return inetAddressUnknown
	case a.Unmap().Is4():
		return inetAddressTypeV4
	}
	return inetAddressTypeV6
}
