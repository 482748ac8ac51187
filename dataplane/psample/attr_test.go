package psample

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
)

// kernelMessage is a PSAMPLE_CMD_SAMPLE message laid out byte by byte as
// psample_sample_packet (Linux 6.1, x86-64) builds it for an ASIC sample
// with every optional attribute: family 0x1d, iif 7, oif 9, rate 1000,
// origsize 1514, group 3, seq 41, out_tc 5, out_tc_occ 123456,
// latency 789, timestamp 0x0102030405060708, proto 0x0800, data 4 bytes.
// Written out here rather than with AppendMessage, so that the parser is
// checked against the kernel's layout and not against its own encoder.
var kernelMessage = []byte{
	0x88, 0, 0, 0, 0x1d, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // nlmsghdr: len 136, type 0x1d
	0, 1, 0, 0, // genlmsghdr: cmd 0 (SAMPLE), version 1
	6, 0, 0, 0, 7, 0, 0, 0, // IIFINDEX u16 7 (+pad)
	6, 0, 1, 0, 9, 0, 0, 0, // OIFINDEX u16 9
	8, 0, 5, 0, 0xe8, 3, 0, 0, // SAMPLE_RATE 1000
	8, 0, 2, 0, 0xea, 5, 0, 0, // ORIGSIZE 1514
	8, 0, 3, 0, 3, 0, 0, 0, // SAMPLE_GROUP 3
	8, 0, 4, 0, 41, 0, 0, 0, // GROUP_SEQ 41
	6, 0, 10, 0, 5, 0, 0, 0, // OUT_TC 5
	12, 0, 11, 0, 0x40, 0xe2, 1, 0, 0, 0, 0, 0, // OUT_TC_OCC 123456
	12, 0, 12, 0, 0x15, 3, 0, 0, 0, 0, 0, 0, // LATENCY 789
	12, 0, 13, 0, 8, 7, 6, 5, 4, 3, 2, 1, // TIMESTAMP
	6, 0, 14, 0, 0, 8, 0, 0, // PROTO 0x0800
	8, 0, 6, 0, 0xde, 0xad, 0xbe, 0xef, // DATA
	// 4 bytes of an attribute from a newer kernel, skipped:
	8, 0, 15, 0, 1, 2, 3, 4,
}

func TestParseKernelLayout(t *testing.T) {
	var s Sample
	ok, err := ParseMessage(kernelMessage, 0x1d, &s)
	if err != nil || !ok {
		t.Fatalf("ParseMessage: ok %v, %v", ok, err)
	}
	want := Sample{Has: HasIIf | HasOIf | HasRate | HasOrigSize | HasGroup | HasSeq | HasOutTC | HasOutTCOcc | HasLatency | HasTimestamp | HasProto | HasData,
		IIfIndex: 7, OIfIndex: 9, Rate: 1000, OrigSize: 1514, Group: 3, Seq: 41, OutTC: 5, OutTCOcc: 123456, Latency: 789,
		Timestamp: 0x0102030405060708, Proto: 0x0800}
	if !bytes.Equal(s.Data, []byte{0xde, 0xad, 0xbe, 0xef}) {
		t.Errorf("data %x", s.Data)
	}
	s.Data = nil
	if !reflect.DeepEqual(s, want) {
		t.Errorf("parsed\n %+v\nwant\n %+v", s, want)
	}
	// Another family's message is not a sample.
	if ok, err := ParseMessage(kernelMessage, 0x1e, &s); ok || err != nil {
		t.Errorf("other family: ok %v err %v", ok, err)
	}
}

func TestAppendMessageRoundTrip(t *testing.T) {
	in := Sample{Has: HasIIf | HasOutTC | HasOutTCOcc | HasLatency, IIfIndex: 12, Rate: 64, OrigSize: 60, Group: 9, Seq: 1 << 31,
		OutTC: 7, OutTCOcc: 1 << 40, Latency: 1 << 33, Data: bytes.Repeat([]byte{0xab}, 61)}
	b := AppendMessage(nil, 0x20, &in)
	var out Sample
	if ok, err := ParseMessage(b, 0x20, &out); !ok || err != nil {
		t.Fatalf("ok %v err %v", ok, err)
	}
	in.Has |= HasRate | HasOrigSize | HasGroup | HasSeq | HasData
	if !bytes.Equal(out.Data, in.Data) {
		t.Errorf("data %x", out.Data)
	}
	in.Data, out.Data = nil, nil
	if !reflect.DeepEqual(in, out) {
		t.Errorf("got %+v\nwant %+v", out, in)
	}
}

// TestParseTruncated: a message cut by the socket's buffer keeps the
// attributes that fit and the first bytes of DATA, marked Truncated.
func TestParseTruncated(t *testing.T) {
	in := Sample{Has: HasIIf, IIfIndex: 3, Rate: 1, OrigSize: 1500, Group: 1, Seq: 5, Data: bytes.Repeat([]byte{1}, 1500)}
	b := AppendMessage(nil, 0x20, &in)
	var out Sample
	ok, err := ParseMessage(b[:200], 0x20, &out)
	if !ok || err != nil || !out.Truncated {
		t.Fatalf("ok %v err %v truncated %v", ok, err, out.Truncated)
	}
	if out.Seq != 5 || out.OrigSize != 1500 || len(out.Data) == 0 || len(out.Data) > 200 {
		t.Errorf("seq %d origsize %d data %d bytes", out.Seq, out.OrigSize, len(out.Data))
	}
	// A truncated message cut inside an attribute other than DATA is an
	// error, never a panic.
	if _, err := ParseMessage(b[:nlmsgHdrLen+genlHdrLen+8+6], 0x20, &out); err == nil {
		t.Error("cut inside SAMPLE_RATE: no error")
	}
}

// TestParseMalformed: lengths that lie are errors, never panics.
func TestParseMalformed(t *testing.T) {
	for _, b := range [][]byte{
		nil,
		make([]byte, 19),
		func() []byte { // attribute length 2 (< header)
			b := AppendMessage(nil, 0x20, &Sample{Rate: 1})
			binary.NativeEndian.PutUint16(b[20:], 2)
			return b
		}(),
		func() []byte { // u32 attribute with 2 bytes
			b := AppendMessage(nil, 0x20, &Sample{Rate: 1})
			binary.NativeEndian.PutUint16(b[20:], 6)
			return b
		}(),
	} {
		var s Sample
		if len(b) >= 20 {
			binary.NativeEndian.PutUint16(b[4:], 0x20)
		}
		if _, err := ParseMessage(b, 0x20, &s); err == nil {
			t.Errorf("%x: no error", b)
		}
	}
}

func FuzzParseMessage(f *testing.F) {
	f.Add(kernelMessage)
	f.Add(AppendMessage(nil, 0x1d, &Sample{Rate: 5, Data: []byte{1, 2, 3}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Sample
		_, _ = ParseMessage(b, 0x1d, &s)
	})
}

func TestParseNoAlloc(t *testing.T) {
	var s Sample
	if n := testing.AllocsPerRun(1000, func() { _, _ = ParseMessage(kernelMessage, 0x1d, &s) }); n != 0 {
		t.Errorf("%v allocations per message", n)
	}
}

// TestParseProbability: a sample whose SAMPLE_RATE is a probability
// (PSAMPLE_ATTR_SAMPLE_PROBABILITY, Linux 6.11: Open vSwitch's psample
// action) is read as the 1-in-N rate nearest to it, the probability kept;
// the kernel's layout, byte by byte (the flag is an attribute without a
// payload, after DATA).
func TestParseProbability(t *testing.T) {
	msg := []byte{
		0x30, 0, 0, 0, 0x1d, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // nlmsghdr: len 48
		0, 1, 0, 0, // genlmsghdr
		8, 0, 5, 0, 0x29, 0x5c, 0x8f, 0x02, // SAMPLE_RATE 42949673 (1% of 2^32)
		8, 0, 3, 0, 3, 0, 0, 0, // SAMPLE_GROUP 3
		8, 0, 6, 0, 0xde, 0xad, 0xbe, 0xef, // DATA
		4, 0, 16, 0, // SAMPLE_PROBABILITY (flag)
	}
	var s Sample
	if ok, err := ParseMessage(msg, 0x1d, &s); !ok || err != nil {
		t.Fatalf("ok %v err %v", ok, err)
	}
	if s.Has&HasProbability == 0 || s.Rate != 100 || s.Probability != 42949673 {
		t.Errorf("rate %d probability %d (has %v), want 100 from 42949673", s.Rate, s.Probability, s.Has&HasProbability != 0)
	}
	for _, c := range []struct{ p, n uint32 }{
		{0, 0}, {1<<32 - 1, 1}, {1 << 31, 2}, {1 << 20, 4096}, {42949673, 100}, {4294967, 1000}, {429497, 10000}, {1, 1<<32 - 1},
	} {
		if got := ProbabilityRate(c.p); got != c.n {
			t.Errorf("ProbabilityRate(%d) = %d, want %d", c.p, got, c.n)
		}
	}
	// The encoder writes what the parser reads.
	in := Sample{Has: HasProbability, Probability: 4294967, Group: 1, Data: []byte{1}}
	var out Sample
	if ok, err := ParseMessage(AppendMessage(nil, 0x20, &in), 0x20, &out); !ok || err != nil || out.Rate != 1000 {
		t.Errorf("round trip: rate %d (ok %v err %v), want 1000", out.Rate, ok, err)
	}
}
