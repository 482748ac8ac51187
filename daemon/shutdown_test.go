package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/snmptest"
)

// shutdownChildEnv marks the re-executed test process that runs the
// daemon inside the lab's switch namespace.
const shutdownChildEnv = "SFLOWSWITCHD_SHUTDOWN_CHILD"

// TestShutdownWhileScrapedAndWalked stops an in-process daemon while its
// /metrics endpoint is being scraped and its SFLOW-MIB walked through a
// real snmpd, over and over: run must return only after every reader of
// the dataplane's mapped counters (metrics handlers, MIB, AgentX
// subagent, workers) has stopped, then close the dataplane. Run it with
// -race: a handler reading the counters while Close unmaps them is a
// data race (or a fault). The daemon needs the whole process in the
// switch namespace (its goroutines run on any thread), so the test
// re-executes itself there.
func TestShutdownWhileScrapedAndWalked(t *testing.T) {
	if os.Getenv(shutdownChildEnv) != "" {
		shutdownChild(t)
		return
	}
	lab := netlab.New(t, 2)
	t.Setenv(shutdownChildEnv, "1")
	out, err := lab.Run(lab.Switch, os.Args[0], "-test.run=^TestShutdownWhileScrapedAndWalked$", "-test.v", "-test.count=1")
	if err != nil {
		t.Fatalf("daemon test in the switch namespace: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// shutdownChild runs in the switch namespace.
func shutdownChild(t *testing.T) {
	snmp := snmptest.Start(t, snmptest.Options{ROCommunity: "public"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ln.Addr().String()
	ln.Close()

	s := config.Defaults()
	s.Collectors = []config.Collector{{Address: config.DefaultCollector}}
	s.Ports = []string{"p1", "p2"}
	s.Sampling = 1
	s.Workers = 2
	s.Metrics = metricsAddr
	s.AgentX = "unix:" + snmp.SocketPath
	s.StateDir = t.TempDir() // never the machine's /var/lib/sflowswitchd
	var logBuf strings.Builder
	var logMu sync.Mutex
	d, err := New(Config{Settings: s, Logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logBuf}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// Every scrape is in flight for a while before it reads the
	// counters, so scrapes overlap the shutdown for sure (a real scrape
	// is over in microseconds and would hit the race only by chance).
	// started holds the X-Seq of every scrape whose handler began, with
	// the time it began.
	var started sync.Map
	d.metricsHook = func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			started.Store(r.Header.Get("X-Seq"), time.Now())
			time.Sleep(time.Second)
			h.ServeHTTP(w, r)
		})
	}
	var seq atomic.Int64
	var failedMu sync.Mutex
	var failed []string // X-Seq of scrapes that got no complete response
	failErr := map[string]string{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()

	// Readers hammer the daemon until told to stop; each counts what it
	// got while the daemon was fully up.
	var scrapes, walks atomic.Int64
	var portLines atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 { // under the handler's limit of concurrent scrapes
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A client that gave up on a slow scrape would leave it
			// running in the daemon and start another: more than the
			// handler's limit in flight, refused with 503. The timeout
			// only stops a hung daemon (a scrape takes seconds under
			// software emulation, Linux 6.1 VM).
			client := &http.Client{Timeout: time.Minute}
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := strconv.FormatInt(seq.Add(1), 10)
				req, err := http.NewRequest("GET", "http://"+metricsAddr+"/metrics", nil)
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("X-Seq", n)
				resp, err := client.Do(req)
				if err != nil {
					failedMu.Lock()
					failed = append(failed, n)
					failErr[n] = err.Error()
					failedMu.Unlock()
					time.Sleep(time.Millisecond)
					continue // not up yet, or shut down
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					failedMu.Lock()
					failed = append(failed, n)
					failErr[n] = fmt.Sprintf("status %d, body %q, %v", resp.StatusCode, b, err)
					failedMu.Unlock()
				} else {
					scrapes.Add(1)
					if strings.Contains(string(b), "sflowswitchd_port_sample_pool_total{") {
						portLines.Store(true)
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		g := snmp.Client(t, "public")
		g.Timeout = 2 * time.Second
		g.Retries = 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, err := g.BulkWalkAll(".1.3.6.1.4.1.14706")
			if err == nil && len(res) > 0 {
				walks.Add(1)
			} else {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()

	// Up: ports sampled (their counters in /metrics) and the MIB served.
	for deadline := time.Now().Add(20 * time.Second); !portLines.Load() || walks.Load() == 0; {
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			logMu.Lock()
			defer logMu.Unlock()
			t.Fatalf("daemon not up after 20 s: %d scrapes (port lines %v), %d walks\n%s", scrapes.Load(), portLines.Load(), walks.Load(), logBuf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // readers in full swing
	s0, w0 := scrapes.Load(), walks.Load()
	stopAt := time.Now()
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return 15 s after the stop")
	}
	// The readers keep going a moment against the stopped daemon.
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("%d scrapes and %d MIB walks before the stop, %d and %d in all", s0, w0, scrapes.Load(), walks.Load())
	if s0 == 0 || w0 == 0 {
		t.Errorf("readers did not overlap the shutdown: %d scrapes, %d walks", s0, w0)
	}
	// A scrape in progress when the daemon was told to stop completes:
	// the daemon waits for it before closing the dataplane.
	inFlight := 0
	started.Range(func(_, v any) bool {
		if v.(time.Time).Before(stopAt) {
			inFlight++
		}
		return true
	})
	for _, n := range failed {
		if at, ok := started.Load(n); ok && at.(time.Time).Before(stopAt) {
			t.Errorf("scrape %s, in progress at the stop, got no complete response: %s", n, failErr[n])
		}
	}
	t.Logf("%d scrapes started before the stop", inFlight)
	// After run, nothing listens any more.
	if c, err := net.DialTimeout("tcp", metricsAddr, time.Second); err == nil {
		c.Close()
		t.Errorf("metrics still listening after run returned")
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
