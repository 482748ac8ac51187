package app

import (
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// The examples in the comments of hsflowd's mod_json.c (readJSON_rtmetric,
// readJSON_rtflow), with the type names hsflowd actually matches
// ("gaugeDouble": its comment's "gaugedouble" is refused by its own
// case-sensitive my_strequal).
const (
	rtmetricExample = `{"rtmetric":{"datasource":"web1",
		"metric1":{"type":"counter32","value":777},
		"metric2":{"type":"string","value":"helloworld"},
		"metric3":{"type":"gaugeDouble","value":1.234}}}`
	rtflowExample = `{"rtflow":{"datasource":"web1","sampling_rate":1,
		"field1":{"type":"int32","value":777},
		"field2":{"type":"string","value":"helloworld"},
		"field3":{"type":"mac","value":"020304050607"}}}`
)

func TestParseRT(t *testing.T) {
	m, err := ParseJSON([]byte(rtmetricExample))
	if err != nil {
		t.Fatal(err)
	}
	want := &sflow.RTMetricSample{Datasource: "web1", Metrics: []sflow.RTValue{
		{Name: "metric1", Type: uint32(sflow.RTMetricCounter32), Uint: 777},
		{Name: "metric2", Type: uint32(sflow.RTMetricString), Str: "helloworld"},
		{Name: "metric3", Type: uint32(sflow.RTMetricGaugeDouble), Float: 1.234},
	}}
	if !reflect.DeepEqual(m.RTMetric, want) {
		t.Fatalf("rtmetric %+v, want %+v", m.RTMetric, want)
	}
	m, err = ParseJSON([]byte(rtflowExample))
	if err != nil {
		t.Fatal(err)
	}
	wantFlow := &sflow.RTFlowSample{Datasource: "web1", SamplingRate: 1, Fields: []sflow.RTValue{
		{Name: "field1", Type: uint32(sflow.RTFlowInt32), Uint: 777},
		{Name: "field2", Type: uint32(sflow.RTFlowString), Str: "helloworld"},
		{Name: "field3", Type: uint32(sflow.RTFlowMAC), MAC: [6]byte{2, 3, 4, 5, 6, 7}},
	}}
	if !reflect.DeepEqual(m.RTFlow, wantFlow) {
		t.Fatalf("rtflow %+v, want %+v", m.RTFlow, wantFlow)
	}
	// Numbers given as strings are read as the host agent reads them
	// (strtoul base 0, strtod); MACs may have separators; no datasource
	// is allowed.
	m, err = ParseJSON([]byte(`{"rtflow":{"a":{"type":"int64","value":"0x10"},"b":{"type":"double","value":"2.5"},
		"c":{"type":"mac","value":"02:03:04:05:06:07"},"d":{"type":"ip","value":"198.18.0.1"},"e":{"type":"ip6","value":"2001:db8::1"},
		"f":{"type":"float","value":0.5}}}`))
	if err != nil {
		t.Fatal(err)
	}
	f := m.RTFlow.Fields
	if m.RTFlow.Datasource != "" || f[0].Uint != 16 || f[1].Float != 2.5 || f[2].MAC != [6]byte{2, 3, 4, 5, 6, 7} ||
		f[3].Addr != netip.MustParseAddr("198.18.0.1") || f[4].Addr != netip.MustParseAddr("2001:db8::1") || f[5].Float != 0.5 {
		t.Fatalf("fields %+v", f)
	}
}

// TestRTThroughEngine: rtmetric and rtflow samples leave in datagrams of
// sub-agent 100000, in message order, and decode to what was sent.
func TestRTThroughEngine(t *testing.T) {
	col := newCollector(t)
	e := New(Config{})
	e.SetAgentAddress(testAgent)
	e.SetReceivers(append(e.receivers, col.receiver()))
	stop := startEngine(t, e)
	for _, msg := range []string{rtmetricExample, rtflowExample} {
		if err := e.SubmitJSON([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	var got []sflow.Sample
	for _, b := range col.read(t, 200*time.Millisecond) {
		d, err := sflow.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if d.SubAgentID != RTSubAgent {
			t.Fatalf("sub-agent %d, want %d", d.SubAgentID, RTSubAgent)
		}
		got = append(got, d.Samples...)
	}
	if len(got) != 2 {
		t.Fatalf("%d samples, want 2", len(got))
	}
	if m, ok := got[0].(*sflow.RTMetricSample); !ok || m.Datasource != "web1" || len(m.Metrics) != 3 || m.Metrics[2].Float != 1.234 {
		t.Fatalf("first sample %+v", got[0])
	}
	if f, ok := got[1].(*sflow.RTFlowSample); !ok || f.SamplingRate != 1 || f.Fields[2].MAC != [6]byte{2, 3, 4, 5, 6, 7} {
		t.Fatalf("second sample %+v", got[1])
	}
	if e.Stats().CounterSamples.Load() != 1 || e.Stats().FlowSamples.Load() != 1 {
		t.Fatalf("stats %d counter, %d flow samples", e.Stats().CounterSamples.Load(), e.Stats().FlowSamples.Load())
	}
}

// TestAbsentCountersUnavailable: app_operations counters and app_workers'
// req_delayed/req_dropped left out of a message are "not available"
// (0xFFFFFFFF), as the host agent sends them; gauges left out are 0.
func TestAbsentCountersUnavailable(t *testing.T) {
	m, err := ParseJSON([]byte(`{"counter_sample":{"app_name":"a","app_operations":{"success":5},"app_workers":{"workers_max":8}}}`))
	if err != nil {
		t.Fatal(err)
	}
	o, w := m.Counters.Operations, m.Counters.Workers
	u := sflow.CounterUnavailable32
	if o.Success != 5 || o.Other != u || o.Timeout != u || o.Unauthorized != u {
		t.Fatalf("operations %+v", o)
	}
	if w.WorkersMax != 8 || w.WorkersActive != 0 || w.ReqDelayed != u || w.ReqDropped != u {
		t.Fatalf("workers %+v", w)
	}
}

// TestNamedSources: applications without a service port get data source
// indexes from 150000 up in order of appearance, one per name; a message
// without a port goes to the data source its application is already on
// (also a port-based one); the assignment survives a restart through the
// state file.
func TestNamedSources(t *testing.T) {
	state := filepath.Join(t.TempDir(), "sub", "apps.json")
	run := func(msgs ...string) map[string][]uint32 {
		col := newCollector(t)
		e := New(Config{StateFile: state})
		e.SetAgentAddress(testAgent)
		e.SetReceivers(append(e.receivers, col.receiver()))
		stop := startEngine(t, e)
		for _, m := range msgs {
			if err := e.SubmitJSON([]byte(m)); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
		}
		stop()
		got := map[string][]uint32{} // app name -> [sub-agent, data source index]
		for _, d := range decodeAll(t, col.read(t, 200*time.Millisecond)) {
			for _, s := range d.Samples {
				var name string
				var idx uint32
				switch s := s.(type) {
				case *sflow.FlowSample:
					idx = s.Source.Index
					for _, r := range s.Records {
						if op, ok := r.(*sflow.AppOperation); ok {
							name = op.Context.Application
						}
					}
				case *sflow.CounterSample:
					idx = s.Source.Index
					for _, r := range s.Records {
						if op, ok := r.(*sflow.AppOperations); ok {
							name = op.Application
						}
					}
				}
				got[name] = append(got[name], d.SubAgentID, idx)
			}
		}
		return got
	}
	flow := func(name, port string) string {
		return `{"flow_sample":{"app_name":"` + name + `"` + port + `,"app_operation":{"operation":"x"}}}`
	}
	counters := func(name string) string {
		return `{"counter_sample":{"app_name":"` + name + `","app_operations":{"success":1}}}`
	}
	got := run(flow("alpha", ""), flow("beta", ""), counters("alpha"), flow("web", `,"service_port":8080`), counters("web"), counters("gamma"))
	want := map[string][]uint32{
		"alpha": {150000, 150000, 150000, 150000},
		"beta":  {150001, 150001},
		"web":   {8080, 8080, 8080, 8080},
		"gamma": {150002, 150002},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	// Restart: the same names keep their indexes, whatever the order; a
	// new name gets the next free one.
	got = run(counters("gamma"), counters("delta"), flow("alpha", ""))
	want = map[string][]uint32{"gamma": {150002, 150002}, "delta": {150003, 150003}, "alpha": {150000, 150000}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart got %v\nwant %v", got, want)
	}
	b, err := os.ReadFile(state)
	if err != nil || !strings.Contains(string(b), `"delta": 150003`) {
		t.Fatalf("state file %s: %v", b, err)
	}
}

// TestStateFileDamaged: a damaged state file is reported, set aside and
// rebuilt; the engine works on.
func TestStateFileDamaged(t *testing.T) {
	for name, content := range map[string]string{
		"not json":        `{"version":1,"applications":{"a":15`,
		"wrong version":   `{"version":9,"applications":{}}`,
		"index in range":  `{"version":1,"applications":{"a":8080}}`,
		"duplicate index": `{"version":1,"applications":{"a":150000,"b":150000}}`,
		"bad name":        `{"version":1,"applications":{"":150000}}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "apps.json")
			if err := os.WriteFile(state, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			var logged strings.Builder
			e := New(Config{StateFile: state, Logger: testLogger(&logged)})
			if !strings.Contains(logged.String(), "application state file damaged") {
				t.Fatalf("not reported: %q", logged.String())
			}
			if b, err := os.ReadFile(state + ".damaged"); err != nil || string(b) != content {
				t.Fatalf("damaged file not kept: %q %v", b, err)
			}
			idx, err := e.reg.assign("zeta")
			if err != nil || idx != NamedIndexBase {
				t.Fatalf("resolve: %d %v", idx, err)
			}
			e.reg.flush(false) // the engine's next tick
			if got := e.Assignments(); len(got) != 1 || got[0] != (NamedSource{"zeta", NamedIndexBase}) {
				t.Fatalf("assignments %v", got)
			}
			if b, err := os.ReadFile(state); err != nil || !strings.Contains(string(b), `"zeta": 150000`) {
				t.Fatalf("rebuilt state file %q: %v", b, err)
			}
		})
	}
}

// TestStateDirUnwritable: a state file that cannot be written is logged
// once; applications are still served.
func TestStateDirUnwritable(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	e := New(Config{StateFile: filepath.Join(blocker, "apps.json"), Logger: testLogger(&logged)})
	for i, name := range []string{"a", "b", "c"} {
		idx, err := e.reg.assign(name)
		if err != nil || idx != NamedIndexBase+uint32(i) {
			t.Fatalf("%s: %d %v", name, idx, err)
		}
		e.reg.flush(false)
	}
	if n := strings.Count(logged.String(), "application state file not written"); n != 1 {
		t.Fatalf("logged %d times: %s", n, logged.String())
	}
}

// TestNamedRangeExhausted: when maxNamed names are assigned (before,
// all 50000 indexes of the named range), a new
// application takes over the index of the one seen least recently that
// is not running; with every one running it is refused
// (too_many_sources), never given a clashing index.
func TestNamedRangeExhausted(t *testing.T) {
	r := newRegistry("", DefaultMaxSources, testLogger(nil))
	for i := 0; i < maxNamed; i++ {
		if _, err := r.assign("app" + strconv.Itoa(NamedIndexBase+i)); err != nil {
			t.Fatal(err)
		}
	}
	r.live = map[string]uint32{} // none running but those below
	r.resolve("app150000", 0)    // running (live), and seen
	r.resolve("app150001", 0)    // seen: more recent than the others
	r.forget(NamedIndexBase + 1) // and not running
	idx, err := r.assign("late")
	if err != nil || idx != NamedIndexBase+2 {
		t.Fatalf("took %d (%v), want %d: the least recently seen non-running one", idx, err, NamedIndexBase+2)
	}
	if _, still := r.named["app150002"]; still || r.used[idx] != "late" || len(r.named) != maxNamed {
		t.Fatalf("take-over not recorded: %v %q %d", still, r.used[idx], len(r.named))
	}
	if idx, err := r.resolve("late", 443), error(nil); err != nil || idx != 443 {
		t.Fatalf("with a port: %d", idx)
	}
	// Every index running: refused.
	full := newRegistry("", maxNamed, testLogger(nil))
	for i := 0; i < maxNamed; i++ {
		if _, err := full.assign("x" + strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = full.assign("new")
	var re *RejectError
	if !errors.As(err, &re) || re.Reason != ReasonTooManySources {
		t.Fatalf("got %v", err)
	}
}

// TestNamedFlood: a sender cycling through new names gets data sources
// only as slots allow (MaxSources, idle ones reclaimed): the others are
// refused (too_many_sources) before any index is assigned or written.
func TestNamedFlood(t *testing.T) {
	state := filepath.Join(t.TempDir(), "apps.json")
	e := New(Config{StateFile: state, MaxSources: 8, Logger: testLogger(nil)})
	stop := startEngine(t, e)
	for i := 0; i < 100; i++ {
		// Each name twice in a row: the second message, queued before
		// the first was handled, finds the index the first was given.
		for range 2 {
			if err := e.SubmitJSON([]byte(`{"counter_sample":{"app_name":"app` + strconv.Itoa(i) + `","app_workers":{"workers_max":1}}}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop()
	if n, r := len(e.Assignments()), e.Stats().Rejected(ReasonTooManySources); n != 8 || r != 184 {
		t.Fatalf("%d assigned, %d refused; want 8 and 184", n, r)
	}
	b, err := os.ReadFile(state)
	if err != nil || strings.Count(string(b), `": 1500`) != 8 {
		t.Fatalf("state file %s: %v", b, err)
	}
}

// checkRTRoundTrip checks an accepted rtmetric/rtflow message: its sample
// encodes into a datagram the strict decoder reads back unchanged.
func checkRTRoundTrip(t *testing.T, m Message) {
	t.Helper()
	var s sflow.Sample = m.RTFlow
	if m.RTMetric != nil {
		s = m.RTMetric
	}
	d := &sflow.Datagram{AgentAddress: testAgent, SubAgentID: RTSubAgent, Samples: []sflow.Sample{s}}
	back, err := sflow.Decode(d.AppendXDR(nil))
	if err != nil {
		t.Fatalf("accepted message encodes to an undecodable datagram: %v", err)
	}
	if !reflect.DeepEqual(back.Samples[0], s) {
		t.Fatalf("round trip\n%+v\n%+v", back.Samples[0], s)
	}
}

// FuzzParseRT fuzzes the rtmetric/rtflow parser: no input crashes it,
// every rejection has a known reason, and every accepted message gives a
// sample that encodes and decodes back unchanged.
//
//	go test -run '^$' -fuzz '^FuzzParseRT$' -fuzztime 1m ./apps/app/
func FuzzParseRT(f *testing.F) {
	f.Add([]byte(rtmetricExample))
	f.Add([]byte(rtflowExample))
	f.Add([]byte(`{"rtflow":{"a":{"type":"int64","value":"0x10"},"c":{"type":"mac","value":"02:03:04:05:06:07"},"d":{"type":"ip","value":"198.18.0.1"},"e":{"type":"ip6","value":"2001:db8::1"},"f":{"type":"float","value":0.5}}}`))
	for _, c := range badInputs {
		if strings.Contains(c.msg, `"rt`) && len(c.msg) < 4096 {
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
		}
	})
}

// testLogger logs text to w (nil: nowhere).
func testLogger(w *strings.Builder) *slog.Logger {
	if w == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// TestStateFileSizeLimited (inputs size-limited): a state file
// above maxStateBytes is reported as damaged and set aside, never read
// without a limit.
func TestStateFileSizeLimited(t *testing.T) {
	state := filepath.Join(t.TempDir(), "apps.json")
	if err := os.WriteFile(state, []byte(`{"version":1,"applications":{}}`+strings.Repeat(" ", maxStateBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	New(Config{StateFile: state, Logger: testLogger(&logged)})
	if !strings.Contains(logged.String(), "application state file damaged") || !strings.Contains(logged.String(), "larger than") {
		t.Fatalf("oversized state file not reported: %q", logged.String())
	}
}
