package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHostileMetricsListener (and the 1000
// concurrent scrapes that already held): what clients of the metrics
// endpoint can hold is bounded, and the daemon goes on sampling.
//   - Slow bodies: POSTs announcing 100,000 body bytes and sending 10 are
//     answered 405 at once; scrapes beside them get 200 within a second
//     (before: four held every scrape slot, every scrape got 503 for
//     minutes).
//   - Idle keep-alive connections hold at most the listener's cap of
//     descriptors (before: never closed, 20,000 exhausted the daemon's).
//   - Aborted scrapes log at most a line a second (before: 16-21 ERROR
//     lines each, 42,000 lines for 2,000).
//   - 1000 concurrent scrapes each get an answer or a refusal, and the
//     descriptors stay within the cap.
func TestHostileMetricsListener(t *testing.T) {
	const capConns, slack = 64, 16 // the listener's cap; the daemon's own descriptors may move a little
	lab := newLab(t, 1)
	col := listenCounting(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "10", "-ports", "p1", "-polling", "0")
	d.waitReady(t, lab, "p1")
	pid := d.cmd.Process.Pid
	fds0, _, _ := fdsThreads(pid)
	hwm0 := usage(t, pid).HWM
	maxFDs := fds0 + capConns + slack
	t.Logf("baseline: %d descriptors, peak RSS %s", fds0, mib(hwm0))

	t.Run("SlowBodies", func(t *testing.T) {
		const posts = 8
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		start := time.Now()
		var worst time.Duration
		for i := 0; i < posts; i++ {
			c, err := dialSwitch(lab, metricsAddr)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789")
		}
		for i, c := range conns {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Errorf("POST %d: no answer within 5 s: %v", i, err)
				continue
			}
			resp.Body.Close()
			worst = max(worst, time.Since(start))
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("POST %d: %s, want 405", i, resp.Status)
			}
		}
		// Scrapes while the POSTs' connections are still open.
		ok := 0
		for i := 0; i < 4; i++ {
			if st := scrapeStatus(lab, time.Second); st == http.StatusOK {
				ok++
			} else {
				t.Errorf("scrape %d beside %d slow POSTs: status %d, want 200 within 1 s", i, posts, st)
			}
		}
		recordHostile(t, hostileRow{
			Case:  fmt.Sprintf("metrics: %d POSTs announcing 100,000 body bytes, sending 10", posts),
			Bound: "each answered 405 within 5 s; scrapes beside them 200 within 1 s",
			Peak:  fmt.Sprintf("slowest 405 after %.0f ms; %d/4 scrapes 200", worst.Seconds()*1000, ok),
		})
	})

	t.Run("IdleKeepAlive", func(t *testing.T) {
		n := sized(2000, 19000)
		w := watchPeaks(t, pid)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		start := time.Now()
		for i := 0; i < n; i++ {
			c, err := dialSwitch(lab, metricsAddr)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			conns = append(conns, c)
			// One small request, then idle with the connection kept.
			fmt.Fprintf(c, "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n")
		}
		time.Sleep(500 * time.Millisecond)
		peakFDs, _ := w.end()
		hwm := usage(t, pid).HWM
		st := scrapeStatus(lab, 2*time.Second)
		t.Logf("%d idle connections in %v: peak %d descriptors (bound %d), peak RSS %s, scrape %d", n, time.Since(start), peakFDs, maxFDs, mib(hwm), st)
		if peakFDs > maxFDs {
			t.Errorf("peak %d descriptors with %d idle connections, bound %d (baseline %d + cap %d + %d)", peakFDs, n, maxFDs, fds0, capConns, slack)
		}
		if hwm > hwm0+32<<20 {
			t.Errorf("peak RSS %s, bound %s", mib(hwm), mib(hwm0+32<<20))
		}
		if st != http.StatusOK {
			t.Errorf("scrape beside %d idle connections: status %d", n, st)
		}
		samplesFlow(t, lab, col, "beside idle connections")
		recordHostile(t, hostileRow{
			Case:  fmt.Sprintf("metrics: %d keep-alive connections left idle", n),
			Bound: fmt.Sprintf("descriptors ≤ baseline + %d (the cap) + %d; RSS +32 MiB; scrapes and sampling go on", capConns, slack),
			Peak:  fmt.Sprintf("%d descriptors (baseline %d), RSS %s", peakFDs, fds0, mib(hwm)),
		})
	})

	t.Run("AbortedScrapes", func(t *testing.T) {
		n := sized(300, 2000)
		lines0 := d.logLines()
		start := time.Now()
		for i := 0; i < n; i++ {
			c, err := dialSwitch(lab, metricsAddr)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
			time.Sleep(200 * time.Microsecond) // the request is read, the answer begun
			c.(*net.TCPConn).SetLinger(0)
			c.Close() // reset
		}
		time.Sleep(500 * time.Millisecond)
		took := time.Since(start)
		lines := d.logLines() - lines0
		m := mustFetchMetrics(t, lab)
		errs, _ := m.value("sflowswitchd_metrics_scrape_errors_total")
		bound := int(took/time.Second) + 2
		t.Logf("%d aborted scrapes in %v: %d log lines (bound %d), %d errors counted", n, took, lines, bound, errs)
		if lines > bound {
			t.Errorf("%d log lines for %d aborted scrapes in %v, bound %d:\n%s", lines, n, took, bound, tail(d.log(), 3000))
		}
		recordHostile(t, hostileRow{
			Case:  fmt.Sprintf("metrics: %d scrapes reset by the client mid-answer", n),
			Bound: "at most one log line a second (+1), every error counted (metrics_scrape_errors_total)",
			Peak:  fmt.Sprintf("%d lines in %.1f s, %d errors counted", lines, took.Seconds(), errs),
		})
	})

	t.Run("ConcurrentScrapes", func(t *testing.T) {
		const n = 1000
		w := watchPeaks(t, pid)
		var ok, refused, other atomic.Int64
		var slowest atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Go(func() {
				start := time.Now()
				defer func() {
					for took := int64(time.Since(start)); ; {
						if old := slowest.Load(); old >= took || slowest.CompareAndSwap(old, took) {
							return
						}
					}
				}()
				c, err := dialSwitch(lab, metricsAddr)
				if err != nil {
					refused.Add(1)
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					if strings.Contains(err.Error(), "timeout") {
						other.Add(1)
					} else {
						refused.Add(1) // reset or closed: refused over the cap
					}
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusServiceUnavailable {
					ok.Add(1)
				} else {
					other.Add(1)
				}
			})
		}
		wg.Wait()
		peakFDs, _ := w.end()
		hwm := usage(t, pid).HWM
		t.Logf("%d concurrent scrapes: %d answered, %d refused, %d hung or odd; slowest %v; peak %d descriptors, RSS %s",
			n, ok.Load(), refused.Load(), other.Load(), time.Duration(slowest.Load()), peakFDs, mib(hwm))
		if other.Load() > 0 {
			t.Errorf("%d scrapes got neither an answer nor a refusal within 20 s", other.Load())
		}
		if peakFDs > maxFDs {
			t.Errorf("peak %d descriptors, bound %d", peakFDs, maxFDs)
		}
		if hwm > hwm0+64<<20 {
			t.Errorf("peak RSS %s, bound %s", mib(hwm), mib(hwm0+64<<20))
		}
		if st := scrapeStatus(lab, 2*time.Second); st != http.StatusOK {
			t.Errorf("scrape after the burst: %d", st)
		}
		samplesFlow(t, lab, col, "after 1000 concurrent scrapes")
		recordHostile(t, hostileRow{
			Case:  fmt.Sprintf("metrics: %d concurrent scrapes", n),
			Bound: fmt.Sprintf("each answered (200/503) or refused within 20 s; descriptors ≤ baseline + %d + %d; RSS +64 MiB", capConns, slack),
			Peak:  fmt.Sprintf("%d answered, %d refused, slowest %.1f s; %d descriptors, RSS %s", ok.Load(), refused.Load(), time.Duration(slowest.Load()).Seconds(), peakFDs, mib(hwm)),
		})
	})
	if !d.alive() {
		t.Fatalf("daemon died\n%s", tail(d.log(), 3000))
	}
}
