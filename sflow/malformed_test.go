package sflow

import (
	"errors"
	"testing"
)

// header is a sample_datagram_v5 header up to (not including) the sample
// count: version 5, IPv4 agent 198.18.0.1, sub-agent 0, sequence 1,
// uptime 0. It is 24 bytes long, so the count is at offset 24, the first
// sample_type at 28, its length at 32 and its body at 36.
const header = `
	00000005 // version
	00000001 // agent address type IPv4
	c6120001 // agent address 198.18.0.1
	00000000 // sub_agent_id
	00000001 // sequence_number
	00000000 // uptime
`

// flowSampleHead is a compact flow_sample body up to the record count
// (offsets 36..63 in a datagram built on header); its record array starts
// at 64, the first record's data_format at 68, length at 72, body at 76.
const flowSampleHead = `
	00000001 // sequence_number
	00000003 // source_id 0:3
	00000400 // sampling_rate
	00001000 // sample_pool
	00000000 // drops
	00000003 // input
	00000005 // output
`

// malformedCase is a datagram a strict decoder must reject, with the
// structure and offset the error must name. needFlow/needCounter name a
// record format the case relies on (it is skipped while that record type
// is not registered in the package).
type malformedCase struct {
	name        string
	data        func(t *testing.T) []byte
	structure   string
	offset      int
	err         error
	needFlow    DataFormat
	needCounter DataFormat
}

func file(name string) func(t *testing.T) []byte {
	return func(t *testing.T) []byte { return readTestdata(t, name) }
}

func hexData(s string) func(t *testing.T) []byte {
	return func(t *testing.T) []byte { return unhex(t, s) }
}

func TestMalformedDatagrams(t *testing.T) {
	cases := []malformedCase{
		// The shared malformed vectors; offsets worked out from `xxd`.
		{
			// Version word 6 at offset 0.
			name: "bad_version.bin", data: file("bad_version.bin"),
			structure: "datagram", offset: 0, err: ErrVersion,
		},
		{
			// One counters_sample (type at 0x1c) of declared length 0x6c,
			// holding one if_counters record (format 0:1 at 0x30) whose
			// length word at 0x34 says 0x54 = 84, but if_counters is 88
			// bytes: its body 0x38..0x8c ends before the last field,
			// ifPromiscuousMode, which would start at 0x38+84 = 0x8c = 140.
			name: "bad_reclen.bin", data: file("bad_reclen.bin"),
			structure: "datagram.sample[0].counters_sample.record[0].if_counters", offset: 140, err: ErrShort,
			needCounter: Format(0, 1),
		},
		{
			// counters_sample length word at 0x20 says 0x70 = 112, but only
			// 144-36 = 108 bytes follow it (the record inside ends exactly at
			// the end of the datagram, so 108 = 0x6c was the right length).
			name: "bad_samplelen.bin", data: file("bad_samplelen.bin"),
			structure: "datagram.sample[0].counters_sample", offset: 32, err: ErrShort,
		},
		{
			// flow_sample length word at 0x20 says 0x178 = 376, but the
			// datagram is 402 bytes, so only 366 follow it.
			name: "truncated.bin", data: file("truncated.bin"),
			structure: "datagram.sample[0].flow_sample", offset: 32, err: ErrShort,
		},
		{
			// The count at 0x18 says 2 samples; the first (length 0xa8 from
			// 0x24) ends at 0xcc = 204, the end of the datagram, where the
			// second sample_type should be.
			name: "bad_nsamples.bin", data: file("bad_nsamples.bin"),
			structure: "datagram", offset: 204, err: ErrShort,
		},
		{
			// One sample ending at 0xcc = 204, then 8 bytes (deadbeef x2).
			name: "trailing.bin", data: file("trailing.bin"),
			structure: "datagram", offset: 204, err: ErrTrailing,
		},

		// Our own cases, byte by byte.
		{
			name: "empty", data: hexData(``),
			structure: "datagram", offset: 0, err: ErrShort,
		},
		{
			name: "version 4", data: hexData(`00000004 00000001 c6120001`),
			structure: "datagram", offset: 0, err: ErrVersion,
		},
		{
			name: "header cut in the address type", data: hexData(`00000005 000000`),
			structure: "datagram", offset: 4, err: ErrShort,
		},
		{
			name: "bad agent address type", data: hexData(`00000005 00000003 c6120001 00000000 00000001 00000000 00000000`),
			structure: "datagram", offset: 4, err: ErrBadValue,
		},
		{
			name: "IPv6 agent address cut", data: hexData(`00000005 00000002 20010db8 00000000`),
			structure: "datagram", offset: 8, err: ErrShort,
		},
		{
			name: "huge sample count", data: hexData(header + `ffffffff // samples<>`),
			structure: "datagram", offset: 24, err: ErrShort,
		},
		{
			name: "sample length past the end", data: hexData(header + `
				00000001 // samples<>
				00000002 // sample_type counters_sample
				ffffffff // length
				00000001 00000003 00000000`),
			structure: "datagram.sample[0].counters_sample", offset: 32, err: ErrShort,
		},
		{
			name: "unknown sample type cut", data: hexData(header + `
				00000001 // samples<>
				00000063 // sample_type 0:99
				00000008 // length
				00000000 // only 4 of 8 bytes`),
			structure: "datagram.sample[0].unknown(0:99)", offset: 32, err: ErrShort,
		},
		{
			name: "huge record count", data: hexData(header + `
				00000001 // samples<>
				00000002 // counters_sample
				0000000c // length
				00000001 // sequence_number
				00000003 // source_id
				40000000 // counter_records<> at offset 44`),
			structure: "datagram.sample[0].counters_sample", offset: 44, err: ErrShort,
		},
		{
			name: "record length past the sample", data: hexData(header + `
				00000001 // samples<>
				00000002 // counters_sample
				00000014 // length 20
				00000001 // sequence_number
				00000003 // source_id
				00000001 // counter_records<>
				00009009 // data_format 9:9
				00000100 // length 256, at offset 52`),
			structure: "datagram.sample[0].counters_sample.record[0].unknown(9:9)", offset: 52, err: ErrShort,
		},
		{
			name: "sample longer than its contents", data: hexData(header + `
				00000001 // samples<>
				00000002 // counters_sample
				00000010 // length 16
				00000001 // sequence_number
				00000003 // source_id
				00000000 // counter_records<> (none)
				00000000 // 4 bytes left over, at offset 48`),
			structure: "datagram.sample[0].counters_sample", offset: 48, err: ErrLength,
		},
		{
			name: "non-zero opaque padding", data: hexData(header + `
				00000001 // samples<>
				00000001 // flow_sample
				0000003c // length 60
				` + flowSampleHead + `
				00000001 // flow_records<>
				00000001 // data_format sampled_header
				00000014 // length 20
				00000001 // header_protocol ETHERNET-ISO88023
				00000040 // frame_length
				00000004 // stripped
				00000003 // header<> length 3
				aabbcc01 // 3 bytes, then padding 01 at offset 95`),
			structure: "datagram.sample[0].flow_sample.record[0].sampled_header", offset: 95, err: ErrBadPadding,
			needFlow: Format(0, 1),
		},
		{
			name: "opaque length past the record", data: hexData(header + `
				00000001 // samples<>
				00000001 // flow_sample
				0000003c // length 60
				` + flowSampleHead + `
				00000001 // flow_records<>
				00000001 // data_format sampled_header
				00000014 // length 20
				00000001 // header_protocol
				00000040 // frame_length
				00000004 // stripped
				00000100 // header<> length 256, at offset 88
				aabbccdd`),
			structure: "datagram.sample[0].flow_sample.record[0].sampled_header", offset: 88, err: ErrShort,
			needFlow: Format(0, 1),
		},
		{
			name: "known record longer than its contents", data: hexData(header + `
				00000001 // samples<>
				00000001 // flow_sample
				0000003c // length 60
				` + flowSampleHead + `
				00000001 // flow_records<>
				000003e9 // data_format extended_switch
				00000014 // length 20 (extended_switch is 16)
				00000064 // src_vlan
				00000000 // src_priority
				000000c8 // dst_vlan
				00000000 // dst_priority
				00000000 // left over at offset 92`),
			structure: "datagram.sample[0].flow_sample.record[0].extended_switch", offset: 92, err: ErrLength,
			needFlow: Format(0, 1001),
		},
		{
			name: "bad next_hop address type", data: hexData(header + `
				00000001 // samples<>
				00000001 // flow_sample
				00000034 // length 52
				` + flowSampleHead + `
				00000001 // flow_records<>
				000003ea // data_format extended_router
				0000000c // length 12
				00000007 // next_hop address type 7, at offset 76
				0a090909
				00000018`),
			structure: "datagram.sample[0].flow_sample.record[0].extended_router", offset: 76, err: ErrBadValue,
			needFlow: Format(0, 1002),
		},
		{
			name: "hostname over string<64>", data: hexData(header + `
				00000001 // samples<>
				00000002 // counters_sample
				0000006c // length 108
				00000001 // sequence_number
				02000001 // source_id 2:1
				00000001 // counter_records<>
				000007d0 // data_format host_descr
				00000058 // length 88
				00000041 // hostname length 65, at offset 56
				61616161616161616161616161616161 61616161616161616161616161616161
				61616161616161616161616161616161 61616161616161616161616161616161
				61000000 // 65th byte and padding
				00000000 // uuid<16> (empty)
				00000000 // machine_type
				00000000 // os_name
				00000000 // os_release<32> (empty)`),
			structure: "datagram.sample[0].counters_sample.record[0].host_descr", offset: 56, err: ErrTooLong,
			needCounter: Format(0, 2000),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := flowRecords[tc.needFlow]; tc.needFlow != 0 && !ok {
				t.Fatalf("flow record %s is not registered", tc.needFlow)
			}
			if _, ok := counterRecords[tc.needCounter]; tc.needCounter != 0 && !ok {
				t.Fatalf("counter record %s is not registered", tc.needCounter)
			}
			d, err := Decode(tc.data(t))
			if err == nil {
				t.Fatalf("accepted: %+v", d)
			}
			if d != nil {
				t.Errorf("returned a datagram with the error %v", err)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v is not a *DecodeError", err, err)
			}
			if de.Structure != tc.structure || de.Offset != tc.offset || !errors.Is(err, tc.err) {
				t.Errorf("got  %s at %d (%v)\nwant %s at %d (%v)", de.Structure, de.Offset, de.Err, tc.structure, tc.offset, tc.err)
			}
		})
	}
}

// TestReaderRejects checks the reader's own strictness, independent of
// which record types are registered.
func TestReaderRejects(t *testing.T) {
	cases := []struct {
		name   string
		data   string
		read   func(r *reader)
		offset int
		err    error
	}{
		{"opaque padding not zero", `00000003 61626300 00000001 61000001`, func(r *reader) { r.opaque(0); r.opaque(0) }, 13, ErrBadPadding}, // the padding starts at 13
		{"string over its maximum", `00000005 6162636465000000`, func(r *reader) { r.string(4) }, 0, ErrTooLong},
		{"opaque past the end", `00000009 61626364`, func(r *reader) { r.opaque(0) }, 0, ErrShort},
		{"mac padding not zero", `00000000 11223344 55660100`, func(r *reader) { r.uint32(); r.mac() }, 10, ErrBadPadding},
		{"array count over the bytes left", `00000003 00000000 00000000`, func(r *reader) { r.count(4) }, 0, ErrShort},
		{"address type 3", `00000003 0a000001`, func(r *reader) { r.address() }, 0, ErrBadValue},
		{"IPv6 address cut", `00000002 20010db8`, func(r *reader) { r.address() }, 4, ErrShort},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newReader(unhex(t, tc.data), "test")
			tc.read(r)
			var de *DecodeError
			if !errors.As(r.err, &de) {
				t.Fatalf("error %v is not a *DecodeError", r.err)
			}
			if de.Structure != "test" || de.Offset != tc.offset || !errors.Is(r.err, tc.err) {
				t.Errorf("got %s at %d (%v), want offset %d (%v)", de.Structure, de.Offset, de.Err, tc.offset, tc.err)
			}
		})
	}
}
