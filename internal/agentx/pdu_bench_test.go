package agentx

import "testing"

// benchResponse is a typical agentx-Response to a GetNext walk of the
// sFlow MIB: four varbinds (an OCTET STRING, an INTEGER, a Counter32 and a
// Counter64) under 1.3.6.1.4.1.14706.
func benchResponse() *PDU {
	base := MustParseOID("1.3.6.1.4.1.14706.1.1.4.1")
	oid := func(col, idx uint32) OID { return append(append(OID{}, base...), col, 1, 3, idx) }
	return &PDU{
		Header: Header{Version: 1, Type: PDUResponse, Flags: FlagNetworkByteOrder, SessionID: 5, TransactionID: 6, PacketID: 7},
		VarBinds: []Variable{
			{Name: oid(2, 7), Type: OctetString, Value: []byte("198.19.255.2")},
			{Name: oid(3, 7), Type: Integer, Value: int32(6343)},
			{Name: oid(4, 7), Type: Counter32, Value: uint32(1 << 30)},
			{Name: oid(5, 7), Type: Counter64, Value: uint64(1 << 40)},
		},
	}
}

// BenchmarkPDUEncode: one agentx-Response appended to a reused buffer.
func BenchmarkPDUEncode(b *testing.B) {
	p := benchResponse()
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = p.AppendEncode(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkPDUDecode: the same PDU decoded (as the master agent's
// requests are, one per request).
func BenchmarkPDUDecode(b *testing.B) {
	raw, err := benchResponse().Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodePDU(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPDUDecodeGetNext: an agentx-GetNext with one search range, the
// request of every snmpwalk step.
func BenchmarkPDUDecodeGetNext(b *testing.B) {
	req := &PDU{Header: Header{Version: 1, Type: PDUGetNext, Flags: FlagNetworkByteOrder, SessionID: 5, TransactionID: 9, PacketID: 10},
		Ranges: []SearchRange{{Start: MustParseOID("1.3.6.1.4.1.14706.1.1.4.1.2.1.3.7")}}}
	raw, err := req.Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodePDU(raw); err != nil {
			b.Fatal(err)
		}
	}
}
