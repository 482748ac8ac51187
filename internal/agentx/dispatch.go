package agentx

import (
	"fmt"
	"log/slog"
)

// maxBulkVarBinds caps the varbinds one GetBulk response may carry. SNMP
// lets an agent return fewer repetitions than asked (RFC 3416 section
// 4.2.3); the master's message size limit would refuse more anyway.
const maxBulkVarBinds = 4096

// setState is where the session's one set transaction stands
// (RFC 2741 section 7.2.4).
type setState uint8

const (
	setIdle setState = iota
	setTested
	setCommitted
	setUndone
)

// dispatcher turns the master's requests into Handler calls and builds
// the responses. It keeps the state of the session's set transaction, so
// the Handler always sees TestSet -> CommitSet -> (UndoSet) -> CleanupSet
// for one transaction at a time.
type dispatcher struct {
	h     Handler
	log   *slog.Logger
	state setState
	tx    uint32
}

// handle processes one request PDU from the master and returns the
// response to send, or nil when none is due (CleanupSet, RFC 2741 section
// 7.2.4.4: the master expects no response).
func (d *dispatcher) handle(req *PDU) *PDU {
	resp := &PDU{Header: Header{
		Version:       1,
		Type:          PDUResponse,
		SessionID:     req.Header.SessionID,
		TransactionID: req.Header.TransactionID,
		PacketID:      req.Header.PacketID,
	}}
	var st ErrorStatus
	var idx int
	switch req.Header.Type {
	case PDUGet:
		resp.VarBinds, st, idx = d.get(req.Ranges)
	case PDUGetNext:
		resp.VarBinds, st, idx = d.getNext(req.Ranges)
	case PDUGetBulk:
		resp.VarBinds, st, idx = d.getBulk(req)
	case PDUTestSet:
		st, idx = d.testSet(req.Header.TransactionID, req.VarBinds)
	case PDUCommitSet:
		st, idx = d.commitSet(req.Header.TransactionID)
	case PDUUndoSet:
		st, idx = d.undoSet(req.Header.TransactionID)
	case PDUCleanupSet:
		d.cleanupSet(req.Header.TransactionID)
		return nil
	default:
		// Administrative PDUs (Open, Register, Notify, Ping, ...) are sent
		// by subagents, never to them.
		d.log.Warn("agentx: unexpected PDU from master", "type", req.Header.Type)
		st = ProcessingError
	}
	resp.Error = st
	if st != NoError {
		resp.Index = uint16(max(0, min(idx, 0xffff)))
		// On error the master uses only res.error and res.index; for the
		// read requests RFC 2741 section 7.2.3 wants the varbinds echoed,
		// which carry no value after a failure, so send none.
		if req.Header.Type != PDUGet && req.Header.Type != PDUGetNext && req.Header.Type != PDUGetBulk {
			resp.VarBinds = nil
		}
	}
	return resp
}

// get serves agentx-Get (RFC 2741 section 7.2.3.1): exact lookups, the
// response name is always the requested one.
func (d *dispatcher) get(ranges []SearchRange) ([]Variable, ErrorStatus, int) {
	vbs := make([]Variable, 0, len(ranges))
	for i, sr := range ranges {
		v, err := d.h.Get(sr.Start)
		if err != nil {
			d.log.Warn("agentx: get failed", "oid", sr.Start, "err", err)
			return nullVarBinds(ranges), GenErr, i + 1
		}
		v.Name = sr.Start
		vbs = append(vbs, v)
	}
	return vbs, NoError, 0
}

// getNext serves agentx-GetNext (RFC 2741 section 7.2.3.2).
func (d *dispatcher) getNext(ranges []SearchRange) ([]Variable, ErrorStatus, int) {
	vbs := make([]Variable, 0, len(ranges))
	for i, sr := range ranges {
		v, err := d.next(sr)
		if err != nil {
			d.log.Warn("agentx: getnext failed", "oid", sr.Start, "err", err)
			return nullVarBinds(ranges), GenErr, i + 1
		}
		vbs = append(vbs, v)
	}
	return vbs, NoError, 0
}

// next finds the successor of one SearchRange and checks that the Handler
// kept to the range: a name at or before the start would make the manager
// loop, so it is an error; one at or past the end becomes endOfMibView.
func (d *dispatcher) next(sr SearchRange) (Variable, error) {
	v, err := d.h.GetNext(sr.Start, sr.Include, sr.End)
	if err != nil {
		return Variable{}, err
	}
	endOfView := Variable{Name: sr.Start, Type: EndOfMibView}
	if v.Type == EndOfMibView || v.Type == NoSuchObject || v.Type == NoSuchInstance {
		return endOfView, nil
	}
	c := v.Name.Compare(sr.Start)
	if c < 0 || (c == 0 && !sr.Include) {
		return Variable{}, fmt.Errorf("handler returned %s, not after %s", v.Name, sr.Start)
	}
	if len(sr.End) > 0 && v.Name.Compare(sr.End) >= 0 {
		return endOfView, nil
	}
	return v, nil
}

// getBulk serves agentx-GetBulk by repeated GetNext (RFC 2741 section
// 7.2.3.3): the first non_repeaters ranges once each, then the others
// max_repetitions times, each repetition continuing (exclusively) from the
// previous result of the same range, with the ranges interleaved. It stops
// early once every repeating range has reached endOfMibView.
func (d *dispatcher) getBulk(req *PDU) ([]Variable, ErrorStatus, int) {
	ranges := req.Ranges
	n := min(int(req.NonRepeaters), len(ranges))
	vbs := make([]Variable, 0, len(ranges))
	for i := range n {
		v, err := d.next(ranges[i])
		if err != nil {
			d.log.Warn("agentx: getbulk failed", "oid", ranges[i].Start, "err", err)
			return nil, GenErr, i + 1
		}
		vbs = append(vbs, v)
	}
	cur := append([]SearchRange(nil), ranges[n:]...)
	done := make([]bool, len(cur))
	for range int(req.MaxRepetitions) {
		if len(cur) == 0 || len(vbs)+len(cur) > maxBulkVarBinds {
			break
		}
		more := false
		for j, sr := range cur {
			if done[j] {
				vbs = append(vbs, Variable{Name: sr.Start, Type: EndOfMibView})
				continue
			}
			v, err := d.next(sr)
			if err != nil {
				d.log.Warn("agentx: getbulk failed", "oid", sr.Start, "err", err)
				return nil, GenErr, n + j + 1
			}
			vbs = append(vbs, v)
			if v.Type == EndOfMibView {
				done[j] = true
				continue
			}
			more = true
			cur[j] = SearchRange{Start: v.Name, End: sr.End}
		}
		if !more {
			break
		}
	}
	return vbs, NoError, 0
}

func nullVarBinds(ranges []SearchRange) []Variable {
	vbs := make([]Variable, len(ranges))
	for i, sr := range ranges {
		vbs[i] = Variable{Name: sr.Start, Type: Null}
	}
	return vbs
}

// testSet starts a set transaction (RFC 2741 section 7.2.4.1). A
// transaction the master left without CleanupSet is cleaned up first, so
// the Handler never has two open.
func (d *dispatcher) testSet(tx uint32, vbs []Variable) (ErrorStatus, int) {
	if d.state != setIdle {
		d.log.Warn("agentx: TestSet before CleanupSet of previous transaction", "previous", d.tx, "tx", tx)
		d.h.CleanupSet(d.tx)
	}
	d.state, d.tx = setTested, tx
	st, idx := d.h.TestSet(tx, vbs)
	if st != NoError {
		idx = max(0, min(idx, len(vbs)))
	}
	return st, idx
}

// commitSet is RFC 2741 section 7.2.4.2; it is valid only after a TestSet
// of the same transaction.
func (d *dispatcher) commitSet(tx uint32) (ErrorStatus, int) {
	if d.state != setTested || d.tx != tx {
		d.log.Warn("agentx: CommitSet out of sequence", "tx", tx, "state", d.state)
		return ProcessingError, 0
	}
	d.state = setCommitted
	return d.h.CommitSet(tx)
}

// undoSet is RFC 2741 section 7.2.4.3; valid after TestSet or CommitSet of
// the same transaction.
func (d *dispatcher) undoSet(tx uint32) (ErrorStatus, int) {
	if (d.state != setCommitted && d.state != setTested) || d.tx != tx {
		d.log.Warn("agentx: UndoSet out of sequence", "tx", tx, "state", d.state)
		return ProcessingError, 0
	}
	d.state = setUndone
	return d.h.UndoSet(tx)
}

// cleanupSet is RFC 2741 section 7.2.4.4: it ends the transaction.
func (d *dispatcher) cleanupSet(tx uint32) {
	if d.state == setIdle || d.tx != tx {
		d.log.Warn("agentx: CleanupSet for unknown transaction", "tx", tx)
		return
	}
	d.state = setIdle
	d.h.CleanupSet(tx)
}

// reset ends an open transaction when the session is lost: the master
// forgets it, so the Handler must release what TestSet reserved.
func (d *dispatcher) reset() {
	if d.state != setIdle {
		d.h.CleanupSet(d.tx)
		d.state = setIdle
	}
}
