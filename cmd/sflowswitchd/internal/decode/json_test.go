package decode

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// jsonProbeRecord is a record type known only to this test, with one field
// of every kind the generic JSON rendering has a rule for.
type jsonProbeRecord struct {
	Header   []byte     `json:"header"`
	SrcMAC   [6]byte    `json:"src_mac"`
	UUID     [16]byte   `json:"uuid"`
	NextHop  netip.Addr `json:"next_hop"`
	Unknown  netip.Addr `json:"unknown_addr"`
	Load     float32    `json:"load"`
	Ratio    float64    `json:"ratio"`
	Label    string     `json:"name"` // collides with the record's "name" key
	URI      string     `json:"uri"`
	Signed   int32      `json:"signed"`
	Path     []uint32   `json:"path"`
	Segments []jsonProbeSegment
	Omitted  uint32 `json:"omitted,omitempty"`
	Hidden   uint32 `json:"-"`
	private  uint32
}

type jsonProbeSegment struct {
	Type uint32   `json:"type"`
	ASNs []uint32 `json:"asns"`
}

func (*jsonProbeRecord) Format() sflow.DataFormat { return sflow.Format(4242, 7) }
func (*jsonProbeRecord) Name() string             { return "probe_record" }
func (r *jsonProbeRecord) AppendXDR(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, r.private)
}

// jsonValue unmarshals b into generic Go values, failing the test on
// invalid JSON.
func jsonValue(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	return v
}

func TestDatagramJSONShape(t *testing.T) {
	probe := &jsonProbeRecord{
		Header:   []byte{0x00, 0x11, 0xab, 0xff},
		SrcMAC:   [6]byte{0x02, 0x00, 0x5e, 0x10, 0xab, 0xcd},
		UUID:     [16]byte{0: 0x12, 15: 0xef},
		NextHop:  netip.MustParseAddr("2001:db8::9"),
		Load:     float32(math.NaN()),
		Ratio:    math.Inf(-1),
		Label:    "probe",
		URI:      "/a?b=1&c=<2>",
		Signed:   -1,
		Path:     []uint32{64512, 65001},
		Segments: []jsonProbeSegment{{Type: 2, ASNs: []uint32{1, 2}}},
		Hidden:   9,
		private:  7,
	}
	d := &sflow.Datagram{
		AgentAddress:   netip.MustParseAddr("198.18.0.1"),
		SubAgentID:     3,
		SequenceNumber: 4000000000,
		Uptime:         123456,
		Samples: []sflow.Sample{
			&sflow.FlowSample{SequenceNumber: 7, Source: sflow.DataSource{Type: 0, Index: 3}, SamplingRate: 1024, SamplePool: 51200, Drops: 2,
				Input: sflow.IfIndex(3), Output: sflow.Interface{Format: sflow.InterfaceMultiple, Value: 4},
				Records: []sflow.Record{probe, &sflow.UnknownRecord{DataFormat: sflow.Format(9, 1), Data: []byte{1, 2, 3, 4}}}},
			&sflow.CounterSample{SequenceNumber: 9, Source: sflow.DataSource{Type: 2, Index: 0x1000000}, Records: []sflow.Record{}},
			&sflow.UnknownSample{DataFormat: sflow.Format(0, 77), Data: []byte{0xde, 0xad, 0xbe, 0xef}},
		},
	}
	// marshalJSON leaves <, > and & as they are (json.Marshal escapes them).
	b, err := marshalJSON(d)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) || strings.Contains(string(b), `\u0026`) {
		t.Errorf("invalid or HTML-escaped JSON: %s", b)
	}
	got := jsonValue(t, b)
	want := jsonValue(t, []byte(`{
		"version": 5, "agent_address": "198.18.0.1", "sub_agent_id": 3,
		"sequence_number": 4000000000, "uptime_ms": 123456,
		"samples": [
			{"type": "flow_sample", "sequence_number": 7, "source_id": {"type": 0, "index": 3},
			 "sampling_rate": 1024, "sample_pool": 51200, "drops": 2,
			 "input": {"format": 0, "value": 3}, "output": {"format": 2, "value": 4},
			 "records": [
				{"format": "4242:7", "name": "probe_record",
				 "header": "0011abff", "src_mac": "02:00:5e:10:ab:cd",
				 "uuid": "120000000000000000000000000000ef",
				 "next_hop": "2001:db8::9", "unknown_addr": null,
				 "load": "NaN", "ratio": "-Inf", "record_name": "probe",
				 "uri": "/a?b=1&c=<2>", "signed": -1, "path": [64512, 65001],
				 "Segments": [{"type": 2, "asns": [1, 2]}]},
				{"format": "9:1", "name": "unknown", "data": "01020304"}
			 ]},
			{"type": "counters_sample_expanded", "sequence_number": 9,
			 "source_id": {"type": 2, "index": 16777216}, "records": []},
			{"type": "unknown", "format": "0:77", "data": "deadbeef"}
		]}`))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JSON mismatch\n got %s\nwant %v", b, want)
	}
	// Keys keep the struct's declaration order, format and name first.
	if i, j := strings.Index(string(b), `"header"`), strings.Index(string(b), `"src_mac"`); !(strings.Index(string(b), `"name":"probe_record"`) < i && i < j) {
		t.Errorf("record keys out of order: %s", b)
	}
}

func TestDatagramJSONUnknownAgentAddress(t *testing.T) {
	b, err := marshalJSON(&sflow.Datagram{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":5,"agent_address":null,"sub_agent_id":0,"sequence_number":0,"uptime_ms":0,"samples":[]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

// TestDatagramJSONMatchesReference decodes every shared golden datagram and
// compares the datagram and sample fields of our JSON with the reading of
// sflowtool, an independent decoder (NAME.sflowtool.json). sflow.Record bodies are
// compared by the record tests; here every record must appear, in order,
// with sflowtool's format tag.
func TestDatagramJSONMatchesReference(t *testing.T) {
	refs, err := filepath.Glob(filepath.Join(sharedTestdata(t), "*.sflowtool.json"))
	if err != nil || len(refs) == 0 {
		t.Fatalf("no reference files: %v", err)
	}
	for _, ref := range refs {
		name := strings.TrimSuffix(filepath.Base(ref), ".sflowtool.json")
		t.Run(name, func(t *testing.T) {
			d, err := sflow.Decode(readTestdata(t, name+".bin"))
			if err != nil {
				t.Fatal(err)
			}
			b, err := marshalJSON(d)
			if err != nil {
				t.Fatal(err)
			}
			refJSON, err := os.ReadFile(ref)
			if err != nil {
				t.Fatal(err)
			}
			compareWithSflowtool(t, jsonValue(t, b), jsonValue(t, refJSON))
		})
	}
}

// compareWithSflowtool checks our datagram JSON against sflowtool's JSON
// (every sflowtool value is a string).
func compareWithSflowtool(t *testing.T, got, ref map[string]any) {
	t.Helper()
	num := func(v any) string {
		if f, ok := v.(float64); ok {
			return strconv.FormatUint(uint64(f), 10)
		}
		return fmt.Sprint(v)
	}
	check := func(what string, gotV any, refV any) {
		t.Helper()
		if fmt.Sprint(gotV) != fmt.Sprint(refV) {
			t.Errorf("%s: ours %v, sflowtool %v", what, gotV, refV)
		}
	}
	check("version", num(got["version"]), ref["datagramVersion"])
	if a, err := netip.ParseAddr(fmt.Sprint(ref["agent"])); err != nil || fmt.Sprint(got["agent_address"]) != a.String() {
		t.Errorf("agent_address: ours %v, sflowtool %v", got["agent_address"], ref["agent"])
	}
	check("sub_agent_id", num(got["sub_agent_id"]), ref["agentSubId"])
	check("sequence_number", num(got["sequence_number"]), ref["packetSequenceNo"])
	check("uptime_ms", num(got["uptime_ms"]), ref["sysUpTime"])
	samples, _ := got["samples"].([]any)
	refSamples, _ := ref["samples"].([]any)
	check("sample count", len(samples), ref["samplesInPacket"])
	if len(samples) != len(refSamples) {
		t.Fatalf("%d samples, sflowtool %d", len(samples), len(refSamples))
	}
	tags := map[string]string{"flow_sample": "0:1", "counters_sample": "0:2", "flow_sample_expanded": "0:3", "counters_sample_expanded": "0:4", "discarded_packet": "0:5"}
	for i := range samples {
		s, rs := samples[i].(map[string]any), refSamples[i].(map[string]any)
		p := fmt.Sprintf("sample[%d].", i)
		if typ := s["type"]; typ == "rtmetric" || typ == "rtflow" {
			compareRTWithSflowtool(t, p, s, rs)
			continue
		}
		check(p+"type", tags[fmt.Sprint(s["type"])], rs["sampleType_tag"])
		check(p+"sequence_number", num(s["sequence_number"]), rs["sampleSequenceNo"])
		src, _ := s["source_id"].(map[string]any)
		check(p+"source_id", num(src["type"])+":"+num(src["index"]), rs["sourceId"])
		blockTag := "counterBlock_tag"
		if strings.HasPrefix(fmt.Sprint(s["type"]), "flow") {
			blockTag = "flowBlock_tag"
			check(p+"sampling_rate", num(s["sampling_rate"]), rs["meanSkipCount"])
			check(p+"sample_pool", num(s["sample_pool"]), rs["samplePool"])
			check(p+"drops", num(s["drops"]), rs["dropEvents"])
			in, _ := s["input"].(map[string]any)
			out, _ := s["output"].(map[string]any)
			check(p+"input.value", num(in["value"]), rs["inputPort"])
			check(p+"output.value", num(out["value"]), rs["outputPort"])
		}
		if s["type"] == "discarded_packet" {
			// sflowtool prefixes the records' keys of a discarded_packet.
			blockTag = "discarded_flowBlock_tag"
			reason, _ := s["reason"].(map[string]any)
			check(p+"drops", num(s["drops"]), rs["dropEvents"])
			check(p+"input", num(s["input"]), rs["inputPort"])
			check(p+"output", num(s["output"]), rs["outputPort"])
			check(p+"reason.code", num(reason["code"]), rs["discardCode"])
			check(p+"reason.name", reason["name"], rs["discardReason"])
		}
		recs, _ := s["records"].([]any)
		refRecs, _ := rs["elements"].([]any)
		if len(recs) != len(refRecs) {
			t.Errorf("%srecords: %d, sflowtool %d", p, len(recs), len(refRecs))
			continue
		}
		for j := range recs {
			r, rr := recs[j].(map[string]any), refRecs[j].(map[string]any)
			check(fmt.Sprintf("%srecord[%d].format", p, j), r["format"], rr[blockTag])
			if n, _ := r["name"].(string); n == "" {
				t.Errorf("%srecord[%d] has no name", p, j)
			}
		}
	}
}

// compareRTWithSflowtool compares an rtmetric/rtflow sample of our JSON
// with sflowtool's reading: "rtmetric_<type>_<name>" (or rtflow_...)
// keys, numbers in decimal, floats with 3 decimals, MACs as 12 hex
// digits, IPv6 addresses in full.
func compareRTWithSflowtool(t *testing.T, p string, s, rs map[string]any) {
	t.Helper()
	typ := fmt.Sprint(s["type"])
	tags := map[string]string{"rtmetric": "4300:1002", "rtflow": "4300:1003"}
	if fmt.Sprint(rs["sampleType_tag"]) != tags[typ] {
		t.Errorf("%stype %s, sflowtool %v", p, typ, rs["sampleType_tag"])
	}
	want := map[string]string{typ + "_datasource_name": fmt.Sprint(s["datasource"])}
	vals, _ := s["metrics"].([]any)
	if typ == "rtflow" {
		vals, _ = s["fields"].([]any)
		want["rtflow_sampling_rate"] = fmt.Sprint(s["sampling_rate"])
		want["rtflow_sample_pool"] = fmt.Sprint(s["sample_pool"])
	}
	for _, v := range vals {
		m := v.(map[string]any)
		vt, name := fmt.Sprint(m["type"]), fmt.Sprint(m["name"])
		var str string
		switch val := m["value"].(type) {
		case float64:
			str = strconv.FormatFloat(val, 'f', -1, 64)
			if strings.Contains(vt, "loat") || strings.Contains(vt, "ouble") {
				str = fmt.Sprintf("%.3f", val)
			}
		case string:
			str = val
			switch vt {
			case "mac":
				str = strings.ReplaceAll(val, ":", "")
			case "ip6":
				a := netip.MustParseAddr(val).As16()
				var parts []string
				for i := 0; i < 16; i += 2 {
					parts = append(parts, fmt.Sprintf("%02x%02x", a[i], a[i+1]))
				}
				str = strings.Join(parts, ":")
			}
		}
		want[typ+"_"+vt+"_"+name] = str
	}
	for k, v := range want {
		if fmt.Sprint(rs[k]) != v {
			t.Errorf("%s%s: ours %q, sflowtool %v", p, k, v, rs[k])
		}
	}
	// Every value sflowtool read is one of ours.
	for k := range rs {
		if strings.HasPrefix(k, typ+"_") {
			if _, ok := want[k]; !ok {
				t.Errorf("%ssflowtool read %s=%v, not in ours", p, k, rs[k])
			}
		}
	}
}

// TestDiscardJSON: `decode` output carries the sample's fields, the reason
// by code and name, and the records.
func TestDiscardJSON(t *testing.T) {
	// Two discarded_packet samples (as sflow's discard tests write them);
	// the second, an egress drop with every record defined for one.
	hdr := &sflow.SampledHeader{Protocol: sflow.HeaderProtocolEthernet, FrameLength: 68, Stripped: 4, Header: make([]byte, 64)}
	in := &sflow.Datagram{AgentAddress: netip.MustParseAddr("198.18.0.1"), SubAgentID: 1, SequenceNumber: 9, Uptime: 1000, Samples: []sflow.Sample{
		&sflow.DiscardedPacket{SequenceNumber: 5, Drops: 3, Input: 4, Reason: sflow.DropACL, Records: []sflow.Record{
			hdr, &sflow.ExtendedFunction{Symbol: "nft_do_chain"}, &sflow.ExtendedLinuxDropReason{Reason: "NETFILTER_DROP"}}},
		&sflow.DiscardedPacket{SequenceNumber: 6, Drops: 7, Input: 4, Output: 9, Reason: sflow.DropNoBufferSpace, Records: []sflow.Record{
			hdr, &sflow.ExtendedEgressQueue{Queue: 2}, &sflow.ExtendedFunction{Symbol: "__dev_queue_xmit"}, &sflow.ExtendedLinuxDropReason{Reason: "QDISC_DROP"}}},
	}}
	d, err := sflow.Decode(in.AppendXDR(nil))
	if err != nil {
		t.Fatal(err)
	}
	b, err := marshalJSON(d)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Samples []struct {
			Type   string `json:"type"`
			Drops  uint32 `json:"drops"`
			Input  uint32 `json:"input"`
			Output uint32 `json:"output"`
			Reason struct {
				Code uint32
				Name string
			} `json:"reason"`
			Records []map[string]any `json:"records"`
		} `json:"samples"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	s := v.Samples[1]
	if s.Type != "discarded_packet" || s.Drops != 7 || s.Input != 4 || s.Output != 9 || s.Reason.Code != 259 ||
		s.Reason.Name != "no_buffer_space" || len(s.Records) != 4 || s.Records[1]["queue"] != float64(2) ||
		s.Records[2]["symbol"] != "__dev_queue_xmit" || s.Records[3]["reason"] != "QDISC_DROP" {
		t.Errorf("JSON %s", b)
	}
}

// TestRTJSON: the host agent's custom metrics (the golden rt.bin, one
// metric and one field of each type) render with their names, types and
// values.
func TestRTJSON(t *testing.T) {
	dec, err := sflow.Decode(readTestdata(t, "rt.bin"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := marshalJSON(dec)
	if err != nil || !json.Valid(js) {
		t.Fatalf("JSON %s: %v", js, err)
	}
	for _, frag := range []string{
		`{"type":"rtmetric","datasource":"web1","metrics":[{"name":"str","type":"string","value":"helloworld"}`,
		`{"name":"c64","type":"counter64","value":1099511627776}`,
		`{"name":"gf","type":"gaugeFloat","value":1.5}`,
		`{"name":"gd","type":"gaugeDouble","value":1.234}`,
		`{"type":"rtflow","datasource":"web1","sampling_rate":10,"sample_pool":0,"fields":[`,
		`{"name":"mac","type":"mac","value":"02:03:04:05:06:07"}`,
		`{"name":"src","type":"ip","value":"198.18.0.1"}`,
		`{"name":"dst6","type":"ip6","value":"2001:db8::1"}`,
		`{"name":"i32","type":"int32","value":4294967295}`,
	} {
		if !strings.Contains(string(js), frag) {
			t.Errorf("JSON lacks %s\n%s", frag, js)
		}
	}
}

// FuzzRender: whatever the strict decoder accepts renders as valid JSON
// (the decode tool prints every datagram it decodes). Seeds are the
// shared golden and malformed datagrams.
func FuzzRender(f *testing.F) {
	testutil.AddGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := sflow.Decode(in)
		if err != nil {
			return
		}
		js, err := marshalJSON(d)
		if err != nil {
			t.Fatalf("marshalJSON: %v", err)
		}
		if !json.Valid(js) {
			t.Fatalf("invalid JSON %s", js)
		}
	})
}

// goldenDatagram decodes the golden datagram file name (sflow's tests
// check that it decodes to the datagram they build field by field).
func goldenDatagram(t *testing.T, name string) *sflow.Datagram {
	t.Helper()
	d, err := sflow.Decode(readTestdata(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCountersL2JSON: the `decode` rendering of the two records.
func TestCountersL2JSON(t *testing.T) {
	b, err := marshalJSON(goldenDatagram(t, "counters_l2.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`{"format":"0:5","name":"vlan_counters","vlan_id":100,"octets":8589934597,"ucast_pkts":1001,"multicast_pkts":1002,"broadcast_pkts":1003,"discards":1004}`,
		`"name":"lag_port_stats","actor_system_id":"02:00:00:00:00:01","partner_oper_system_id":"02:00:00:00:00:02","attached_agg_id":10,"actor_admin_state":5,"actor_oper_state":61,"partner_admin_state":1,"partner_oper_state":63,"lacpdus_rx":101`,
	} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON lacks %s:\n%s", want, b)
		}
	}
}

// TestFlowTransitJSON: the `decode` rendering names the three records and
// their values.
func TestFlowTransitJSON(t *testing.T) {
	b, err := marshalJSON(goldenDatagram(t, "flow_transit.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{"format":"0:1036","name":"extended_egress_queue","queue":7}`,
		`{"format":"0:1040","name":"extended_queue","depth":11354112}`,
		`{"format":"0:1039","name":"extended_transit","delay":4294967295}`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
}

// TestFlowTunnelJSON: the `decode` rendering carries the tunnel records'
// outer header and VNI under their spec names.
func TestFlowTunnelJSON(t *testing.T) {
	b, err := marshalJSON(goldenDatagram(t, "flow_tunnel.bin"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Samples []struct {
			Records []map[string]any `json:"records"`
		} `json:"samples"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	in, vni := v.Samples[0].Records[1], v.Samples[0].Records[2]
	hdr, _ := in["header"].(map[string]any)
	if in["name"] != "extended_ipv4_tunnel_ingress" || in["format"] != "0:1024" || hdr["src_ip"] != "198.18.1.1" ||
		hdr["dst_port"] != float64(4789) || vni["name"] != "extended_vni_ingress" || vni["vni"] != float64(4097) {
		t.Errorf("JSON %s", b)
	}
	out := v.Samples[1].Records[1]
	if hdr, _ := out["header"].(map[string]any); out["name"] != "extended_ipv6_tunnel_egress" || hdr["dst_ip"] != "2001:db8:2::1" {
		t.Errorf("JSON %s", b)
	}
}
