// Package httpsflow is the sFlow library for Go services: net/http
// middleware that reports sampled requests (http_request with
// extended_socket_ipv4/ipv6) and true per-method and per-status counts
// (http_counters), and a generic API for other operations (app_operation
// and the application counters). Samples go to the sflowswitchd daemon's
// local JSON API over UDP (UDPReporter) or straight into an app.Engine
// that sends to the collectors itself (EngineReporter).
package httpsflow

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/sflowswitchd/sflowswitchd/apps/app"
)

// Reporter takes the samples of a service. Implementations must be safe
// for concurrent use and must not block for long: they are called on the
// request path of sampled requests.
type Reporter interface {
	ReportFlow(*app.FlowSample) error
	ReportCounters(*app.CounterSample) error
}

// EngineReporter reports into an app.Engine in the same process.
type EngineReporter struct {
	Engine *app.Engine
}

// ReportFlow implements Reporter.
func (r EngineReporter) ReportFlow(f *app.FlowSample) error { return r.Engine.SubmitFlow(f) }

// ReportCounters implements Reporter.
func (r EngineReporter) ReportCounters(c *app.CounterSample) error { return r.Engine.SubmitCounters(c) }

// UDPReporter sends samples as JSON API messages (apps/app/README.md)
// to the daemon's local API, one datagram per sample.
type UDPReporter struct {
	conn *net.UDPConn
	bufs sync.Pool
	// Errors counts samples that could not be encoded or sent.
	Errors atomic.Uint64
}

// DialAPI returns a reporter sending to the daemon's JSON API at addr
// (app.DefaultAPIAddress when empty).
func DialAPI(addr string) (*UDPReporter, error) {
	if addr == "" {
		addr = app.DefaultAPIAddress
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("httpsflow: API address: %w", err)
	}
	conn, err := net.DialUDP("udp", nil, ua)
	if err != nil {
		return nil, fmt.Errorf("httpsflow: API socket: %w", err)
	}
	r := &UDPReporter{conn: conn}
	r.bufs.New = func() any { b := make([]byte, 0, 1024); return &b }
	return r, nil
}

// Close closes the socket.
func (r *UDPReporter) Close() error { return r.conn.Close() }

// ReportFlow implements Reporter.
func (r *UDPReporter) ReportFlow(f *app.FlowSample) error {
	bp := r.bufs.Get().(*[]byte)
	defer r.bufs.Put(bp)
	b, err := app.AppendFlowJSON((*bp)[:0], f)
	*bp = b
	if err != nil {
		r.Errors.Add(1)
		return err
	}
	return r.send(b)
}

// ReportCounters implements Reporter.
func (r *UDPReporter) ReportCounters(c *app.CounterSample) error {
	bp := r.bufs.Get().(*[]byte)
	defer r.bufs.Put(bp)
	b, err := app.AppendCountersJSON((*bp)[:0], c)
	*bp = b
	if err != nil {
		r.Errors.Add(1)
		return err
	}
	return r.send(b)
}

func (r *UDPReporter) send(b []byte) error {
	if _, err := r.conn.Write(b); err != nil {
		r.Errors.Add(1)
		return fmt.Errorf("httpsflow: send to the API: %w", err)
	}
	return nil
}
