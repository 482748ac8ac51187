package listener

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serve runs a bounded listener of h on loopback until the test ends.
func serve(t *testing.T, h http.Handler, lim Limits) *Server {
	t.Helper()
	s, err := Listen("test", "127.0.0.1:0", h, lim, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })

// get makes one GET on a new connection and returns the status (0: the
// connection failed).
func get(t *testing.T, addr string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestSlowBodiesDoNotHoldScrapes: POSTs announcing
// 100,000 body bytes and sending 10 are answered 405 at once without
// their body being read; scrapes meanwhile get 200. (They used to hold
// every in-flight slot of the handler, and every scrape got 503 for
// minutes.)
func TestSlowBodiesDoNotHoldScrapes(t *testing.T) {
	s := serve(t, ok, Defaults)
	addr := s.Addr().String()
	for i := 0; i < 8; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		fmt.Fprintf(c, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("POST %d: no answer within 2 s: %v", i, err)
		}
		if resp.StatusCode != http.StatusMethodNotAllowed || !resp.Close {
			t.Errorf("POST %d: %s, close %v; want 405 and the connection closed", i, resp.Status, resp.Close)
		}
	}
	for i := 0; i < 4; i++ {
		if st := get(t, addr); st != http.StatusOK {
			t.Errorf("scrape %d beside slow POSTs: %d", i, st)
		}
	}
	if n := s.Stats().BadRequests.Load(); n != 8 {
		t.Errorf("%d requests refused, want 8", n)
	}
}

// TestIdleConnectionsBounded: keep-alive connections
// left idle, and connections that never send a request, hold at most
// MaxConns descriptors; a scrape arriving over the cap closes the one
// waiting longest and is served; idle connections are closed after
// IdleTimeout. (20,000 idle connections used to exhaust the daemon's
// descriptors.)
func TestIdleConnectionsBounded(t *testing.T) {
	lim := Defaults
	lim.MaxConns, lim.IdleTimeout, lim.ReadHeaderTimeout = 16, 300*time.Millisecond, 300*time.Millisecond
	s := serve(t, ok, lim)
	addr := s.Addr().String()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 200; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if i%2 == 0 { // half send a request and keep the connection
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		}
	}
	time.Sleep(100 * time.Millisecond)
	if open := s.Stats().Open.Load(); open > int64(lim.MaxConns) {
		t.Errorf("%d connections open, cap %d", open, lim.MaxConns)
	}
	for i := 0; i < 5; i++ {
		if st := get(t, addr); st != http.StatusOK {
			t.Errorf("scrape %d with the cap held by idle connections: %d", i, st)
		}
	}
	if s.Stats().Evicted.Load() == 0 {
		t.Errorf("no idle connection evicted")
	}
	deadline := time.Now().Add(3 * time.Second)
	for s.Stats().Open.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if open := s.Stats().Open.Load(); open > 0 {
		t.Errorf("%d connections still open 3 s after they went idle (idle timeout %v)", open, lim.IdleTimeout)
	}
}

// TestOverCapRefusedAtOnce: with every connection busy in a handler, a
// new one is closed at once and counted, not queued.
func TestOverCapRefusedAtOnce(t *testing.T) {
	release := make(chan struct{})
	var inside sync.WaitGroup
	lim := Defaults
	lim.MaxConns = 4
	inside.Add(lim.MaxConns)
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside.Done()
		<-release
	}), lim)
	defer close(release)
	addr := s.Addr().String()
	for i := 0; i < lim.MaxConns; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	inside.Wait()
	start := time.Now()
	// The reset can reach the client before its connect returns.
	c, err := net.Dial("tcp", addr)
	if err == nil {
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = c.Read(make([]byte, 1))
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
		t.Fatalf("over the cap: %v after %v, want the connection closed at once", err, time.Since(start))
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("refused after %v", took)
	}
	if n := s.Stats().Refused.Load(); n != 1 {
		t.Errorf("%d refused, want 1", n)
	}
}
