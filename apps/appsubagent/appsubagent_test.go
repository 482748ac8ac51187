package appsubagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/apps/apm"
	"github.com/sflowswitchd/sflowswitchd/apps/app"
	"github.com/sflowswitchd/sflowswitchd/apps/httpsflow"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/metricstest"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

func TestStartAppsRefusesNonLoopback(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	for _, addr := range []string{"0.0.0.0:0", ":36343", "198.18.0.1:0", "[::]:0", "localhost:1", "127.0.0.1"} {
		if _, err := Start(ctx, Config{API: addr}, log); err == nil {
			t.Errorf("Start(%q) accepted", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		a, err := Start(ctx, Config{API: addr}, log)
		if err != nil {
			t.Errorf("Start(%q): %v", addr, err)
			continue
		}
		if !a.api.Addr().IsLoopback() || a.api.Port() == 0 {
			t.Errorf("listening on %v", a.api)
		}
	}
	if a, err := Start(ctx, Config{}, log); a != nil || err != nil {
		t.Errorf("API off: %v %v", a, err)
	}
	var off *Subagent // the daemon calls these unconditionally
	off.SetReceivers(nil)
	off.SetAgentAddress(netip.Addr{})
	rec := httptest.NewRecorder()
	off.ServeAPM(rec, httptest.NewRequest(http.MethodGet, "/apm", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("/apm with the API off: %d", rec.Code)
	}
}

// appLab is a running application sub-agent sending to a collector.
type appLab struct {
	apps *Subagent
	col  *net.UDPConn
	stop func()
}

func newAppLab(t *testing.T) *appLab {
	t.Helper()
	col, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := col.SetReadBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { col.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a, err := Start(ctx, Config{API: "127.0.0.1:0", APMInterval: time.Second, APMReports: 100}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	a.SetAgentAddress(netip.MustParseAddr("198.18.0.1"))
	a.SetReceivers([]agent.ReceiverConfig{{Index: 1, Address: col.LocalAddr().(*net.UDPAddr).AddrPort()}})
	return &appLab{apps: a, col: col, stop: cancel}
}

// collect reads datagrams until none came for quiet; every datagram must
// decode with our decoder and with goflow2 alike.
func (l *appLab) collect(t *testing.T, quiet time.Duration) (flows []*sflow.FlowSample, counters []*sflow.CounterSample) {
	t.Helper()
	buf := make([]byte, 65536)
	for {
		if err := l.col.SetReadDeadline(time.Now().Add(quiet)); err != nil {
			t.Fatal(err)
		}
		n, err := l.col.Read(buf)
		if err != nil {
			return
		}
		d, err := sflow.Decode(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		var p goflow.Packet
		if err := goflow.DecodeMessageVersion(bytes.NewBuffer(buf[:n]), &p); err != nil || len(p.Samples) != len(d.Samples) || p.SubAgentId != d.SubAgentID {
			t.Fatalf("goflow2: %v", err)
		}
		for _, s := range d.Samples {
			switch s := s.(type) {
			case *sflow.FlowSample:
				if s.Source.Index%200000 != d.SubAgentID {
					t.Fatalf("sub-agent %d sends data source %v", d.SubAgentID, s.Source)
				}
				flows = append(flows, s)
			case *sflow.CounterSample:
				counters = append(counters, s)
			}
		}
	}
}

// apmCount fetches /apm as `sflowswitchd apm` does and sums the
// estimated transactions of application name in the applications
// reports, after closing the current interval.
func (l *appLab) apmCount(t *testing.T, name string) (count, success float64) {
	t.Helper()
	l.apps.apm.Tick(time.Now().Add(2 * time.Second))
	srv := httptest.NewServer(http.HandlerFunc(l.apps.ServeAPM))
	defer srv.Close()
	var out bytes.Buffer
	if err := FetchAPM(context.Background(), APMURL(strings.TrimPrefix(srv.URL, "http://"), 4, false), &out); err != nil {
		t.Fatalf("sflowswitchd apm: %v", err)
	}
	var snap APMSnapshot
	if err := json.Unmarshal(out.Bytes(), &snap); err != nil {
		t.Fatalf("apm output: %v\n%s", err, out.String())
	}
	if len(snap.Controls) != 1 || snap.Controls[0].Aggregation != apm.Applications {
		t.Fatalf("controls %+v", snap.Controls)
	}
	for _, r := range snap.Reports {
		for _, row := range r.Rows {
			if row.AppName == name {
				count += float64(row.TransactionCount)
				success += float64(row.SuccessfulTransactions)
			}
		}
	}
	return count, success
}

func within4SD(t *testing.T, what string, got, mean, sd float64) {
	t.Helper()
	t.Logf("%s: %.0f, expected %.0f ± %.0f (4 SD)", what, got, mean, 4*sd)
	if math.Abs(got-mean) > 4*sd {
		t.Errorf("%s: %.0f, want %.0f ± %.0f (4 SD)", what, got, mean, 4*sd)
	}
}

// TestAppAPIGoMiddleware: a Go HTTP server with the httpsflow middleware
// reports to the daemon's JSON API over UDP; the daemon's app engine
// sends to a collector.
func TestAppAPIGoMiddleware(t *testing.T) {
	const k, n = 2000, 10
	lab := newAppLab(t)
	rep, err := httpsflow.DialAPI(lab.apps.api.String())
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()
	mw, err := httpsflow.New(httpsflow.Config{AppName: "web", SamplingRate: n, Reporter: rep},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				return
			}
			status, _ := strconv.Atoi(r.URL.Query().Get("s"))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(strings.Repeat("y", len(r.URL.Path))))
		}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw)
	defer srv.Close()
	port := uint32(srv.Listener.Addr().(*net.TCPAddr).Port)
	methods := []string{http.MethodGet, http.MethodPost, http.MethodDelete}
	statuses := []int{200, 404, 500, 301}
	var wantC sflow.HTTPCounters
	var fails float64
	for i := 0; i < k; i++ {
		m, s := methods[i%3], statuses[(i/3)%4]
		var body io.Reader
		if m == http.MethodPost {
			body = strings.NewReader("0123456789")
		}
		req, _ := http.NewRequest(m, fmt.Sprintf("%s/item/%d?s=%d", srv.URL, i, s), body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch m {
		case http.MethodGet:
			wantC.MethodGetCount++
		case http.MethodPost:
			wantC.MethodPostCount++
		default:
			wantC.MethodDeleteCount++
		}
		switch s / 100 {
		case 2:
			wantC.Status2XXCount++
		case 3:
			wantC.Status3XXCount++
		case 4:
			wantC.Status4XXCount++
		case 5:
			wantC.Status5XXCount++
			fails++
		}
	}
	if err := mw.SendCounters(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	flows, counters := lab.collect(t, 1500*time.Millisecond)
	p := 1.0 / n
	within4SD(t, "http_request samples", float64(len(flows)), k*p, math.Sqrt(k*p*(1-p)))
	for _, f := range flows {
		h := f.Records[0].(*sflow.HTTPRequest)
		sock := f.Records[1].(*sflow.ExtendedSocketIPv4)
		var i, s int
		if _, err := fmt.Sscanf(h.URI, "/item/%d?s=%d", &i, &s); err != nil {
			t.Fatalf("uri %q", h.URI)
		}
		path := fmt.Sprintf("/item/%d", i)
		wantReq := uint64(0)
		if methods[i%3] == http.MethodPost {
			wantReq = 10
		}
		if f.Source.Index != port || f.SamplingRate != n || f.Output.Value != sflow.IfIndexInternal ||
			h.Method != app.MethodFromString(methods[i%3]) || int(h.Status) != statuses[(i/3)%4] || s != int(h.Status) ||
			h.RespBytes != uint64(len(path)) || h.ReqBytes != wantReq || h.MimeType != "application/json" ||
			sock.LocalPort != port || sock.RemoteIP != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("sample of request %d: %+v %+v %+v", i, f, h, sock)
		}
	}
	if len(counters) != 1 {
		t.Fatalf("%d counter samples", len(counters))
	}
	if got := counters[0].Records[0].(*sflow.HTTPCounters); *got != wantC {
		t.Errorf("http_counters %+v, want %+v", *got, wantC)
	}
	count, success := lab.apmCount(t, "web")
	within4SD(t, "APM transactions", count, k, math.Sqrt(k*(n-1)))
	within4SD(t, "APM successful transactions", success, k-fails, math.Sqrt((k-fails)*(n-1)))
}

// pythonClient is the python3 example of docs/guides/configure.md, extended to a workload:
// K operations, each sampled 1-in-N at random and sent as a flow_sample
// with an IPv4 socket, then the true app_operations counts.
const pythonClient = `
import json, random, socket, sys
port, K, N = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
ops = {"success": 0, "not_found": 0}
for i in range(K):
    status = 8 if i % 5 == 0 else 0
    ops["not_found" if status else "success"] += 1
    if random.random() < 1.0 / N:
        s.sendto(json.dumps({"flow_sample": {"app_name": "inventory", "service_port": 7001, "sampling_rate": N,
            "app_operation": {"operation": "get.item", "attributes": "id=%d" % i, "status": status, "req_bytes": 10, "resp_bytes": i, "uS": 1500},
            "extended_socket_ipv4": {"protocol": 6, "local_ip": "198.18.0.1", "remote_ip": "198.18.0.2", "local_port": 7001, "remote_port": 40000 + i % 1000}}}).encode(),
            ("127.0.0.1", port))
s.sendto(json.dumps({"counters_sample": {"app_name": "inventory", "service_port": 7001, "app_operations": ops,
    "app_workers": {"workers_active": 3, "workers_idle": 5, "workers_max": 8, "req_delayed": 0, "req_dropped": 0}}}).encode(), ("127.0.0.1", port))
`

// TestAppAPIPython drives the JSON API from python3 (a non-Go client) and
// from bash's /dev/udp.
func TestAppAPIPython(t *testing.T) {
	const k, n = 2000, 10
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed: %v", err)
	}
	lab := newAppLab(t)
	apiPort := strconv.Itoa(int(lab.apps.api.Port()))
	out, err := exec.Command(python, "-c", pythonClient, apiPort, strconv.Itoa(k), strconv.Itoa(n)).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	// The README's bash one-liner: one operation on another service.
	bashMsg := `{"flow_sample":{"app_name":"batch","service_port":9000,"client":true,"app_operation":{"operation":"upload.photo","status":2,"uS":5000},"app_parent_context":{"application":"batch","operation":"nightly","attributes":""}}}`
	if out, err := exec.Command("bash", "-c", "echo '"+bashMsg+"' > /dev/udp/127.0.0.1/"+apiPort).CombinedOutput(); err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	flows, counters := lab.collect(t, 1500*time.Millisecond)
	var inv []*sflow.FlowSample
	var batch *sflow.FlowSample
	for _, f := range flows {
		if f.Source.Index == 7001 {
			inv = append(inv, f)
		} else if f.Source.Index == 209000 {
			batch = f
		} else {
			t.Errorf("unexpected data source %v", f.Source)
		}
	}
	p := 1.0 / n
	within4SD(t, "app_operation samples", float64(len(inv)), k*p, math.Sqrt(k*p*(1-p)))
	for _, f := range inv {
		op := f.Records[0].(*sflow.AppOperation)
		var i int
		if _, err := fmt.Sscanf(op.Context.Attributes, "id=%d", &i); err != nil {
			t.Fatal(err)
		}
		wantStatus := sflow.AppStatusSuccess
		if i%5 == 0 {
			wantStatus = sflow.AppStatusNotFound
		}
		if op.Context.Application != "inventory" || op.Context.Operation != "get.item" || op.Status != wantStatus ||
			op.RespBytes != uint64(i) || op.DurationUS != 1500 || f.SamplingRate != n || f.Output.Value != sflow.IfIndexInternal {
			t.Errorf("sample %+v %+v", f, op)
		}
	}
	if batch == nil || batch.Input.Value != sflow.IfIndexInternal || batch.Output.Value != 0 || len(batch.Records) != 2 {
		t.Fatalf("bash client-side sample %+v", batch)
	}
	if len(counters) != 1 {
		t.Fatalf("%d counter samples", len(counters))
	}
	ops := counters[0].Records[0].(*sflow.AppOperations)
	if ops.Success != k-k/5 || ops.NotFound != k/5 || ops.Application != "inventory" {
		t.Errorf("app_operations %+v", ops)
	}
	if hp := counters[0].Records[2].(*sflow.HostParent); hp.ContainerType != 2 || hp.ContainerIndex != 1 {
		t.Errorf("host_parent %+v", hp)
	}
	count, success := lab.apmCount(t, "inventory")
	within4SD(t, "APM transactions", count, k, math.Sqrt(k*(n-1)))
	within4SD(t, "APM successful transactions", success, k-k/5, math.Sqrt((k-k/5)*(n-1)))

	// Metrics: the bad input below is counted by reason.
	if _, err := exec.Command("bash", "-c", "echo 'not json' > /dev/udp/127.0.0.1/"+apiPort).CombinedOutput(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for lab.apps.engine.Stats().Rejected(app.ReasonNotJSON) != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	m := metricstest.Scrape(t, NewAppCollector(lab.apps.engine.Stats(), lab.apps.conn))
	for _, want := range []string{
		`sflowswitchd_app_samples_rejected_total{reason="not_json"} 1`,
		"\nsflowswitchd_app_api_socket_drops_total 0\n",
		"\ngo_goroutines ",
		"\nprocess_resident_memory_bytes ",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
}

// TestAppAPIIPv6Loopback: on 127.0.0.1 the API also listens on ::1 with
// the same port, as hsflowd does (its example sender addresses
// "localhost", often ::1 first); a message sent there is taken, and
// both sockets' kernel drops are counted.
func TestAppAPIIPv6Loopback(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := Start(ctx, Config{API: "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	has6 := false
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, ad := range addrs {
			if ipn, ok := ad.(*net.IPNet); ok && ipn.IP.Equal(net.IPv6loopback) {
				has6 = true
			}
		}
	}
	if !has6 {
		if a.conn6 != nil {
			t.Fatal("an IPv6 socket without ::1")
		}
		t.Log("no ::1 on this host: one socket, as it should")
		return
	}
	if a.conn6 == nil || len(a.Conns()) != 2 {
		t.Fatal("no ::1 socket beside 127.0.0.1")
	}
	c, err := net.Dial("udp", netip.AddrPortFrom(netip.IPv6Loopback(), a.api.Port()).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(`{"counter_sample":{"app_name":"six","app_workers":{"workers_max":1}}}`)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for a.engine.Stats().Accepted.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := a.engine.Stats().Accepted.Load(); n != 1 {
		t.Fatalf("%d messages accepted through ::1, want 1", n)
	}
	if m := metricstest.Scrape(t, NewAppCollector(a.engine.Stats(), a.Conns()...)); !strings.Contains(m, "\nsflowswitchd_app_api_socket_drops_total 0\n") {
		t.Errorf("metrics lack the API sockets' drops:\n%s", m)
	}
}
