package agentx

import (
	"fmt"
	"net"
	"slices"
	"sync"
)

// testBase is where the test handler's objects live, below the SFLOW-MIB
// enterprise OID the real daemon registers.
var testBase = MustParseOID("1.3.6.1.4.1.14706.1")

// Test objects (all under testBase):
//
//	.1.0      OctetString  read-only scalar
//	.2.0      Integer      read-only scalar
//	.3.0      Counter64    read-only scalar
//	.4.0      IPAddress    read-only scalar
//	.5.1.2.i  Integer      writable column, 1..1000 (i = 1..3)
//	.5.1.3.i  OctetString  writable column, at most 32 octets (i = 1..3)
//	.6.1.1.i  Gauge32      read-only column, i = 1..bulkRows
const bulkRows = 1000

var (
	oidName     = testBase.Append(1, 0)
	oidCount    = testBase.Append(2, 0)
	oidOctets   = testBase.Append(3, 0)
	oidAddr     = testBase.Append(4, 0)
	oidRateCol  = testBase.Append(5, 1, 2)
	oidOwnerCol = testBase.Append(5, 1, 3)
	oidBulkCol  = testBase.Append(6, 1, 1)
)

type memObject struct {
	v        Variable
	writable bool
	check    func(Variable) ErrorStatus
}

// memHandler is a small in-memory MIB implementing Handler the way the
// MIB layer must: TestSet validates the whole set and changes nothing,
// CommitSet applies it, UndoSet restores, CleanupSet forgets.
type memHandler struct {
	mu      sync.Mutex
	objs    map[string]*memObject
	keys    []OID // sorted
	pending []Variable
	saved   []Variable
	calls   []string // set-phase trace: "test:tx", "commit:tx", ...
	// failCommit makes CommitSet fail with commitFailed (for UndoSet tests).
	failCommit bool
}

func checkRate(v Variable) ErrorStatus {
	if v.Type != Integer {
		return WrongType
	}
	if n := v.Value.(int32); n < 1 || n > 1000 {
		return WrongValue
	}
	return NoError
}

func checkOwner(v Variable) ErrorStatus {
	if v.Type != OctetString {
		return WrongType
	}
	if len(v.Value.([]byte)) > 32 {
		return WrongLength
	}
	return NoError
}

func newMemHandler() *memHandler {
	h := &memHandler{objs: map[string]*memObject{}}
	h.add(Variable{Name: oidName, Type: OctetString, Value: []byte("sflowswitchd-test")}, nil)
	h.add(Variable{Name: oidCount, Type: Integer, Value: int32(5)}, nil)
	h.add(Variable{Name: oidOctets, Type: Counter64, Value: uint64(1) << 40}, nil)
	h.add(Variable{Name: oidAddr, Type: IPAddress, Value: net.IPv4(198, 18, 0, 1).To4()}, nil)
	for i := uint32(1); i <= 3; i++ {
		h.add(Variable{Name: oidRateCol.Append(i), Type: Integer, Value: int32(10 * i)}, checkRate)
		h.add(Variable{Name: oidOwnerCol.Append(i), Type: OctetString, Value: fmt.Appendf(nil, "owner-%d", i)}, checkOwner)
	}
	for i := uint32(1); i <= bulkRows; i++ {
		h.add(Variable{Name: oidBulkCol.Append(i), Type: Gauge32, Value: i}, nil)
	}
	slices.SortFunc(h.keys, OID.Compare)
	return h
}

func (h *memHandler) add(v Variable, check func(Variable) ErrorStatus) {
	h.objs[v.Name.String()] = &memObject{v: v, writable: check != nil, check: check}
	h.keys = append(h.keys, v.Name)
}

// value returns the current value of oid (for assertions).
func (h *memHandler) value(oid OID) any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.objs[oid.String()].v.Value
}

func (h *memHandler) trace() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

func (h *memHandler) Get(oid OID) (Variable, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if o, ok := h.objs[oid.String()]; ok {
		return o.v, nil
	}
	// An instance of a known object type (same parent) is NoSuchInstance.
	i, _ := slices.BinarySearchFunc(h.keys, oid, OID.Compare)
	for _, j := range []int{i - 1, i} {
		if j >= 0 && j < len(h.keys) && len(oid) > 1 && h.keys[j].HasPrefix(oid[:len(oid)-1]) &&
			len(h.keys[j]) == len(oid) {
			return Variable{Name: oid, Type: NoSuchInstance}, nil
		}
	}
	return Variable{Name: oid, Type: NoSuchObject}, nil
}

func (h *memHandler) GetNext(from OID, include bool, end OID) (Variable, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i, found := slices.BinarySearchFunc(h.keys, from, OID.Compare)
	if found && !include {
		i++
	}
	if i >= len(h.keys) || (len(end) > 0 && h.keys[i].Compare(end) >= 0) {
		return Variable{Name: from, Type: EndOfMibView}, nil
	}
	return h.objs[h.keys[i].String()].v, nil
}

func (h *memHandler) TestSet(tx uint32, vbs []Variable) (ErrorStatus, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf("test:%d", tx))
	for i, v := range vbs {
		o, ok := h.objs[v.Name.String()]
		switch {
		case !ok:
			return NoCreation, i + 1
		case !o.writable:
			return NotWritable, i + 1
		}
		if st := o.check(v); st != NoError {
			return st, i + 1
		}
	}
	h.pending = slices.Clone(vbs)
	return NoError, 0
}

func (h *memHandler) CommitSet(tx uint32) (ErrorStatus, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf("commit:%d", tx))
	if h.failCommit {
		return CommitFailed, 1
	}
	h.saved = h.saved[:0]
	for _, v := range h.pending {
		o := h.objs[v.Name.String()]
		h.saved = append(h.saved, o.v)
		o.v = v
	}
	return NoError, 0
}

func (h *memHandler) UndoSet(tx uint32) (ErrorStatus, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf("undo:%d", tx))
	for _, v := range h.saved {
		h.objs[v.Name.String()].v = v
	}
	h.saved = h.saved[:0]
	return NoError, 0
}

func (h *memHandler) CleanupSet(tx uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf("cleanup:%d", tx))
	h.pending, h.saved = nil, h.saved[:0]
}
