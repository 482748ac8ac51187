package sflow

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"
)

// countersL2Golden is testdata/counters_l2.bin, written field by field from
// the layouts of vlan_counters (docs/spec/sflow_version_5.txt) and
// lag_port_stats (counters_lag.go: sflow.org sflow_lag.txt, hsflowd's
// sflow.h SFLLACP_counters, sflowtool's readCounters_LACP), not produced by
// this package. The four port state bytes differ so that their order
// shows.
const countersL2Golden = `
	00000005          // version 5
	00000001 c6120001 // agent address IPv4 198.18.0.1
	00000000          // sub_agent_id 0
	00000017          // sequence_number 23
	00092888          // uptime 600200 ms
	00000002          // 2 samples

	00000002          // sample_type 0:2 counters_sample
	00000030          // length 48
	00000001          // sequence_number 1
	01000064          // source_id 1:100 (VLAN 100)
	00000001          // 1 record
	00000005 0000001c //   0:5 vlan_counters, length 28
	00000064          //     vlan_id 100
	0000000200000005  //     octets 2^33+5
	000003e9          //     ucastPkts 1001
	000003ea          //     multicastPkts 1002
	000003eb          //     broadcastPkts 1003
	000003ec          //     discards 1004

	00000002          // sample_type 0:2 counters_sample
	000000ac          // length 172
	00000002          // sequence_number 2
	00000007          // source_id 0:7 (a bond member)
	00000002          // 2 records
	00000001 00000058 //   0:1 if_counters, length 88
	00000007          //     ifIndex 7
	00000006          //     ifType 6
	00000002540be400  //     ifSpeed 10 Gbit/s
	00000001          //     ifDirection full-duplex
	00000003          //     ifStatus admin up, oper up
	00000000000f4240  //     ifInOctets 1000000
	000003e8 00000014 0000001e 00000001 00000002 00000003 // in ucast 1000, mcast 20, bcast 30, discards 1, errors 2, unknown 3
	00000000001e8480  //     ifOutOctets 2000000
	000007d0 00000028 00000032 00000004 00000005 // out ucast 2000, mcast 40, bcast 50, discards 4, errors 5
	00000002          //     ifPromiscuousMode false
	00000007 00000038 //   0:7 lag_port_stats, length 56
	020000000001 0000 //     dot3adAggPortActorSystemID 02:00:00:00:00:01, 2 bytes of padding
	020000000002 0000 //     dot3adAggPortPartnerOperSystemID 02:00:00:00:00:02, padding
	0000000a          //     dot3adAggPortAttachedAggID 10
	05                //     dot3adAggPortState[0] actor admin: activity, aggregation
	3d                //     dot3adAggPortState[1] actor oper: activity, aggregation, sync, collecting, distributing
	01                //     dot3adAggPortState[2] partner admin: activity
	3f                //     dot3adAggPortState[3] partner oper: activity, timeout, aggregation, sync, collecting, distributing
	00000065          //     LACPDUsRx 101
	00000066          //     markerPDUsRx 102
	00000067          //     markerResponsePDUsRx 103
	00000068          //     unknownRx 104
	00000069          //     illegalRx 105
	0000006a          //     LACPDUsTx 106
	0000006b          //     markerPDUsTx 107
	0000006c          //     markerResponsePDUsTx 108
`

// countersL2Datagram is the datagram of countersL2Golden, built from this
// package's types.
func countersL2Datagram() *Datagram {
	return &Datagram{
		AgentAddress: netip.MustParseAddr("198.18.0.1"), SequenceNumber: 23, Uptime: 600200,
		Samples: []Sample{
			&CounterSample{SequenceNumber: 1, Source: DataSource{SourceSmonVlan, 100}, Records: []Record{
				&VLANCounters{VLANID: 100, Octets: 1<<33 + 5, UcastPkts: 1001, MulticastPkts: 1002, BroadcastPkts: 1003, Discards: 1004},
			}},
			&CounterSample{SequenceNumber: 2, Source: DataSource{SourceIfIndex, 7}, Records: []Record{
				&IfCounters{IfIndex: 7, IfType: 6, IfSpeed: 10_000_000_000, IfDirection: IfDirectionFullDuplex, IfStatus: 3,
					IfInOctets: 1000000, IfInUcastPkts: 1000, IfInMulticastPkts: 20, IfInBroadcastPkts: 30, IfInDiscards: 1,
					IfInErrors: 2, IfInUnknownProtos: 3, IfOutOctets: 2000000, IfOutUcastPkts: 2000, IfOutMulticastPkts: 40,
					IfOutBroadcastPkts: 50, IfOutDiscards: 4, IfOutErrors: 5, IfPromiscuousMode: IfPromiscuousFalse},
				&LAGPortStats{ActorSystemID: [6]byte{2, 0, 0, 0, 0, 1}, PartnerOperSystemID: [6]byte{2, 0, 0, 0, 0, 2}, AttachedAggID: 10,
					ActorAdminState:   LACPStateActivity | LACPStateAggregation,
					ActorOperState:    LACPStateActivity | LACPStateAggregation | LACPStateSynchronization | LACPStateCollecting | LACPStateDistributing,
					PartnerAdminState: LACPStateActivity,
					PartnerOperState: LACPStateActivity | LACPStateTimeout | LACPStateAggregation | LACPStateSynchronization |
						LACPStateCollecting | LACPStateDistributing,
					LACPDUsRx: 101, MarkerPDUsRx: 102, MarkerResponsePDUsRx: 103, UnknownRx: 104, IllegalRx: 105,
					LACPDUsTx: 106, MarkerPDUsTx: 107, MarkerResponsePDUsTx: 108},
			}},
		},
	}
}

// TestCountersL2Golden: the annotated bytes, testdata/counters_l2.bin and
// our encoding are identical, and our decoder reads the file back.
func TestCountersL2Golden(t *testing.T) {
	checkGoldenDatagram(t, "counters_l2", countersL2Golden, countersL2Datagram())
}

// TestCountersL2Testdata compares every counter record field of
// counters_l2.bin with sflowtool's reading, in both directions; for
// lag_port_stats this checks the order of the four port state bytes
// (sflowtool reads them as the spec assigns them).
func TestCountersL2Testdata(t *testing.T) {
	ctrCheckTestdata(t, "counters_l2")
}

// ctrL2SflowtoolView renders vlan_counters and lag_port_stats as sflowtool
// prints them (readCounters_vlan, readCounters_LACP), nil for other
// records.
func ctrL2SflowtoolView(rec Record) map[string]string {
	mac := func(m [6]byte) string { return fmt.Sprintf("%x", m[:]) }
	switch r := rec.(type) {
	case *VLANCounters:
		return map[string]string{
			"in_vlan": ctrU(r.VLANID), "octets": ctrU(r.Octets), "ucastPkts": ctrU(r.UcastPkts),
			"multicastPkts": ctrU(r.MulticastPkts), "broadcastPkts": ctrU(r.BroadcastPkts), "discards": ctrU(r.Discards),
		}
	case *LAGPortStats:
		return map[string]string{
			"actorSystemID": mac(r.ActorSystemID), "partnerSystemID": mac(r.PartnerOperSystemID),
			"attachedAggID":       ctrU(r.AttachedAggID),
			"actorAdminPortState": fmt.Sprint(r.ActorAdminState), "actorOperPortState": fmt.Sprint(r.ActorOperState),
			"partnerAdminPortState": fmt.Sprint(r.PartnerAdminState), "partnerOperPortState": fmt.Sprint(r.PartnerOperState),
			"LACPDUsRx": ctrU(r.LACPDUsRx), "markerPDUsRx": ctrU(r.MarkerPDUsRx),
			"markerResponsePDUsRx": ctrU(r.MarkerResponsePDUsRx), "unknownRx": ctrU(r.UnknownRx),
			"illegalRx": ctrU(r.IllegalRx), "LACPDUsTx": ctrU(r.LACPDUsTx), "markerPDUsTx": ctrU(r.MarkerPDUsTx),
			"markerResponsePDUsTx": ctrU(r.MarkerResponsePDUsTx),
		}
	}
	return nil
}

// TestCountersL2RecordGolden: record bodies against hand-written XDR, and
// SetUnavailable.
func TestCountersL2RecordGolden(t *testing.T) {
	v := &VLANCounters{VLANID: 4094}
	v.SetUnavailable()
	checkRecordGolden(t, v, unhex(t, `
		00000ffe         // vlan_id 4094
		ffffffffffffffff // octets unavailable
		ffffffff         // ucastPkts unavailable
		ffffffff         // multicastPkts unavailable
		ffffffff         // broadcastPkts unavailable
		ffffffff         // discards unavailable`), false)

	l := &LAGPortStats{ActorSystemID: [6]byte{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}, AttachedAggID: 3,
		ActorOperState: LACPStateActivity, PartnerOperState: LACPStateExpired}
	l.SetUnavailable()
	checkRecordGolden(t, l, unhex(t, `
		aabbccddeeff 0000 // actor system id, padding
		000000000000 0000 // partner oper system id unknown, padding
		00000003          // attached agg id 3
		00 01 00 80       // actor admin, actor oper, partner admin, partner oper
		ffffffff ffffffff ffffffff ffffffff // LACPDUsRx .. unknownRx unavailable
		ffffffff ffffffff ffffffff ffffffff // illegalRx .. markerResponsePDUsTx unavailable`), false)
	if l.ActorOperState != LACPStateActivity || l.AttachedAggID != 3 {
		t.Errorf("SetUnavailable changed the states: %+v", l)
	}
}

// TestCountersL2DecodeErrors: wrong lengths and non-zero MAC padding are
// rejected with the record named.
func TestCountersL2DecodeErrors(t *testing.T) {
	lag := unhex(t, strings.Repeat("00", 56))
	badPad := append([]byte(nil), lag...)
	badPad[7] = 1 // the second padding byte after actorSystemID
	cases := []struct {
		name string
		f    DataFormat
		body []byte
		want error
	}{
		{"vlan short", FormatVLANCounters, make([]byte, 24), ErrShort},
		{"vlan long", FormatVLANCounters, make([]byte, 32), ErrLength},
		{"lag short", FormatLAGPortStats, lag[:52], ErrShort},
		{"lag long", FormatLAGPortStats, append(lag, 0, 0, 0, 0), ErrLength},
		{"lag mac padding", FormatLAGPortStats, badPad, ErrBadPadding},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(ctrCounterDatagram(c.f, c.body))
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, c.want) {
				t.Fatalf("got %v, want a *DecodeError wrapping %v", err, c.want)
			}
			if !strings.Contains(de.Structure, "record[0]") {
				t.Errorf("error does not name the record: %v", err)
			}
		})
	}
}

// TestCountersL2Goflow2: goflow2 v2.2.6 decodes if_counters by value and
// keeps vlan_counters and lag_port_stats raw (it names format 5 but has no
// decoder for it): their framing and body bytes are checked.
func TestCountersL2Goflow2(t *testing.T) {
	want := countersL2Datagram()
	p := goflowDecode(t, readTestdata(t, "counters_l2.bin"))
	if len(p.Samples) != 2 {
		t.Fatalf("goflow2 read %d samples", len(p.Samples))
	}
	for i, s := range want.Samples {
		cs := s.(*CounterSample)
		g, ok := p.Samples[i].(goflow.CounterSample)
		if !ok || g.Header.SourceIdType != cs.Source.Type || g.Header.SourceIdValue != cs.Source.Index || len(g.Records) != len(cs.Records) {
			t.Fatalf("sample %d: goflow2 %+v", i, p.Samples[i])
		}
		for j, rec := range cs.Records {
			gr := g.Records[j]
			body := rec.AppendXDR(nil)
			if gr.Header.DataFormat != uint32(rec.Format()) || gr.Header.Length != uint32(len(body)) {
				t.Errorf("sample %d record %d: goflow2 header %+v, ours %s length %d", i, j, gr.Header, rec.Format(), len(body))
			}
			if ifc, ok := rec.(*IfCounters); ok {
				if g, ok := gr.Data.(goflow.IfCounters); !ok || g.IfIndex != ifc.IfIndex || g.IfOutOctets != ifc.IfOutOctets {
					t.Errorf("if_counters: goflow2 %+v", gr.Data)
				}
				continue
			}
			if raw, ok := gr.Data.(goflow.RawRecord); !ok || !bytes.Equal(raw.Data, body) {
				t.Errorf("sample %d %s: goflow2 kept %+v, want the raw body %x", i, rec.Name(), gr.Data, body)
			}
		}
	}
}

// TestCountersL2Tshark: Wireshark 4.0 decodes vlan_counters and
// lag_port_stats. It shows the four port state bytes as one word
// ("sflow.lag_port.state", checked: the bytes in wire order) and labels
// its bytes in the reverse of the spec's order (actor admin from the last
// byte; the order hsflowd produces on a little-endian host), as booleans,
// so the per-state fields are not compared.
func TestCountersL2Tshark(t *testing.T) {
	d := countersL2Datagram()
	v := d.Samples[0].(*CounterSample).Records[0].(*VLANCounters)
	l := d.Samples[1].(*CounterSample).Records[1].(*LAGPortStats)
	want := map[string]string{
		"sflow_245.vlan_id":                      ctrU(v.VLANID),
		"sflow_245.octets":                       ctrU(v.Octets),
		"sflow_245.ucastPkts":                    ctrU(v.UcastPkts),
		"sflow_245.multicastPkts":                ctrU(v.MulticastPkts),
		"sflow_245.broadcastPkts":                ctrU(v.BroadcastPkts),
		"sflow_245.discards":                     ctrU(v.Discards),
		"sflow.lag_port.actor_system_id":         "02:00:00:00:00:01",
		"sflow.lag_port.partner_oper_system_id":  "02:00:00:00:00:02",
		"sflow.lag_port.attached_agg_id":         ctrU(l.AttachedAggID),
		"sflow.lag_port.state":                   fmt.Sprintf("0x%02x%02x%02x%02x", l.ActorAdminState, l.ActorOperState, l.PartnerAdminState, l.PartnerOperState),
		"sflow.lag_port.lacpdus.rx":              ctrU(l.LACPDUsRx),
		"sflow.lag_port.marker_pdus.rx":          ctrU(l.MarkerPDUsRx),
		"sflow.lag_port.marker_response_pdus.rx": ctrU(l.MarkerResponsePDUsRx),
		"sflow.lag_port.unknown.rx":              ctrU(l.UnknownRx),
		"sflow.lag_port.illegal.rx":              ctrU(l.IllegalRx),
		"sflow.lag_port.lacpdus.tx":              ctrU(l.LACPDUsTx),
		"sflow.lag_port.marker_pdus.tx":          ctrU(l.MarkerPDUsTx),
		"sflow.lag_port.marker_response_pdus.tx": ctrU(l.MarkerResponsePDUsTx),
		"sflow_245.counters_record_format":       "5,1,7",
	}
	var fields []string
	for f := range want {
		fields = append(fields, f)
	}
	got := tsharkFields(t, d.AppendXDR(nil), fields...)
	for f, w := range want {
		if g := strings.Join(got[f], ","); g != w {
			t.Errorf("tshark %s = %q, want %q", f, g, w)
		}
	}
}

// TestCountersL2AppendNoAlloc: encoding the two counters samples does not
// allocate.
func TestCountersL2AppendNoAlloc(t *testing.T) {
	buf := make([]byte, 0, 512)
	for i, s := range countersL2Datagram().Samples {
		if n := testing.AllocsPerRun(100, func() { buf = AppendSample(buf[:0], s) }); n != 0 {
			t.Errorf("sample %d: %v allocations", i, n)
		}
	}
}
