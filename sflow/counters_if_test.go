package sflow

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"testing"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"
)

func TestIfCountersGolden(t *testing.T) {
	rec := &IfCounters{
		IfIndex:            7,
		IfType:             6,
		IfSpeed:            25_000_000_000,
		IfDirection:        IfDirectionFullDuplex,
		IfStatus:           IfStatusAdminUp | IfStatusOperUp,
		IfInOctets:         0x0102030405060708,
		IfInUcastPkts:      0x11,
		IfInMulticastPkts:  0x12,
		IfInBroadcastPkts:  0x13,
		IfInDiscards:       0x14,
		IfInErrors:         0x15,
		IfInUnknownProtos:  0x16,
		IfOutOctets:        0x1112131415161718,
		IfOutUcastPkts:     0x21,
		IfOutMulticastPkts: 0x22,
		IfOutBroadcastPkts: 0x23,
		IfOutDiscards:      0x24,
		IfOutErrors:        0x25,
		IfPromiscuousMode:  IfPromiscuousFalse,
	}
	want := unhex(t, `
		00000007          // ifIndex
		00000006          // ifType ethernetCsmacd
		00000005 d21dba00 // ifSpeed 25 000 000 000
		00000001          // ifDirection full-duplex
		00000003          // ifStatus admin up (bit 0) | oper up (bit 1)
		01020304 05060708 // ifInOctets
		00000011          // ifInUcastPkts
		00000012          // ifInMulticastPkts
		00000013          // ifInBroadcastPkts
		00000014          // ifInDiscards
		00000015          // ifInErrors
		00000016          // ifInUnknownProtos
		11121314 15161718 // ifOutOctets
		00000021          // ifOutUcastPkts
		00000022          // ifOutMulticastPkts
		00000023          // ifOutBroadcastPkts
		00000024          // ifOutDiscards
		00000025          // ifOutErrors
		00000002          // ifPromiscuousMode false(2)`)
	checkRecordGolden(t, rec, want, false)
}

func TestIfCountersUnavailableGolden(t *testing.T) {
	// An interface that keeps no counters and whose speed, direction and
	// status are unknown: counters are the maximum value, the integers 0
	// (spec "Enterprise = 0 refers to standard sFlow structures").
	rec := &IfCounters{IfIndex: 9, IfType: 6}
	rec.SetUnavailable()
	want := unhex(t, `
		00000009          // ifIndex
		00000006          // ifType
		00000000 00000000 // ifSpeed unknown
		00000000          // ifDirection unknown
		00000000          // ifStatus admin down, oper down
		ffffffff ffffffff // ifInOctets not available
		ffffffff          // ifInUcastPkts
		ffffffff          // ifInMulticastPkts
		ffffffff          // ifInBroadcastPkts
		ffffffff          // ifInDiscards
		ffffffff          // ifInErrors
		ffffffff          // ifInUnknownProtos
		ffffffff ffffffff // ifOutOctets
		ffffffff          // ifOutUcastPkts
		ffffffff          // ifOutMulticastPkts
		ffffffff          // ifOutBroadcastPkts
		ffffffff          // ifOutDiscards
		ffffffff          // ifOutErrors
		00000000          // ifPromiscuousMode unknown`)
	checkRecordGolden(t, rec, want, false)
}

func TestIfStatusBits(t *testing.T) {
	for _, c := range []struct {
		admin, oper bool
		want        uint32
	}{{false, false, 0}, {true, false, 1}, {false, true, 2}, {true, true, 3}} {
		if got := IfStatusBits(c.admin, c.oper); got != c.want {
			t.Errorf("IfStatusBits(%v, %v) = %d, want %d", c.admin, c.oper, got, c.want)
		}
	}
}

func TestEthernetCountersGolden(t *testing.T) {
	rec := &EthernetCounters{
		Dot3StatsAlignmentErrors:           0xa1,
		Dot3StatsFCSErrors:                 0xa2,
		Dot3StatsSingleCollisionFrames:     0xa3,
		Dot3StatsMultipleCollisionFrames:   0xa4,
		Dot3StatsSQETestErrors:             0xa5,
		Dot3StatsDeferredTransmissions:     0xa6,
		Dot3StatsLateCollisions:            0xa7,
		Dot3StatsExcessiveCollisions:       0xa8,
		Dot3StatsInternalMacTransmitErrors: 0xa9,
		Dot3StatsCarrierSenseErrors:        0xaa,
		Dot3StatsFrameTooLongs:             0xab,
		Dot3StatsInternalMacReceiveErrors:  0xac,
		Dot3StatsSymbolErrors:              0x010000ad,
	}
	want := unhex(t, `
		000000a1 // dot3StatsAlignmentErrors
		000000a2 // dot3StatsFCSErrors
		000000a3 // dot3StatsSingleCollisionFrames
		000000a4 // dot3StatsMultipleCollisionFrames
		000000a5 // dot3StatsSQETestErrors
		000000a6 // dot3StatsDeferredTransmissions
		000000a7 // dot3StatsLateCollisions
		000000a8 // dot3StatsExcessiveCollisions
		000000a9 // dot3StatsInternalMacTransmitErrors
		000000aa // dot3StatsCarrierSenseErrors
		000000ab // dot3StatsFrameTooLongs
		000000ac // dot3StatsInternalMacReceiveErrors
		010000ad // dot3StatsSymbolErrors`)
	checkRecordGolden(t, rec, want, false)

	var none EthernetCounters
	none.SetUnavailable()
	wantNone := bytes.Repeat([]byte{0xff}, 13*4) // 13 counters, all not available
	checkRecordGolden(t, &none, wantNone, false)
}

func TestIfCountersDecodeRejectsWrongLength(t *testing.T) {
	body := (&IfCounters{IfIndex: 1}).AppendXDR(nil)
	for _, n := range []int{len(body) - 4, len(body) + 4} {
		b := make([]byte, n)
		copy(b, body)
		if _, err := Decode(ctrCounterDatagram(FormatIfCounters, b)); err == nil {
			t.Errorf("if_counters of %d bytes (want 88) decoded without error", n)
		} else {
			t.Logf("%d bytes: %v", n, err)
		}
	}
}

func TestCountersIfTestdata(t *testing.T) {
	ctrCheckTestdata(t, "counters_if")
}

// TestCountersExpandedTestdata checks the expanded counters sample of
// expanded.bin (its flow sample belongs to the flow record tests).
func TestCountersExpandedTestdata(t *testing.T) {
	d := ctrCheckTestdata(t, "expanded")
	var n int
	for _, s := range d.Samples {
		if cs, ok := s.(*CounterSample); ok {
			n++
			if !cs.Expanded || cs.SampleFormat() != FormatCounterSampleExpanded {
				t.Errorf("counters sample decoded as compact: %+v", cs)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d counters samples in expanded.bin, want 1", n)
	}
}

// ctrCounterDatagram wraps a raw counter record body of format f in a
// datagram with one counters sample, for decoder error tests.
func ctrCounterDatagram(f DataFormat, body []byte) []byte {
	s := &CounterSample{SequenceNumber: 1, Source: DataSource{0, 1}, Records: []Record{&UnknownRecord{DataFormat: f, Data: body}}}
	d := &Datagram{AgentAddress: netip.MustParseAddr("198.18.0.1"), SequenceNumber: 1, Samples: []Sample{s}}
	return d.AppendXDR(nil)
}

// ctrCheckTestdata decodes the shared golden datagram NAME.bin, compares
// every counters sample and counter record field with the reference
// decoder's reading in NAME.sflowtool.json, and checks that re-encoding
// reproduces the file byte for byte.
func ctrCheckTestdata(t *testing.T, name string) *Datagram {
	t.Helper()
	raw := readTestdata(t, name+".bin")
	d, err := Decode(raw)
	if err != nil {
		t.Fatalf("decoding %s.bin: %v", name, err)
	}
	// Re-encode each counters sample and compare it with its bytes in the
	// file, located by walking the datagram framing by hand (flow samples
	// are the flow record tests' business).
	rawSamples := ctrRawSamples(t, raw)
	if len(rawSamples) != len(d.Samples) {
		t.Fatalf("%d samples decoded, %d in the file", len(d.Samples), len(rawSamples))
	}
	allCounters := true
	for i, s := range d.Samples {
		if _, ok := s.(*CounterSample); !ok {
			allCounters = false
			continue
		}
		if again := AppendSample(nil, s); !bytes.Equal(again, rawSamples[i]) {
			t.Errorf("re-encoding sample %d of %s.bin differs:\n got %x\nwant %x", i, name, again, rawSamples[i])
		}
	}
	if again := d.AppendXDR(nil); allCounters && !bytes.Equal(again, raw) {
		t.Errorf("re-encoding %s.bin differs:\n got %x\nwant %x", name, again, raw)
	}

	var ref map[string]any
	if err := json.Unmarshal(readTestdata(t, name+".sflowtool.json"), &ref); err != nil {
		t.Fatalf("%s.sflowtool.json: %v", name, err)
	}
	eq := func(what, got string, want any) {
		t.Helper()
		if w, ok := want.(string); !ok || got != w {
			t.Errorf("%s: ours %q, sflowtool %v", what, got, want)
		}
	}
	eq("datagramVersion", "5", ref["datagramVersion"])
	if a, err := netip.ParseAddr(fmt.Sprint(ref["agent"])); err != nil || a != d.AgentAddress {
		t.Errorf("agent: ours %v, sflowtool %v", d.AgentAddress, ref["agent"])
	}
	eq("agentSubId", ctrU(d.SubAgentID), ref["agentSubId"])
	eq("packetSequenceNo", ctrU(d.SequenceNumber), ref["packetSequenceNo"])
	eq("sysUpTime", ctrU(d.Uptime), ref["sysUpTime"])
	eq("samplesInPacket", strconv.Itoa(len(d.Samples)), ref["samplesInPacket"])
	refSamples, _ := ref["samples"].([]any)
	if len(refSamples) != len(d.Samples) {
		t.Fatalf("%d samples, sflowtool %d", len(d.Samples), len(refSamples))
	}
	for i, s := range d.Samples {
		rs, _ := refSamples[i].(map[string]any)
		p := fmt.Sprintf("sample[%d].", i)
		eq(p+"sampleType_tag", s.SampleFormat().String(), rs["sampleType_tag"])
		cs, ok := s.(*CounterSample)
		if !ok {
			continue
		}
		eq(p+"sampleSequenceNo", ctrU(cs.SequenceNumber), rs["sampleSequenceNo"])
		eq(p+"sourceId", cs.Source.String(), rs["sourceId"])
		elems, _ := rs["elements"].([]any)
		if len(elems) != len(cs.Records) {
			t.Errorf("%s%d records, sflowtool %d", p, len(cs.Records), len(elems))
			continue
		}
		for j, rec := range cs.Records {
			rp := fmt.Sprintf("%srecord[%d].%s", p, j, rec.Name())
			elem, _ := elems[j].(map[string]any)
			refView := map[string]string{}
			ctrFlatten(refView, "", elem)
			eq(rp+".counterBlock_tag", rec.Format().String(), refView["counterBlock_tag"])
			delete(refView, "counterBlock_tag")
			ours := ctrSflowtoolView(rec)
			if ours == nil {
				t.Errorf("%s: no sflowtool view for %T", rp, rec)
				continue
			}
			ctrCompareViews(t, rp, ours, refView)
		}
	}
	return d
}

// ctrRawSamples splits a datagram into its sample_record byte ranges
// (sample_type, length and sample_data), reading only the framing words.
func ctrRawSamples(t *testing.T, raw []byte) [][]byte {
	t.Helper()
	word := func(off int) int {
		if off+4 > len(raw) {
			t.Fatalf("datagram framing truncated at %d", off)
		}
		return int(binary.BigEndian.Uint32(raw[off:]))
	}
	off := 8 // version, agent address type
	switch word(4) {
	case 1:
		off += 4
	case 2:
		off += 16
	}
	off += 12 // sub_agent_id, sequence_number, uptime
	n := word(off)
	off += 4
	var out [][]byte
	for i := 0; i < n; i++ {
		end := off + 8 + word(off+4)
		if end > len(raw) {
			t.Fatalf("sample %d runs past the datagram", i)
		}
		out = append(out, raw[off:end])
		off = end
	}
	return out
}

// ctrCompareViews checks that two flattened field maps hold the same keys
// with the same values.
func ctrCompareViews(t *testing.T, what string, ours, ref map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(ref))
	for k := range ref {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, ok := ours[k]
		if !ok {
			t.Errorf("%s: sflowtool field %s=%q not produced by our decoding", what, k, ref[k])
			continue
		}
		if v != ref[k] {
			t.Errorf("%s.%s: ours %q, sflowtool %q", what, k, v, ref[k])
		}
	}
	for k, v := range ours {
		if _, ok := ref[k]; !ok {
			t.Errorf("%s: our field %s=%q missing from sflowtool's reading", what, k, v)
		}
	}
}

// ctrFlatten flattens sflowtool's JSON (strings, objects and arrays) into
// "a[0].b" keys.
func ctrFlatten(out map[string]string, prefix string, v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			ctrFlatten(out, key, e)
		}
	case []any:
		for i, e := range x {
			ctrFlatten(out, fmt.Sprintf("%s[%d]", prefix, i), e)
		}
	default:
		out[prefix] = fmt.Sprint(x)
	}
}

func ctrU[T ~uint32 | ~uint64 | ~int32](v T) string { return fmt.Sprint(v) }

// ctrSflowtoolView renders a counter record with sflowtool's field names
// and number formats (sflowtool.c readCounters_*), or nil for a record
// type it does not cover.
func ctrSflowtoolView(rec Record) map[string]string {
	switch r := rec.(type) {
	case *IfCounters:
		return map[string]string{
			"ifIndex":            ctrU(r.IfIndex),
			"networkType":        ctrU(r.IfType),
			"ifSpeed":            ctrU(r.IfSpeed),
			"ifDirection":        ctrU(r.IfDirection),
			"ifStatus":           ctrU(r.IfStatus),
			"ifInOctets":         ctrU(r.IfInOctets),
			"ifInUcastPkts":      ctrU(r.IfInUcastPkts),
			"ifInMulticastPkts":  ctrU(r.IfInMulticastPkts),
			"ifInBroadcastPkts":  ctrU(r.IfInBroadcastPkts),
			"ifInDiscards":       ctrU(r.IfInDiscards),
			"ifInErrors":         ctrU(r.IfInErrors),
			"ifInUnknownProtos":  ctrU(r.IfInUnknownProtos),
			"ifOutOctets":        ctrU(r.IfOutOctets),
			"ifOutUcastPkts":     ctrU(r.IfOutUcastPkts),
			"ifOutMulticastPkts": ctrU(r.IfOutMulticastPkts),
			"ifOutBroadcastPkts": ctrU(r.IfOutBroadcastPkts),
			"ifOutDiscards":      ctrU(r.IfOutDiscards),
			"ifOutErrors":        ctrU(r.IfOutErrors),
			"ifPromiscuousMode":  ctrU(r.IfPromiscuousMode),
		}
	case *EthernetCounters:
		return map[string]string{
			"dot3StatsAlignmentErrors":           ctrU(r.Dot3StatsAlignmentErrors),
			"dot3StatsFCSErrors":                 ctrU(r.Dot3StatsFCSErrors),
			"dot3StatsSingleCollisionFrames":     ctrU(r.Dot3StatsSingleCollisionFrames),
			"dot3StatsMultipleCollisionFrames":   ctrU(r.Dot3StatsMultipleCollisionFrames),
			"dot3StatsSQETestErrors":             ctrU(r.Dot3StatsSQETestErrors),
			"dot3StatsDeferredTransmissions":     ctrU(r.Dot3StatsDeferredTransmissions),
			"dot3StatsLateCollisions":            ctrU(r.Dot3StatsLateCollisions),
			"dot3StatsExcessiveCollisions":       ctrU(r.Dot3StatsExcessiveCollisions),
			"dot3StatsInternalMacTransmitErrors": ctrU(r.Dot3StatsInternalMacTransmitErrors),
			"dot3StatsCarrierSenseErrors":        ctrU(r.Dot3StatsCarrierSenseErrors),
			"dot3StatsFrameTooLongs":             ctrU(r.Dot3StatsFrameTooLongs),
			"dot3StatsInternalMacReceiveErrors":  ctrU(r.Dot3StatsInternalMacReceiveErrors),
			"dot3StatsSymbolErrors":              ctrU(r.Dot3StatsSymbolErrors),
		}
	}
	if v := ctrHostSflowtoolView(rec); v != nil {
		return v
	}
	if v := ctrL2SflowtoolView(rec); v != nil {
		return v
	}
	return ctrAppSflowtoolView(rec)
}

// ctrTestIf and ctrTestEth return counters with a distinct value in every
// field, so a field read from the wrong position cannot go unnoticed.
func ctrTestIf(ifIndex uint32) *IfCounters {
	return &IfCounters{
		IfIndex: ifIndex, IfType: 6, IfSpeed: 100_000_000_000, IfDirection: IfDirectionHalfDuplex,
		IfStatus: IfStatusAdminUp, IfInOctets: 1<<40 + 1, IfInUcastPkts: 101, IfInMulticastPkts: 102,
		IfInBroadcastPkts: 103, IfInDiscards: 104, IfInErrors: 105, IfInUnknownProtos: 106,
		IfOutOctets: 1<<41 + 2, IfOutUcastPkts: 201, IfOutMulticastPkts: 202, IfOutBroadcastPkts: 203,
		IfOutDiscards: 204, IfOutErrors: 205, IfPromiscuousMode: IfPromiscuousTrue,
	}
}

func ctrTestEth(base uint32) *EthernetCounters {
	e := &EthernetCounters{}
	for i, p := range e.fields() {
		*p = base + uint32(i)
	}
	return e
}

// ctrEncodedDatagram builds, with our encoder, a datagram with a compact
// counters sample holding if_counters, ethernet_counters and every host
// and application record, and a counters sample whose ifIndex data source
// does not fit in 24 bits (so it must be sent expanded, format 4).
func ctrEncodedDatagram() (*Datagram, []byte) {
	compact := &CounterSample{SequenceNumber: 77, Source: DataSource{SourceIfIndex, 12}, Records: []Record{ctrTestIf(12), ctrTestEth(1000)}}
	compact.Records = append(compact.Records, ctrHostTestRecords()...)
	compact.Records = append(compact.Records, ctrAppTestRecords()...)
	big := uint32(1<<24 + 5)
	expanded := &CounterSample{SequenceNumber: 78, Source: DataSource{SourceIfIndex, big}, Records: []Record{ctrTestIf(big), ctrTestEth(2000)}}
	d := &Datagram{AgentAddress: netip.MustParseAddr("198.18.0.1"), SubAgentID: 3, SequenceNumber: 55, Uptime: 999, Samples: []Sample{compact, expanded}}
	return d, d.AppendXDR(nil)
}

func TestCountersGoflow2Agreement(t *testing.T) {
	d, wire := ctrEncodedDatagram()
	if f := d.Samples[1].SampleFormat(); f != FormatCounterSampleExpanded {
		t.Fatalf("sample with ifIndex >= 2^24 uses format %v, want 0:4", f)
	}
	p := goflowDecode(t, wire)
	if p.Version != 5 || p.SubAgentId != 3 || p.SequenceNumber != 55 || p.Uptime != 999 || len(p.Samples) != 2 {
		t.Fatalf("goflow2 header: %+v", p)
	}
	for i, s := range d.Samples {
		ours := s.(*CounterSample)
		gs, ok := p.Samples[i].(goflow.CounterSample)
		if !ok {
			t.Fatalf("goflow2 sample %d is %T, want a counters sample", i, p.Samples[i])
		}
		h := gs.Header
		if h.Format != uint32(ours.SampleFormat()) || h.SampleSequenceNumber != ours.SequenceNumber ||
			h.SourceIdType != ours.Source.Type || h.SourceIdValue != ours.Source.Index {
			t.Errorf("sample %d header: goflow2 %+v, ours format %v seq %d source %v", i, h, ours.SampleFormat(), ours.SequenceNumber, ours.Source)
		}
		if len(gs.Records) != len(ours.Records) {
			t.Fatalf("sample %d: goflow2 %d records, ours %d", i, len(gs.Records), len(ours.Records))
		}
		for j, rec := range ours.Records {
			g := gs.Records[j]
			body := rec.AppendXDR(nil)
			if g.Header.DataFormat != uint32(rec.Format()) || g.Header.Length != uint32(len(body)) {
				t.Errorf("sample %d record %d (%s): goflow2 header %+v, ours format %d length %d", i, j, rec.Name(), g.Header, uint32(rec.Format()), len(body))
			}
			switch r := rec.(type) {
			case *IfCounters:
				want := goflow.IfCounters{
					IfIndex: r.IfIndex, IfType: r.IfType, IfSpeed: r.IfSpeed, IfDirection: uint32(r.IfDirection),
					IfStatus: r.IfStatus, IfInOctets: r.IfInOctets, IfInUcastPkts: r.IfInUcastPkts,
					IfInMulticastPkts: r.IfInMulticastPkts, IfInBroadcastPkts: r.IfInBroadcastPkts,
					IfInDiscards: r.IfInDiscards, IfInErrors: r.IfInErrors, IfInUnknownProtos: r.IfInUnknownProtos,
					IfOutOctets: r.IfOutOctets, IfOutUcastPkts: r.IfOutUcastPkts, IfOutMulticastPkts: r.IfOutMulticastPkts,
					IfOutBroadcastPkts: r.IfOutBroadcastPkts, IfOutDiscards: r.IfOutDiscards, IfOutErrors: r.IfOutErrors,
					IfPromiscuousMode: r.IfPromiscuousMode,
				}
				if got, ok := g.Data.(goflow.IfCounters); !ok || got != want {
					t.Errorf("sample %d if_counters: goflow2 %+v, want %+v", i, g.Data, want)
				}
			case *EthernetCounters:
				want := goflow.EthernetCounters{
					Dot3StatsAlignmentErrors: r.Dot3StatsAlignmentErrors, Dot3StatsFCSErrors: r.Dot3StatsFCSErrors,
					Dot3StatsSingleCollisionFrames: r.Dot3StatsSingleCollisionFrames, Dot3StatsMultipleCollisionFrames: r.Dot3StatsMultipleCollisionFrames,
					Dot3StatsSQETestErrors: r.Dot3StatsSQETestErrors, Dot3StatsDeferredTransmissions: r.Dot3StatsDeferredTransmissions,
					Dot3StatsLateCollisions: r.Dot3StatsLateCollisions, Dot3StatsExcessiveCollisions: r.Dot3StatsExcessiveCollisions,
					Dot3StatsInternalMacTransmitErrors: r.Dot3StatsInternalMacTransmitErrors, Dot3StatsCarrierSenseErrors: r.Dot3StatsCarrierSenseErrors,
					Dot3StatsFrameTooLongs: r.Dot3StatsFrameTooLongs, Dot3StatsInternalMacReceiveErrors: r.Dot3StatsInternalMacReceiveErrors,
					Dot3StatsSymbolErrors: r.Dot3StatsSymbolErrors,
				}
				if got, ok := g.Data.(goflow.EthernetCounters); !ok || got != want {
					t.Errorf("sample %d ethernet_counters: goflow2 %+v, want %+v", i, g.Data, want)
				}
			default:
				// goflow2 does not know the host and application records:
				// it must frame-skip them by their length, keeping the body.
				raw, ok := g.Data.(goflow.RawRecord)
				if !ok || !bytes.Equal(raw.Data, body) {
					t.Errorf("sample %d %s: goflow2 kept %+v, want the raw body %x", i, rec.Name(), g.Data, body)
				}
			}
		}
	}
}

func TestCountersTsharkAgreement(t *testing.T) {
	d := &Datagram{AgentAddress: netip.MustParseAddr("198.18.0.1"), SequenceNumber: 8, Uptime: 1234}
	var ifs []*IfCounters
	var eths []*EthernetCounters
	for i, idx := range []uint32{12, 1<<24 + 5} {
		ifc := ctrTestIf(idx)
		ifc.IfStatus = uint32(i+1) & 3 // admin up, then oper up only
		ifs = append(ifs, ifc)
		eth := ctrTestEth(uint32(1000 * (i + 1)))
		eths = append(eths, eth)
		d.Samples = append(d.Samples, &CounterSample{SequenceNumber: uint32(60 + i), Source: DataSource{SourceIfIndex, idx}, Records: []Record{ifc, eth}})
	}
	ifFields := map[string]func(c *IfCounters) string{
		"sflow_245.ifindex":        func(c *IfCounters) string { return ctrU(c.IfIndex) },
		"sflow_245.iftype":         func(c *IfCounters) string { return ctrU(c.IfType) },
		"sflow_245.ifspeed":        func(c *IfCounters) string { return ctrU(c.IfSpeed) },
		"sflow_245.ifdirection":    func(c *IfCounters) string { return ctrU(c.IfDirection) },
		"sflow_245.ifadmin_status": func(c *IfCounters) string { return ctrU(c.IfStatus & IfStatusAdminUp) },
		"sflow_245.ifoper_status":  func(c *IfCounters) string { return ctrU((c.IfStatus & IfStatusOperUp) >> 1) },
		"sflow_245.ifinoct":        func(c *IfCounters) string { return ctrU(c.IfInOctets) },
		"sflow_245.ifinpkt":        func(c *IfCounters) string { return ctrU(c.IfInUcastPkts) },
		"sflow_245.ifinmcast":      func(c *IfCounters) string { return ctrU(c.IfInMulticastPkts) },
		"sflow_245.ifinbcast":      func(c *IfCounters) string { return ctrU(c.IfInBroadcastPkts) },
		"sflow_245.ifindisc":       func(c *IfCounters) string { return ctrU(c.IfInDiscards) },
		"sflow_245.ifinerr":        func(c *IfCounters) string { return ctrU(c.IfInErrors) },
		"sflow_245.ifinunk":        func(c *IfCounters) string { return ctrU(c.IfInUnknownProtos) },
		"sflow_245.ifoutoct":       func(c *IfCounters) string { return ctrU(c.IfOutOctets) },
		"sflow_245.ifoutpkt":       func(c *IfCounters) string { return ctrU(c.IfOutUcastPkts) },
		"sflow_245.ifoutmcast":     func(c *IfCounters) string { return ctrU(c.IfOutMulticastPkts) },
		"sflow_245.ifoutbcast":     func(c *IfCounters) string { return ctrU(c.IfOutBroadcastPkts) },
		"sflow_245.ifoutdisc":      func(c *IfCounters) string { return ctrU(c.IfOutDiscards) },
		"sflow_245.ifouterr":       func(c *IfCounters) string { return ctrU(c.IfOutErrors) },
		"sflow_245.ifpromisc":      func(c *IfCounters) string { return ctrU(c.IfPromiscuousMode) },
	}
	ethNames := []string{
		"dot3StatsAlignmentErrors", "dot3StatsFCSErrors", "dot3StatsSingleCollisionFrames",
		"dot3StatsMultipleCollisionFrames", "dot3StatsSQETestErrors", "dot3StatsDeferredTransmissions",
		"dot3StatsLateCollisions", "dot3StatsExcessiveCollisions", "dot3StatsInternalMacTransmitErrors",
		"dot3StatsCarrierSenseErrors", "dot3StatsFrameTooLongs", "dot3StatsInternalMacReceiveErrors",
		"dot3StatsSymbolErrors",
	}
	sampleFields := map[string]func(s *CounterSample) string{
		"sflow_245.sampletype":                   func(s *CounterSample) string { return ctrU(uint32(s.SampleFormat())) },
		"sflow.counters_sample.sequence_number":  func(s *CounterSample) string { return ctrU(s.SequenceNumber) },
		"sflow.counters_sample.counters_records": func(s *CounterSample) string { return strconv.Itoa(len(s.Records)) },
		"sflow_245.counters_record_format":       nil, // two per sample, checked below
	}
	var fields []string
	for f := range ifFields {
		fields = append(fields, f)
	}
	for _, n := range ethNames {
		fields = append(fields, "sflow_245."+n)
	}
	for f := range sampleFields {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	got := tsharkFields(t, d.AppendXDR(nil), fields...)
	// tshark 4.4 (Debian 13) shows the two status bits as booleans, 4.0
	// (Debian 12) as numbers.
	for _, f := range []string{"sflow_245.ifadmin_status", "sflow_245.ifoper_status"} {
		for i, v := range got[f] {
			switch v {
			case "True":
				got[f][i] = "1"
			case "False":
				got[f][i] = "0"
			}
		}
	}

	check := func(field string, want []string) {
		t.Helper()
		if fmt.Sprint(got[field]) != fmt.Sprint(want) {
			t.Errorf("%s: tshark %q, ours %q", field, got[field], want)
		}
	}
	for f, fn := range ifFields {
		check(f, []string{fn(ifs[0]), fn(ifs[1])})
	}
	for i, n := range ethNames {
		check("sflow_245."+n, []string{ctrU(*eths[0].fields()[i]), ctrU(*eths[1].fields()[i])})
	}
	var formats []string
	for f, fn := range sampleFields {
		if fn == nil {
			continue
		}
		var want []string
		for _, s := range d.Samples {
			want = append(want, fn(s.(*CounterSample)))
		}
		check(f, want)
	}
	for range d.Samples {
		formats = append(formats, ctrU(uint32(FormatIfCounters)), ctrU(uint32(FormatEthernetCounters)))
	}
	check("sflow_245.counters_record_format", formats)
	if got["sflow_245.sampletype"][1] != "4" {
		t.Errorf("second sample type %v, want 4 (expanded counters sample)", got["sflow_245.sampletype"])
	}
}
