package agentx

import (
	"bytes"
	"encoding/hex"
	"net"
	"reflect"
	"strings"
	"testing"
)

// hx turns a spaced hex string into bytes; the vectors below are written
// by hand from the field layouts of RFC 2741 sections 5 and 6.
func hx(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func TestOIDEncoding(t *testing.T) {
	cases := []struct {
		name    string
		oid     string
		include bool
		wire    string
	}{
		// RFC 2741 section 5.1: 1.3.6.1.2.1.1.1.0 (sysDescr.0) is n_subid
		// 4, prefix 2, then 1.1.1.0.
		{"sysDescr.0 prefix", "1.3.6.1.2.1.1.1.0", false, "04 02 00 00 00000001 00000001 00000001 00000000"},
		{"sflow enterprise", "1.3.6.1.4.1.14706", true, "02 04 01 00 00000001 00003972"},
		{"prefix only", "1.3.6.1.4", false, "00 04 00 00"},
		{"internet itself is not compressed", "1.3.6.1", false, "04 00 00 00 00000001 00000003 00000006 00000001"},
		{"x=0 not compressible", "1.3.6.1.0.5", false, "06 00 00 00 00000001 00000003 00000006 00000001 00000000 00000005"},
		{"x>255 not compressible", "1.3.6.1.256", false, "05 00 00 00 00000001 00000003 00000006 00000001 00000100"},
		{"not internet", "1.2.3", false, "03 00 00 00 00000001 00000002 00000003"},
		{"null OID", "", false, "00 00 00 00"},
		{"max subid", "1.4294967295", false, "02 00 00 00 00000001 ffffffff"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			oid := MustParseOID(c.oid)
			got, err := appendOID(nil, oid, c.include)
			if err != nil {
				t.Fatal(err)
			}
			want := hx(t, c.wire)
			if !bytes.Equal(got, want) {
				t.Fatalf("encode %s:\n got %x\nwant %x", c.oid, got, want)
			}
			if n := encodedOIDLen(oid); n != len(want) {
				t.Errorf("encodedOIDLen = %d, want %d", n, len(want))
			}
			r := &reader{buf: want, order: be}
			dec, inc, err := r.oid()
			if err != nil {
				t.Fatal(err)
			}
			if !dec.Equal(oid) || inc != c.include || len(r.buf) != 0 {
				t.Fatalf("decode: %s include=%v rest=%d, want %s include=%v", dec, inc, len(r.buf), oid, c.include)
			}
		})
	}
}

func TestOIDLittleEndianAndErrors(t *testing.T) {
	r := &reader{buf: hx(t, "02 04 00 00 01000000 72390000"), order: byteOrder(0)}
	oid, _, err := r.oid()
	if err != nil || oid.String() != "1.3.6.1.4.1.14706" {
		t.Fatalf("little endian OID = %s, %v", oid, err)
	}
	for name, wire := range map[string]string{
		"truncated header":  "02 04",
		"truncated subids":  "02 04 00 00 00000001",
		"n_subid too large": "81 00 00 00",
		"include not bool":  "00 00 02 00",
	} {
		r := &reader{buf: hx(t, wire), order: be}
		if _, _, err := r.oid(); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
	if _, err := appendOID(nil, make(OID, 129), false); err == nil {
		t.Error("129 sub-identifiers encoded without error")
	}
}

func TestOctetStringPadding(t *testing.T) {
	cases := []struct{ s, wire string }{
		{"", "00000000"},
		{"a", "00000001 61000000"},
		{"ab", "00000002 61620000"},
		{"abc", "00000003 61626300"},
		{"abcd", "00000004 61626364"},
		{"abcde", "00000005 61626364 65000000"},
	}
	for _, c := range cases {
		want := hx(t, c.wire)
		if got := appendOctets(nil, []byte(c.s)); !bytes.Equal(got, want) {
			t.Errorf("encode %q = %x, want %x", c.s, got, want)
		}
		r := &reader{buf: want, order: be}
		got, err := r.octets()
		if err != nil || string(got) != c.s || len(r.buf) != 0 {
			t.Errorf("decode %x = %q, %v (rest %d)", want, got, err, len(r.buf))
		}
	}
	// Little endian length.
	r := &reader{buf: hx(t, "03000000 78797a00"), order: byteOrder(0)}
	if got, err := r.octets(); err != nil || string(got) != "xyz" {
		t.Errorf("little endian octets = %q, %v", got, err)
	}
	for _, bad := range []string{"00000005 61626364", "00000003 6162", "ffffffff", "0000"} {
		r := &reader{buf: hx(t, bad), order: be}
		if _, err := r.octets(); err == nil {
			t.Errorf("octets %s decoded without error", bad)
		}
	}
}

func TestVarBindEncoding(t *testing.T) {
	name := "02 04 00 00 00000001 00003972" // 1.3.6.1.4.1.14706
	cases := []struct {
		v    Variable
		wire string
	}{
		{Variable{Type: Integer, Value: int32(-2)}, "0002 0000" + name + "fffffffe"},
		{Variable{Type: OctetString, Value: []byte("sflow")}, "0004 0000" + name + "00000005 73666c6f 77000000"},
		{Variable{Type: Null}, "0005 0000" + name},
		{Variable{Type: ObjectIdentifier, Value: MustParseOID("1.3.6.1.2.1.1")}, "0006 0000" + name + "02 02 00 00 00000001 00000001"},
		{Variable{Type: IPAddress, Value: net.IPv4(198, 18, 0, 1).To4()}, "0040 0000" + name + "00000004 c6120001"},
		{Variable{Type: Counter32, Value: uint32(0xdeadbeef)}, "0041 0000" + name + "deadbeef"},
		{Variable{Type: Gauge32, Value: uint32(7)}, "0042 0000" + name + "00000007"},
		{Variable{Type: TimeTicks, Value: uint32(100)}, "0043 0000" + name + "00000064"},
		{Variable{Type: Opaque, Value: []byte{1, 2}}, "0044 0000" + name + "00000002 01020000"},
		{Variable{Type: Counter64, Value: uint64(0x0102030405060708)}, "0046 0000" + name + "01020304 05060708"},
		{Variable{Type: NoSuchObject}, "0080 0000" + name},
		{Variable{Type: NoSuchInstance}, "0081 0000" + name},
		{Variable{Type: EndOfMibView}, "0082 0000" + name},
	}
	for _, c := range cases {
		c.v.Name = MustParseOID("1.3.6.1.4.1.14706")
		want := hx(t, c.wire)
		got, err := appendVarBind(nil, c.v)
		if err != nil {
			t.Fatalf("%s: %v", c.v.Type, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s encode:\n got %x\nwant %x", c.v.Type, got, want)
		}
		r := &reader{buf: want, order: be}
		dec, err := r.varBind()
		if err != nil {
			t.Fatalf("%s decode: %v", c.v.Type, err)
		}
		if !reflect.DeepEqual(dec, c.v) || len(r.buf) != 0 {
			t.Errorf("%s decode = %#v, want %#v", c.v.Type, dec, c.v)
		}
	}
	// Convenience Go types on encode.
	for _, v := range []Variable{
		{Type: Integer, Value: 5}, {Type: Integer, Value: int64(-5)},
		{Type: Gauge32, Value: 5}, {Type: Counter64, Value: uint32(5)},
		{Type: OctetString, Value: "x"}, {Type: IPAddress, Value: net.ParseIP("198.18.0.1")},
	} {
		if _, err := appendVarBind(nil, v); err != nil {
			t.Errorf("encode %v %T: %v", v.Type, v.Value, err)
		}
	}
	for _, v := range []Variable{
		{Type: Integer, Value: int64(1) << 40}, {Type: Integer, Value: "x"},
		{Type: Gauge32, Value: -1}, {Type: Counter32, Value: uint64(1) << 33},
		{Type: OctetString, Value: 3}, {Type: IPAddress, Value: net.ParseIP("2001:db8::1")},
		{Type: ObjectIdentifier, Value: "1.3"}, {Type: VarType(99)},
	} {
		if _, err := appendVarBind(nil, v); err == nil {
			t.Errorf("encode %v %T %v: no error", v.Type, v.Value, v.Value)
		}
	}
}

// openWire is an agentx-Open PDU written by hand (RFC 2741 sections 6.1,
// 6.2.1): network byte order, packetID 1, timeout 5, o.id 1.3.6.1.4.1.14706,
// o.descr "sflow".
const openWire = "01 01 10 00  00000000 00000000 00000001 0000001c" +
	"05 000000" + "02 04 00 00 00000001 00003972" + "00000005 73666c6f 77000000"

func TestHeaderAndOpenPDU(t *testing.T) {
	want := hx(t, openWire)
	p := &PDU{Header: Header{Version: 1, Type: PDUOpen, PacketID: 1}, Timeout: 5,
		ID: MustParseOID("1.3.6.1.4.1.14706"), Descr: "sflow"}
	got, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Open:\n got %x\nwant %x", got, want)
	}
	dec, err := DecodePDU(want)
	if err != nil {
		t.Fatal(err)
	}
	h := dec.Header
	if h.Version != 1 || h.Type != PDUOpen || h.Flags != FlagNetworkByteOrder || h.PacketID != 1 || h.PayloadLength != 28 {
		t.Fatalf("header = %+v", h)
	}
	if dec.Timeout != 5 || dec.Descr != "sflow" || dec.ID.String() != "1.3.6.1.4.1.14706" {
		t.Fatalf("open = %+v", dec)
	}
}

// TestLittleEndianRequests decodes PDUs a master may send in little endian
// (NETWORK_BYTE_ORDER clear): every multi-byte field must be swapped.
func TestLittleEndianRequests(t *testing.T) {
	// agentx-GetNext, session 7, transaction 9, packet 0x0102, one
	// SearchRange 1.3.6.1.4.1.14706 (include) .. 1.3.6.1.4.1.14707.
	getNext := hx(t, "01 06 00 00  07000000 09000000 02010000 18000000"+
		"02 04 01 00 01000000 72390000"+
		"02 04 00 00 01000000 73390000")
	p, err := DecodePDU(getNext)
	if err != nil {
		t.Fatal(err)
	}
	if p.Header.SessionID != 7 || p.Header.TransactionID != 9 || p.Header.PacketID != 0x0102 {
		t.Fatalf("header = %+v", p.Header)
	}
	want := []SearchRange{{Start: MustParseOID("1.3.6.1.4.1.14706"), Include: true, End: MustParseOID("1.3.6.1.4.1.14707")}}
	if !reflect.DeepEqual(p.Ranges, want) {
		t.Fatalf("ranges = %v, want %v", p.Ranges, want)
	}

	// agentx-TestSet in a non-default context "ctx", little endian, one
	// Integer varbind 1.3.6.1.4.1.14706.1 = 258 and one Counter64.
	testSet := hx(t, "01 08 08 00  01000000 02000000 03000000 3c000000"+
		"03000000 63747800"+
		"0200 0000 03 04 00 00 01000000 72390000 01000000 02010000"+
		"4600 0000 03 04 00 00 01000000 72390000 02000000 08070605 04030201")
	p, err = DecodePDU(testSet)
	if err != nil {
		t.Fatal(err)
	}
	if p.Context != "ctx" || len(p.VarBinds) != 2 {
		t.Fatalf("testset = %+v", p)
	}
	if v := p.VarBinds[0]; v.Type != Integer || v.Value != int32(258) || v.Name.String() != "1.3.6.1.4.1.14706.1" {
		t.Errorf("varbind 1 = %+v", v)
	}
	if v := p.VarBinds[1]; v.Type != Counter64 || v.Value != uint64(0x0102030405060708) {
		t.Errorf("varbind 2 = %+v", v)
	}

	// Re-encoding gives network byte order with the same content.
	enc, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if enc[2] != byte(FlagNetworkByteOrder|FlagNonDefaultContext) {
		t.Errorf("flags = %#x", enc[2])
	}
	q, err := DecodePDU(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(q.VarBinds, p.VarBinds) || q.Context != p.Context {
		t.Errorf("re-encoded = %+v", q)
	}
}

func TestResponseAndGetBulkPDU(t *testing.T) {
	// agentx-Response (RFC 2741 section 6.2.16): sysUpTime 0, error
	// wrongValue (10), index 2, one Null varbind 1.3.6.1.4.1.14706.
	resp := &PDU{Header: Header{Type: PDUResponse, SessionID: 5, TransactionID: 6, PacketID: 7},
		Error: WrongValue, Index: 2, VarBinds: []Variable{{Name: MustParseOID("1.3.6.1.4.1.14706"), Type: Null}}}
	want := hx(t, "01 12 10 00 00000005 00000006 00000007 00000018"+
		"00000000 000a 0002"+"0005 0000 02 04 00 00 00000001 00003972")
	got, err := resp.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Response:\n got %x\nwant %x", got, want)
	}
	// agentx-GetBulk, little endian: non_repeaters 1, max_repetitions 10,
	// two ranges with null end.
	bulk := hx(t, "01 07 00 00 01000000 00000000 01000000 18000000"+
		"0100 0a00"+"01 04 00 00 01000000 00 00 00 00"+"00 02 00 00 00 00 00 00")
	p, err := DecodePDU(bulk)
	if err != nil {
		t.Fatal(err)
	}
	if p.NonRepeaters != 1 || p.MaxRepetitions != 10 || len(p.Ranges) != 2 ||
		p.Ranges[0].Start.String() != "1.3.6.1.4.1" || p.Ranges[1].Start.String() != "1.3.6.1.2" {
		t.Fatalf("getbulk = %+v", p)
	}
}

func TestRegisterPDU(t *testing.T) {
	p := &PDU{Header: Header{Type: PDURegister, SessionID: 3, PacketID: 4}, Timeout: 0, Priority: 127,
		Subtree: MustParseOID("1.3.6.1.4.1.14706")}
	want := hx(t, "01 03 10 00 00000003 00000000 00000004 00000010"+
		"00 7f 00 00"+"02 04 00 00 00000001 00003972")
	got, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Register:\n got %x\nwant %x", got, want)
	}
	// A range registration carries r.upper_bound.
	p.RangeSubID, p.UpperBound = 7, 9
	got, err = p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := DecodePDU(got)
	if err != nil || dec.RangeSubID != 7 || dec.UpperBound != 9 || len(got) != HeaderLen+20 {
		t.Fatalf("range register = %+v, %v", dec, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := map[string]string{
		"short header":          "01 01 10 00",
		"version 2":             "02 0d 10 00 00000000 00000000 00000000 00000000",
		"unknown type":          "01 63 10 00 00000000 00000000 00000000 00000000",
		"length > data":         "01 0d 10 00 00000000 00000000 00000000 00000004",
		"length < data":         "01 0d 10 00 00000000 00000000 00000000 00000000 00000000",
		"length not aligned":    "01 0d 10 00 00000000 00000000 00000000 00000002 0000",
		"huge length":           "01 0d 10 00 00000000 00000000 00000000 7fffffff",
		"trailing in close":     "01 02 10 00 00000000 00000000 00000000 00000008 05000000 00000000",
		"truncated response":    "01 12 10 00 00000000 00000000 00000000 00000004 00000000",
		"bad varbind type":      "01 12 10 00 00000000 00000000 00000000 0000000c 00000000 00000000 0063 0000",
		"ipaddress 3 octets":    "01 08 10 00 00000000 00000000 00000000 00000010 0040 0000 00 00 00 00 00000003 01020300",
		"range missing end":     "01 05 10 00 00000000 00000000 00000000 00000004 00 00 00 00",
		"range_subid > subtree": "01 03 10 00 00000000 00000000 00000000 0000000c 00 7f 05 00 01 00 00 00 00000001",
		"index allocate":        "01 0e 10 00 00000000 00000000 00000000 00000000",
		"context overrun":       "01 0d 18 00 00000000 00000000 00000000 00000004 00000010",
	}
	for name, wire := range cases {
		if p, err := DecodePDU(hx(t, wire)); err == nil {
			t.Errorf("%s: decoded %+v without error", name, p)
		}
	}
}

func TestReadPDUStream(t *testing.T) {
	var stream bytes.Buffer
	stream.Write(hx(t, openWire))
	// A Ping with a bad context length: header valid, payload not.
	stream.Write(hx(t, "01 0d 18 00 00000001 00000000 00000009 00000004 00000010"))
	stream.Write(hx(t, openWire))
	if p, err := ReadPDU(&stream); err != nil || p.Header.Type != PDUOpen {
		t.Fatalf("first = %v, %v", p, err)
	}
	p, err := ReadPDU(&stream)
	if err == nil || p == nil || p.Header.PacketID != 9 {
		t.Fatalf("second = %v, %v; want payload error with header", p, err)
	}
	if p, err := ReadPDU(&stream); err != nil || p.Header.Type != PDUOpen {
		t.Fatalf("third (stream still in sync) = %v, %v", p, err)
	}
	if _, err := ReadPDU(&stream); err == nil {
		t.Fatal("read at EOF succeeded")
	}
}
