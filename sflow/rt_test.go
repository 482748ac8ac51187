package sflow

import (
	"bytes"
	"errors"
	"math"
	"net/netip"
	"reflect"
	"testing"
)

// The golden datagram below is written field by field from the rtmetric
// and rtflow layouts (rt.go; hsflowd's mod_json.c writes them, sflowtool's
// readRTMetric/readRTFlow read them), not produced by this package.
const rtGolden = `
	00000005         // version
	00000001 c6120009 // agent address IPv4 198.18.0.9
	000186a0         // sub_agent_id 100000
	00000001         // sequence_number
	000003e8         // uptime 1000 ms
	00000002         // 2 samples

	010cc3ea         // sample_type 4300:1002 rtmetric
	00000094         // length 148
	00000004 77656231 // datasource "web1"
	00000007         // 7 metrics
	00000003 73747200 00000000 0000000a 68656c6c6f776f726c64 0000 // "str" string "helloworld"
	00000003 63333200 00000001 00000309                          // "c32" counter32 777
	00000003 63363400 00000002 0000010000000000                  // "c64" counter64 2^40
	00000003 67333200 00000003 00000001                          // "g32" gauge32 1
	00000003 67363400 00000004 0000000000000002                  // "g64" gauge64 2
	00000002 67660000 00000005 3fc00000                          // "gf" gaugeFloat 1.5
	00000002 67640000 00000006 3ff3be76c8b43958                  // "gd" gaugeDouble 1.234

	010cc3eb         // sample_type 4300:1003 rtflow
	000000b0         // length 176
	00000004 77656231 // datasource "web1"
	0000000a         // sampling_rate 10
	00000000         // sample_pool 0
	00000008         // 8 fields
	00000001 73000000 00000000 00000003 47455400              // "s" string "GET"
	00000003 6d616300 00000001 020304050607 0000              // "mac" mac 02:03:04:05:06:07
	00000003 73726300 00000002 c6120001                       // "src" ip 198.18.0.1
	00000004 64737436 00000003 20010db8000000000000000000000001 // "dst6" ip6 2001:db8::1
	00000003 69333200 00000004 ffffffff                       // "i32" int32 4294967295
	00000003 69363400 00000005 0000000100000000               // "i64" int64 2^32
	00000001 66000000 00000006 3fc00000                       // "f" float 1.5
	00000001 64000000 00000007 3ff3be76c8b43958               // "d" double 1.234
`

func rtGoldenDatagram() *Datagram {
	return &Datagram{
		AgentAddress: netip.MustParseAddr("198.18.0.9"), SubAgentID: 100000, SequenceNumber: 1, Uptime: 1000,
		Samples: []Sample{
			&RTMetricSample{Datasource: "web1", Metrics: []RTValue{
				{Name: "str", Type: uint32(RTMetricString), Str: "helloworld"},
				{Name: "c32", Type: uint32(RTMetricCounter32), Uint: 777},
				{Name: "c64", Type: uint32(RTMetricCounter64), Uint: 1 << 40},
				{Name: "g32", Type: uint32(RTMetricGauge32), Uint: 1},
				{Name: "g64", Type: uint32(RTMetricGauge64), Uint: 2},
				{Name: "gf", Type: uint32(RTMetricGaugeFloat), Float: 1.5},
				{Name: "gd", Type: uint32(RTMetricGaugeDouble), Float: 1.234},
			}},
			&RTFlowSample{Datasource: "web1", SamplingRate: 10, Fields: []RTValue{
				{Name: "s", Type: uint32(RTFlowString), Str: "GET"},
				{Name: "mac", Type: uint32(RTFlowMAC), MAC: [6]byte{2, 3, 4, 5, 6, 7}},
				{Name: "src", Type: uint32(RTFlowIP), Addr: netip.MustParseAddr("198.18.0.1")},
				{Name: "dst6", Type: uint32(RTFlowIP6), Addr: netip.MustParseAddr("2001:db8::1")},
				{Name: "i32", Type: uint32(RTFlowInt32), Uint: math.MaxUint32},
				{Name: "i64", Type: uint32(RTFlowInt64), Uint: 1 << 32},
				{Name: "f", Type: uint32(RTFlowFloat), Float: 1.5},
				{Name: "d", Type: uint32(RTFlowDouble), Float: 1.234},
			}},
		},
	}
}

func TestRTGolden(t *testing.T) {
	want := unhex(t, rtGolden)
	d := rtGoldenDatagram()
	if got := d.AppendXDR(nil); !bytes.Equal(got, want) {
		t.Fatalf("encoding differs from the golden bytes\ngot  %x\nwant %x", got, want)
	}
	dec, err := Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dec, d) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", dec.Samples, d.Samples)
	}
}

// TestRTMalformed: a strict decoder refuses an unknown value type (its
// size is unknown), an over-long name, a count beyond the bytes present
// and leftover bytes.
func TestRTMalformed(t *testing.T) {
	good := unhex(t, rtGolden)
	const metric0Type = 28 + 8 + 8 + 4 + 8 // header, sample type+length, datasource, count, name "str"
	for _, tc := range []struct {
		name string
		edit func(b []byte) []byte
		want error
	}{
		{"unknown metric type", func(b []byte) []byte { b[metric0Type+3] = 7; return b }, ErrBadValue},
		{"name over 64 bytes", func(b []byte) []byte { b[28+8+8+4+3] = 65; return b }, ErrTooLong},
		{"count beyond the bytes", func(b []byte) []byte { b[28+8+8+3] = 200; return b }, ErrShort},
		{"declared length too long", func(b []byte) []byte {
			b[28+7] += 4 // rtmetric length 152, 4 bytes of rtflow's type eaten
			return b
		}, ErrLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.edit(bytes.Clone(good))
			_, err := Decode(b)
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want a DecodeError wrapping %v", err, tc.want)
			}
		})
	}
}

// TestRTGoldenFile: testdata/rt.bin (a fuzz seed) holds the golden bytes.
func TestRTGoldenFile(t *testing.T) {
	if !bytes.Equal(readTestdata(t, "rt.bin"), unhex(t, rtGolden)) {
		t.Fatal("testdata/rt.bin differs from rtGolden")
	}
}

// TestPortNameGolden: port_name (0:1005) written by hand from the
// structure (string name<255>).
func TestPortNameGolden(t *testing.T) {
	checkRecordGolden(t, &PortName{PortName: "swp12"}, unhex(t, `
		00000005   // name length 5
		7377703132 // "swp12"
		000000     // padding`), false)
	checkRecordGolden(t, &PortName{PortName: ""}, unhex(t, `00000000 // empty name`), false)
}
