package e2e

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/snmptest"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// The Python test's parameters: pyK flow samples of application pyApp
// reported at sampling rate pyRate (the application sampled them), then
// one counters sample.
const (
	pyK    = 300
	pyRate = 5
	pyPort = 7001
	pyApp  = "inventory"
)

// pyFlows is a python3 one-liner sending pyK flow samples to the JSON API
// (paced, 0.5 ms apart). Sample i: operation get.item, attributes i=I,
// status NOT_FOUND (8) for every 10th, request i bytes, response 2i, 1000+i
// µs, initiator customer-(i mod 7), socket 198.19.255.1:7001 <-
// 198.18.0.11:40000+i.
var pyFlows = fmt.Sprintf(`import json,socket,time;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);`+
	`[(s.sendto(json.dumps({"flow_sample":{"app_name":%[1]q,"service_port":%[2]d,"sampling_rate":%[3]d,`+
	`"app_operation":{"operation":"get.item","attributes":"i=%%d"%%i,"status":8 if i%%10==0 else 0,"req_bytes":i,"resp_bytes":2*i,"uS":1000+i},`+
	`"app_initiator":{"actor":"customer-%%d"%%(i%%7)},`+
	`"extended_socket_ipv4":{"protocol":6,"local_ip":"198.19.255.1","remote_ip":"198.18.0.11","local_port":%[2]d,"remote_port":40000+i}}}).encode(),(%[4]q,%[5]s)),time.sleep(0.0005)) for i in range(%[6]d)]`,
	pyApp, pyPort, pyRate, "127.0.0.1", "36343", pyK)

// pyCounters is a python3 one-liner sending one counters sample.
var pyCounters = fmt.Sprintf(`import json,socket;socket.socket(socket.AF_INET,socket.SOCK_DGRAM).sendto(json.dumps({"counters_sample":{"app_name":%q,"service_port":%d,`+
	`"app_operations":{"success":270,"not_found":30},"app_workers":{"workers_active":3,"workers_idle":5,"workers_max":8,"req_delayed":1,"req_dropped":2}}}).encode(),("127.0.0.1",36343))`,
	pyApp, pyPort)

func testAppJSONFromPython(t *testing.T, lab *netlab.Lab, col *collector, snmp *snmptest.Snmpd) {
	py := python3(t)
	if out, err := lab.Run(lab.Switch, py, "-c", pyFlows); err != nil {
		t.Fatalf("python3 flow samples: %v\n%s", err, out)
	}
	if out, err := lab.Run(lab.Switch, py, "-c", pyCounters); err != nil {
		t.Fatalf("python3 counters sample: %v\n%s", err, out)
	}
	ds := sflow.DataSource{Type: sflow.SourceEntLogicalEntry, Index: pyPort}
	dgs := col.waitFor(t, 5*time.Second, fmt.Sprintf("%d flow samples and the counters of 3:%d", pyK, pyPort), func(dgs []datagram) bool {
		return len(appFlowsOf(dgs, ds)) >= pyK && len(counterSamplesOf(dgs, ds)) > 0
	})
	handled := time.Now()

	flows := appFlowsOf(dgs, ds)
	if len(flows) != pyK {
		t.Errorf("%d flow samples of 3:%d, sent %d", len(flows), pyPort, pyK)
	}
	var ok int
	for k, f := range flows {
		checkAppFlowHeader(t, lab, f, pyPort, pyRate)
		i := k // the API keeps the order of one sender's datagrams
		if f.fs.SequenceNumber != uint32(i+1) || f.fs.SamplePool != uint32(pyRate*(i+1)) {
			t.Errorf("flow sample %d: sequence %d pool %d, want %d and %d (pool = sum of sampling_rate without seen)",
				i, f.fs.SequenceNumber, f.fs.SamplePool, i+1, pyRate*(i+1))
		}
		status := sflow.AppStatus(0)
		if i%10 == 0 {
			status = 8
		} else {
			ok++
		}
		want := []sflow.Record{
			&sflow.AppOperation{Context: sflow.AppContext{Application: pyApp, Operation: "get.item", Attributes: "i=" + strconv.Itoa(i)},
				ReqBytes: uint64(i), RespBytes: uint64(2 * i), DurationUS: uint32(1000 + i), Status: status},
			&sflow.AppInitiator{Actor: fmt.Sprintf("customer-%d", i%7)},
			&sflow.ExtendedSocketIPv4{Protocol: 6, LocalIP: lab.AgentAddr, RemoteIP: netip4(198, 18, 0, 11), LocalPort: pyPort, RemotePort: uint32(40000 + i)},
		}
		if fmtRecords(f.fs.Records...) != fmtRecords(want...) {
			t.Errorf("flow sample %d: records %s, want %s", i, fmtRecords(f.fs.Records...), fmtRecords(want...))
		}
	}
	cs := counterSamplesOf(dgs, ds)
	if len(cs) != 1 {
		t.Fatalf("%d counter samples of 3:%d, want 1", len(cs), pyPort)
	}
	u := sflow.CounterUnavailable32
	checkAppCounterRecords(t, cs[0], pyPort,
		// Counters the message leaves out are "not available", as
		// hsflowd sends them (apps/app/counters_absent.go).
		&sflow.AppOperations{Application: pyApp, AppStatusCounts: sflow.AppStatusCounts{Success: 270, NotFound: 30, Other: u, Timeout: u, InternalError: u,
			BadRequest: u, Forbidden: u, TooLarge: u, NotImplemented: u, Unavailable: u, Unauthorized: u}},
		&sflow.AppWorkers{WorkersActive: 3, WorkersIdle: 5, WorkersMax: 8, ReqDelayed: 1, ReqDropped: 2})

	// goflow2: same samples; the raw app_initiator, socket and
	// app_workers records read from the spec's layout.
	gfs := goflowAppSamples(t, datagramsOfSubAgent(dgs, pyPort), pyPort)
	var gfFlows int
	for _, g := range gfs {
		if !g.flow {
			w, ok := g.rawRecord(2206)
			v, err := parseUint32s(w, 5)
			if !ok || err != nil || fmt.Sprint(v) != "[3 5 8 1 2]" || len(g.formats) != 3 || g.formats[2] != 2002 {
				t.Errorf("goflow2: counters of 3:%d: formats %v, app_workers %v (%v)", pyPort, g.formats, v, err)
			}
			continue
		}
		i := gfFlows
		gfFlows++
		if fmt.Sprint(g.formats) != "[2202 2204 2100]" || g.rate != pyRate || g.pool != uint32(pyRate*(i+1)) || g.seq != uint32(i+1) {
			t.Errorf("goflow2: flow sample %d: formats %v rate %d pool %d seq %d", i, g.formats, g.rate, g.pool, g.seq)
			continue
		}
		r := &xdrReader{b: g.raw[1]}
		actor := r.str(64)
		s, err := parseSocket4(g.raw[2])
		if r.done() != nil || err != nil || actor != fmt.Sprintf("customer-%d", i%7) || s.remotePort != uint32(40000+i) || s.local != lab.AgentAddr {
			t.Errorf("goflow2: flow sample %d: actor %q socket %+v (%v)", i, actor, s, err)
		}
	}
	if gfFlows != pyK {
		t.Errorf("goflow2 sees %d flow samples of 3:%d, sent %d", gfFlows, pyPort, pyK)
	}

	// APM: every message is a transaction of weight pyRate.
	doc := waitAPMClosed(t, lab, apmControlApplications, handled)
	appIdx := doc.appIndex(t, pyApp)
	count, success := doc.totals(apmControlApplications, appIdx)
	if count != pyRate*pyK || success != uint64(pyRate*ok) {
		t.Errorf("APM applications report of %s: %d transactions, %d successful; want %d and %d", pyApp, count, success, pyRate*pyK, pyRate*ok)
	}
	if g := apmCountsGoSNMP(t, snmp, apmControlApplications)[appIdx]; g != count {
		t.Errorf("APM-MIB (gosnmp): apmReportTransactionCount of app %d sums to %d, sflowswitchd apm says %d", appIdx, g, count)
	}
	t.Logf("python3: %d flow samples and 1 counters sample arrived as sent; APM %s (app %d): %d transactions, %d successful", len(flows), pyApp, appIdx, count, success)
}

// netip4 is the IPv4 address a.b.c.d.
func netip4(a, b, c, d byte) netip.Addr { return netip.AddrFrom4([4]byte{a, b, c, d}) }

// badPort is the application of the good samples sent around the bad
// input.
const (
	badPort = 7002
	badApp  = "guard"
)

// goodMessage is a valid flow sample numbered g.
func goodMessage(g int) []byte {
	return []byte(fmt.Sprintf(`{"flow_sample":{"app_name":%q,"service_port":%d,"app_operation":{"operation":"good","attributes":"g=%d","status":0,"uS":10},`+
		`"extended_socket_ipv4":{"protocol":6,"local_ip":"198.19.255.1","remote_ip":"198.18.0.11","local_port":%d,"remote_port":50000}}}`, badApp, badPort, g, badPort))
}

// badMessages are malformed API messages and the reason each must be
// rejected for (apps/app/README.md, Strictness). too_large (> 64 KiB)
// cannot be sent: a UDP datagram over IPv4 carries at most 65507 bytes,
// so the largest ones here are rejected for what they contain.
func badMessages() []struct {
	reason string
	msg    []byte
} {
	valid := string(goodMessage(0))
	edit := func(old, new string) []byte {
		if !strings.Contains(valid, old) {
			panic("badMessages: " + old + " not in the valid message")
		}
		return []byte(strings.Replace(valid, old, new, 1))
	}
	return []struct {
		reason string
		msg    []byte
	}{
		{"not_json", []byte("hello")},
		{"not_json", []byte("{")},
		{"not_json", []byte{}},
		{"not_json", []byte{0, 1, 2, 0xff, 0xfe}},
		{"not_json", []byte(valid[:len(valid)/2])},
		{"not_json", []byte(valid + "{}")},
		{"not_json", []byte(strings.Repeat("x", 65507))}, // oversized, the UDP maximum
		{"wrong_type", edit(`"app_name":"guard"`, `"app_name":5`)},
		{"wrong_type", edit(`"service_port":7002`, `"service_port":"7002"`)},
		{"wrong_type", []byte(`{"flow_sample":"x"}`)},
		{"wrong_type", []byte(`[1,2]`)},
		{"wrong_type", edit(`"status":0`, `"status":true`)},
		{"unknown_field", edit(`"uS":10`, `"uS":10,"bogus":1`)},
		{"unknown_field", []byte(`{"flow_samples":{}}`)},
		{"unknown_field", []byte(`{"counters_sample":{"app_name":"guard","service_port":7002,"http_counters":{"method_gett_count":1}}}`)},
		{"out_of_range", edit(`"service_port":7002`, `"service_port":0`)},
		{"out_of_range", edit(`"service_port":7002`, `"service_port":70000`)},
		{"out_of_range", edit(`"service_port":7002`, `"service_port":-1`)},
		{"out_of_range", edit(`"service_port":7002`, `"service_port":1.5`)},
		{"out_of_range", edit(`"status":0`, `"status":11`)},
		{"out_of_range", edit(`"local_port":7002`, `"local_port":70000`)},
		{"string_too_long", edit(`"app_name":"guard"`, `"app_name":"`+strings.Repeat("g", 33)+`"`)},
		{"string_too_long", edit(`"attributes":"g=0"`, `"attributes":"`+strings.Repeat("a", 65000)+`"`)}, // oversized
		{"missing_field", edit(`"app_name":"guard",`, ``)},
		{"missing_field", edit(`"app_operation":{"operation":"good","attributes":"g=0","status":0,"uS":10},`, ``)},
		{"missing_field", []byte(`{"counters_sample":{"app_name":"guard","service_port":7002}}`)},
		{"bad_address", edit(`"local_ip":"198.19.255.1"`, `"local_ip":"300.1.1.1"`)},
		{"bad_address", edit(`"remote_ip":"198.18.0.11"`, `"remote_ip":"2001:db8::1"`)},
		{"bad_message", []byte(`{}`)},
		{"bad_message", []byte(`{"flow_sample":` + valid[len(`{"flow_sample":`):len(valid)-1] + `,"counters_sample":{"app_name":"guard","service_port":7002,"app_workers":{}}}`)},
	}
}

// pySendFile is a python3 one-liner sending each line of a file
// (base64) as one datagram to the JSON API, 1 ms apart.
const pySendFile = `import base64,socket,sys,time;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);[(s.sendto(base64.b64decode(l),("127.0.0.1",36343)),time.sleep(0.001)) for l in open(sys.argv[1])]`

func testAppBadInput(t *testing.T, lab *netlab.Lab, d *daemon, col *collector) {
	before := mustFetchMetrics(t, lab)
	acceptedBefore, _ := before.value("sflowswitchd_app_samples_accepted_total")

	// Good samples 1..G interleaved with the bad messages, three rounds
	// of the bad list.
	const rounds = 3
	bad := badMessages()
	var lines []string
	wantRejected := map[string]uint64{}
	good := 0
	for range rounds {
		for i, b := range bad {
			if i%3 == 0 {
				good++
				lines = append(lines, base64.StdEncoding.EncodeToString(goodMessage(good)))
			}
			lines = append(lines, base64.StdEncoding.EncodeToString(b.msg))
			wantRejected[b.reason]++
		}
	}
	good++
	lines = append(lines, base64.StdEncoding.EncodeToString(goodMessage(good)))
	path := filepath.Join(t.TempDir(), "messages.b64")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := lab.Run(lab.Switch, python3(t), "-c", pySendFile, path); err != nil {
		t.Fatalf("python3 sender: %v\n%s", err, out)
	}

	ds := sflow.DataSource{Type: sflow.SourceEntLogicalEntry, Index: badPort}
	dgs := col.waitFor(t, 5*time.Second, fmt.Sprintf("%d good flow samples of 3:%d", good, badPort), func(dgs []datagram) bool {
		return len(appFlowsOf(dgs, ds)) >= good
	})
	flows := appFlowsOf(dgs, ds)
	if len(flows) != good {
		t.Errorf("%d flow samples of 3:%d, sent %d good ones", len(flows), badPort, good)
	}
	for k, f := range flows {
		checkAppFlowHeader(t, lab, f, badPort, 1)
		want := fmtRecords(
			&sflow.AppOperation{Context: sflow.AppContext{Application: badApp, Operation: "good", Attributes: fmt.Sprintf("g=%d", k+1)}, DurationUS: 10},
			&sflow.ExtendedSocketIPv4{Protocol: 6, LocalIP: lab.AgentAddr, RemoteIP: netip4(198, 18, 0, 11), LocalPort: badPort, RemotePort: 50000},
		)
		if got := fmtRecords(f.fs.Records...); got != want || f.fs.SequenceNumber != uint32(k+1) {
			t.Errorf("good sample %d: sequence %d records %s, want %s", k+1, f.fs.SequenceNumber, got, want)
		}
	}

	if !d.alive() {
		t.Fatalf("daemon exited:\n%s", d.log())
	}
	after := mustFetchMetrics(t, lab)
	rb, ra := before.rejectedByReason(), after.rejectedByReason()
	var total uint64
	for reason, n := range wantRejected {
		total += n
		if got := ra[reason] - rb[reason]; got != n {
			t.Errorf("rejected %s: +%d, sent %d", reason, got, n)
		}
	}
	for reason := range ra {
		if _, sent := wantRejected[reason]; !sent && ra[reason] != rb[reason] {
			t.Errorf("rejected %s: +%d, sent none", reason, ra[reason]-rb[reason])
		}
	}
	acceptedAfter, _ := after.value("sflowswitchd_app_samples_accepted_total")
	if acceptedAfter-acceptedBefore != uint64(good) {
		t.Errorf("accepted +%d, sent %d good samples", acceptedAfter-acceptedBefore, good)
	}
	t.Logf("%d malformed messages rejected by reason %v, %d good samples around them arrived intact", total, wantRejected, good)
}
