package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/collectoraddr"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/dropnotify"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/portfail"
	"github.com/sflowswitchd/sflowswitchd/dataplane/ports"
	"github.com/sflowswitchd/sflowswitchd/internal/buildinfo"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/metricstest"
)

// TestCheckReload: a reload that could only be applied in part is refused
// whole before anything changes (validate a configuration whole: a
// typo in ports would stop sampling on every port).
func TestCheckReload(t *testing.T) {
	old := config.Defaults()
	old.Ports = []string{"swp*"}
	old.Collectors = []config.Collector{{Address: "198.18.0.1"}}
	d := &Daemon{log: slog.New(slog.NewTextHandler(io.Discard, nil)), settings: old, mibRows: 3,
		ports: map[int]ports.Info{3: {Index: 3, Name: "swp1"}, 4: {Index: 4, Name: "swp2"}}}
	for _, c := range []struct {
		name   string
		change func(*config.Settings)
		want   string // "" = accepted
	}{
		{"same", func(*config.Settings) {}, ""},
		{"a port that comes later, next to present ones", func(s *config.Settings) { s.Ports = []string{"swp1", "swp9"} }, ""},
		{"default selection", func(s *config.Settings) { s.Ports = nil }, ""},
		{"typo", func(s *config.Settings) { s.Ports = []string{"sw*p"} }, "match none"},
		{"monitor ports only, present", func(s *config.Settings) { s.Ports, s.MonitorPorts = []string{"x"}, []string{"swp2"} }, ""},
		{"three collectors", func(s *config.Settings) {
			s.Collectors = []config.Collector{{Address: "198.18.0.1"}, {Address: "198.18.0.2"}, {Address: "198.18.0.3"}}
		}, ""},
		{"four collectors", func(s *config.Settings) {
			s.Collectors = []config.Collector{{Address: "198.18.0.1"}, {Address: "198.18.0.2"}, {Address: "198.18.0.3"}, {Address: "198.18.0.4"}}
		}, "restart to add collectors"},
	} {
		s := old
		c.change(&s)
		err := d.checkReload(s)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestReloadOn: SIGHUP re-reads the settings; a file that cannot be read
// and settings that could only be applied in part are refused and logged,
// the running settings staying in force; accepted settings take effect,
// except those that need a restart (logged), and the log level follows
// log_level. A SIGHUP caught before start-up completed is applied
// once it has.
func TestReloadOn(t *testing.T) {
	var logMu sync.Mutex
	var logBuf strings.Builder
	log := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logBuf}, nil))
	logText := func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return logBuf.String()
	}
	logged := func(want string) bool { return strings.Contains(logText(), want) }
	old := config.Defaults()
	old.Ports = []string{"swp*"}
	old.Collectors = []config.Collector{{Address: "198.18.0.1"}}
	old.Workers = 2
	level := new(slog.LevelVar)
	d := &Daemon{log: log, level: level, settings: old, mibRows: 3, changed: make(chan struct{}, 1), ready: make(chan struct{}),
		drops: dropnotify.New(2, nil, log), ports: map[int]ports.Info{3: {Index: 3, Name: "swp1"}}}

	typo, next := old, old
	typo.Ports = []string{"sw*p"}
	next.Sampling, next.Workers, next.LogLevel = 77, 9, "debug"
	loads := []func() (config.Settings, config.Sources, error){
		func() (config.Settings, config.Sources, error) {
			return config.Settings{}, nil, errors.New(`config c.conf:3: unknown setting "samplng" (did you mean "sampling"?)`)
		},
		func() (config.Settings, config.Sources, error) { return typo, nil, nil },
		func() (config.Settings, config.Sources, error) {
			return next, config.Sources{"sampling": config.SourceFile}, nil
		},
	}
	var n atomic.Int32
	load := func() (config.Settings, config.Sources, error) { return loads[n.Add(1)-1]() }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hup := make(chan os.Signal)
	go d.ReloadOn(ctx, hup, load)
	waitLog := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !logged(want); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q logged:\n%s", want, logText())
			}
		}
	}
	settings := func() config.Settings {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.settings
	}

	// A SIGHUP during start-up waits until start-up completed.
	early := make(chan os.Signal, 1)
	early <- syscall.SIGHUP
	go d.ReloadOn(ctx, early, load)
	time.Sleep(100 * time.Millisecond)
	if n.Load() != 0 {
		t.Fatalf("settings read on a SIGHUP before start-up completed")
	}
	close(d.ready)
	waitLog(`unknown setting \"samplng\"`)
	hup <- syscall.SIGHUP
	waitLog("match none")
	if s := settings(); !reflect.DeepEqual(s, old) {
		t.Fatalf("refused reloads changed the settings: %+v", s)
	}
	if !logged("config reload refused; previous settings stay in force") {
		t.Errorf("refusal not logged as such:\n%s", logText())
	}
	// Refusals are counted and exported; the last one's state too.
	d.portFail = portfail.New(log, func(uint32) string { return "" })
	d.resolver = collectoraddr.NewResolver(log, func() {})
	d.build = buildinfo.Get("1.2.3", "abc")
	d.agentChoice = agentChoice{addr: netip.MustParseAddr("198.18.0.1"), iface: "eth0", why: "agent_address set"}
	scraped := metricstest.Scrape(t, d.configCollector())
	for _, want := range []string{
		"sflowswitchd_config_reload_failures_total 2\n",
		"sflowswitchd_config_last_reload_success 0\n",
		`sflowswitchd_build_info{commit="abc",goversion="` + runtime.Version() + `",version="1.2.3"} 1`,
		`sflowswitchd_agent_address_info{address="198.18.0.1",interface="eth0",why="agent_address set"} 1`,
	} {
		if !strings.Contains(scraped, want) {
			t.Errorf("metrics after two refused reloads lack %q:\n%s", want, scraped)
		}
	}

	hup <- syscall.SIGHUP
	waitLog("configuration reloaded")
	if s := settings(); s.Sampling != 77 || s.Workers != 2 {
		t.Errorf("after reload: sampling %d (want 77), workers %d (want 2 until restart)", s.Sampling, s.Workers)
	}
	if want := `changed="sampling: 0 -> 77; log_level: \"info\" -> \"debug\""`; !logged(want) {
		t.Errorf("the reload did not log what changed (want %s):\n%s", want, logText())
	}
	if scraped := metricstest.Scrape(t, d.configCollector()); !strings.Contains(scraped, "sflowswitchd_config_last_reload_success 1\n") ||
		!strings.Contains(scraped, "sflowswitchd_config_reload_failures_total 2\n") {
		t.Errorf("metrics after a good reload:\n%s", scraped)
	}
	if d.sources.Of("sampling") != config.SourceFile {
		t.Errorf("sources after the reload: %v", d.sources)
	}
	if !logged("a change of workers takes effect at restart") {
		t.Errorf("restart-only change not logged:\n%s", logText())
	}
	if level.Level() != slog.LevelDebug {
		t.Errorf("log level %v after log_level = debug", level.Level())
	}
	select {
	case <-d.changed:
	default:
		t.Error("no reconfiguration asked for")
	}
}
