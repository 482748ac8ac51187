package agentx

import (
	"bytes"
	"encoding/binary"
	"net"
	"reflect"
	"testing"
)

// seedPDUs is one PDU of every type we decode, used as fuzz seeds.
func seedPDUs() []*PDU {
	sub := MustParseOID("1.3.6.1.4.1.14706")
	h := func(t PDUType) Header {
		return Header{Version: 1, Type: t, SessionID: 1, TransactionID: 2, PacketID: 3}
	}
	all := []Variable{
		{Name: sub.Append(1), Type: Integer, Value: int32(-1)},
		{Name: sub.Append(2), Type: OctetString, Value: []byte("abc")},
		{Name: sub.Append(3), Type: Null},
		{Name: sub.Append(4), Type: ObjectIdentifier, Value: MustParseOID("1.2.3")},
		{Name: sub.Append(5), Type: IPAddress, Value: net.IPv4(198, 18, 0, 1).To4()},
		{Name: sub.Append(6), Type: Counter32, Value: uint32(6)},
		{Name: sub.Append(7), Type: Gauge32, Value: uint32(7)},
		{Name: sub.Append(8), Type: TimeTicks, Value: uint32(8)},
		{Name: sub.Append(9), Type: Opaque, Value: []byte{9}},
		{Name: sub.Append(10), Type: Counter64, Value: uint64(10)},
		{Name: sub.Append(11), Type: NoSuchObject},
		{Name: sub.Append(12), Type: NoSuchInstance},
		{Name: sub.Append(13), Type: EndOfMibView},
	}
	ranges := []SearchRange{{Start: sub, Include: true, End: sub.Append(99)}, {Start: MustParseOID("1.2")}}
	return []*PDU{
		{Header: h(PDUOpen), Timeout: 5, ID: sub, Descr: "sflowswitchd"},
		{Header: h(PDUClose), Reason: ReasonShutdown},
		{Header: h(PDURegister), Priority: 127, Subtree: sub, RangeSubID: 7, UpperBound: 10, Context: "c"},
		{Header: h(PDUUnregister), Priority: 127, Subtree: sub},
		{Header: h(PDUGet), Ranges: ranges},
		{Header: h(PDUGetNext), Ranges: ranges, Context: "ctx1"},
		{Header: h(PDUGetBulk), NonRepeaters: 1, MaxRepetitions: 10, Ranges: ranges},
		{Header: h(PDUTestSet), VarBinds: all},
		{Header: h(PDUCommitSet)},
		{Header: h(PDUUndoSet)},
		{Header: h(PDUCleanupSet)},
		{Header: h(PDUNotify), VarBinds: all[:3]},
		{Header: h(PDUPing)},
		{Header: h(PDUResponse), Error: WrongValue, Index: 2, VarBinds: all},
	}
}

// toLittleEndian converts a header-only PDU (Ping, CommitSet, ...) to
// little endian: NETWORK_BYTE_ORDER cleared and the four 32-bit header
// fields swapped. Used for seeds only.
func toLittleEndian(b []byte) []byte {
	out := bytes.Clone(b)
	out[2] &^= byte(FlagNetworkByteOrder)
	for i := 4; i < HeaderLen; i += 4 {
		binary.LittleEndian.PutUint32(out[i:], binary.BigEndian.Uint32(b[i:]))
	}
	return out
}

func FuzzDecodePDU(f *testing.F) {
	for _, p := range seedPDUs() {
		b, err := p.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if p.Header.Type == PDUPing || p.Header.Type == PDUCommitSet {
			f.Add(toLittleEndian(b))
		}
	}
	f.Add([]byte{1, 6, 0, 0, 7, 0, 0, 0, 9, 0, 0, 0, 2, 1, 0, 0, 24, 0, 0, 0,
		2, 4, 1, 0, 1, 0, 0, 0, 0x72, 0x39, 0, 0, 2, 4, 0, 0, 1, 0, 0, 0, 0x73, 0x39, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodePDU(data)
		if err != nil {
			return
		}
		enc, err := p.Encode()
		if err != nil {
			t.Fatalf("decoded PDU does not encode: %v\n%+v", err, p)
		}
		q, err := DecodePDU(enc)
		if err != nil {
			t.Fatalf("re-encoded PDU does not decode: %v\n%x", err, enc)
		}
		// Encoding normalizes to network byte order and recomputes the
		// payload length (prefix compression may shorten OIDs).
		p.Header.Flags |= FlagNetworkByteOrder
		p.Header.PayloadLength = uint32(len(enc) - HeaderLen)
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip differs:\n got %+v\nwant %+v", q, p)
		}
		enc2, err := q.Encode()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable: %v\n%x\n%x", err, enc, enc2)
		}
	})
}

func TestSeedPDUsRoundTrip(t *testing.T) {
	for _, p := range seedPDUs() {
		b, err := p.Encode()
		if err != nil {
			t.Fatalf("%s: %v", p.Header.Type, err)
		}
		q, err := DecodePDU(b)
		if err != nil {
			t.Fatalf("%s: %v", p.Header.Type, err)
		}
		p.Header.Flags = q.Header.Flags
		p.Header.PayloadLength = q.Header.PayloadLength
		if p.Context != "" && q.Header.Flags&FlagNonDefaultContext == 0 {
			t.Errorf("%s: context flag not set", p.Header.Type)
		}
		if !reflect.DeepEqual(p, q) {
			t.Errorf("%s round trip:\n got %+v\nwant %+v", p.Header.Type, q, p)
		}
	}
}
