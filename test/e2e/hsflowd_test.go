package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Data sources the daemon gives hsflowd's example applications, which
// send no service_port: the host agent's range from 150000, in order of
// appearance (the flow sample's application comes first).
const (
	exampleServiceIndex = 150000 // "example.service" (flow samples)
	rocksMgrIndex       = 150001 // "rocks.mgr" (counters)
)

// hsflowdMessages returns the two echo command lines of hsflowd's
// json_example (testdata/hsflowd), made to send to the daemon's API with
// bash's /dev/udp instead of nc.
func hsflowdMessages(t *testing.T) (flow, counters string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "hsflowd", "json_example.messages"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d message lines, want 2", len(lines))
	}
	const nc = " | nc -u -w1 localhost 36343;"
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if !strings.HasSuffix(l, nc) {
			t.Fatalf("line %d does not end with %q", i+1, nc)
		}
		lines[i] = strings.TrimSuffix(l, nc) + " > /dev/udp/127.0.0.1/36343"
	}
	return lines[0], lines[1]
}

// sendShell runs a bash command (hsflowd's echo line) in the switch
// namespace with N set as the script has it (n < 0: unset).
func sendShell(t *testing.T, lab *netlab.Lab, cmd string, n int) {
	t.Helper()
	prefix := "unset N; "
	if n >= 0 {
		prefix = fmt.Sprintf("N=%d; ", n)
	}
	if out, err := lab.Run(lab.Switch, "bash", "-c", prefix+cmd); err != nil {
		t.Fatalf("bash %s: %v\n%s", cmd, err, out)
	}
}

// onlyCustomSamples reports whether every sample of d is an rtmetric or
// rtflow (enterprise 4300) sample, which goflow2 does not know.
func onlyCustomSamples(d *sflow.Datagram) bool {
	if d == nil || len(d.Samples) == 0 {
		return false
	}
	for _, s := range d.Samples {
		switch s.(type) {
		case *sflow.RTMetricSample, *sflow.RTFlowSample:
		default:
			return false
		}
	}
	return true
}

// TestHsflowdJSONExample sends hsflowd's own example messages
// (src/Linux/scripts/json_example, byte for byte, through bash as the
// script does) to the real daemon and checks the decoded stream:
//
//   - the first pass, with $N unset, sends a counter_sample that is not
//     JSON ("success":,): rejected and counted (not_json), as hsflowd's
//     cJSON refuses it too;
//   - the flow_sample (no service_port, client side) arrives as an
//     app_operation flow sample of data source 3:150000, sub-agent
//     150000, input 0x3FFFFFFF (client), output 0, rate 100, pool 100 per
//     sample, with every record the message holds;
//   - the counter_sample (no service_port) arrives as app_operations
//     (counters the message leaves out: "not available"), app_resources,
//     app_workers and host_parent 2:1 on 3:150001, sub-agent 150001;
//   - the same messages with service_port added land on the spec's
//     port-based data sources (client side 200000 + port);
//   - after a restart the applications keep their data sources (state
//     file), and a damaged state file is reported and rebuilt.
func TestHsflowdJSONExample(t *testing.T) {
	lab := newLab(t, 1)
	stateDir := t.TempDir()
	col := listen(t, lab, collectorPort)
	args := []string{"-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-ports", "p1", "-sampling", "1000", "-app-api", appAPIAddr, "-agentx", "off", "-state-dir", stateDir}
	d := startDaemon(t, lab, args...)
	d.waitReady(t, lab, "p1")
	flowCmd, countersCmd := hsflowdMessages(t)

	before := mustFetchMetrics(t, lab).rejectedByReason()
	// Three passes of the script's loop: N unset, 1, 2.
	for _, n := range []int{-1, 1, 2} {
		sendShell(t, lab, flowCmd, n)
		sendShell(t, lab, countersCmd, n)
	}
	exDS := sflow.DataSource{Type: sflow.SourceEntLogicalEntry, Index: exampleServiceIndex}
	rmDS := sflow.DataSource{Type: sflow.SourceEntLogicalEntry, Index: rocksMgrIndex}
	dgs := col.waitFor(t, 5*time.Second, "3 flow samples of 3:150000 and 2 counter samples of 3:150001", func(dgs []datagram) bool {
		return len(appFlowsOf(dgs, exDS)) >= 3 && len(counterSamplesOf(dgs, rmDS)) >= 2
	})
	if got := mustFetchMetrics(t, lab).rejectedByReason()["not_json"] - before["not_json"]; got != 1 {
		t.Errorf("not_json rejections rose by %d, want 1 (the pass with N unset)", got)
	}
	flows := appFlowsOf(dgs, exDS)
	if len(flows) != 3 {
		t.Fatalf("%d flow samples of %s, want 3", len(flows), exDS)
	}
	wantFlowRecords := []sflow.Record{
		&sflow.AppOperation{Context: sflow.AppContext{Application: "example.service", Operation: "task.start", Attributes: "id=123&user=root"},
			StatusDescr: "OK", Status: 0, ReqBytes: 43, RespBytes: 234, DurationUS: 2000},
		&sflow.AppParentContext{Context: sflow.AppContext{Application: "my_parent_app", Operation: "my_parent_op", Attributes: "my_parent_attrib=1"}},
		&sflow.AppInitiator{Actor: "123"},
		&sflow.AppTarget{Actor: "231"},
		&sflow.ExtendedSocketIPv6{Protocol: 6, LocalIP: mustAddr("fec0::1:c:2908:3350"), RemoteIP: mustAddr("fec0::1:20c:29ff:fe44:9bad"), LocalPort: 123, RemotePort: 43032},
	}
	for i, f := range flows {
		want := sflow.FlowSample{SequenceNumber: uint32(i + 1), Source: exDS, SamplingRate: 100, SamplePool: uint32(100 * (i + 1)),
			Input: sflow.IfIndex(sflow.IfIndexInternal), Output: sflow.IfIndex(0), Records: wantFlowRecords}
		got := *f.fs
		got.Expanded = false
		if !reflect.DeepEqual(got, want) {
			t.Errorf("flow sample %d:\n got %+v %s\nwant %+v %s", i, got, fmtRecords(got.Records...), want, fmtRecords(want.Records...))
		}
		if f.dg.SubAgentID != exampleServiceIndex || f.dg.AgentAddress != lab.AgentAddr {
			t.Errorf("flow sample %d in a datagram of sub-agent %d, agent %s", i, f.dg.SubAgentID, f.dg.AgentAddress)
		}
	}
	cs := counterSamplesOf(dgs, rmDS)
	if len(cs) != 2 {
		t.Fatalf("%d counter samples of %s, want 2", len(cs), rmDS)
	}
	u := sflow.CounterUnavailable32
	for i, c := range cs {
		n := uint32(i + 1)
		want := []sflow.Record{
			&sflow.AppOperations{Application: "rocks.mgr", AppStatusCounts: sflow.AppStatusCounts{Success: n, Other: u, Timeout: n, InternalError: u, BadRequest: u,
				Forbidden: u, TooLarge: u, NotImplemented: u, NotFound: u, Unavailable: u, Unauthorized: n}},
			&sflow.AppResources{UserTime: n, MemUsed: 600000, MemMax: 1200000},
			&sflow.AppWorkers{WorkersActive: 1, WorkersIdle: 2, WorkersMax: 8, ReqDelayed: u, ReqDropped: u},
			&sflow.HostParent{ContainerType: sflow.SourceEntPhysicalEntry, ContainerIndex: 1},
		}
		if c.seq != n || !reflect.DeepEqual(c.records, want) {
			t.Errorf("counter sample %d: seq %d %s\nwant seq %d %s", i, c.seq, fmtRecords(c.records...), n, fmtRecords(want...))
		}
	}
	for _, dg := range datagramsOfSubAgent(dgs, rocksMgrIndex) {
		for _, s := range dg.our.Samples {
			if cs, ok := s.(*sflow.CounterSample); !ok || cs.Source != rmDS {
				t.Errorf("sub-agent %d carries %T %+v", rocksMgrIndex, s, s)
			}
		}
	}

	// The same messages with service_port added: the spec's port rule.
	const exPort, rmPort = 8123, 9123
	withPort := func(cmd, kind, quote string, port int) string {
		key := quote + kind + quote + ":{"
		if !strings.Contains(cmd, key) {
			t.Fatalf("no %s in %s", key, cmd)
		}
		return strings.Replace(cmd, key, fmt.Sprintf("%s%sservice_port%s:%d,", key, quote, quote, port), 1)
	}
	sendShell(t, lab, withPort(flowCmd, "flow_sample", `"`, exPort), 3)
	sendShell(t, lab, withPort(countersCmd, "counter_sample", `\"`, rmPort), 3)
	exClient := sflow.DataSource{Type: sflow.SourceEntLogicalEntry, Index: 200000 + exPort}
	rmPortDS := sflow.DataSource{Type: sflow.SourceEntLogicalEntry, Index: rmPort}
	dgs = col.waitFor(t, 5*time.Second, "the samples with service_port", func(dgs []datagram) bool {
		return len(appFlowsOf(dgs, exClient)) >= 1 && len(counterSamplesOf(dgs, rmPortDS)) >= 1
	})
	if f := appFlowsOf(dgs, exClient)[0]; f.dg.SubAgentID != exPort || f.fs.SequenceNumber != 1 || f.fs.Input != sflow.IfIndex(sflow.IfIndexInternal) ||
		!reflect.DeepEqual(f.fs.Records, wantFlowRecords) {
		t.Errorf("flow sample with service_port %d: sub-agent %d %+v", exPort, f.dg.SubAgentID, f.fs)
	}
	if c := counterSamplesOf(dgs, rmPortDS)[0]; c.seq != 1 || len(c.records) != 4 {
		t.Errorf("counters with service_port %d: seq %d, %d records", rmPort, c.seq, len(c.records))
	}
	if n := len(datagramsOfSubAgent(dgs, rmPort)); n == 0 {
		t.Errorf("no datagram of sub-agent %d", rmPort)
	}
	// Sequences restart with the daemon: checked before the restarts.
	checkDatagramSequences(t, col.snapshot(t))
	checkSampleSequences(t, col.snapshot(t))

	// Restart: the state file keeps the assignment, whatever the order in
	// which the applications come back.
	state, err := os.ReadFile(filepath.Join(stateDir, "apps.json"))
	if err != nil || !strings.Contains(string(state), `"example.service": 150000`) || !strings.Contains(string(state), `"rocks.mgr": 150001`) {
		t.Fatalf("state file %s: %v", state, err)
	}
	stop := func() {
		t.Helper()
		d.signal(t, syscall.SIGTERM)
		if code := d.waitExit(t, 10*time.Second); code != 0 {
			t.Fatalf("daemon exited %d:\n%s", code, d.log())
		}
	}
	start := func() *daemon {
		t.Helper()
		d = startDaemon(t, lab, args...)
		d.waitReady(t, lab, "p1")
		return d
	}
	restart := func() *daemon {
		t.Helper()
		stop()
		return start()
	}
	d = restart()
	since := time.Now()
	sendShell(t, lab, countersCmd, 7) // rocks.mgr first this time
	sendShell(t, lab, flowCmd, 7)
	dgs = col.waitFor(t, 5*time.Second, "samples after the restart", func(dgs []datagram) bool {
		after := afterDatagrams(dgs, since)
		return len(appFlowsOf(after, exDS)) >= 1 && len(counterSamplesOf(after, rmDS)) >= 1
	})
	if n := len(counterSamplesOf(afterDatagrams(dgs, since), sflow.DataSource{Type: sflow.SourceEntLogicalEntry, Index: exampleServiceIndex})); n != 0 {
		t.Errorf("rocks.mgr's counters went to 150000 after the restart")
	}

	// A damaged state file, found at the start: reported, set aside,
	// rebuilt; the daemon serves on. Assignment starts afresh (rocks.mgr
	// comes first now). It is damaged while no daemon runs: a running
	// daemon owns the file and writes it at its stop (its writes are
	// batched), which would repair it.
	stop()
	if err := os.WriteFile(filepath.Join(stateDir, "apps.json"), []byte(`{"version":1,"applications":{"x":`), 0o600); err != nil {
		t.Fatal(err)
	}
	d = start()
	since = time.Now()
	sendShell(t, lab, countersCmd, 8)
	col.waitFor(t, 5*time.Second, "rocks.mgr's counters on 3:150000 after the state file was damaged", func(dgs []datagram) bool {
		return len(counterSamplesOf(afterDatagrams(dgs, since), exDS)) >= 1
	})
	if !strings.Contains(d.log(), "application state file damaged") {
		t.Errorf("damaged state file not reported:\n%s", d.log())
	}
	if _, err := os.Stat(filepath.Join(stateDir, "apps.json.damaged")); err != nil {
		t.Errorf("damaged file not set aside: %v", err)
	}
	if !d.alive() {
		t.Errorf("daemon exited:\n%s", d.log())
	}
}

// TestHsflowdRTMetrics sends hsflowd's rtmetric and rtflow messages (the
// examples of its mod_json.c) and a malformed one through the real
// daemon: the samples arrive in datagrams of sub-agent 100000 and decode
// to what was sent; the bad one is counted (bad_name).
func TestHsflowdRTMetrics(t *testing.T) {
	lab := newLab(t, 1)
	col := listen(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-ports", "p1", "-sampling", "1000", "-app-api", appAPIAddr, "-agentx", "off", "-state-dir", t.TempDir())
	d.waitReady(t, lab, "p1")
	before := mustFetchMetrics(t, lab).rejectedByReason()
	for _, msg := range []string{
		`{"rtmetric":{"datasource":"web1","metric1":{"type":"counter32","value":777},"metric2":{"type":"string","value":"helloworld"},"metric3":{"type":"gaugeDouble","value":1.234},"metric4":{"type":"counter64","value":"18446744073709551615"},"metric5":{"type":"gaugeFloat","value":0.5}}}`,
		`{"rtflow":{"datasource":"web1","sampling_rate":10,"field1":{"type":"int32","value":777},"field2":{"type":"string","value":"helloworld"},"field3":{"type":"mac","value":"020304050607"},"src":{"type":"ip","value":"198.18.0.1"},"dst":{"type":"ip6","value":"2001:db8::1"},"d":{"type":"double","value":2.5}}}`,
		`{"rtmetric":{"datasource":"9lives","m":{"type":"gauge32","value":1}}}`,
	} {
		if out, err := lab.Run(lab.Switch, "bash", "-c", "echo '"+msg+"' > /dev/udp/127.0.0.1/36343"); err != nil {
			t.Fatalf("send: %v\n%s", err, out)
		}
	}
	dgs := col.waitFor(t, 5*time.Second, "an rtmetric and an rtflow sample", func(dgs []datagram) bool {
		n := 0
		for _, dg := range datagramsOfSubAgent(dgs, 100000) {
			n += len(dg.our.Samples)
		}
		return n >= 2
	})
	var got []sflow.Sample
	for _, dg := range datagramsOfSubAgent(dgs, 100000) {
		if dg.our.AgentAddress != lab.AgentAddr {
			t.Errorf("agent address %s", dg.our.AgentAddress)
		}
		got = append(got, dg.our.Samples...)
	}
	want := []sflow.Sample{
		&sflow.RTMetricSample{Datasource: "web1", Metrics: []sflow.RTValue{
			{Name: "metric1", Type: uint32(sflow.RTMetricCounter32), Uint: 777},
			{Name: "metric2", Type: uint32(sflow.RTMetricString), Str: "helloworld"},
			{Name: "metric3", Type: uint32(sflow.RTMetricGaugeDouble), Float: 1.234},
			{Name: "metric4", Type: uint32(sflow.RTMetricCounter64), Uint: 18446744073709551615},
			{Name: "metric5", Type: uint32(sflow.RTMetricGaugeFloat), Float: 0.5},
		}},
		&sflow.RTFlowSample{Datasource: "web1", SamplingRate: 10, Fields: []sflow.RTValue{
			{Name: "field1", Type: uint32(sflow.RTFlowInt32), Uint: 777},
			{Name: "field2", Type: uint32(sflow.RTFlowString), Str: "helloworld"},
			{Name: "field3", Type: uint32(sflow.RTFlowMAC), MAC: [6]byte{2, 3, 4, 5, 6, 7}},
			{Name: "src", Type: uint32(sflow.RTFlowIP), Addr: mustAddr("198.18.0.1")},
			{Name: "dst", Type: uint32(sflow.RTFlowIP6), Addr: mustAddr("2001:db8::1")},
			{Name: "d", Type: uint32(sflow.RTFlowDouble), Float: 2.5},
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("samples of sub-agent 100000:\n got %+v\nwant %+v", got, want)
	}
	if n := mustFetchMetrics(t, lab).rejectedByReason()["bad_name"] - before["bad_name"]; n != 1 {
		t.Errorf("bad_name rejections rose by %d, want 1", n)
	}
	checkDatagramSequences(t, col.snapshot(t))
	if !d.alive() {
		t.Errorf("daemon exited:\n%s", d.log())
	}
}

// afterDatagrams returns the datagrams received after since.
func afterDatagrams(dgs []datagram, since time.Time) []datagram {
	var out []datagram
	for _, dg := range dgs {
		if dg.at.After(since) {
			out = append(out, dg)
		}
	}
	return out
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestHsflowdConf runs the daemon on an hsflowd.conf alone (no flags
// besides the lab's): its collector, pcap { dev sampling }, polling and
// json settings take effect, the port it does not name is not sampled,
// the settings that do not apply are printed with their line.
func TestHsflowdConf(t *testing.T) {
	lab := newLab(t, 2)
	col := listen(t, lab, collectorPort)
	conf := filepath.Join(t.TempDir(), "hsflowd.conf")
	body := fmt.Sprintf(`# hsflowd.conf of a switch moving to sflowswitchd
sflow {
  polling = 1
  sampling = 400
  collector { ip = %s udpport = %d }
  pcap { dev = p1 ; sampling = 10 }
  json { udpport = 36343 }
  nflog { group = 5 }
}
`, lab.CollectorAddr, collectorPort)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, lab, "-hsflowd-conf", conf, "-agentx", "off", "-state-dir", t.TempDir())
	d.waitReady(t, lab, "p1")
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	p2 := uint32(lab.LinkIndex(lab.Switch, "p2"))
	const k = 3000
	sendNumbered(t, lab, 0, 1, 1, k)
	flowCmd, _ := hsflowdMessages(t)
	sendShell(t, lab, flowCmd, 1)
	p1ds := sflow.DataSource{Type: sflow.SourceIfIndex, Index: p1}
	exDS := sflow.DataSource{Type: sflow.SourceEntLogicalEntry, Index: exampleServiceIndex}
	col.waitFor(t, 5*time.Second, "a port_name counter sample of p1 and the JSON API's sample", func(dgs []datagram) bool {
		return len(counterSamplesOf(dgs, p1ds)) >= 1 && len(appFlowsOf(dgs, exDS)) == 1
	})
	dgs := col.waitDelivered(t, lab) // every flow sample of p1 is in
	flows := flowSamplesOf(dgs, p1)
	for _, f := range flows {
		if f.rate != 10 {
			t.Fatalf("p1 sampled at %d, want 10 (pcap { sampling = 10 })", f.rate)
		}
	}
	if mean, sd, ok := withinSigmas(len(flows), k, 0.1, 4); !ok {
		t.Errorf("%d flow samples of %d frames at 1 in 10, want %.0f ± 4×%.1f", len(flows), k, mean, sd)
	}
	if n := len(flowSamplesOf(dgs, p2)) + len(counterSamplesOf(dgs, sflow.DataSource{Type: sflow.SourceIfIndex, Index: p2})); n != 0 {
		t.Errorf("p2, not in any pcap { dev }, has %d samples", n)
	}
	var name string
	for _, r := range counterSamplesOf(dgs, p1ds)[0].records {
		if pn, ok := r.(*sflow.PortName); ok {
			name = pn.PortName
		}
	}
	if name != "p1" {
		t.Errorf("port_name %q, want p1", name)
	}
	if want := "file=" + conf + " line=8 col=3 setting=nflog"; !strings.Contains(d.log(), want) {
		t.Errorf("log lacks %q:\n%s", want, d.log())
	}
	checkDatagramSequences(t, col.snapshot(t))
}
