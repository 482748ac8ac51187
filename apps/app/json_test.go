package app

import (
	"bytes"
	"net/netip"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

const goodFlowJSON = `{"flow_sample":{"app_name":"payment","service_port":8443,"sampling_rate":10,
 "app_operation":{"operation":"charge","attributes":"cc=visa","status_descr":"ok","status":0,"req_bytes":100,"resp_bytes":20,"uS":1500},
 "app_parent_context":{"application":"web","operation":"checkout","attributes":""},
 "app_initiator":{"actor":"c-1"},"app_target":{"actor":"m-2"},
 "extended_socket_ipv4":{"protocol":6,"local_ip":"198.18.0.1","remote_ip":"198.18.0.2","local_port":8443,"remote_port":40000}}}`

const goodHTTPJSON = `{"flow_sample":{"app_name":"http","service_port":80,"sampling_rate":2,
 "http_request":{"method":"GET","protocol":1001,"uri":"/a?b=c","host":"example.com","useragent":"curl","mime_type":"text/html","req_bytes":0,"resp_bytes":512,"uS":900,"status":200},
 "extended_proxy_request":{"uri":"/b","host":"backend"},
 "extended_socket_ipv6":{"protocol":6,"local_ip":"2001:db8::1","remote_ip":"2001:db8::2","local_port":80,"remote_port":50000}}}`

const goodCountersJSON = `{"counters_sample":{"app_name":"payment","service_port":8443,
 "app_operations":{"success":10,"other":1,"timeout":2,"internal_error":3,"bad_request":4,"forbidden":5,"too_large":6,"not_implemented":7,"not_found":8,"unavailable":9,"unauthorized":10},
 "app_resources":{"user_time":1,"system_time":2,"mem_used":3,"mem_max":4,"fd_open":5,"fd_max":6,"conn_open":7,"conn_max":8},
 "app_workers":{"workers_active":1,"workers_idle":2,"workers_max":3,"req_delayed":4,"req_dropped":5},
 "http_counters":{"method_get_count":3,"status_2XX_count":3}}}`

func TestParseJSONGood(t *testing.T) {
	m, err := ParseJSON([]byte(goodFlowJSON))
	if err != nil {
		t.Fatal(err)
	}
	f := m.Flow
	want := &FlowSample{AppName: "payment", ServicePort: 8443, SamplingRate: 10,
		Operation: &sflow.AppOperation{Context: sflow.AppContext{Application: "payment", Operation: "charge", Attributes: "cc=visa"},
			StatusDescr: "ok", ReqBytes: 100, RespBytes: 20, DurationUS: 1500},
		ParentContext: &sflow.AppParentContext{Context: sflow.AppContext{Application: "web", Operation: "checkout"}},
		Initiator:     &sflow.AppInitiator{Actor: "c-1"}, Target: &sflow.AppTarget{Actor: "m-2"},
		Socket4: &sflow.ExtendedSocketIPv4{Protocol: 6, LocalIP: netip.MustParseAddr("198.18.0.1"),
			RemoteIP: netip.MustParseAddr("198.18.0.2"), LocalPort: 8443, RemotePort: 40000}}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("parsed %+v\nwant   %+v", f, want)
	}
	m, err = ParseJSON([]byte(goodHTTPJSON))
	if err != nil {
		t.Fatal(err)
	}
	if h := m.Flow.HTTP; h.Method != sflow.HTTPMethodGet || h.URI != "/a?b=c" || h.Status != 200 || h.RespBytes != 512 ||
		m.Flow.Socket6.RemoteIP != netip.MustParseAddr("2001:db8::2") || m.Flow.ProxyRequest.Host != "backend" {
		t.Errorf("http sample %+v %+v", m.Flow, h)
	}
	m, err = ParseJSON([]byte(goodCountersJSON))
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Counters; c.Operations.Unauthorized != 10 || c.Operations.Application != "payment" || c.Resources.ConnMax != 8 ||
		c.Workers.ReqDropped != 5 || c.HTTP.MethodGetCount != 3 || c.HTTP.Status2XXCount != 3 {
		t.Errorf("counters %+v", c)
	}
}

// TestJSONRoundTrip checks that what the library sends (AppendFlowJSON,
// AppendCountersJSON) parses back to the same sample.
func TestJSONRoundTrip(t *testing.T) {
	for _, in := range []string{goodFlowJSON, goodHTTPJSON, goodCountersJSON} {
		m, err := ParseJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		var b []byte
		if m.Flow != nil {
			b, err = AppendFlowJSON(nil, m.Flow)
		} else {
			b, err = AppendCountersJSON(nil, m.Counters)
		}
		if err != nil {
			t.Fatal(err)
		}
		m2, err := ParseJSON(b)
		if err != nil {
			t.Fatalf("re-parse %s: %v", b, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Errorf("round trip changed the sample:\n%+v\n%+v", m, m2)
		}
	}
}

// badInputs are messages the parser must refuse, with the reason.
var badInputs = []struct {
	name   string
	msg    string
	reason Reason
}{
	{"not json", `hello`, ReasonNotJSON},
	{"truncated", `{"flow_sample":{"app_name":"a"`, ReasonNotJSON},
	{"trailing data", `{"counters_sample":{"app_name":"a","service_port":1,"app_workers":{}}} {}`, ReasonNotJSON},
	{"empty", ``, ReasonNotJSON},
	{"too large", `{"flow_sample":{"app_name":"` + strings.Repeat("a", MaxMessageSize) + `"}}`, ReasonTooLarge},
	{"array", `[1,2]`, ReasonWrongType},
	{"port string", `{"flow_sample":{"app_name":"a","service_port":"80","app_operation":{}}}`, ReasonWrongType},
	{"client number", `{"flow_sample":{"app_name":"a","service_port":80,"client":1,"app_operation":{}}}`, ReasonWrongType},
	{"name number", `{"counters_sample":{"app_name":7,"service_port":80,"app_workers":{}}}`, ReasonWrongType},
	{"unknown top", `{"flow_sample":{"app_name":"a","service_port":80,"app_operation":{}},"x":1}`, ReasonUnknownField},
	{"unknown inner", `{"flow_sample":{"app_name":"a","service_port":80,"app_operation":{"color":"red"}}}`, ReasonUnknownField},
	{"port 0", `{"flow_sample":{"app_name":"a","service_port":0,"app_operation":{}}}`, ReasonOutOfRange},
	{"port 70000", `{"flow_sample":{"app_name":"a","service_port":70000,"app_operation":{}}}`, ReasonOutOfRange},
	{"negative", `{"flow_sample":{"app_name":"a","service_port":80,"app_operation":{"uS":-1}}}`, ReasonOutOfRange},
	{"fraction", `{"flow_sample":{"app_name":"a","service_port":80,"sampling_rate":1.5,"app_operation":{}}}`, ReasonOutOfRange},
	{"rate 0", `{"flow_sample":{"app_name":"a","service_port":80,"sampling_rate":0,"app_operation":{}}}`, ReasonOutOfRange},
	{"status 11", `{"flow_sample":{"app_name":"a","service_port":80,"app_operation":{"status":11}}}`, ReasonOutOfRange},
	{"http status", `{"flow_sample":{"app_name":"a","service_port":80,"http_request":{"method":"GET","status":1000}}}`, ReasonOutOfRange},
	{"huge counter", `{"counters_sample":{"app_name":"a","service_port":80,"app_workers":{"workers_max":4294967296}}}`, ReasonOutOfRange},
	{"long app", `{"flow_sample":{"app_name":"` + strings.Repeat("a", 33) + `","service_port":80,"app_operation":{}}}`, ReasonStringTooLong},
	{"long uri", `{"flow_sample":{"app_name":"a","service_port":80,"http_request":{"method":"GET","uri":"/` + strings.Repeat("u", 255) + `"}}}`, ReasonStringTooLong},
	{"long actor", `{"flow_sample":{"app_name":"a","service_port":80,"app_operation":{},"app_target":{"actor":"` + strings.Repeat("x", 65) + `"}}}`, ReasonStringTooLong},
	{"long status_descr", `{"flow_sample":{"app_name":"a","service_port":80,"app_operation":{"status_descr":"` + strings.Repeat("x", 65) + `"}}}`, ReasonStringTooLong},
	{"no app_name", `{"flow_sample":{"service_port":80,"app_operation":{}}}`, ReasonMissingField},
	{"no app_name in counters", `{"counter_sample":{"app_workers":{}}}`, ReasonMissingField},
	{"no operation", `{"flow_sample":{"app_name":"a","service_port":80}}`, ReasonMissingField},
	{"no counters", `{"counters_sample":{"app_name":"a","service_port":80}}`, ReasonMissingField},
	{"empty method", `{"flow_sample":{"app_name":"a","service_port":80,"http_request":{"method":""}}}`, ReasonMissingField},
	{"bad ip", `{"flow_sample":{"app_name":"a","service_port":80,"app_operation":{},"extended_socket_ipv4":{"local_ip":"300.1.1.1"}}}`, ReasonBadAddress},
	{"v6 in v4", `{"flow_sample":{"app_name":"a","service_port":80,"app_operation":{},"extended_socket_ipv4":{"local_ip":"::1"}}}`, ReasonBadAddress},
	{"v4 in v6", `{"flow_sample":{"app_name":"a","service_port":80,"app_operation":{},"extended_socket_ipv6":{"remote_ip":"1.2.3.4"}}}`, ReasonBadAddress},
	{"both samples", `{"flow_sample":{"app_name":"a","service_port":80,"app_operation":{}},"counters_sample":{"app_name":"a","service_port":80,"app_workers":{}}}`, ReasonBadMessage},
	{"null", `null`, ReasonBadMessage},
	{"empty object", `{}`, ReasonBadMessage},
	{"counter_sample and its alias", `{"counter_sample":{"app_name":"a","app_workers":{}},"counters_sample":{"app_name":"a","app_workers":{}}}`, ReasonBadMessage},
	{"counter_sample unknown", `{"counter_sample":{"app_name":"a","app_operations":{"succes":1}}}`, ReasonUnknownField},
	{"counter_sample negative", `{"counter_sample":{"app_name":"a","app_operations":{"success":-1}}}`, ReasonOutOfRange},
	// The host agent's custom metrics.
	{"rtmetric not object", `{"rtmetric":[1]}`, ReasonWrongType},
	{"rtmetric no metric", `{"rtmetric":{"datasource":"web1"}}`, ReasonMissingField},
	{"rtmetric bad name", `{"rtmetric":{"a.b":{"type":"gauge32","value":1}}}`, ReasonBadName},
	{"rtmetric datasource digit", `{"rtmetric":{"datasource":"1web","m":{"type":"gauge32","value":1}}}`, ReasonBadName},
	{"rtmetric datasource number", `{"rtmetric":{"datasource":1,"m":{"type":"gauge32","value":1}}}`, ReasonWrongType},
	{"rtmetric long name", `{"rtmetric":{"` + strings.Repeat("m", 65) + `":{"type":"gauge32","value":1}}}`, ReasonStringTooLong},
	{"rtmetric long value", `{"rtmetric":{"m":{"type":"string","value":"` + strings.Repeat("v", 256) + `"}}}`, ReasonStringTooLong},
	{"rtmetric unknown type", `{"rtmetric":{"m":{"type":"gaugedouble","value":1}}}`, ReasonOutOfRange},
	{"rtmetric no value", `{"rtmetric":{"m":{"type":"gauge32"}}}`, ReasonMissingField},
	{"rtmetric no type", `{"rtmetric":{"m":{"value":1}}}`, ReasonMissingField},
	{"rtmetric extra key", `{"rtmetric":{"m":{"type":"gauge32","value":1,"unit":"s"}}}`, ReasonUnknownField},
	{"rtmetric string as number", `{"rtmetric":{"m":{"type":"string","value":1}}}`, ReasonWrongType},
	{"rtmetric counter32 overflow", `{"rtmetric":{"m":{"type":"counter32","value":4294967296}}}`, ReasonOutOfRange},
	{"rtmetric counter negative", `{"rtmetric":{"m":{"type":"counter64","value":-1}}}`, ReasonOutOfRange},
	{"rtmetric counter text", `{"rtmetric":{"m":{"type":"counter64","value":"lots"}}}`, ReasonWrongType},
	{"rtmetric float overflow", `{"rtmetric":{"m":{"type":"gaugeFloat","value":1e39}}}`, ReasonOutOfRange},
	{"rtmetric value object", `{"rtmetric":{"m":{"type":"gauge32","value":{}}}}`, ReasonWrongType},
	{"rtmetric duplicate", `{"rtmetric":{"m":{"type":"gauge32","value":1},"m":{"type":"gauge32","value":2}}}`, ReasonBadMessage},
	{"rtmetric and rtflow", `{"rtmetric":{"m":{"type":"gauge32","value":1}},"rtflow":{"f":{"type":"int32","value":1}}}`, ReasonBadMessage},
	{"rtflow rate 0", `{"rtflow":{"sampling_rate":0,"f":{"type":"int32","value":1}}}`, ReasonOutOfRange},
	{"rtflow bad mac", `{"rtflow":{"f":{"type":"mac","value":"0203040506"}}}`, ReasonBadAddress},
	{"rtflow v6 as ip", `{"rtflow":{"f":{"type":"ip","value":"2001:db8::1"}}}`, ReasonBadAddress},
	{"rtflow v4 as ip6", `{"rtflow":{"f":{"type":"ip6","value":"198.18.0.1"}}}`, ReasonBadAddress},
	{"rtflow no field", `{"rtflow":{"datasource":"web1","sampling_rate":5}}`, ReasonMissingField},
	{"rtflow bad type", `{"rtflow":{"f":{"type":"counter32","value":1}}}`, ReasonOutOfRange},
}

func TestParseJSONBad(t *testing.T) {
	for _, c := range badInputs {
		_, err := ParseJSON([]byte(c.msg))
		re, ok := err.(*RejectError)
		if !ok || re.Reason != c.reason {
			t.Errorf("%s: err %v, want reason %v", c.name, err, c.reason)
		}
	}
}

// TestBadInputCountedOthersIntact interleaves every bad message with good
// ones through the engine: each rejection is counted under its reason,
// and every good sample arrives intact.
func TestBadInputCountedOthersIntact(t *testing.T) {
	col := newCollector(t)
	e := New(Config{})
	e.SetAgentAddress(testAgent)
	e.SetReceivers(append(e.receivers, col.receiver()))
	stop := startEngine(t, e)
	want := map[Reason]uint64{}
	for i, c := range badInputs {
		if err := e.SubmitJSON([]byte(c.msg)); err == nil {
			t.Fatalf("%s accepted", c.name)
		}
		want[c.reason]++
		good := strings.Replace(goodFlowJSON, `"uS":1500`, `"uS":`+strconv.Itoa(i), 1)
		if err := e.SubmitJSON([]byte(good)); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	for r := Reason(0); r < numReasons; r++ {
		if got := e.Stats().Rejected(r); got != want[r] {
			t.Errorf("rejected %v = %d, want %d", r, got, want[r])
		}
	}
	var n int
	for _, d := range decodeAll(t, col.read(t, 200*time.Millisecond)) {
		for _, s := range d.Samples {
			fs := s.(*sflow.FlowSample)
			op := fs.Records[0].(*sflow.AppOperation)
			if op.DurationUS != uint32(n) || op.Context.Operation != "charge" || len(fs.Records) != 5 {
				t.Errorf("good sample %d damaged: %+v", n, fs)
			}
			n++
		}
	}
	if n != len(badInputs) {
		t.Errorf("%d good samples arrived, want %d", n, len(badInputs))
	}
}

// FuzzParseJSON checks that no input crashes the parser, that every
// rejection has a known reason, and that every accepted message is valid
// and survives a round trip through the library's encoder.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{goodFlowJSON, goodHTTPJSON, goodCountersJSON} {
		f.Add([]byte(s))
	}
	for _, c := range badInputs {
		if len(c.msg) < 4096 {
			f.Add([]byte(c.msg))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseJSON(b)
		if err != nil {
			re, ok := err.(*RejectError)
			if !ok || re.Reason < 0 || re.Reason >= numReasons {
				t.Fatalf("error %v is not a RejectError with a known reason", err)
			}
			return
		}
		if m.RTMetric != nil || m.RTFlow != nil {
			checkRTRoundTrip(t, m)
			return
		}
		var out []byte
		if m.Flow != nil {
			if err := m.Flow.Validate(); err != nil {
				t.Fatalf("accepted an invalid sample: %v", err)
			}
			out, err = AppendFlowJSON(nil, m.Flow)
			// Encoding must fit a datagram.
			if len(sflow.AppendSample(nil, &sflow.FlowSample{Records: records(m.Flow)})) > 65000 {
				t.Fatal("sample too large")
			}
		} else {
			if err := m.Counters.Validate(); err != nil {
				t.Fatalf("accepted an invalid sample: %v", err)
			}
			out, err = AppendCountersJSON(nil, m.Counters)
		}
		if err != nil {
			t.Fatal(err)
		}
		m2, err := ParseJSON(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		out2, _ := appendMessage(m2)
		out1, _ := appendMessage(m)
		if !bytes.Equal(out1, out2) {
			t.Fatalf("round trip differs:\n%s\n%s", out1, out2)
		}
	})
}

func appendMessage(m Message) ([]byte, error) {
	if m.Flow != nil {
		return AppendFlowJSON(nil, m.Flow)
	}
	return AppendCountersJSON(nil, m.Counters)
}

func records(f *FlowSample) []sflow.Record {
	var r []sflow.Record
	if f.Operation != nil {
		r = append(r, f.Operation)
	}
	if f.HTTP != nil {
		r = append(r, f.HTTP)
	}
	return r
}

// TestREADMEExamples parses every JSON example of README.md.
func TestREADMEExamples(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(b), "```json\n")[1:]
	if len(blocks) < 3 {
		t.Fatalf("%d JSON examples in README.md", len(blocks))
	}
	for _, blk := range blocks {
		msg := blk[:strings.Index(blk, "```")]
		if _, err := ParseJSON([]byte(msg)); err != nil {
			t.Errorf("README example %s: %v", msg, err)
		}
	}
}
