// Package listener serves the daemon's HTTP endpoints (/metrics, /apm)
// with every resource a client can hold bounded: a
// connection cap, read, write and idle timeouts, a header size limit, and
// only bodiless GET and HEAD requests. What is refused is refused at
// once and counted, never queued: a connection over the cap is closed as
// soon as it is accepted, unless a connection is waiting for a request
// (idle between requests, or not sent one yet): the one waiting longest
// is closed instead, so idle or trickling clients cannot lock scrapers
// out; a
// request with a body or another method gets 405 and the connection is
// closed without reading the body. Four POSTs that sent 10 of 100,000
// announced body bytes used to hold every scrape slot for minutes, and
// 20,000 idle keep-alive connections exhausted the daemon's descriptors.
package listener

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/internal/prom"
	"github.com/sflowswitchd/sflowswitchd/internal/ratelog"
)

// Limits are a listener's bounds (Defaults).
type Limits struct {
	// MaxConns is the most connections open at once.
	MaxConns int
	// ReadHeaderTimeout bounds reading a request's header, ReadTimeout
	// the whole request, WriteTimeout writing the response (a client
	// that does not read), IdleTimeout a keep-alive connection between
	// requests.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header.
	MaxHeaderBytes int
}

// Defaults are the bounds of the daemon's listeners: a scrape is a small
// GET answered in well under a second; Prometheus keeps one connection
// per target.
var Defaults = Limits{
	MaxConns:          64,
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       10 * time.Second,
	WriteTimeout:      30 * time.Second,
	IdleTimeout:       30 * time.Second,
	MaxHeaderBytes:    8 << 10,
}

// Stats are a listener's counts.
type Stats struct {
	// Accepted connections (Evicted ones among them: idle, closed to
	// make room), Refused over the cap (closed at once), Open now.
	Accepted, Refused, Evicted atomic.Uint64
	Open                       atomic.Int64
	// BadRequests got 405: a method other than GET or HEAD, or a body.
	BadRequests atomic.Uint64
	// AcceptErrors are failed accepts (EMFILE: no descriptor left).
	AcceptErrors atomic.Uint64
}

// Server is one bounded HTTP listener.
type Server struct {
	name   string
	srv    *http.Server
	ln     *capListener
	stats  *Stats
	served chan struct{}
	log    *slog.Logger
}

// Listen opens a TCP listener on addr for handler h, bounded by lim; name
// ("metrics") labels its log lines and metrics. Nothing is served until
// Serve.
func Listen(name, addr string, h http.Handler, lim Limits, logger *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", name, err)
	}
	st := &Stats{}
	cl := &capListener{Listener: ln, max: lim.MaxConns, stats: st, idle: map[net.Conn]time.Time{}}
	errs := ratelog.New(logger, slog.LevelWarn, name+" listener: connection error", time.Second)
	s := &Server{name: name, ln: cl, stats: st, served: make(chan struct{}), log: logger}
	s.srv = &http.Server{
		Handler:           getOnly(h, st),
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ConnState:         cl.track,
		// Accept errors (EMFILE), TLS garbage, handler panics: one line
		// a second at most, with the count of the others.
		ErrorLog: log.New(ratelogWriter{errs}, "", 0),
	}
	return s, nil
}

// Addr is the address listened on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Stats are the listener's counts.
func (s *Server) Stats() *Stats { return s.stats }

// Serve serves until ctx ends; then it stops accepting, lets requests in
// flight finish for up to 5 s, cuts the rest, and returns once every
// handler has returned.
func (s *Server) Serve(ctx context.Context) {
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(s.name+" listener", "err", err)
		}
	}()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		s.log.Warn(s.name+" listener: requests cut at shutdown", "err", err)
		s.srv.Close()
	}
	<-s.served
}

// getOnly answers 405 to anything but a bodiless GET or HEAD, closing the
// connection: the server then reads no body (it would otherwise read up
// to 256 KiB of it before answering, holding the handler).
func getOnly(h http.Handler, st *Stats) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Method != http.MethodGet && r.Method != http.MethodHead) || r.ContentLength != 0 {
			st.BadRequests.Add(1)
			w.Header().Set("Connection", "close")
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "only GET and HEAD without a body", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// capListener accepts at most max connections at once; over the cap it
// closes the connection idle longest to make room, or else the new one.
type capListener struct {
	net.Listener
	max   int
	stats *Stats

	mu   sync.Mutex
	open int
	idle map[net.Conn]time.Time // connections waiting for a request, since when
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				l.stats.AcceptErrors.Add(1)
			}
			return nil, err // http.Server retries temporary errors with backoff
		}
		l.mu.Lock()
		var victim net.Conn
		if l.open >= l.max {
			if victim = l.oldestIdle(); victim == nil {
				l.mu.Unlock()
				l.stats.Refused.Add(1)
				refuse(c)
				continue
			}
			delete(l.idle, victim)
		}
		l.open++
		l.stats.Open.Store(int64(l.open))
		l.mu.Unlock()
		if victim != nil {
			l.stats.Evicted.Add(1)
			victim.Close() // counted out by its trackedConn
		}
		l.stats.Accepted.Add(1)
		return &trackedConn{Conn: c, l: l}, nil
	}
}

// oldestIdle returns the connection idle longest, nil if none (under mu).
func (l *capListener) oldestIdle() net.Conn {
	var oldest net.Conn
	var since time.Time
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	return oldest
}

// track follows the server's connection states (http.Server.ConnState):
// which connections wait for a request, new or between requests (the
// server reads a request's header in those states, so a client trickling
// one byte at a time is among them too, until ReadHeaderTimeout).
func (l *capListener) track(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st == http.StateIdle || st == http.StateNew {
		l.idle[c] = time.Now()
	} else {
		delete(l.idle, c)
	}
}

func (l *capListener) closed(c net.Conn) {
	l.mu.Lock()
	l.open--
	delete(l.idle, c)
	l.stats.Open.Store(int64(l.open))
	l.mu.Unlock()
}

// refuse closes a connection over the cap at once, with a reset: no
// FIN_WAIT or TIME_WAIT state is kept for it.
func refuse(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// trackedConn counts itself out of its listener once, when closed.
type trackedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.closed(c) })
	return err
}

// ratelogWriter turns the http.Server's error log into rate-limited lines.
type ratelogWriter struct{ l *ratelog.Limiter }

func (w ratelogWriter) Write(p []byte) (int, error) {
	msg := string(p)
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	w.l.Log("err", msg)
	return len(p), nil
}

var (
	connsDesc   = prom.Desc("listener_connections_total", "Connections to an HTTP listener by what became of them: accepted, refused (over the connection cap, closed at once), evicted (idle, closed to make room for a new one).", "listener", "outcome")
	openDesc    = prom.Desc("listener_connections_open", "Connections open now on an HTTP listener.", "listener")
	badReqDesc  = prom.Desc("listener_requests_refused_total", "Requests an HTTP listener answered 405: a method other than GET or HEAD, or a body.", "listener")
	acceptDesc  = prom.Desc("listener_accept_errors_total", "Failed accepts of an HTTP listener (no descriptor left: EMFILE, ENFILE), retried with backoff.", "listener")
	scrapeDesc  = prom.Desc("metrics_scrape_errors_total", "Errors of the /metrics handler: a client that went away mid-answer, a collector's error (logged at most once a second).")
	listenDescs = []*prometheus.Desc{connsDesc, openDesc, badReqDesc, acceptDesc}
)

// Collector exports the counts of servers (sflowswitchd_listener_*), and
// with scrapeErrs those of the /metrics handler's errors.
func Collector(scrapeErrs *ratelog.Limiter, servers ...*Server) prometheus.Collector {
	return collector{servers, scrapeErrs}
}

type collector struct {
	servers    []*Server
	scrapeErrs *ratelog.Limiter
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range listenDescs {
		ch <- d
	}
	if c.scrapeErrs != nil {
		ch <- scrapeDesc
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.servers {
		st := s.stats
		ch <- prom.Counter(connsDesc, st.Accepted.Load(), s.name, "accepted")
		ch <- prom.Counter(connsDesc, st.Refused.Load(), s.name, "refused")
		ch <- prom.Counter(connsDesc, st.Evicted.Load(), s.name, "evicted")
		ch <- prom.Gauge(openDesc, float64(st.Open.Load()), s.name)
		ch <- prom.Counter(badReqDesc, st.BadRequests.Load(), s.name)
		ch <- prom.Counter(acceptDesc, st.AcceptErrors.Load(), s.name)
	}
	if c.scrapeErrs != nil {
		ch <- prom.Counter(scrapeDesc, c.scrapeErrs.Total.Load())
	}
}
