package daemon

import (
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/config/dnssd"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/dropnotify"
	"github.com/sflowswitchd/sflowswitchd/dataplane/ports"
)

// TestDNSSDLayering: each DNS-SD outcome as the daemon installs it, over
// the settings of the files and flags (the base), through the reload
// path: records install their collectors and TXT settings; a SIGHUP
// replaces the base under the answer in force; a bad value keeps the
// value in force; an error keeps everything; an empty answer removes
// the collectors; an answer the MIB cannot hold is refused whole; a key
// gone from the zone gives the setting back to the base.
func TestDNSSDLayering(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	base := config.Defaults()
	base.Workers, base.DNSSD, base.Polling = 2, true, 30
	base.Collectors = []config.Collector{{Address: config.NoCollector}}
	d := &Daemon{log: log, settings: base, mibRows: 3, changed: make(chan struct{}, 1), ready: make(chan struct{}),
		drops: dropnotify.New(2, nil, log), ports: map[int]ports.Info{3: {Index: 3, Name: "swp1"}}}
	d.dnssd = newDNSSD(base)
	d.dnssd.baseSrc = config.Sources{"polling": config.SourceFile, "dns_sd": config.SourceFlag}
	settings := func() config.Settings {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.settings
	}
	collectors := func() []string {
		var out []string
		s := settings()
		for _, c := range s.StaticCollectors() {
			out = append(out, c.Address)
		}
		return out
	}
	records := func(cols []string, txt ...string) dnssd.Answer {
		return dnssd.Answer{Outcome: dnssd.Records, Name: "_sflow._udp.example.net.", Collectors: cols, TXT: txt}
	}
	two := []string{"198.18.0.1:6343", "198.18.0.2:6344"}

	d.dnssdAnswer(records(two, "txtvers=1", "sampling=400", "polling=5"), time.Minute)
	if s := settings(); !reflect.DeepEqual(collectors(), two) || s.Sampling != 400 || s.Polling != 5 || s.HeaderBytes != base.HeaderBytes {
		t.Fatalf("records: collectors %q sampling %d polling %d header %d", collectors(), s.Sampling, s.Polling, s.HeaderBytes)
	}
	// `sflowswitchd show` names DNS-SD as the source of what it set.
	d.mu.Lock()
	src := d.sources
	d.mu.Unlock()
	for k, want := range map[string]config.Source{"polling": config.SourceDNSSD, "sampling": config.SourceDNSSD, "collector": config.SourceDNSSD,
		"dns_sd": config.SourceFlag, "header_bytes": config.SourceDefault} {
		if got := src.Of(k); got != want {
			t.Errorf("source of %s = %s, want %s", k, got, want)
		}
	}

	// SIGHUP: a new base (headerBytes from the file), the answer over it.
	base2 := base
	base2.HeaderBytes, base2.Polling = 64, 10
	if err := d.Reload(base2); err != nil {
		t.Fatal(err)
	}
	if s := settings(); s.HeaderBytes != 64 || s.Polling != 5 || s.Sampling != 400 || !reflect.DeepEqual(collectors(), two) {
		t.Errorf("after SIGHUP: header %d (want the file's 64), polling %d (want DNS-SD's 5), sampling %d, collectors %q", s.HeaderBytes, s.Polling, s.Sampling, collectors())
	}

	// Bad values: the values in force stay, counted.
	d.dnssdAnswer(records(two, "sampling=abc", "headerBytes=99999", "polling=5"), time.Minute)
	if s := settings(); s.Sampling != 400 || s.HeaderBytes != 64 {
		t.Errorf("bad values: sampling %d, header %d; want 400 and 64", s.Sampling, s.HeaderBytes)
	}
	if n, _ := d.dnssd.problems.Load(dnssd.BadValue); n == nil || n.(interface{ Load() uint64 }).Load() != 2 {
		t.Errorf("bad values counted: %v", n)
	}

	// An error keeps everything.
	before := settings()
	d.dnssdAnswer(dnssd.Answer{Outcome: dnssd.Error}, 10*time.Second)
	if s := settings(); !reflect.DeepEqual(s, before) {
		t.Errorf("an error changed the settings")
	}

	// More collectors than the MIB was sized for: refused whole.
	d.dnssdAnswer(records([]string{"198.18.0.1:1", "198.18.0.1:2", "198.18.0.1:3", "198.18.0.1:4"}, "sampling=999"), time.Minute)
	if s := settings(); s.Sampling != 400 || !reflect.DeepEqual(collectors(), two) || d.dnssd.refused.Load() != 1 {
		t.Errorf("4 collectors: sampling %d collectors %q refused %d", s.Sampling, collectors(), d.dnssd.refused.Load())
	}

	// Empty: no collector.
	d.dnssdAnswer(dnssd.Answer{Outcome: dnssd.Empty}, 5*time.Minute)
	if c := collectors(); len(c) != 0 {
		t.Errorf("empty answer: collectors %q", c)
	}

	// Records back, without polling: the file's polling again.
	d.dnssdAnswer(records(two[:1], "sampling=300"), time.Minute)
	if s := settings(); s.Polling != 10 || s.Sampling != 300 || !reflect.DeepEqual(collectors(), two[:1]) {
		t.Errorf("records back: polling %d (want the file's 10), sampling %d, collectors %q", s.Polling, s.Sampling, collectors())
	}
	for o, want := range map[dnssd.Outcome]uint64{dnssd.Records: 4, dnssd.Error: 1, dnssd.Empty: 1} {
		if got := d.dnssd.outcomes[o].Load(); got != want {
			t.Errorf("%s outcomes %d, want %d", o, got, want)
		}
	}
}
