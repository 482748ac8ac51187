package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/apps/httpsflow"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/snmptest"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestApplications is the applications on the switch, end to end:
// the daemon runs in the switch namespace with its local JSON API
// (-app-api), 2 s APM reports, and an AgentX connection to a real snmpd
// (in a temp dir, reached through its unix socket) serving the APM-MIB.
// The collector listens in the collector namespace.
//
//   - HTTP: a Go HTTP server with the httpsflow middleware (1 in 10)
//     listening in the switch namespace serves requests from a client in
//     the collector namespace; the samples, counters and APM reports must
//     describe exactly what the client sent.
//   - JSONFromPython: python3 one-liners send flow samples and a counters
//     sample to the JSON API; every one arrives, encoded as sent, and the
//     APM reports count them.
//   - BadInput: a burst of malformed messages is rejected and counted by
//     reason, the good samples around it arrive intact, and the daemon
//     keeps running.
func TestApplications(t *testing.T) {
	lab := newLab(t, 1)
	snmp := startSnmpd(t)
	col := listen(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-ports", "p1", "-sampling", "1000", "-app-api", appAPIAddr, "-apm-interval", "2",
		"-agentx", "unix:"+snmp.SocketPath)
	d.waitReady(t, lab, "p1")
	waitAPMMIB(t, snmp, d)

	t.Run("HTTP", func(t *testing.T) { testAppHTTP(t, lab, col, snmp) })
	t.Run("JSONFromPython", func(t *testing.T) { testAppJSONFromPython(t, lab, col, snmp) })
	t.Run("BadInput", func(t *testing.T) { testAppBadInput(t, lab, d, col) })

	checkDatagramSequences(t, col.snapshot(t))
	checkSampleSequences(t, col.snapshot(t))
	if !d.alive() {
		t.Errorf("daemon exited:\n%s", d.log())
	}
}

// The HTTP test's parameters: httpTotal requests sampled 1 in httpN by
// the middleware, in three phases of httpK requests: one at a time round
// robin over httpConns keep-alive connections (the sample pool of request
// n is then exactly n+1), httpConns clients at once, one at a time again.
const (
	httpK       = 1500      // requests per phase
	httpTotal   = 3 * httpK // phase 1 sequential, 2 concurrent, 3 sequential
	httpN       = 10
	httpPort    = 8080
	httpConns   = 4
	httpAppName = "e2e-shop"
	httpAgent   = "sflowswitchd-e2e/1"
)

// httpPlan is what the client sends as request n and what the server
// answers.
type httpPlan struct {
	method  string
	uri     string
	status  int
	req     int  // request body bytes
	chunked bool // request body without Content-Length
	resp    int  // response body bytes
	mime    string
}

func planRequest(n int) httpPlan {
	p := httpPlan{method: [3]string{http.MethodGet, http.MethodPost, http.MethodPut}[n%3], status: http.StatusOK, mime: "application/json"}
	switch {
	case n%7 == 3:
		p.status, p.mime = http.StatusNotFound, "text/plain; charset=utf-8"
	case n%11 == 5:
		p.status, p.mime = http.StatusInternalServerError, "text/plain; charset=utf-8"
	}
	if p.method != http.MethodGet {
		p.req = (n*131)%4000 + 1
		p.chunked = p.method == http.MethodPut && n%2 == 0
	}
	p.resp = (n * 37) % 5000
	p.uri = fmt.Sprintf("/item/%d?resp=%d&tag=e2e", n, p.resp)
	return p
}

// requestNumber returns n of a URI made by planRequest.
func requestNumber(uri string) (int, bool) {
	rest, ok := strings.CutPrefix(uri, "/item/")
	if !ok {
		return 0, false
	}
	s, _, _ := strings.Cut(rest, "?")
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0 && n < httpTotal
}

// shopHandler answers request n as planRequest(n) says, after checking
// that the request body is the one planned (400 otherwise, which the
// client reports).
func shopHandler(w http.ResponseWriter, r *http.Request) {
	n, ok := requestNumber(r.RequestURI)
	if !ok {
		http.Error(w, "no such item", http.StatusBadRequest)
		return
	}
	p := planRequest(n)
	got, err := io.Copy(io.Discard, r.Body)
	if err != nil || got != int64(p.req) || r.Method != p.method {
		http.Error(w, fmt.Sprintf("request %d: %s with %d body bytes (%v), planned %s with %d", n, r.Method, got, err, p.method, p.req), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", p.mime)
	w.WriteHeader(p.status)
	if _, err := w.Write(bytes.Repeat([]byte{'x'}, p.resp)); err != nil {
		return // the client went away: it reports the short response
	}
}

// hiddenLength hides a body's length from net/http, so the request is
// sent chunked (no Content-Length) and the middleware counts the bytes
// the handler reads.
type hiddenLength struct{ io.Reader }

func testAppHTTP(t *testing.T, lab *netlab.Lab, col *collector, snmp *snmptest.Snmpd) {
	// The server's listening socket and the reporter's UDP socket are
	// created in the switch namespace; accepted connections stay there.
	var ln net.Listener
	var rep *httpsflow.UDPReporter
	err := lab.Do(lab.Switch, func() error {
		var err error
		if ln, err = net.Listen("tcp4", netip.AddrPortFrom(lab.AgentAddr, httpPort).String()); err != nil {
			return err
		}
		rep, err = httpsflow.DialAPI(appAPIAddr)
		return err
	})
	if err != nil {
		t.Fatalf("server sockets in the switch namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := rep.Close(); err != nil {
			t.Errorf("close the reporter: %v", err)
		}
	})
	mw, err := httpsflow.New(httpsflow.Config{AppName: httpAppName, SamplingRate: httpN, PollingInterval: time.Hour, Reporter: rep},
		http.HandlerFunc(shopHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mw, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close the HTTP server: %v", err)
		}
		if err := <-served; err != http.ErrServerClosed {
			t.Errorf("HTTP server: %v", err)
		}
	})

	// The client dials from the collector namespace: one transport per
	// connection, so requests rotate over httpConns source ports.
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := lab.Do(lab.Collector, func() error {
			var err error
			var d net.Dialer
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	clients := make([]*http.Client, httpConns)
	for i := range clients {
		tr := &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 1, DisableCompression: true}
		t.Cleanup(tr.CloseIdleConnections)
		clients[i] = &http.Client{Transport: tr, Timeout: 5 * time.Second}
	}
	base := "http://" + netip.AddrPortFrom(lab.AgentAddr, httpPort).String()
	clientPort := make([]uint16, httpTotal)
	// send sends request n with client c and checks the answer.
	send := func(c *http.Client, n int) error {
		p := planRequest(n)
		var body io.Reader
		if p.method != http.MethodGet {
			body = bytes.NewReader(bytes.Repeat([]byte{'y'}, p.req))
			if p.chunked {
				body = hiddenLength{body}
			}
		}
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
			clientPort[n] = uint16(ci.Conn.LocalAddr().(*net.TCPAddr).Port)
		}})
		req, err := http.NewRequestWithContext(ctx, p.method, base+p.uri, body)
		if err != nil {
			return err
		}
		req.Header.Set("User-Agent", httpAgent)
		resp, err := c.Do(req)
		if err != nil {
			return fmt.Errorf("request %d: %w", n, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != p.status || len(got) != p.resp {
			return fmt.Errorf("request %d: status %d, %d body bytes (%v), planned %d and %d: %s", n, resp.StatusCode, len(got), err, p.status, p.resp, got)
		}
		return nil
	}
	// Phase 1: one request at a time, round robin over the connections.
	for n := range httpK {
		if err := send(clients[n%httpConns], n); err != nil {
			t.Fatal(err)
		}
	}
	// Phase 2: httpConns clients at once, requests numbered in the
	// order they are taken.
	var next atomic.Int64
	next.Store(httpK)
	errs := make(chan error, httpConns)
	for _, c := range clients {
		go func() {
			for n := int(next.Add(1) - 1); n < 2*httpK; n = int(next.Add(1) - 1) {
				if err := send(c, n); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Phase 3: one at a time again, which shows whether phase 2 left the
	// sample pool off (see checkHTTPPool).
	for n := 2 * httpK; n < httpTotal; n++ {
		if err := send(clients[n%httpConns], n); err != nil {
			t.Fatal(err)
		}
	}
	methods := map[string]uint32{}
	var classes [6]uint32 // 1XX..5XX, other
	for n := range httpTotal {
		p := planRequest(n)
		methods[p.method]++
		classes[p.status/100-1]++
	}
	if err := mw.SendCounters(); err != nil {
		t.Fatalf("send http_counters: %v", err)
	}
	if e := mw.ReportErrors.Load() + rep.Errors.Load(); e != 0 {
		t.Fatalf("the middleware could not report %d samples", e)
	}

	ds := sflow.DataSource{Type: sflow.SourceEntLogicalEntry, Index: httpPort}
	col.waitFor(t, 5*time.Second, "the http_counters of 3:8080", func(dgs []datagram) bool {
		return len(counterSamplesOf(dgs, ds)) > 0
	})
	// The counters were queued after every flow sample: the engine has
	// sent them all (allow the last datagrams to land).
	time.Sleep(200 * time.Millisecond)
	handled := time.Now()
	dgs := col.snapshot(t)

	// Flow samples: count, header rules, and each one describes the
	// request whose number is in its URI.
	flows := appFlowsOf(dgs, ds)
	mean, sd, ok := withinSigmas(len(flows), httpTotal, 1.0/httpN, 4)
	if !ok {
		t.Errorf("%d http_request samples of %d requests at 1 in %d, want %.0f ± %.0f (4 SD)", len(flows), httpTotal, httpN, mean, 4*sd)
	}
	t.Logf("%d http_request samples of %d requests at 1 in %d (expected %.0f, SD %.1f)", len(flows), httpTotal, httpN, mean, sd)
	sampled := map[int]bool{}
	var sampledOK int // sampled requests with status < 500 (APM successes)
	for _, f := range flows {
		checkAppFlowHeader(t, lab, f, httpPort, httpN)
		if len(f.fs.Records) != 2 {
			t.Errorf("flow sample %d: %d records, want http_request and extended_socket_ipv4", f.fs.SequenceNumber, len(f.fs.Records))
			continue
		}
		h, ok1 := f.fs.Records[0].(*sflow.HTTPRequest)
		s, ok2 := f.fs.Records[1].(*sflow.ExtendedSocketIPv4)
		if !ok1 || !ok2 {
			t.Errorf("flow sample %d: records %T, %T", f.fs.SequenceNumber, f.fs.Records[0], f.fs.Records[1])
			continue
		}
		n, ok := requestNumber(h.URI)
		if !ok || sampled[n] {
			t.Errorf("flow sample %d: URI %q unknown or sampled twice", f.fs.SequenceNumber, h.URI)
			continue
		}
		sampled[n] = true
		p := planRequest(n)
		if p.status < 500 {
			sampledOK++
		}
		want := sflow.HTTPRequest{Method: httpMethodNumber(p.method), Protocol: 1001, URI: p.uri, Host: base[len("http://"):],
			UserAgent: httpAgent, MimeType: p.mime, ReqBytes: uint64(p.req), RespBytes: uint64(p.resp), DurationUS: h.DurationUS, Status: int32(p.status)}
		if *h != want {
			t.Errorf("request %d: http_request %+v, want %+v", n, *h, want)
		}
		wantSock := sflow.ExtendedSocketIPv4{Protocol: 6, LocalIP: lab.AgentAddr, RemoteIP: lab.CollectorAddr, LocalPort: httpPort, RemotePort: uint32(clientPort[n])}
		if *s != wantSock {
			t.Errorf("request %d: extended_socket_ipv4 %+v, want %+v", n, *s, wantSock)
		}
		checkHTTPPool(t, n, f.fs.SamplePool)
	}

	// http_counters: the true counts, exactly.
	cs := counterSamplesOf(dgs, ds)
	if len(cs) != 1 {
		t.Fatalf("%d counter samples of 3:%d, want 1", len(cs), httpPort)
	}
	wantCounters := sflow.HTTPCounters{MethodGetCount: methods[http.MethodGet], MethodPostCount: methods[http.MethodPost],
		MethodPutCount: methods[http.MethodPut], Status2XXCount: classes[1], Status4XXCount: classes[3], Status5XXCount: classes[4]}
	checkAppCounterRecords(t, cs[0], httpPort, &wantCounters)
	t.Logf("http_counters: GET %d POST %d PUT %d, 2XX %d 4XX %d 5XX %d", wantCounters.MethodGetCount, wantCounters.MethodPostCount,
		wantCounters.MethodPutCount, wantCounters.Status2XXCount, wantCounters.Status4XXCount, wantCounters.Status5XXCount)

	// goflow2 reads the same datagrams and samples; the application
	// records it keeps raw are read here from the spec's XDR layout.
	gfs := goflowAppSamples(t, datagramsOfSubAgent(dgs, httpPort), httpPort)
	var gfFlows int
	for _, g := range gfs {
		if g.subAgent != httpPort || g.agent != lab.AgentAddr {
			t.Errorf("goflow2: sample of 3:%d in a datagram of agent %s sub-agent %d", httpPort, g.agent, g.subAgent)
		}
		if !g.flow {
			hc, ok := g.rawRecord(2201)
			v, err := parseUint32s(hc, 15)
			if !ok || err != nil || v[1] != methods[http.MethodGet] || v[3] != methods[http.MethodPost] || v[4] != methods[http.MethodPut] ||
				v[10] != classes[1] || v[12] != classes[3] || v[13] != classes[4] {
				t.Errorf("goflow2: http_counters %v (%v), want GET/POST/PUT %v and 2XX/4XX/5XX %v", v, err, methods, classes)
			}
			continue
		}
		gfFlows++
		if g.rate != httpN || g.input != 0 || g.output != 0x3FFFFFFF || g.drop != 0 || len(g.formats) != 2 || g.formats[0] != 2206 || g.formats[1] != 2100 {
			t.Errorf("goflow2: flow sample %d: rate %d input %#x output %#x drops %d formats %v", g.seq, g.rate, g.input, g.output, g.drop, g.formats)
			continue
		}
		h, err1 := parseHTTPRequest(g.raw[0])
		s, err2 := parseSocket4(g.raw[1])
		n, ok := requestNumber(h.uri)
		if err1 != nil || err2 != nil || !ok {
			t.Errorf("goflow2: flow sample %d: http_request %+v (%v), socket %+v (%v)", g.seq, h, err1, s, err2)
			continue
		}
		p := planRequest(n)
		if h.method != uint32(httpMethodNumber(p.method)) || h.protocol != 1001 || h.status != int32(p.status) ||
			h.reqBytes != uint64(p.req) || h.respBytes != uint64(p.resp) || h.useragent != httpAgent || h.mimeType != p.mime ||
			s.protocol != 6 || s.local != lab.AgentAddr || s.remote != lab.CollectorAddr || s.localPort != httpPort ||
			s.remotePort != uint32(clientPort[n]) {
			t.Errorf("goflow2: request %d: http_request %+v socket %+v pool %d, planned %+v from port %d", n, h, s, g.pool, p, clientPort[n])
		}
	}
	if gfFlows != len(flows) {
		t.Errorf("goflow2 sees %d flow samples of 3:%d, our decoder %d", gfFlows, httpPort, len(flows))
	}

	// APM: every sample is a transaction of weight N. The estimates are
	// exact functions of the samples, and within 4 SD of the truth.
	waitAPMClosed(t, lab, apmControlApplications, handled)
	doc := waitAPMClosed(t, lab, apmControlFlows, handled) // fetched after both closed
	appIdx := doc.appIndex(t, httpAppName)
	count, success := doc.totals(apmControlApplications, appIdx)
	if count != uint64(httpN*len(flows)) || success != uint64(httpN*sampledOK) {
		t.Errorf("APM applications report of %s: %d transactions, %d successful; want %d × (%d, %d)", httpAppName, count, success, httpN, len(flows), sampledOK)
	}
	trueOK := classes[0] + classes[1] + classes[2] + classes[3]
	checkEstimate(t, "APM transactions", count, httpTotal, httpN)
	checkEstimate(t, "APM successful transactions", success, int(trueOK), httpN)
	fc, fsucc := doc.totals(apmControlFlows, appIdx)
	if fc != count || fsucc != success {
		t.Errorf("APM flows report of %s: %d/%d, applications report %d/%d", httpAppName, fc, fsucc, count, success)
	}
	for _, r := range doc.Reports {
		for _, row := range r.Rows {
			if r.Control == apmControlFlows && row.App == appIdx && (row.Server != lab.AgentAddr.String() || row.Client != lab.CollectorAddr.String()) {
				t.Errorf("APM flows report %d: row server %q client %q, want %s and %s", r.Number, row.Server, row.Client, lab.AgentAddr, lab.CollectorAddr)
			}
		}
	}
	// The same counts through snmpd: gosnmp and net-snmp's snmpwalk.
	if g := apmCountsGoSNMP(t, snmp, apmControlApplications)[appIdx]; g != count {
		t.Errorf("APM-MIB (gosnmp): apmReportTransactionCount of app %d sums to %d, sflowswitchd apm says %d", appIdx, g, count)
	}
	if w := apmCountsSnmpwalk(t, snmp, apmControlApplications)[appIdx]; w != count {
		t.Errorf("APM-MIB (snmpwalk): apmReportTransactionCount of app %d sums to %d, sflowswitchd apm says %d", appIdx, w, count)
	}
	t.Logf("APM %s (app %d): %d transactions (%d successful) estimated from %d samples; true %d (%d)", httpAppName, appIdx, count, success, len(flows), httpTotal, trueOK)
}

// checkHTTPPool checks the sample_pool of the sample of request n: the
// requests the middleware saw up to it. When requests come one at a time
// (phases 1 and 3) that is exactly n+1: the requests of phase 2 were all
// seen before phase 3 began, however they were sampled. In phase 2 the
// samples of concurrent requests may reach the daemon in another order
// than their pools were taken, so only the total is bounded.
func checkHTTPPool(t *testing.T, n int, pool uint32) {
	t.Helper()
	lo, hi := n+1, n+1
	if n >= httpK && n < 2*httpK {
		lo, hi = 1, 2*httpK
	}
	if int(pool) < lo || int(pool) > hi {
		t.Errorf("request %d: sample_pool %d, want %d..%d (requests seen so far)", n, pool, lo, hi)
	}
}

// httpMethodNumber is the http_method enumeration of sflow_http.txt.
func httpMethodNumber(m string) sflow.HTTPMethod {
	switch m {
	case http.MethodGet:
		return 2
	case http.MethodPost:
		return 4
	case http.MethodPut:
		return 5
	}
	return 0
}

// checkEstimate checks that est, a count estimated from samples taken 1
// in n (weight n each), is within 4 SD of the true count.
func checkEstimate(t *testing.T, what string, est uint64, truth, n int) {
	t.Helper()
	p := 1 / float64(n)
	sd := float64(n) * math.Sqrt(float64(truth)*p*(1-p))
	if math.Abs(float64(est)-float64(truth)) > 4*sd {
		t.Errorf("%s: estimate %d, true %d, want within %.0f (4 SD)", what, est, truth, 4*sd)
	}
}

// checkAppCounterRecords checks an application counter sample of port:
// the records want, then host_parent = 2:1 (sflow_host.txt).
func checkAppCounterRecords(t *testing.T, c counterRec, port uint16, want ...sflow.Record) {
	t.Helper()
	if c.subAgent != uint32(port) {
		t.Errorf("counter sample of 3:%d from sub-agent %d", port, c.subAgent)
	}
	if len(c.records) != len(want)+1 {
		t.Fatalf("counter sample of 3:%d: %d records, want %d", port, len(c.records), len(want)+1)
	}
	for i, w := range want {
		if got, want := fmtRecords(c.records[i]), fmtRecords(w); got != want {
			t.Errorf("counter sample of 3:%d: record %d %s, want %s", port, i, got, want)
		}
	}
	if hp, ok := c.records[len(want)].(*sflow.HostParent); !ok || *hp != (sflow.HostParent{ContainerType: sflow.SourceEntPhysicalEntry, ContainerIndex: 1}) {
		t.Errorf("counter sample of 3:%d: last record %+v, want host_parent 2:1", port, c.records[len(want)])
	}
}
