package sflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"
)

// discardToolSample is sflowtool's reading of one discarded_packet
// sample (sflowtool.c readDiscardSample): values are strings, records
// are "elements" whose keys carry the "discarded_" prefix.
type discardToolSample struct {
	Tag      string              `json:"sampleType_tag"`
	Seq      string              `json:"sampleSequenceNo"`
	SourceID string              `json:"sourceId"`
	Drops    string              `json:"dropEvents"`
	Input    string              `json:"inputPort"`
	Output   string              `json:"outputPort"`
	Code     string              `json:"discardCode"`
	Reason   string              `json:"discardReason"`
	Elements []map[string]string `json:"elements"`
}

// discardToolView renders a record carried in a discarded_packet under
// sflowtool's keys (without the "discarded_" prefix).
func discardToolView(t *testing.T, rec Record) (map[string]string, bool) {
	switch r := rec.(type) {
	case *ExtendedFunction:
		return map[string]string{"extendedType": "function", "symbol": r.Symbol}, true
	case *ExtendedLinuxDropReason:
		return map[string]string{"extendedType": "linux_reason", "linux_drop_reason": r.Reason}, true
	case *ExtendedEgressQueue:
		return map[string]string{"extendedType": "egress_queue", "egress_queue_id": fmt.Sprint(r.Queue)}, true
	}
	return flowToolView(t, rec)
}

// TestDiscardTestdata: the golden discard.bin decodes field by field equal
// to the reference decoder's reading and re-encodes byte for byte.
func TestDiscardTestdata(t *testing.T) {
	wire := readTestdata(t, "discard.bin")
	d, err := Decode(wire)
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Agent   string              `json:"agent"`
		Seq     string              `json:"packetSequenceNo"`
		Uptime  string              `json:"sysUpTime"`
		Samples []discardToolSample `json:"samples"`
	}
	if err := json.Unmarshal(readTestdata(t, "discard.sflowtool.json"), &ref); err != nil {
		t.Fatal(err)
	}
	if d.AgentAddress.String() != ref.Agent || fmt.Sprint(d.SequenceNumber) != ref.Seq || fmt.Sprint(d.Uptime) != ref.Uptime {
		t.Errorf("datagram header %v/%d/%d, sflowtool %+v", d.AgentAddress, d.SequenceNumber, d.Uptime, ref)
	}
	if len(d.Samples) != len(ref.Samples) || len(ref.Samples) != 2 {
		t.Fatalf("%d samples, sflowtool %d", len(d.Samples), len(ref.Samples))
	}
	for i, s := range d.Samples {
		rs := ref.Samples[i]
		dp, ok := s.(*DiscardedPacket)
		if !ok {
			t.Fatalf("sample[%d] is %T", i, s)
		}
		got := []string{dp.SampleFormat().String(), fmt.Sprint(dp.SequenceNumber), dp.Source.String(), fmt.Sprint(dp.Drops),
			fmt.Sprint(dp.Input), fmt.Sprint(dp.Output), fmt.Sprint(uint32(dp.Reason)), dp.Reason.String()}
		want := []string{rs.Tag, rs.Seq, rs.SourceID, rs.Drops, rs.Input, rs.Output, rs.Code, rs.Reason}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("sample[%d] tag/seq/source/drops/in/out/code/reason = %v, sflowtool %v", i, got, want)
		}
		if len(dp.Records) != len(rs.Elements) {
			t.Fatalf("sample[%d]: %d records, sflowtool %d", i, len(dp.Records), len(rs.Elements))
		}
		for j, rec := range dp.Records {
			el := rs.Elements[j]
			if rec.Format().String() != el["discarded_flowBlock_tag"] {
				t.Errorf("sample[%d].record[%d] format %s, sflowtool %s", i, j, rec.Format(), el["discarded_flowBlock_tag"])
				continue
			}
			view, ok := discardToolView(t, rec)
			if !ok {
				t.Fatalf("sample[%d].record[%d] %s (%T) not compared", i, j, rec.Format(), rec)
			}
			for k, v := range view {
				if el["discarded_"+k] != v {
					t.Errorf("sample[%d].%s.%s = %q, sflowtool %q", i, rec.Name(), k, v, el["discarded_"+k])
				}
			}
		}
	}
	if again := d.AppendXDR(nil); !bytes.Equal(again, wire) {
		t.Errorf("re-encoding differs from discard.bin:\n got %x\nwant %x", again, wire)
	}
}

// TestDropReasonNames: the names are in the spec's order, with the two
// entries the reference decoder's header misnumbers at their place in the
// sequence (sflow_drops.md note).
func TestDropReasonNames(t *testing.T) {
	for code, name := range map[DropReason]string{0: "net_unreachable", 3: "port_unreachable", 15: "precedence_cutoff",
		256: "unknown", 258: "acl", 259: "no_buffer_space", 261: "traffic_shaping", 316: "udp_parsing",
		332: "dev_hdr", 366: "tc_egress", 371: "socket_filter", 372: "bgp_flowspec", 16: "16", 373: "373"} {
		if got := code.String(); got != name {
			t.Errorf("%d: %q, want %q", code, got, name)
		}
		if c, ok := DropReasonByName(name); ok != (name[0] < '0' || name[0] > '9') || (ok && c != code) {
			t.Errorf("DropReasonByName(%q) = %d, %v", name, c, ok)
		}
	}
}

// discardDatagram encodes a datagram of two discarded_packet samples with
// every record this package defines for them.
func discardDatagram(t *testing.T) ([]byte, []*DiscardedPacket) {
	frame := testFrame()
	samples := []*DiscardedPacket{
		{SequenceNumber: 5, Drops: 3, Input: 4, Reason: DropACL, Records: []Record{
			&SampledHeader{Protocol: HeaderProtocolEthernet, FrameLength: 68, Stripped: 4, Header: frame[:61]},
			&ExtendedFunction{Symbol: "nft_do_chain"},
			&ExtendedLinuxDropReason{Reason: "NETFILTER_DROP"},
		}},
		{SequenceNumber: 6, Source: DataSource{0, 0}, Drops: 7, Input: 4, Output: 9, Reason: DropNoBufferSpace, Records: []Record{
			&SampledHeader{Protocol: HeaderProtocolEthernet, FrameLength: 68, Stripped: 4, Header: frame},
			&ExtendedEgressQueue{Queue: 2},
			&ExtendedFunction{Symbol: "__dev_queue_xmit"},
			&ExtendedLinuxDropReason{Reason: "QDISC_DROP"},
		}},
	}
	w, err := NewDatagramWriter(netip.MustParseAddr("198.18.0.1"), 1, DefaultMaxDatagramSize)
	if err != nil {
		t.Fatal(err)
	}
	w.Begin(9, 1000)
	for _, s := range samples {
		if err := w.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return append([]byte(nil), w.Bytes()...), samples
}

// TestDiscardGoflow2: goflow2 (an independent decoder) reads our
// discarded_packet samples with the values we wrote. goflow2 v2.2.6 decodes
// extended_egress_queue and extended_function; extended_linux_drop_reason
// it keeps raw, and we check its bytes.
func TestDiscardGoflow2(t *testing.T) {
	wire, samples := discardDatagram(t)
	p := goflowDecode(t, wire)
	if len(p.Samples) != len(samples) {
		t.Fatalf("goflow2 read %d samples", len(p.Samples))
	}
	for i, ours := range samples {
		g, ok := p.Samples[i].(goflow.DropSample)
		if !ok {
			t.Fatalf("sample %d: goflow2 %T, want DropSample", i, p.Samples[i])
		}
		if g.Header.Format != 5 || g.Header.SampleSequenceNumber != ours.SequenceNumber || g.Header.SourceIdType != ours.Source.Type ||
			g.Header.SourceIdValue != ours.Source.Index || g.Drops != ours.Drops || g.Input != ours.Input ||
			g.Output != ours.Output || g.Reason != uint32(ours.Reason) || len(g.Records) != len(ours.Records) {
			t.Fatalf("sample %d: goflow2 %+v, ours %+v", i, g, ours)
		}
		for j, gr := range g.Records {
			if gr.Header.DataFormat != uint32(ours.Records[j].Format()) {
				t.Errorf("sample %d record %d: goflow2 format %d, ours %s", i, j, gr.Header.DataFormat, ours.Records[j].Format())
			}
			switch r := ours.Records[j].(type) {
			case *ExtendedFunction:
				if f, ok := gr.Data.(goflow.ExtendedFunction); !ok || f.Symbol != r.Symbol {
					t.Errorf("extended_function: goflow2 %+v, ours %q", gr.Data, r.Symbol)
				}
			case *ExtendedEgressQueue:
				if q, ok := gr.Data.(goflow.EgressQueue); !ok || q.Queue != r.Queue {
					t.Errorf("extended_egress_queue: goflow2 %+v, ours %d", gr.Data, r.Queue)
				}
			case *ExtendedLinuxDropReason:
				raw, ok := gr.Data.(goflow.RawRecord)
				if !ok || !bytes.Equal(raw.Data, appendString(nil, r.Reason, 0)) {
					t.Errorf("extended_linux_drop_reason: goflow2 %+v", gr.Data)
				}
			default:
				checkGoflowFlowRecord(t, r, gr.Data)
			}
		}
	}
	// And our own decoder gives back the same samples.
	d, err := Decode(wire)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range d.Samples {
		if fmt.Sprintf("%+v", s) == "" || !bytes.Equal(AppendSample(nil, s), AppendSample(nil, samples[i])) {
			t.Errorf("sample %d does not round-trip", i)
		}
	}
}

// TestDiscardRecordGolden: record bodies against hand-written XDR.
func TestDiscardRecordGolden(t *testing.T) {
	checkRecordGolden(t, &ExtendedEgressQueue{Queue: 3}, unhex(t, `00000003`), true)
	checkRecordGolden(t, &ExtendedFunction{Symbol: "kfree"}, unhex(t, `00000005 6b66726565 000000`), true)
	checkRecordGolden(t, &ExtendedLinuxDropReason{Reason: "NO_SOCKET"}, unhex(t, `00000009 4e4f5f534f434b4554 000000`), true)
	// Longer than the decoder's cap: truncated to 64 bytes.
	long := strings.Repeat("x", 70)
	if got := (&ExtendedFunction{Symbol: long}).AppendXDR(nil); len(got) != 4+64 {
		t.Errorf("70-byte symbol encoded in %d bytes, want 4+64", len(got))
	}
}

// TestDiscardStrict: malformed discarded_packet samples are rejected with
// the structure named.
func TestDiscardStrict(t *testing.T) {
	good, _ := discardDatagram(t)
	if _, err := Decode(good); err != nil {
		t.Fatal(err)
	}
	body := func(recs string) []byte {
		b := unhex(t, `00000005 00000001 c6120001 00000000 00000001 00000001 00000001 // header: v5, agent, sub, seq, uptime, 1 sample
			00000005`) // discarded_packet
		s := unhex(t, `00000001 00000000 00000000 00000000 00000004 00000000 00000102`+recs)
		b = appendUint32(b, uint32(len(s)))
		return append(b, s...)
	}
	cases := []struct {
		name, recs string
		want       error
	}{
		{"symbol longer than 64", `00000001 0000040e 00000048 00000044` + strings.Repeat("41", 68), ErrTooLong},
		{"reason string past record", `00000001 00000412 00000008 00000010 41414141`, ErrShort},
		{"queue with extra word", `00000001 0000040c 00000008 00000001 00000002`, ErrLength},
		{"records count forged", `40000000`, ErrShort},
		{"bad padding", `00000001 00000412 00000008 00000001 41010000`, ErrBadPadding},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(body(c.recs))
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, c.want) {
				t.Fatalf("got %v, want a *DecodeError wrapping %v", err, c.want)
			}
			if !strings.Contains(de.Structure, "discarded_packet") {
				t.Errorf("error does not name the sample: %v", err)
			}
		})
	}
	// Truncated sample header.
	short := body("00000000")
	short = short[:len(short)-12]
	if _, err := Decode(short); err == nil {
		t.Error("truncated discarded_packet accepted")
	}
}

// TestDiscardAppendNoAlloc: encoding a discarded_packet into a buffer
// with room does not allocate (the agent's hot path).
func TestDiscardAppendNoAlloc(t *testing.T) {
	_, samples := discardDatagram(t)
	buf := make([]byte, 0, 2048)
	var s Sample = samples[1]
	if n := testing.AllocsPerRun(100, func() { buf = AppendSample(buf[:0], s) }); n != 0 {
		t.Errorf("%v allocations per discarded_packet", n)
	}
}
