package e2e

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// appAPIAddr is the daemon's local JSON API inside the switch namespace.
const appAPIAddr = "127.0.0.1:36343"

// APM report controls the daemon creates (apps/app NewAPM).
const (
	apmControlFlows        = 1
	apmControlApplications = 4
)

// apmDoc is the part of `sflowswitchd apm`'s JSON document the tests
// read, decoded here with plain structs (not the daemon's types).
type apmDoc struct {
	Applications []struct {
		App  uint32 `json:"app"`
		Name string `json:"name"`
	} `json:"applications"`
	Reports []struct {
		Control         uint32    `json:"control"`
		Number          uint32    `json:"number"`
		Start           time.Time `json:"start"`
		IntervalSeconds uint64    `json:"intervalSeconds"`
		Rows            []struct {
			App                    uint32 `json:"app"`
			Server                 string `json:"server"`
			Client                 string `json:"client"`
			TransactionCount       uint64 `json:"transactionCount"`
			SuccessfulTransactions uint64 `json:"successfulTransactions"`
		} `json:"rows"`
	} `json:"reports"`
}

// fetchAPM runs `sflowswitchd apm -api METRICS` in the switch namespace
// (nsenter) and decodes its output.
func fetchAPM(t *testing.T, lab *netlab.Lab) apmDoc {
	t.Helper()
	out, err := lab.Run(lab.Switch, daemonBin, "apm", "-api", metricsAddr)
	if err != nil {
		t.Fatalf("sflowswitchd apm: %v\n%s", err, out)
	}
	var doc apmDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("sflowswitchd apm output: %v\n%s", err, out)
	}
	return doc
}

// appIndex returns the APM application index of name.
func (d apmDoc) appIndex(t *testing.T, name string) uint32 {
	t.Helper()
	for _, a := range d.Applications {
		if a.Name == name {
			return a.App
		}
	}
	t.Fatalf("application %q not in the APM directory %+v", name, d.Applications)
	return 0
}

// totals sums the transaction and success counts of application app over
// every kept report of control.
func (d apmDoc) totals(control, app uint32) (count, success uint64) {
	for _, r := range d.Reports {
		if r.Control != control {
			continue
		}
		for _, row := range r.Rows {
			if row.App == app {
				count += row.TransactionCount
				success += row.SuccessfulTransactions
			}
		}
	}
	return count, success
}

// waitAPMClosed polls the APM reports until control has closed a report
// that ended at or after t (so every transaction added before t is in a
// closed report), and returns them.
func waitAPMClosed(t *testing.T, lab *netlab.Lab, control uint32, after time.Time) apmDoc {
	t.Helper()
	deadline := time.Now().Add(testutil.Scaled(10 * time.Second))
	for {
		doc := fetchAPM(t, lab)
		for _, r := range doc.Reports {
			end := r.Start.Add(time.Duration(r.IntervalSeconds) * time.Second)
			if r.Control == control && !end.Before(after) {
				return doc
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no APM report of control %d closed after %v within 10 s", control, after.Format(time.StampMilli))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// value returns the value of the unlabelled series name.
func (m metrics) value(name string) (uint64, bool) {
	for _, line := range m {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := metricValue(v)
			return n, err == nil
		}
	}
	return 0, false
}

// mustFetchMetrics fetches the daemon's metrics or fails the test.
func mustFetchMetrics(t *testing.T, lab *netlab.Lab) metrics {
	t.Helper()
	m, err := fetchMetrics(lab)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	return m
}

// rejectedByReason returns sflowswitchd_app_samples_rejected_total by
// reason.
func (m metrics) rejectedByReason() map[string]uint64 {
	const name = "sflowswitchd_app_samples_rejected_total{reason=\""
	out := map[string]uint64{}
	for _, line := range m {
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		reason, val, ok := strings.Cut(rest, "\"} ")
		if !ok {
			continue
		}
		if v, err := metricValue(val); err == nil {
			out[reason] = v
		}
	}
	return out
}

// appFlow is one application flow sample as our decoder read it, with
// the datagram it came in.
type appFlow struct {
	dg *sflow.Datagram
	fs *sflow.FlowSample
}

// appFlowsOf returns the flow samples of data source ds in arrival
// order.
func appFlowsOf(dgs []datagram, ds sflow.DataSource) []appFlow {
	var out []appFlow
	for _, dg := range dgs {
		for _, s := range dg.our.Samples {
			if fs, ok := s.(*sflow.FlowSample); ok && fs.Source == ds {
				out = append(out, appFlow{dg: dg.our, fs: fs})
			}
		}
	}
	return out
}

// datagramsOfSubAgent returns the datagrams of sub-agent id.
func datagramsOfSubAgent(dgs []datagram, id uint32) []datagram {
	var out []datagram
	for _, dg := range dgs {
		if dg.our.SubAgentID == id {
			out = append(out, dg)
		}
	}
	return out
}

// checkAppFlowHeader checks the sample header rules of apps/app's
// README (sflow_application.txt / sflow_http.txt section 3) for a
// server-side sample of service port port: sub_agent_id = port, data
// source 3:port, input unknown (0), output internal (0x3FFFFFFF), no
// drops, the agent address of the switch.
func checkAppFlowHeader(t *testing.T, lab *netlab.Lab, f appFlow, port uint16, rate uint32) {
	t.Helper()
	want := sflow.FlowSample{SequenceNumber: f.fs.SequenceNumber,
		Source:       sflow.DataSource{Type: sflow.SourceEntLogicalEntry, Index: uint32(port)},
		SamplingRate: rate, SamplePool: f.fs.SamplePool,
		Input: sflow.IfIndex(0), Output: sflow.IfIndex(sflow.IfIndexInternal)}
	got := *f.fs
	got.Records, got.Expanded = nil, false
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Errorf("flow sample %d of 3:%d: header %+v, want %+v", f.fs.SequenceNumber, port, got, want)
	}
	if f.dg.SubAgentID != uint32(port) || f.dg.AgentAddress != lab.AgentAddr {
		t.Errorf("flow sample %d of 3:%d in a datagram of agent %s sub-agent %d, want %s sub-agent %d",
			f.fs.SequenceNumber, port, f.dg.AgentAddress, f.dg.SubAgentID, lab.AgentAddr, port)
	}
}

// fmtRecords prints records with their types and values (not their
// addresses), for comparison.
func fmtRecords(recs ...sflow.Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s%+v ", r.Name(), reflect.Indirect(reflect.ValueOf(r)).Interface())
	}
	return b.String()
}

// gfSample is goflow2's view of one sample of an entLogicalEntry data
// source: header fields and raw records by format (goflow2 knows none of
// the application formats and keeps them as raw bytes by their length).
type gfSample struct {
	subAgent, dgSeq  uint32
	agent            netip.Addr
	flow             bool
	seq, index       uint32
	rate, pool, drop uint32
	input, output    uint32
	formats          []uint32
	raw              [][]byte
}

// goflowAppSamples returns goflow2's view of every sample of data
// sources 3:index (flow and counter), in arrival order. A record goflow2
// decoded into a structure (not raw) is reported as an error: none of the
// application formats is one it knows.
func goflowAppSamples(t *testing.T, dgs []datagram, index uint32) []gfSample {
	t.Helper()
	var out []gfSample
	for _, dg := range dgs {
		agent, _ := netip.AddrFromSlice(net.IP(dg.gf.AgentIP).To4())
		for _, s := range dg.gf.Samples {
			g := gfSample{subAgent: dg.gf.SubAgentId, dgSeq: dg.gf.SequenceNumber, agent: agent}
			var recs []goflow.FlowRecord
			var crecs []goflow.CounterRecord
			var h goflow.SampleHeader
			switch s := s.(type) {
			case goflow.FlowSample:
				h, recs, g.flow = s.Header, s.Records, true
				g.rate, g.pool, g.drop, g.input, g.output = s.SamplingRate, s.SamplePool, s.Drops, s.Input, s.Output
			case goflow.ExpandedFlowSample:
				h, recs, g.flow = s.Header, s.Records, true
				g.rate, g.pool, g.drop, g.input, g.output = s.SamplingRate, s.SamplePool, s.Drops, s.InputIfValue, s.OutputIfValue
			case goflow.CounterSample:
				h, crecs = s.Header, s.Records
			default:
				continue
			}
			if h.SourceIdType != sflow.SourceEntLogicalEntry || h.SourceIdValue != index {
				continue
			}
			g.seq, g.index = h.SampleSequenceNumber, h.SourceIdValue
			for _, r := range recs {
				raw, ok := r.Data.(goflow.RawRecord)
				if !ok {
					t.Errorf("goflow2 decoded record format %d of 3:%d as %T, expected raw", r.Header.DataFormat, index, r.Data)
					continue
				}
				g.formats, g.raw = append(g.formats, r.Header.DataFormat), append(g.raw, raw.Data)
			}
			for _, r := range crecs {
				raw, ok := r.Data.(goflow.RawRecord)
				if !ok {
					t.Errorf("goflow2 decoded counter record format %d of 3:%d as %T, expected raw", r.Header.DataFormat, index, r.Data)
					continue
				}
				g.formats, g.raw = append(g.formats, r.Header.DataFormat), append(g.raw, raw.Data)
			}
			out = append(out, g)
		}
	}
	return out
}

// rawRecord returns the raw bytes of the record of format f.
func (g gfSample) rawRecord(f uint32) ([]byte, bool) {
	for i, x := range g.formats {
		if x == f {
			return g.raw[i], true
		}
	}
	return nil, false
}

// xdrReader reads XDR (RFC 4506) fields of a record's raw bytes: an
// independent reading of the spec's structures, without our decoder.
type xdrReader struct {
	b   []byte
	err error
}

func (r *xdrReader) u32() uint32 {
	if len(r.b) < 4 {
		r.err = errors.New("short record")
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *xdrReader) u64() uint64 {
	return uint64(r.u32())<<32 | uint64(r.u32())
}

func (r *xdrReader) ipv4() netip.Addr {
	if len(r.b) < 4 {
		r.err = errors.New("short record")
		return netip.Addr{}
	}
	a := netip.AddrFrom4([4]byte(r.b[:4]))
	r.b = r.b[4:]
	return a
}

// str reads string<max>: a length, the bytes, padding to 4.
func (r *xdrReader) str(max int) string {
	n := int(r.u32())
	if r.err != nil {
		return ""
	}
	if n > max {
		r.err = fmt.Errorf("string of %d bytes, at most %d", n, max)
		return ""
	}
	padded := (n + 3) &^ 3
	if len(r.b) < padded {
		r.err = errors.New("short string")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[padded:]
	return s
}

// done reports an error if the record was not read exactly.
func (r *xdrReader) done() error {
	if r.err == nil && len(r.b) != 0 {
		return fmt.Errorf("%d bytes left in the record", len(r.b))
	}
	return r.err
}

// xdrHTTPRequest is http_request (sflow_http.txt, flow format 2206) read
// from raw bytes.
type xdrHTTPRequest struct {
	method, protocol                                       uint32
	uri, host, referer, useragent, xff, authuser, mimeType string
	reqBytes, respBytes                                    uint64
	us                                                     uint32
	status                                                 int32
}

func parseHTTPRequest(b []byte) (xdrHTTPRequest, error) {
	r := &xdrReader{b: b}
	var h xdrHTTPRequest
	h.method, h.protocol = r.u32(), r.u32()
	h.uri, h.host, h.referer = r.str(255), r.str(64), r.str(255)
	h.useragent, h.xff, h.authuser, h.mimeType = r.str(128), r.str(64), r.str(32), r.str(64)
	h.reqBytes, h.respBytes = r.u64(), r.u64()
	h.us, h.status = r.u32(), int32(r.u32())
	return h, r.done()
}

// xdrSocket4 is extended_socket_ipv4 (sflow_host.txt, flow format 2100)
// read from raw bytes.
type xdrSocket4 struct {
	protocol              uint32
	local, remote         netip.Addr
	localPort, remotePort uint32
}

func parseSocket4(b []byte) (xdrSocket4, error) {
	r := &xdrReader{b: b}
	s := xdrSocket4{protocol: r.u32(), local: r.ipv4(), remote: r.ipv4(), localPort: r.u32(), remotePort: r.u32()}
	return s, r.done()
}

// parseUint32s reads a record of n unsigned ints (http_counters: 15,
// host_parent: 2, app_workers: 5).
func parseUint32s(b []byte, n int) ([]uint32, error) {
	r := &xdrReader{b: b}
	out := make([]uint32, n)
	for i := range out {
		out[i] = r.u32()
	}
	return out, r.done()
}

// python3 returns the path of the python3 interpreter (run by nsenter,
// which does not search our PATH the same way in every setup).
func python3(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 not installed: %v", err)
	}
	return p
}
