package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
)

// TestCollectorNameStopsResolving (issue 10, defect 3): the collector's
// host name is resolved in the background, never on a port event. While
// it has not resolved, the receiver exists without an address; when it
// stops resolving, the last address stays in use, the failures are counted
// for that collector, and port changes are applied as usual.
func TestCollectorNameStopsResolving(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var mu sync.Mutex
	fail, changes := false, 0
	res := newResolver(log, func() { mu.Lock(); changes++; mu.Unlock() })
	res.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail || host != "collector.test" {
			return nil, errors.New("lookup collector.test: server misbehaving")
		}
		return []netip.Addr{netip.MustParseAddr("2001:db8::9"), netip.MustParseAddr("198.18.0.77")}, nil
	}
	s := defaultSettings()
	s.Collectors = []Collector{{Address: "collector.test:6343"}, {Address: "198.18.0.5"}}
	s.Ports = []string{"p*"}
	ports := []dataplane.PortInfo{{Index: 5, Name: "p1", Up: true}}

	m, err := buildModel(s, ports, res, log)
	if err != nil {
		t.Fatalf("buildModel before the name resolved: %v", err)
	}
	if r := m.static.Receivers; len(r) != 2 || r[0].Address.Addr().IsValid() || r[0].Name != "collector.test" || r[0].Address.Port() != 6343 ||
		r[1].Address != netip.MustParseAddrPort("198.18.0.5:6343") {
		t.Fatalf("receivers before resolution: %+v", r)
	}
	ctx := context.Background()
	res.resolveDue(ctx)
	if changes != 1 {
		t.Errorf("%d reconfigurations after the name resolved, want 1", changes)
	}
	if m, err = buildModel(s, ports, res, log); err != nil || m.static.Receivers[0].Address != netip.MustParseAddrPort("198.18.0.77:6343") {
		t.Fatalf("after resolution: %+v %v", m.static.Receivers, err)
	}

	// The name stops resolving: a new port is still taken, and the
	// collector keeps its last address.
	mu.Lock()
	fail = true
	mu.Unlock()
	for i := 0; i < 2; i++ {
		res.mu.Lock()
		res.names["collector.test"].next = time.Time{}
		res.mu.Unlock()
		res.resolveDue(ctx)
	}
	ports = append(ports, dataplane.PortInfo{Index: 6, Name: "p2", Up: true})
	m, err = buildModel(s, ports, res, log)
	if err != nil {
		t.Fatalf("port change refused while the collector name fails: %v", err)
	}
	if len(m.ports) != 2 || m.static.Receivers[0].Address != netip.MustParseAddrPort("198.18.0.77:6343") {
		t.Fatalf("model while the name fails: ports %+v receivers %+v", m.ports, m.static.Receivers)
	}
	if st := res.stats(); len(st) != 1 || st[0] != (nameStats{host: "collector.test", failures: 2, resolved: 0}) {
		t.Errorf("resolver stats %+v, want 2 failures of collector.test, not resolved", st)
	}
	// Retries back off: the next lookup is due 2 s after the second failure.
	res.mu.Lock()
	wait := res.names["collector.test"].wait
	res.mu.Unlock()
	if wait != 2*resolveMinWait {
		t.Errorf("retry wait %v after two failures, want %v", wait, 2*resolveMinWait)
	}
}
