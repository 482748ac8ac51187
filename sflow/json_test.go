package sflow

import (
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

func (*jsonProbeRecord) Format() DataFormat          { return Format(4242, 7) }
func (*jsonProbeRecord) Name() string                { return "probe_record" }
func (r *jsonProbeRecord) AppendXDR(b []byte) []byte { return appendUint32(b, r.private) }

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
	d := &Datagram{
		AgentAddress:   netip.MustParseAddr("198.18.0.1"),
		SubAgentID:     3,
		SequenceNumber: 4000000000,
		Uptime:         123456,
		Samples: []Sample{
			&FlowSample{SequenceNumber: 7, Source: DataSource{0, 3}, SamplingRate: 1024, SamplePool: 51200, Drops: 2,
				Input: IfIndex(3), Output: Interface{Format: InterfaceMultiple, Value: 4},
				Records: []Record{probe, &UnknownRecord{DataFormat: Format(9, 1), Data: []byte{1, 2, 3, 4}}}},
			&CounterSample{SequenceNumber: 9, Source: DataSource{2, 0x1000000}, Records: []Record{}},
			&UnknownSample{DataFormat: Format(0, 77), Data: []byte{0xde, 0xad, 0xbe, 0xef}},
		},
	}
	// Called directly: json.Marshal would re-escape <, > and & itself.
	b, err := d.MarshalJSON()
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
	b, err := json.Marshal(&Datagram{})
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
// sflowtool, an independent decoder (NAME.sflowtool.json). Record bodies are
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
			d, err := Decode(readTestdata(t, name+".bin"))
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(d)
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
