package sflow

import (
	"bytes"
	"errors"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"
)

// flowTransitGolden is testdata/flow_transit.bin, written field by field
// from the layouts of extended_egress_queue, extended_queue and
// extended_transit (flow_transit.go: hsflowd's sflow.h, sflowtool's
// readExtendedEgressQueue/QueueDepth/TransitDelay), not produced by this
// package. The records are in the order of sflowtool's example output in
// the sFlow blog's "Transit delay and queueing" (1036, 1040, 1039).
const flowTransitGolden = `
	00000005          // version 5
	00000001 c6120001 // agent address IPv4 198.18.0.1
	00000000          // sub_agent_id 0
	00000016          // sequence_number 22
	00092824          // uptime 600100 ms
	00000002          // 2 samples

	00000001          // sample_type 0:1 flow_sample
	00000044          // length 68
	00000004          // sequence_number 4
	00000005          // source_id 0:5
	00001000          // sampling_rate 4096
	00064000          // sample_pool 409600
	00000000          // drops 0
	00000003          // input ifIndex 3
	00000005          // output ifIndex 5
	00000003          // 3 records
	0000040c 00000004 //   0:1036 extended_egress_queue, length 4
	00000007          //     queue 7
	00000410 00000004 //   0:1040 extended_queue, length 4
	00ad4000          //     depth 11354112 bytes
	0000040f 00000004 //   0:1039 extended_transit, length 4
	000ccfec          //     delay 839660 ns

	00000001          // sample_type 0:1 flow_sample
	00000044          // length 68
	00000005          // sequence_number 5
	00000005          // source_id 0:5
	00001000          // sampling_rate 4096
	00065000          // sample_pool 413696
	00000002          // drops 2
	00000003          // input ifIndex 3
	00000005          // output ifIndex 5
	00000003          // 3 records
	0000040c 00000004 //   0:1036 extended_egress_queue, length 4
	00000000          //     queue 0
	00000410 00000004 //   0:1040 extended_queue, length 4
	00000000          //     depth 0 (empty queue)
	0000040f 00000004 //   0:1039 extended_transit, length 4
	ffffffff          //     delay >= 0xffffffff ns (saturated)
`

// flowTransitDatagram is the datagram of flowTransitGolden, built from
// this package's types.
func flowTransitDatagram() *Datagram {
	return &Datagram{
		AgentAddress: netip.MustParseAddr("198.18.0.1"), SequenceNumber: 22, Uptime: 600100,
		Samples: []Sample{
			&FlowSample{SequenceNumber: 4, Source: DataSource{SourceIfIndex, 5}, SamplingRate: 4096, SamplePool: 409600,
				Input: IfIndex(3), Output: IfIndex(5), Records: []Record{
					&ExtendedEgressQueue{Queue: 7}, &ExtendedQueue{Depth: 11354112}, &ExtendedTransit{Delay: 839660},
				}},
			&FlowSample{SequenceNumber: 5, Source: DataSource{SourceIfIndex, 5}, SamplingRate: 4096, SamplePool: 413696, Drops: 2,
				Input: IfIndex(3), Output: IfIndex(5), Records: []Record{
					&ExtendedEgressQueue{Queue: 0}, &ExtendedQueue{Depth: 0}, &ExtendedTransit{Delay: math.MaxUint32},
				}},
		},
	}
}

// TestFlowTransitGolden: the annotated bytes, testdata/flow_transit.bin and
// our encoding are identical, and our decoder reads the file back.
func TestFlowTransitGolden(t *testing.T) {
	checkGoldenDatagram(t, "flow_transit", flowTransitGolden, flowTransitDatagram())
}

// TestFlowTransitTestdata compares our decoding of flow_transit.bin with
// sflowtool's reading, record keys in both directions.
func TestFlowTransitTestdata(t *testing.T) {
	d := checkAgainstFlowTool(t, "flow_transit")
	checkExtRecordsAgainstSflowtool(t, "flow_transit", d)
}

// TestFlowTransitRecordGolden: record bodies against hand-written XDR, and
// the saturating setters.
func TestFlowTransitRecordGolden(t *testing.T) {
	checkRecordGolden(t, &ExtendedTransit{Delay: 10_000_000}, unhex(t, `00989680 // delay 10 ms in ns`), true)
	checkRecordGolden(t, &ExtendedQueue{Depth: 3000}, unhex(t, `00000bb8 // depth 3000 bytes`), true)
	checkRecordGolden(t, &ExtendedEgressQueue{Queue: 7}, unhex(t, `00000007 // queue 7`), true)

	var tr ExtendedTransit
	for _, c := range []struct {
		d    time.Duration
		want uint32
	}{{10 * time.Millisecond, 10_000_000}, {0, 0}, {-time.Second, 0}, {math.MaxUint32, math.MaxUint32},
		{math.MaxUint32 + 1, math.MaxUint32}, {time.Hour, math.MaxUint32}} {
		if tr.SetDelay(c.d); tr.Delay != c.want {
			t.Errorf("SetDelay(%v) = %d, want %d", c.d, tr.Delay, c.want)
		}
	}
	var q ExtendedQueue
	for _, c := range []struct {
		bytes uint64
		want  uint32
	}{{0, 0}, {1500, 1500}, {math.MaxUint32, math.MaxUint32}, {1 << 40, math.MaxUint32}} {
		if q.SetDepth(c.bytes); q.Depth != c.want {
			t.Errorf("SetDepth(%d) = %d, want %d", c.bytes, q.Depth, c.want)
		}
	}
}

// TestFlowTransitDecodeErrors: a body that is not one word is rejected.
func TestFlowTransitDecodeErrors(t *testing.T) {
	for _, f := range []DataFormat{FormatExtendedEgressQueue, FormatExtendedTransit, FormatExtendedQueue} {
		for body, want := range map[string]error{"": ErrShort, "00000001 00000002": ErrLength} {
			_, err := Decode(flowDatagramWithBody(f, unhex(t, body)))
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, want) || !strings.Contains(de.Structure, "record[0]") {
				t.Errorf("%s body %q: got %v, want a *DecodeError naming record[0] wrapping %v", f, body, err, want)
			}
		}
	}
}

// TestFlowTransitGoflow2: goflow2 v2.2.6 decodes extended_egress_queue by
// value; extended_queue and extended_transit it keeps raw (framing and
// body bytes checked).
func TestFlowTransitGoflow2(t *testing.T) {
	want := flowTransitDatagram()
	p := goflowDecode(t, readTestdata(t, "flow_transit.bin"))
	if len(p.Samples) != 2 {
		t.Fatalf("goflow2 read %d samples", len(p.Samples))
	}
	for i, s := range want.Samples {
		fs := s.(*FlowSample)
		g, ok := p.Samples[i].(goflow.FlowSample)
		if !ok || g.SamplePool != fs.SamplePool || g.Drops != fs.Drops || len(g.Records) != len(fs.Records) {
			t.Fatalf("sample %d: goflow2 %+v", i, p.Samples[i])
		}
		for j, rec := range fs.Records {
			gr := g.Records[j]
			body := rec.AppendXDR(nil)
			if gr.Header.DataFormat != uint32(rec.Format()) || gr.Header.Length != 4 {
				t.Errorf("sample %d record %d: goflow2 header %+v, ours %s", i, j, gr.Header, rec.Format())
			}
			if q, ok := rec.(*ExtendedEgressQueue); ok {
				if gq, ok := gr.Data.(goflow.EgressQueue); !ok || gq.Queue != q.Queue {
					t.Errorf("extended_egress_queue: goflow2 %+v, ours %d", gr.Data, q.Queue)
				}
				continue
			}
			if raw, ok := gr.Data.(goflow.RawRecord); !ok || !bytes.Equal(raw.Data, body) {
				t.Errorf("sample %d %s: goflow2 kept %+v, want the raw body %x", i, rec.Name(), gr.Data, body)
			}
		}
	}
}

// TestFlowTransitTshark: Wireshark 4.0's sFlow dissector knows none of
// 1036, 1039, 1040 and reads an unknown record's body as the next records
// (see TestFlowTunnelTshark), so it can only confirm the first record's
// format and length of each sample.
func TestFlowTransitTshark(t *testing.T) {
	got := tsharkFields(t, readTestdata(t, "flow_transit.bin"), "sflow.flow_sample.sample_pool", "sflow_245.flow_record_format",
		"sflow_5.flow_data_length")
	if g := strings.Join(got["sflow.flow_sample.sample_pool"], ","); g != "409600,413696" {
		t.Errorf("tshark sample pools %q", g)
	}
	if f, l := got["sflow_245.flow_record_format"], got["sflow_5.flow_data_length"]; len(f) == 0 || f[0] != "1036" || len(l) == 0 || l[0] != "4" {
		t.Errorf("tshark flow record formats %q, lengths %q: want 1036 of 4 bytes first", f, l)
	}
}

// TestFlowTransitAppendNoAlloc: encoding a flow sample with the three
// records does not allocate.
func TestFlowTransitAppendNoAlloc(t *testing.T) {
	var s Sample = flowTransitDatagram().Samples[0]
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { buf = AppendSample(buf[:0], s) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
