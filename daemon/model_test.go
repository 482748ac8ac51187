package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/collectoraddr"
	"github.com/sflowswitchd/sflowswitchd/dataplane/ports"
)

// TestCollectorNameStopsResolving: the collector's
// host name is resolved in the background, never on a port event. While
// it has not resolved, the receiver exists without an address; when it
// stops resolving, the last address stays in use, the failures are counted
// for that collector, and port changes are applied as usual.
func TestCollectorNameStopsResolving(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var mu sync.Mutex
	fail, changes := false, 0
	res := collectoraddr.NewResolver(log, func() { mu.Lock(); changes++; mu.Unlock() })
	now := time.Now()
	res.Now = func() time.Time { return now }
	res.Lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail || host != "collector.test" {
			return nil, errors.New("lookup collector.test: server misbehaving")
		}
		return []netip.Addr{netip.MustParseAddr("2001:db8::9"), netip.MustParseAddr("198.18.0.77")}, nil
	}
	s := config.Defaults()
	s.Collectors = []config.Collector{{Address: "collector.test:6343"}, {Address: "198.18.0.5"}}
	s.Ports = []string{"p*"}
	present := []ports.Info{{Index: 5, Name: "p1", Up: true}}

	m, err := buildModel(s, present, res, log)
	if err != nil {
		t.Fatalf("BuildModel before the name resolved: %v", err)
	}
	if r := m.Static.Receivers; len(r) != 2 || r[0].Address.Addr().IsValid() || r[0].Name != "collector.test" || r[0].Address.Port() != 6343 ||
		r[1].Address != netip.MustParseAddrPort("198.18.0.5:6343") {
		t.Fatalf("receivers before resolution: %+v", r)
	}
	ctx := context.Background()
	res.ResolveDue(ctx)
	if changes != 1 {
		t.Errorf("%d reconfigurations after the name resolved, want 1", changes)
	}
	if m, err = buildModel(s, present, res, log); err != nil || m.Static.Receivers[0].Address != netip.MustParseAddrPort("198.18.0.77:6343") {
		t.Fatalf("after resolution: %+v %v", m.Static.Receivers, err)
	}

	// The name stops resolving: a new port is still taken, and the
	// collector keeps its last address.
	mu.Lock()
	fail = true
	mu.Unlock()
	var next time.Time
	for i := 0; i < 2; i++ {
		now = now.Add(time.Hour) // due again
		next = res.ResolveDue(ctx)
	}
	present = append(present, ports.Info{Index: 6, Name: "p2", Up: true})
	m, err = buildModel(s, present, res, log)
	if err != nil {
		t.Fatalf("port change refused while the collector name fails: %v", err)
	}
	if len(m.Ports) != 2 || m.Static.Receivers[0].Address != netip.MustParseAddrPort("198.18.0.77:6343") {
		t.Fatalf("model while the name fails: ports %+v receivers %+v", m.Ports, m.Static.Receivers)
	}
	if st := res.Stats(); len(st) != 1 || st[0] != (collectoraddr.NameStats{Host: "collector.test", Failures: 2, Resolved: 0}) {
		t.Errorf("resolver stats %+v, want 2 failures of collector.test, not resolved", st)
	}
	// Retries back off: the next lookup is due 2 s after the second failure.
	if wait := next.Sub(now); wait != 2*collectoraddr.RetryMinWait {
		t.Errorf("retry wait %v after two failures, want %v", wait, 2*collectoraddr.RetryMinWait)
	}
}

// TestCollectorNameResolvesToReservedPort: a
// collector given as a host name is checked once resolved, with its own
// port: a name resolving only to this host's loopback, configured at the
// SNMP or AgentX port, gets no address (nothing is sent; logged once,
// collector_address_refused), while the same name at port 6343 is used;
// a name with another address too uses that one. The resolver used to
// check the address at 6343, so localhost:161 sent sFlow into snmpd.
func TestCollectorNameResolvesToReservedPort(t *testing.T) {
	var logBuf strings.Builder
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	res := collectoraddr.NewResolver(log, nil)
	res.Lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "snmp.test":
			return []netip.Addr{netip.MustParseAddr("::1"), netip.MustParseAddr("127.0.0.1")}, nil
		case "both.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("198.18.0.9")}, nil
		}
		return nil, errors.New("no such host")
	}
	s := config.Defaults()
	s.Collectors = []config.Collector{{Address: "snmp.test:161"}, {Address: "snmp.test:705"}, {Address: "snmp.test:6343"}, {Address: "both.test:705"}}
	for i := 0; i < 2; i++ { // the first model asks for the names
		res.ResolveDue(context.Background())
		m, err := buildModel(s, nil, res, log)
		if err != nil {
			t.Fatal(err)
		}
		r := m.Static.Receivers
		if i == 0 {
			continue
		}
		if r[0].Address.Addr().IsValid() || r[1].Address.Addr().IsValid() {
			t.Errorf("snmp.test at 161 and 705 given addresses %v, %v", r[0].Address, r[1].Address)
		}
		if r[2].Address != netip.MustParseAddrPort("127.0.0.1:6343") {
			t.Errorf("snmp.test at 6343: %v, want 127.0.0.1:6343", r[2].Address)
		}
		if r[3].Address != netip.MustParseAddrPort("198.18.0.9:705") {
			t.Errorf("both.test at 705: %v, want 198.18.0.9:705", r[3].Address)
		}
	}
	if n := strings.Count(logBuf.String(), "collector name resolves to an address that cannot be a collector"); n != 2 {
		t.Errorf("%d refusals logged for two ports over two reconfigurations, want 2 (once each):\n%s", n, logBuf.String())
	}
	for _, st := range res.Stats() {
		if want := map[string]int{"snmp.test": 1, "both.test": 0}[st.Host]; st.Refused != want {
			t.Errorf("%s: Refused %d, want %d", st.Host, st.Refused, want)
		}
	}
}

// TestDentSwitchPorts: with dent { } only the switch ports (the
// switchport pattern) are data sources, as mod_dent samples only them;
// without it every selected port is.
func TestDentSwitchPorts(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	res := collectoraddr.NewResolver(log, func() {})
	present := []ports.Info{{Index: 5, Name: "swp1", Up: true}, {Index: 6, Name: "swp2s1", Up: true}, {Index: 7, Name: "eth0", Up: true}}
	sources := func(s config.Settings) []uint32 {
		t.Helper()
		m, err := buildModel(s, present, res, log)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint32
		for _, p := range m.Ports {
			out = append(out, p.IfIndex)
		}
		return out
	}
	s := config.Defaults()
	s.Collectors = []config.Collector{{Address: "198.18.0.5"}}
	if got := sources(s); len(got) != 3 {
		t.Errorf("without dent: data sources %v, want the 3 ports", got)
	}
	s.Dent, s.PsampleIngressGroup = true, 1
	if got := sources(s); len(got) != 2 || got[0] != 5 || got[1] != 6 {
		t.Errorf("dent: data sources %v, want swp1 and swp2s1 (5, 6)", got)
	}
}
