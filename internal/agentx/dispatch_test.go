package agentx

import (
	"log/slog"
	"reflect"
	"testing"
)

func newTestDispatcher() (*dispatcher, *memHandler) {
	h := newMemHandler()
	return &dispatcher{h: h, log: slog.New(slog.DiscardHandler)}, h
}

func req(t PDUType, tx uint32) *PDU {
	return &PDU{Header: Header{Version: 1, Type: t, SessionID: 1, TransactionID: tx, PacketID: 100 + tx}}
}

func names(vbs []Variable) []string {
	var s []string
	for _, v := range vbs {
		s = append(s, v.Name.String()+"/"+v.Type.String())
	}
	return s
}

func TestDispatchGet(t *testing.T) {
	d, _ := newTestDispatcher()
	r := req(PDUGet, 1)
	r.Ranges = []SearchRange{{Start: oidCount}, {Start: oidRateCol.Append(9)}, {Start: MustParseOID("1.3.6.1.4.1.14706.9")}}
	resp := d.handle(r)
	if resp.Error != NoError || resp.Header.PacketID != r.Header.PacketID || resp.Header.Type != PDUResponse {
		t.Fatalf("resp = %+v", resp)
	}
	want := []string{oidCount.String() + "/Integer", oidRateCol.Append(9).String() + "/NoSuchInstance", "1.3.6.1.4.1.14706.9/NoSuchObject"}
	if got := names(resp.VarBinds); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestDispatchGetNextRanges(t *testing.T) {
	d, _ := newTestDispatcher()
	r := req(PDUGetNext, 1)
	r.Ranges = []SearchRange{
		{Start: oidCount},                // exclusive: next object
		{Start: oidCount, Include: true}, // inclusive: itself
		{Start: testBase, End: oidCount}, // bounded: first object
		{Start: oidName, End: oidCount},  // next would be the end bound itself
		{Start: oidBulkCol.Append(bulkRows)},
	}
	resp := d.handle(r)
	want := []string{
		oidOctets.String() + "/Counter64",
		oidCount.String() + "/Integer",
		oidName.String() + "/OctetString",
		oidName.String() + "/EndOfMibView",
		oidBulkCol.Append(bulkRows).String() + "/EndOfMibView",
	}
	if got := names(resp.VarBinds); !reflect.DeepEqual(got, want) || resp.Error != NoError {
		t.Fatalf("got %v (%s), want %v", got, resp.Error, want)
	}
}

// TestDispatchGetBulk checks RFC 2741 section 7.2.3.3: non-repeaters once,
// repeaters interleaved max_repetitions times, early stop when all ended.
func TestDispatchGetBulk(t *testing.T) {
	d, _ := newTestDispatcher()
	r := req(PDUGetBulk, 1)
	r.NonRepeaters, r.MaxRepetitions = 1, 3
	r.Ranges = []SearchRange{
		{Start: testBase},
		{Start: oidRateCol},
		{Start: oidBulkCol.Append(bulkRows - 1)},
	}
	resp := d.handle(r)
	bulk := func(i uint32) string { return oidBulkCol.Append(i).String() }
	want := []string{
		oidName.String() + "/OctetString",
		oidRateCol.Append(1).String() + "/Integer", bulk(bulkRows) + "/Gauge32",
		oidRateCol.Append(2).String() + "/Integer", bulk(bulkRows) + "/EndOfMibView",
		oidRateCol.Append(3).String() + "/Integer", bulk(bulkRows) + "/EndOfMibView",
	}
	if got := names(resp.VarBinds); !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%v\nwant\n%v", got, want)
	}

	// All repeaters at the end: stops after one repetition.
	r.NonRepeaters, r.MaxRepetitions = 0, 50
	r.Ranges = []SearchRange{{Start: bulkEndOID()}}
	resp = d.handle(r)
	if len(resp.VarBinds) != 1 || resp.VarBinds[0].Type != EndOfMibView {
		t.Fatalf("bulk at end = %v", names(resp.VarBinds))
	}

	// Non-repeaters larger than the range count is clamped.
	r.NonRepeaters, r.MaxRepetitions = 9, 9
	r.Ranges = []SearchRange{{Start: testBase}}
	if resp = d.handle(r); len(resp.VarBinds) != 1 {
		t.Fatalf("clamped non-repeaters = %v", names(resp.VarBinds))
	}

	// A bounded repeater stops at its end.
	r.NonRepeaters, r.MaxRepetitions = 0, 10
	r.Ranges = []SearchRange{{Start: oidBulkCol, End: oidBulkCol.Append(3)}}
	resp = d.handle(r)
	want = []string{bulk(1) + "/Gauge32", bulk(2) + "/Gauge32", bulk(2) + "/EndOfMibView"}
	if got := names(resp.VarBinds); !reflect.DeepEqual(got, want) {
		t.Fatalf("bounded bulk = %v, want %v", got, want)
	}
}

func bulkEndOID() OID { return oidBulkCol.Append(bulkRows) }

func TestDispatchSetSequence(t *testing.T) {
	d, h := newTestDispatcher()
	ts := req(PDUTestSet, 7)
	ts.VarBinds = []Variable{
		{Name: oidRateCol.Append(1), Type: Integer, Value: int32(500)},
		{Name: oidRateCol.Append(2), Type: Integer, Value: int32(5000)}, // out of range
	}
	if resp := d.handle(ts); resp.Error != WrongValue || resp.Index != 2 {
		t.Fatalf("testset = %s index %d, want wrongValue index 2", resp.Error, resp.Index)
	}
	if d.handle(req(PDUCleanupSet, 7)) != nil {
		t.Fatal("CleanupSet got a response")
	}
	if h.value(oidRateCol.Append(1)) != int32(10) {
		t.Fatal("failed set changed a value")
	}

	// Good set; CommitSet of another transaction is refused.
	ts = req(PDUTestSet, 8)
	ts.VarBinds = []Variable{{Name: oidRateCol.Append(1), Type: Integer, Value: int32(500)}}
	if resp := d.handle(ts); resp.Error != NoError {
		t.Fatalf("testset = %s", resp.Error)
	}
	if resp := d.handle(req(PDUCommitSet, 99)); resp.Error != ProcessingError {
		t.Fatalf("out-of-sequence commit = %s", resp.Error)
	}
	if resp := d.handle(req(PDUCommitSet, 8)); resp.Error != NoError {
		t.Fatalf("commit = %s", resp.Error)
	}
	if h.value(oidRateCol.Append(1)) != int32(500) {
		t.Fatal("commit did not apply")
	}
	// The master undoes (another subagent's commit failed).
	if resp := d.handle(req(PDUUndoSet, 8)); resp.Error != NoError {
		t.Fatalf("undo = %s", resp.Error)
	}
	d.handle(req(PDUCleanupSet, 8))
	if h.value(oidRateCol.Append(1)) != int32(10) {
		t.Fatal("undo did not restore")
	}

	// A TestSet without CleanupSet of the previous one cleans it up first.
	ts = req(PDUTestSet, 9)
	ts.VarBinds = []Variable{{Name: oidOwnerCol.Append(1), Type: OctetString, Value: []byte("me")}}
	d.handle(ts)
	ts.Header.TransactionID = 10
	d.handle(ts)
	want := []string{"test:7", "cleanup:7", "test:8", "commit:8", "undo:8", "cleanup:8", "test:9", "cleanup:9", "test:10"}
	if got := h.trace(); !reflect.DeepEqual(got, want) {
		t.Fatalf("trace %v, want %v", got, want)
	}
	d.reset()
	if got := h.trace(); got[len(got)-1] != "cleanup:10" {
		t.Fatalf("reset did not clean up: %v", got)
	}
}

func TestDispatchSetErrors(t *testing.T) {
	d, h := newTestDispatcher()
	cases := []struct {
		v    Variable
		want ErrorStatus
	}{
		{Variable{Name: oidRateCol.Append(1), Type: OctetString, Value: []byte("x")}, WrongType},
		{Variable{Name: oidRateCol.Append(1), Type: Integer, Value: int32(0)}, WrongValue},
		{Variable{Name: oidOwnerCol.Append(1), Type: OctetString, Value: make([]byte, 33)}, WrongLength},
		{Variable{Name: oidCount, Type: Integer, Value: int32(1)}, NotWritable},
		{Variable{Name: oidRateCol.Append(4), Type: Integer, Value: int32(1)}, NoCreation},
	}
	for i, c := range cases {
		ts := req(PDUTestSet, uint32(i+1))
		ok := Variable{Name: oidRateCol.Append(3), Type: Integer, Value: int32(1)}
		ts.VarBinds = []Variable{ok, ok, c.v}
		if resp := d.handle(ts); resp.Error != c.want || resp.Index != 3 {
			t.Errorf("%v: %s index %d, want %s index 3", c.v.Name, resp.Error, resp.Index, c.want)
		}
		d.handle(req(PDUCleanupSet, uint32(i+1)))
	}
	// Commit failure is passed on with its index.
	h.failCommit = true
	ts := req(PDUTestSet, 50)
	ts.VarBinds = []Variable{{Name: oidRateCol.Append(3), Type: Integer, Value: int32(1)}}
	d.handle(ts)
	if resp := d.handle(req(PDUCommitSet, 50)); resp.Error != CommitFailed || resp.Index != 1 {
		t.Fatalf("commit = %s %d", resp.Error, resp.Index)
	}
	// Requests a master never sends get processingError.
	if resp := d.handle(req(PDURegister, 51)); resp.Error != ProcessingError {
		t.Fatalf("register to subagent = %s", resp.Error)
	}
}
