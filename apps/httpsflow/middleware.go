package httpsflow

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sflowswitchd/sflowswitchd/apps/app"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Defaults of Config.
const (
	DefaultAppName         = "http"
	DefaultSamplingRate    = 100
	DefaultPollingInterval = 20 * time.Second
)

// Config configures the HTTP middleware.
type Config struct {
	// AppName names the service (default "http").
	AppName string
	// ServicePort is the lowest port the server listens on: the
	// sub_agent_id and data source index (sflow_http.txt section 3).
	// 0 = the local port of the first request; set it when the server
	// listens on several ports.
	ServicePort uint16
	// SamplingRate: one request in SamplingRate is sampled, at random
	// (default 100; 1 samples every request).
	SamplingRate uint32
	// PollingInterval is how often Run sends http_counters (default 20 s).
	PollingInterval time.Duration
	// Reporter takes the samples.
	Reporter Reporter
}

// Middleware is an http.Handler that samples the requests it serves.
type Middleware struct {
	cfg  Config
	next http.Handler
	port atomic.Uint32
	// seen counts the unsampled requests since the last sample (the
	// sample pool). A sampled request adds itself when it reports
	// (Swap(0)+1): counting it at its start could let a concurrent
	// sample's Swap take it, leaving this one Seen 0, which the API reads
	// as absent (= sampling_rate) and the pool would overcount.
	seen    atomic.Uint32
	methods [9]atomic.Uint32 // by sflow.HTTPMethod
	status  [6]atomic.Uint32 // 1XX..5XX, other
	writers sync.Pool
	// ReportErrors counts samples the reporter refused.
	ReportErrors atomic.Uint64
}

// New wraps next.
func New(cfg Config, next http.Handler) (*Middleware, error) {
	if cfg.Reporter == nil {
		return nil, errors.New("httpsflow: Config.Reporter is required")
	}
	if cfg.AppName == "" {
		cfg.AppName = DefaultAppName
	}
	if len(cfg.AppName) > 32 {
		return nil, fmt.Errorf("httpsflow: AppName %q longer than 32 bytes", cfg.AppName)
	}
	if cfg.SamplingRate == 0 {
		cfg.SamplingRate = DefaultSamplingRate
	}
	if cfg.PollingInterval <= 0 {
		cfg.PollingInterval = DefaultPollingInterval
	}
	m := &Middleware{cfg: cfg, next: next}
	m.port.Store(uint32(cfg.ServicePort))
	m.writers.New = func() any { return &responseWriter{} }
	return m, nil
}

// ServeHTTP serves r with the wrapped handler. The sampling decision comes
// first; an unsampled request costs a random number, a pooled
// ResponseWriter wrapper and three atomic adds. Requests whose handler
// panics are not counted.
func (m *Middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sampled := m.cfg.SamplingRate == 1 || rand.Uint32N(m.cfg.SamplingRate) == 0
	if !sampled {
		m.seen.Add(1)
	}
	rw := m.writers.Get().(*responseWriter)
	*rw = responseWriter{w: w}
	var start time.Time
	var body *countingBody
	if sampled {
		start = time.Now()
		if r.Body != nil && r.Body != http.NoBody {
			body = &countingBody{rc: r.Body}
			r.Body = body
		}
	}
	m.next.ServeHTTP(rw, r)
	status := rw.status
	if status == 0 && !rw.hijacked {
		status = http.StatusOK // net/http's answer when the handler wrote nothing
	}
	m.methods[app.MethodFromString(r.Method)].Add(1)
	m.status[statusClass(status)].Add(1)
	if sampled {
		m.report(r, rw, body, time.Since(start), status)
	}
	rw.w = nil
	m.writers.Put(rw)
}

func statusClass(s int) int {
	if s >= 100 && s < 600 {
		return s/100 - 1
	}
	return 5
}

func (m *Middleware) report(r *http.Request, rw *responseWriter, body *countingBody, d time.Duration, status int) {
	port := uint16(m.port.Load())
	local := localAddr(r)
	if port == 0 {
		if !local.IsValid() || local.Port() == 0 {
			m.seen.Add(1) // seen, not reported: the next sample's pool counts it
			m.ReportErrors.Add(1)
			return
		}
		port = local.Port()
		m.port.CompareAndSwap(0, uint32(port))
	}
	reqBytes := uint64(0)
	if r.ContentLength > 0 {
		reqBytes = uint64(r.ContentLength)
	} else if body != nil {
		reqBytes = body.n
	}
	user, _, _ := r.BasicAuth()
	f := &app.FlowSample{
		AppName:      m.cfg.AppName,
		ServicePort:  port,
		SamplingRate: m.cfg.SamplingRate,
		Seen:         m.seen.Swap(0) + 1,
		HTTP: &sflow.HTTPRequest{
			Method:     app.MethodFromString(r.Method),
			Protocol:   uint32(r.ProtoMajor*1000 + r.ProtoMinor),
			URI:        truncate(r.RequestURI, 255),
			Host:       truncate(r.Host, 64),
			Referer:    truncate(r.Referer(), 255),
			UserAgent:  truncate(r.UserAgent(), 128),
			XFF:        truncate(r.Header.Get("X-Forwarded-For"), 64),
			AuthUser:   truncate(user, 32),
			MimeType:   truncate(rw.Header().Get("Content-Type"), 64),
			ReqBytes:   reqBytes,
			RespBytes:  rw.written,
			DurationUS: durationUS(d),
			Status:     int32(status),
		},
	}
	if remote, err := netip.ParseAddrPort(r.RemoteAddr); err == nil && local.IsValid() {
		setSocket(f, 6, local, netip.AddrPortFrom(remote.Addr().WithZone(""), remote.Port()))
	}
	if err := m.cfg.Reporter.ReportFlow(f); err != nil {
		m.ReportErrors.Add(1)
	}
}

func localAddr(r *http.Request) netip.AddrPort {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
		}
	}
	return netip.AddrPort{}
}

// setSocket fills extended_socket_ipv4 or _ipv6 of IP protocol proto from
// the connection's end points when both are of the same family;
// IPv4-mapped IPv6 addresses are reported as IPv4. Otherwise (an end
// point unknown, mixed families) it sets nothing.
func setSocket(f *app.FlowSample, proto uint32, local, remote netip.AddrPort) {
	la, ra := local.Addr().Unmap(), remote.Addr().Unmap()
	switch {
	case la.Is4() && ra.Is4():
		f.Socket4 = &sflow.ExtendedSocketIPv4{Protocol: proto, LocalIP: la, RemoteIP: ra, LocalPort: uint32(local.Port()), RemotePort: uint32(remote.Port())}
	case la.Is6() && ra.Is6():
		f.Socket6 = &sflow.ExtendedSocketIPv6{Protocol: proto, LocalIP: la, RemoteIP: ra, LocalPort: uint32(local.Port()), RemotePort: uint32(remote.Port())}
	}
}

func durationUS(d time.Duration) uint32 {
	us := d.Microseconds()
	if us < 0 {
		return 0
	}
	if us > 1<<32-1 {
		return 1<<32 - 1
	}
	return uint32(us)
}

// truncate cuts s to at most n bytes on a UTF-8 character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Counters returns the true (unsampled) request counts by method and by
// status class since the middleware started.
func (m *Middleware) Counters() sflow.HTTPCounters {
	var c sflow.HTTPCounters
	c.MethodOtherCount = m.methods[sflow.HTTPMethodOther].Load()
	c.MethodOptionCount = m.methods[sflow.HTTPMethodOptions].Load()
	c.MethodGetCount = m.methods[sflow.HTTPMethodGet].Load()
	c.MethodHeadCount = m.methods[sflow.HTTPMethodHead].Load()
	c.MethodPostCount = m.methods[sflow.HTTPMethodPost].Load()
	c.MethodPutCount = m.methods[sflow.HTTPMethodPut].Load()
	c.MethodDeleteCount = m.methods[sflow.HTTPMethodDelete].Load()
	c.MethodTraceCount = m.methods[sflow.HTTPMethodTrace].Load()
	c.MethodConnectCount = m.methods[sflow.HTTPMethodConnect].Load()
	c.Status1XXCount = m.status[0].Load()
	c.Status2XXCount = m.status[1].Load()
	c.Status3XXCount = m.status[2].Load()
	c.Status4XXCount = m.status[3].Load()
	c.Status5XXCount = m.status[4].Load()
	c.StatusOtherCount = m.status[5].Load()
	return c
}

// SendCounters reports http_counters now. It fails until the service
// port is known (set in Config or learned from a request).
func (m *Middleware) SendCounters() error {
	port := uint16(m.port.Load())
	if port == 0 {
		return errors.New("httpsflow: service port not known yet")
	}
	c := m.Counters()
	return m.cfg.Reporter.ReportCounters(&app.CounterSample{AppName: m.cfg.AppName, ServicePort: port, HTTP: &c})
}

// Run sends the counters every PollingInterval until ctx ends, with a
// random first delay so that services started together do not send
// together.
func (m *Middleware) Run(ctx context.Context) {
	first := time.NewTimer(rand.N(m.cfg.PollingInterval))
	defer first.Stop()
	select {
	case <-ctx.Done():
		return
	case <-first.C:
	}
	t := time.NewTicker(m.cfg.PollingInterval)
	defer t.Stop()
	for {
		if err := m.SendCounters(); err != nil {
			m.ReportErrors.Add(1)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// responseWriter records the status and counts the body bytes written.
// It is pooled; the handler must not keep it after returning (the
// net/http rule for ResponseWriter).
type responseWriter struct {
	w        http.ResponseWriter
	status   int
	written  uint64
	hijacked bool
}

func (w *responseWriter) Header() http.Header { return w.w.Header() }

func (w *responseWriter) WriteHeader(code int) {
	// 1xx are informational: the final status comes later.
	if w.status == 0 && (code < 100 || code > 199 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.w.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.w.Write(b)
	w.written += uint64(n)
	return n, err
}

// Flush implements http.Flusher when the underlying writer does.
func (w *responseWriter) Flush() {
	if f, ok := w.w.(http.Flusher); ok {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		f.Flush()
	}
}

// Hijack implements http.Hijacker when the underlying writer does.
func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("httpsflow: the ResponseWriter does not support Hijack")
	}
	w.hijacked = true
	return h.Hijack()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.w }

// countingBody counts the request body bytes the handler read (used when
// the request has no Content-Length).
type countingBody struct {
	rc io.ReadCloser
	n  uint64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.n += uint64(n)
	return n, err
}

func (b *countingBody) Close() error { return b.rc.Close() }
