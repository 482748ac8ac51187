package prom

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// slowCollector takes a while to collect, so that a client can go away
// before the response is written.
type slowCollector struct{ d *prometheus.Desc }

func (c slowCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.d }
func (c slowCollector) Collect(ch chan<- prometheus.Metric) {
	time.Sleep(10 * time.Millisecond)
	ch <- Gauge(c.d, 1)
}

// TestAbortedScrapesLogRateLimited: clients that
// send a scrape and reset the connection before the answer make the
// handler's writes fail, once per metric family; the log gets at most a
// line a second with the number not logged, and every error is counted.
// It used to get 16-21 ERROR lines per aborted scrape (2,000 scrapes:
// 42,000 lines, 7.2 MiB in 3.4 s).
func TestAbortedScrapesLogRateLimited(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	reg := NewRegistry()
	reg.MustRegister(slowCollector{Desc("slow", "A slow collector.")})
	srv := httptest.NewServer(Handler(reg, log))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	const scrapes = 150
	start := time.Now()
	for i := 0; i < scrapes; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // the request is read
		if err := c.(*net.TCPConn).SetLinger(0); err != nil {
			t.Fatal(err)
		}
		c.Close() // RST
	}
	time.Sleep(200 * time.Millisecond) // the last handlers finish
	took := time.Since(start)
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	lines := strings.Count(out, "\n")
	t.Logf("%d aborted scrapes in %v: %d log lines (%d bytes)", scrapes, took, lines, len(out))
	if bound := int(took/time.Second) + 2; lines > bound {
		t.Errorf("%d log lines for %d aborted scrapes in %v, bound %d (one a second):\n%.2000s", lines, scrapes, took, bound, out)
	}
	if lines == 0 {
		t.Errorf("no log line: the aborted scrapes made no error (the test's abort does not work)")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
