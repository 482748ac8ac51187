package httpsflow

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/apps/apm"
	"github.com/sflowswitchd/sflowswitchd/apps/app"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// testHandler answers /r/<i>?status=S&size=N with status S, N body bytes
// and a text/plain type, after reading the request body.
func testHandler(w http.ResponseWriter, r *http.Request) {
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	status, _ := strconv.Atoi(r.URL.Query().Get("status"))
	size, _ := strconv.Atoi(r.URL.Query().Get("size"))
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(bytes.Repeat([]byte{'x'}, size))
	}
}

var (
	testMethods  = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodHead, "PATCH"}
	testStatuses = []int{200, 201, 302, 404, 503}
)

// request i of the workload: method, status, response size, body size.
func workload(i int) (method string, status, size, body int) {
	method = testMethods[i%len(testMethods)]
	status = testStatuses[(i/len(testMethods))%len(testStatuses)]
	size = (i * 37) % 3000
	if method == http.MethodPost || method == http.MethodPut {
		body = 10 + i%500
	}
	return
}

// Traffic is the true record of what the client did.
type Traffic struct {
	K        int
	Methods  map[sflow.HTTPMethod]uint32
	Statuses [6]uint32
}

// RunWorkload sends k requests to base (a URL without path).
func runWorkload(t testing.TB, base string, k int) Traffic {
	t.Helper()
	tr := Traffic{K: k, Methods: map[sflow.HTTPMethod]uint32{}}
	client := &http.Client{Timeout: 10 * time.Second}
	for i := 0; i < k; i++ {
		method, status, size, body := workload(i)
		var rd io.Reader
		if body > 0 {
			rd = strings.NewReader(strings.Repeat("b", body))
		}
		req, err := http.NewRequest(method, fmt.Sprintf("%s/r/%d?status=%d&size=%d", base, i, status, size), rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("User-Agent", "httpsflow-test")
		req.Header.Set("Referer", "http://ref.example/")
		req.Header.Set("X-Forwarded-For", "198.18.9.9")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != status {
			t.Fatalf("request %d: status %d, want %d", i, resp.StatusCode, status)
		}
		tr.Methods[app.MethodFromString(method)]++
		tr.Statuses[status/100-1]++
	}
	return tr
}

// CheckSamples verifies the flow samples of a run: about K/N
// http_request samples (within 4 standard deviations of the binomial
// count), each matching the request it describes, with its socket.
func checkSamples(t testing.TB, samples []*sflow.FlowSample, k int, n uint32, serverPort uint16) {
	t.Helper()
	p := 1 / float64(n)
	mean, sd := float64(k)*p, math.Sqrt(float64(k)*p*(1-p))
	t.Logf("%d http_request samples for %d requests at 1-in-%d", len(samples), k, n)
	if got := float64(len(samples)); math.Abs(got-mean) > 4*sd {
		t.Errorf("%d http_request samples, want %.0f ± %.0f (4 SD)", len(samples), mean, 4*sd)
	}
	var lastPool uint32
	for _, s := range samples {
		if s.Source != (sflow.DataSource{Type: sflow.SourceEntLogicalEntry, Index: uint32(serverPort)}) ||
			s.SamplingRate != n || s.Input != sflow.IfIndex(0) || s.Output != sflow.IfIndex(sflow.IfIndexInternal) {
			t.Fatalf("flow sample header %+v", s)
		}
		if s.SamplePool <= lastPool || s.SamplePool > uint32(k) {
			t.Errorf("sample pool %d after %d (k %d)", s.SamplePool, lastPool, k)
		}
		lastPool = s.SamplePool
		var h *sflow.HTTPRequest
		var sock *sflow.ExtendedSocketIPv4
		for _, r := range s.Records {
			switch r := r.(type) {
			case *sflow.HTTPRequest:
				h = r
			case *sflow.ExtendedSocketIPv4:
				sock = r
			}
		}
		if h == nil || sock == nil {
			t.Fatalf("records %v: want http_request and extended_socket_ipv4", s.Records)
		}
		var i int
		if _, err := fmt.Sscanf(h.URI, "/r/%d?", &i); err != nil {
			t.Fatalf("uri %q: %v", h.URI, err)
		}
		method, status, size, body := workload(i)
		wantResp := uint64(size)
		if method == http.MethodHead {
			wantResp = 0
		}
		if h.Method != app.MethodFromString(method) || h.Status != int32(status) || h.RespBytes != wantResp ||
			h.ReqBytes != uint64(body) || h.URI != fmt.Sprintf("/r/%d?status=%d&size=%d", i, status, size) ||
			h.Protocol != 1001 || h.UserAgent != "httpsflow-test" || h.Referer != "http://ref.example/" ||
			h.XFF != "198.18.9.9" || h.MimeType != "text/plain" || !strings.HasPrefix(h.Host, "127.0.0.1:") {
			t.Errorf("request %d (%s %d size %d body %d) sampled as %+v", i, method, status, size, body, h)
		}
		lo := netip.MustParseAddr("127.0.0.1")
		if sock.Protocol != 6 || sock.LocalIP != lo || sock.RemoteIP != lo || sock.LocalPort != uint32(serverPort) || sock.RemotePort == 0 {
			t.Errorf("socket %+v", sock)
		}
	}
	if lastPool != 0 && uint32(k)-lastPool > 50*n {
		t.Errorf("last sample pool %d far below %d requests", lastPool, k)
	}
}

// checkCounters verifies http_counters equal the true counts.
func checkCounters(t testing.TB, c *sflow.HTTPCounters, tr Traffic) {
	t.Helper()
	want := sflow.HTTPCounters{
		MethodGetCount: tr.Methods[sflow.HTTPMethodGet], MethodPostCount: tr.Methods[sflow.HTTPMethodPost],
		MethodPutCount: tr.Methods[sflow.HTTPMethodPut], MethodDeleteCount: tr.Methods[sflow.HTTPMethodDelete],
		MethodHeadCount: tr.Methods[sflow.HTTPMethodHead], MethodOtherCount: tr.Methods[sflow.HTTPMethodOther],
		Status2XXCount: tr.Statuses[1], Status3XXCount: tr.Statuses[2], Status4XXCount: tr.Statuses[3], Status5XXCount: tr.Statuses[4],
	}
	if *c != want {
		t.Errorf("http_counters %+v\nwant          %+v", *c, want)
	}
}

// checkAPM verifies that the applications report of the APM engine
// estimates K transactions within 4 SD (each sampled transaction weighs
// N: the estimate's variance is K(N-1)), and the successful ones (status
// < 500) likewise.
func checkAPM(t testing.TB, e *apm.Engine, tr Traffic, n uint32) {
	t.Helper()
	e.Tick(time.Now().Add(2 * time.Second))
	reports, ok := e.Reports(4)
	if !ok {
		t.Fatal("no applications report control")
	}
	var count, success float64
	for _, r := range reports {
		if r.Aggregation != apm.Applications {
			t.Fatalf("control 4 is %v", r.Aggregation)
		}
		for _, row := range r.Rows {
			if row.AppName != "web" {
				t.Errorf("APM row of application %q", row.AppName)
			}
			count += float64(row.TransactionCount)
			success += float64(row.SuccessfulTransactions)
		}
	}
	k := float64(tr.K)
	sd := math.Sqrt(k * float64(n-1))
	t.Logf("APM: %.0f transactions estimated (%.0f successful) for %d", count, success, tr.K)
	if math.Abs(count-k) > 4*sd {
		t.Errorf("APM estimates %.0f transactions, want %.0f ± %.0f", count, k, 4*sd)
	}
	ks := k - float64(tr.Statuses[4])
	if sds := math.Sqrt(ks * float64(n-1)); math.Abs(success-ks) > 4*sds+1 {
		t.Errorf("APM estimates %.0f successful transactions, want %.0f ± %.0f", success, ks, 4*sds)
	}
}

// collect reads datagrams until quiet and splits the samples.
func collect(t testing.TB, conn *net.UDPConn, quiet time.Duration) (flows []*sflow.FlowSample, counters []*sflow.CounterSample) {
	t.Helper()
	buf := make([]byte, 65536)
	for {
		if err := conn.SetReadDeadline(time.Now().Add(quiet)); err != nil {
			t.Fatal(err)
		}
		n, err := conn.Read(buf)
		if err != nil {
			return
		}
		d, err := sflow.Decode(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		var p goflow.Packet
		if err := goflow.DecodeMessageVersion(bytes.NewBuffer(buf[:n]), &p); err != nil || len(p.Samples) != len(d.Samples) || p.SubAgentId != d.SubAgentID {
			t.Fatalf("goflow2: %v (%d samples, ours %d)", err, len(p.Samples), len(d.Samples))
		}
		for _, s := range d.Samples {
			switch s := s.(type) {
			case *sflow.FlowSample:
				flows = append(flows, s)
			case *sflow.CounterSample:
				counters = append(counters, s)
			}
		}
	}
}

func listenCollector(t testing.TB) *net.UDPConn {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestMiddlewareEndToEnd: a Go HTTP server using the middleware serves
// K requests from a client on loopback; the app engine sends to a UDP
// collector. The samples, counters and APM reports must match what the
// client did.
func TestMiddlewareEndToEnd(t *testing.T) {
	const k, n = 2000, 10
	col := listenCollector(t)
	ae, err := app.NewAPM(time.Second, 100, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	eng := app.New(app.Config{APM: ae})
	eng.SetAgentAddress(netip.MustParseAddr("198.18.0.1"))
	eng.SetReceivers([]agent.ReceiverConfig{{Index: 1, Address: col.LocalAddr().(*net.UDPAddr).AddrPort()}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)

	mw, err := New(Config{AppName: "web", SamplingRate: n, Reporter: EngineReporter{Engine: eng}}, http.HandlerFunc(testHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw)
	t.Cleanup(srv.Close)
	port := uint16(srv.Listener.Addr().(*net.TCPAddr).Port)

	tr := runWorkload(t, srv.URL, k)
	if err := mw.SendCounters(); err != nil {
		t.Fatal(err)
	}
	stop()
	flows, counters := collect(t, col, 300*time.Millisecond)
	checkSamples(t, flows, k, n, port)
	if len(counters) != 1 {
		t.Fatalf("%d counter samples, want 1", len(counters))
	}
	cs := counters[0]
	if cs.Source != (sflow.DataSource{Type: sflow.SourceEntLogicalEntry, Index: uint32(port)}) || len(cs.Records) != 2 {
		t.Fatalf("counter sample %+v", cs)
	}
	checkCounters(t, cs.Records[0].(*sflow.HTTPCounters), tr)
	if hp := cs.Records[1].(*sflow.HostParent); *hp != (sflow.HostParent{ContainerType: 2, ContainerIndex: 1}) {
		t.Errorf("host_parent %+v", hp)
	}
	checkAPM(t, ae, tr, n)
	if st := eng.Stats(); st.APMAdded.Load() != uint64(len(flows)) || mw.ReportErrors.Load() != 0 {
		t.Errorf("apm added %d of %d samples, report errors %d", st.APMAdded.Load(), len(flows), mw.ReportErrors.Load())
	}
}

// TestTruncate checks that strings are cut on character boundaries.
func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{{"abc", 5, "abc"}, {"abcdef", 3, "abc"}, {"aé", 2, "a"}, {"éé", 3, "é"}} {
		if got := truncate(c.s, c.n); got != c.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

// BenchmarkMiddlewareUnsampled measures the cost the middleware adds to
// a request that is not sampled.
func BenchmarkMiddlewareUnsampled(b *testing.B) {
	mw, err := New(Config{SamplingRate: 1 << 30, ServicePort: 80, Reporter: EngineReporter{Engine: app.New(app.Config{})}},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		mw.ServeHTTP(w, req)
	}
}
