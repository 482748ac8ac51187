package sonic_test

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/redistest"
	"github.com/sflowswitchd/sflowswitchd/platform/sonic"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// fixture is the SONiC content of these tests: 32 ports, PortChannel0001
// of Ethernet0 and Ethernet4, Vlan1000 with Ethernet8, two collectors (one
// in the mgmt VRF), sFlow on, polling every 5 s.
func fixture() redistest.Fixture {
	return redistest.Fixture{
		Ports:   32,
		OSIndex: func(name string) int { return 100 + len(name) },
		LAG:     "PortChannel0001", Members: []string{"Ethernet0", "Ethernet4"},
		VLAN: "Vlan1000", VLANMember: "Ethernet8",
		Collectors: map[string][]string{
			"col1": {"collector_ip", "198.18.5.2", "collector_port", "6343"},
			"col2": {"collector_ip", "2001:db8::2", "collector_port", "6344", "collector_vrf", "mgmt"},
		},
		Global: []string{"admin_state", "up", "polling_interval", "5", "agent_id", "eth0", "sample_direction", "both", "max_header_size", "128", "drop_monitor_limit", "50"},
		Ready:  true,
		MAC:    "52:54:00:12:34:56",
	}
}

// run starts a client on srv and returns it with a channel of its changes.
func run(t *testing.T, srv *redistest.Server, o sonic.Options) (*sonic.Client, <-chan *sonic.State) {
	t.Helper()
	ch := make(chan *sonic.State, 64)
	o.DBConfig = srv.DBConfig
	o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.OnChange = func(s *sonic.State) {
		select {
		case ch <- s:
		default:
		}
	}
	c := sonic.New(o)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return c, ch
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// waitFor waits up to d for a state for which ok holds.
func waitFor(t *testing.T, c *sonic.Client, d time.Duration, what string, ok func(*sonic.State) bool) *sonic.State {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if s := c.State(); s != nil && ok(s) {
			return s
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no state with %s within %v (last: %+v)", what, d, c.State())
	return nil
}

func TestReadState(t *testing.T) {
	srv := redistest.Start(t)
	fixture().Write(srv)
	c, _ := run(t, srv, sonic.Options{})
	st := waitFor(t, c, 5*time.Second, "ports", func(s *sonic.State) bool { return len(s.Ports) > 0 })
	if !st.Ready || !st.SystemReady {
		t.Errorf("ready %v, system ready %v; want both", st.Ready, st.SystemReady)
	}
	cfg := st.Config
	if !cfg.AdminUp || cfg.Polling != 5 || cfg.AgentID != "eth0" || cfg.Direction != "both" || cfg.MaxHeaderSize != 128 || cfg.DropMonitorLimit != 50 {
		t.Errorf("config %+v", cfg)
	}
	if cfg.MAC.String() != "52:54:00:12:34:56" {
		t.Errorf("mac %v", cfg.MAC)
	}
	want := []sonic.Collector{
		{Name: "col1", Addr: netip.MustParseAddrPort("198.18.5.2:6343")},
		{Name: "col2", Addr: netip.MustParseAddrPort("[2001:db8::2]:6344"), Device: "mgmt"},
	}
	if len(cfg.Collectors) != 2 || cfg.Collectors[0] != want[0] || cfg.Collectors[1] != want[1] {
		t.Errorf("collectors %+v, want %+v", cfg.Collectors, want)
	}
	// 32 ports and the LAG; the VLAN is in PORT_INDEX_TABLE but is not a
	// port (not in COUNTERS_PORT_NAME_MAP).
	if len(st.Ports) != 33 {
		t.Fatalf("%d ports, want 33", len(st.Ports))
	}
	for i := 0; i < 32; i++ {
		name := redistest.PortName(i)
		p, ok := st.PortByName(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		if p.Index != uint32(4*i+1) || p.OID != redistest.PortOID(i) || p.SpeedMbps != 100000 || !p.AdminUp || !p.OperUp || p.OSIndex != uint32(100+len(name)) {
			t.Errorf("%s: %+v", name, p)
		}
		if ct, ok := c.Counters(st, p); !ok {
			t.Errorf("%s: no counters", name)
		} else if v, _ := ct.Get("SAI_PORT_STAT_IF_IN_OCTETS"); v != redistest.Counter(i, 0, 0) {
			t.Errorf("%s in octets %d, want %d", name, v, redistest.Counter(i, 0, 0))
		}
	}
	lag, ok := st.Port(1001)
	if !ok || lag.Name != "PortChannel0001" || !lag.IsLAG() || strings.Join(lag.Members, ",") != "Ethernet0,Ethernet4" || lag.SpeedMbps != 200000 {
		t.Fatalf("LAG 1001: %+v %v", lag, ok)
	}
	for _, m := range lag.Members {
		if p, _ := st.PortByName(m); p.LAG != "PortChannel0001" {
			t.Errorf("%s not marked a member", m)
		}
	}
	if _, ok := st.PortByName("Vlan1000"); ok {
		t.Error("Vlan1000 reported as a port")
	}
	// The members' lag_port_stats: teamd's LACP state (STATE_DB
	// LAG_MEMBER_TABLE) with the LAG's SONiC ifIndex while selected.
	actor := [6]byte{0x52, 0x54, 0, 0x12, 0x34, 0x56}
	for _, c := range []struct {
		name string
		want sflow.LAGPortStats
	}{
		{"Ethernet0", sflow.LAGPortStats{ActorSystemID: actor, PartnerOperSystemID: [6]byte{0x52, 0x54, 0, 0xaa, 0xbb, 0xcc}, AttachedAggID: 1001,
			ActorAdminState: 5, ActorOperState: 61, PartnerOperState: 61}},
		{"Ethernet4", sflow.LAGPortStats{ActorSystemID: actor, ActorAdminState: 5, ActorOperState: 69, PartnerOperState: 2}},
	} {
		c.want.SetUnavailable()
		p, _ := st.PortByName(c.name)
		var l sflow.LAGPortStats
		if !sonic.LAGPortStats(st, p, &l) || l != c.want {
			t.Errorf("%s: lag_port_stats %+v, want %+v", c.name, l, c.want)
		}
	}
	for _, name := range []string{"Ethernet8", "PortChannel0001"} {
		p, _ := st.PortByName(name)
		var l sflow.LAGPortStats
		if sonic.LAGPortStats(st, p, &l) {
			t.Errorf("%s (not a LAG member) has lag_port_stats", name)
		}
	}
	// The LAG's counters are its members' summed, and its if_counters
	// carry them with the LAG's ifIndex.
	ct, ok := c.Counters(st, lag)
	if !ok {
		t.Fatal("no LAG counters")
	}
	var ifc sflow.IfCounters
	sonic.IfCounters(lag, ct, &ifc)
	if ifc.IfIndex != 1001 || ifc.IfInOctets != redistest.Counter(0, 0, 0)+redistest.Counter(1, 0, 0) ||
		ifc.IfOutUcastPkts != uint32(redistest.Counter(0, 9, 0)+redistest.Counter(1, 9, 0)) || ifc.IfSpeed != 200_000_000_000 || ifc.IfStatus != 3 {
		t.Errorf("LAG if_counters %+v", ifc)
	}
	in, out := ct.Packets()
	if want := redistest.Counter(0, 1, 0) + redistest.Counter(0, 3, 0) + redistest.Counter(0, 4, 0) +
		redistest.Counter(1, 1, 0) + redistest.Counter(1, 3, 0) + redistest.Counter(1, 4, 0); in != want {
		t.Errorf("LAG in packets %d, want %d", in, want)
	}
	if out == 0 {
		t.Error("LAG out packets 0")
	}
	if len(c.BadValues()) != 0 {
		t.Errorf("bad values in a good fixture: %v", c.BadValues())
	}
}

// TestBadValues: every bad value is reported, by table, and skips only its
// own key or field; the rest is read.
func TestBadValues(t *testing.T) {
	srv := redistest.Start(t)
	f := fixture()
	f.Global = []string{"admin_state", "up", "polling_interval", "3", "agent_id", "eth0/1", "sample_direction", "sideways"}
	f.Collectors["bad-ip"] = []string{"collector_ip", "300.1.2.3"}
	f.Collectors["bad-vrf"] = []string{"collector_ip", "198.18.7.2", "collector_vrf", "Vrf-red"}
	f.Collectors["bad-port"] = []string{"collector_ip", "198.18.7.3", "collector_port", "70000"}
	f.Write(srv)
	srv.HSet(redistest.ApplDB, "PORT_TABLE:Ethernet12", "speed", "fast")
	srv.HSet(redistest.StateDB, "PORT_INDEX_TABLE|Ethernet16", "index", "minus-one")
	srv.HSet(redistest.CountersDB, "COUNTERS_PORT_NAME_MAP", "Ethernet200", "oid:0x1000000000fff")
	srv.HSet(redistest.CountersDB, "COUNTERS:"+redistest.PortOID(5), "SAI_PORT_STAT_IF_IN_ERRORS", "many")
	srv.HSet(redistest.StateDB, "LAG_MEMBER_TABLE|PortChannel0001|Ethernet0", "runner.partner_lacpdu_info.state", "300",
		"runner.partner_lacpdu_info.system", "not-a-mac")
	srv.HSet(redistest.ApplDB, "LAG_MEMBER_TABLE:PortChannel0001:Ethernet4", "status", "maybe")
	c, _ := run(t, srv, sonic.Options{})
	waitFor(t, c, 5*time.Second, "ports", func(s *sonic.State) bool { return len(s.Ports) > 0 })
	time.Sleep(1500 * time.Millisecond) // a counter read
	st := c.State()
	if st.Config.Polling != sonic.DefaultPolling || st.Config.AgentID != "" || st.Config.Direction != "" || !st.Config.AdminUp {
		t.Errorf("config %+v", st.Config)
	}
	if len(st.Config.Collectors) != 2 {
		t.Errorf("collectors %+v, want the two good ones", st.Config.Collectors)
	}
	p, _ := st.PortByName("Ethernet12")
	if p.SpeedMbps != 0 || !p.OperUp {
		t.Errorf("Ethernet12 with a bad speed: %+v", p)
	}
	if p, _ := st.PortByName("Ethernet16"); p.Index != 17 {
		t.Errorf("Ethernet16 with a bad index: %+v (want port_util's 17)", p)
	}
	p200, ok := st.PortByName("Ethernet200")
	if !ok {
		t.Fatal("Ethernet200 (no counters) not a port")
	}
	if _, ok := c.Counters(st, p200); ok {
		t.Error("counters for an OID with none")
	}
	p5, _ := st.PortByName(redistest.PortName(5))
	ct, _ := c.Counters(st, p5)
	var ifc sflow.IfCounters
	sonic.IfCounters(p5, ct, &ifc)
	if ifc.IfInErrors != sflow.CounterUnavailable32 || ifc.IfInOctets != redistest.Counter(5, 0, 0) {
		t.Errorf("port 5 with a bad counter: %+v", ifc)
	}
	// Bad LACP values leave only their own field unknown.
	var l sflow.LAGPortStats
	if p0, _ := st.PortByName("Ethernet0"); !sonic.LAGPortStats(st, p0, &l) || l.PartnerOperState != 0 || l.PartnerOperSystemID != ([6]byte{}) ||
		l.ActorOperState != 61 || l.AttachedAggID != 1001 {
		t.Errorf("Ethernet0 with a bad partner state and system: %+v", l)
	}
	bad := c.BadValues()
	for tb, n := range map[string]uint64{"SFLOW": 3, "SFLOW_COLLECTOR": 3, "PORT_TABLE": 1, "PORT_INDEX_TABLE": 1, "COUNTERS": 2, "LAG_MEMBER_TABLE": 3} {
		if bad[tb] != n {
			t.Errorf("bad values of %s: %d, want %d (all: %v)", tb, bad[tb], n, bad)
		}
	}
}

// TestLiveChanges: each redis-cli HSET and DEL of the tables read takes
// effect through keyspace notifications, within a second.
func TestLiveChanges(t *testing.T) {
	srv := redistest.Start(t)
	fixture().Write(srv)
	c, _ := run(t, srv, sonic.Options{})
	waitFor(t, c, 5*time.Second, "ports", func(s *sonic.State) bool { return len(s.Ports) == 33 })
	step := func(what string, change func(), ok func(*sonic.State) bool) {
		t.Helper()
		start := time.Now()
		change()
		waitFor(t, c, time.Second, what, ok)
		t.Logf("%s: applied in %v", what, time.Since(start).Round(time.Millisecond))
	}
	step("collector added", func() {
		srv.HSet(redistest.ConfigDB, "SFLOW_COLLECTOR|col3", "collector_ip", "198.18.9.9")
	}, func(s *sonic.State) bool { return len(s.Config.Collectors) == 3 })
	step("collector port changed", func() {
		srv.HSet(redistest.ConfigDB, "SFLOW_COLLECTOR|col3", "collector_port", "7000")
	}, func(s *sonic.State) bool {
		return len(s.Config.Collectors) == 3 && s.Config.Collectors[2].Addr.Port() == 7000
	})
	step("collector deleted", func() { srv.Del(redistest.ConfigDB, "SFLOW_COLLECTOR|col3") },
		func(s *sonic.State) bool { return len(s.Config.Collectors) == 2 })
	step("polling", func() { srv.HSet(redistest.ConfigDB, "SFLOW|global", "polling_interval", "30") },
		func(s *sonic.State) bool { return s.Config.Polling == 30 })
	step("agent_id", func() { srv.HSet(redistest.ConfigDB, "SFLOW|global", "agent_id", "lo") },
		func(s *sonic.State) bool { return s.Config.AgentID == "lo" })
	step("admin down", func() { srv.HSet(redistest.ConfigDB, "SFLOW|global", "admin_state", "down") },
		func(s *sonic.State) bool { return !s.Config.AdminUp })
	step("admin up", func() { srv.HSet(redistest.ConfigDB, "SFLOW|global", "admin_state", "up") },
		func(s *sonic.State) bool { return s.Config.AdminUp })
	step("speed", func() { srv.HSet(redistest.ApplDB, "PORT_TABLE:Ethernet8", "speed", "25000") },
		func(s *sonic.State) bool { p, _ := s.PortByName("Ethernet8"); return p.SpeedMbps == 25000 })
	step("oper down", func() { srv.HSet(redistest.ApplDB, "PORT_TABLE:Ethernet8", "oper_status", "down") },
		func(s *sonic.State) bool { p, _ := s.PortByName("Ethernet8"); return !p.OperUp })
	step("LAG member removed", func() { srv.Del(redistest.ConfigDB, "PORTCHANNEL_MEMBER|PortChannel0001|Ethernet4") },
		func(s *sonic.State) bool { p, _ := s.Port(1001); return p != nil && len(p.Members) == 1 })
	if !c.TakeReset(1001) {
		t.Error("a LAG whose members changed: no counter reset")
	}
	step("LAG member added", func() { srv.HSet(redistest.ConfigDB, "PORTCHANNEL_MEMBER|PortChannel0001|Ethernet12", "NULL", "NULL") },
		func(s *sonic.State) bool { p, _ := s.Port(1001); return p != nil && len(p.Members) == 2 })
	step("LAG member selected by teamd", func() {
		srv.HSet(redistest.StateDB, "LAG_MEMBER_TABLE|PortChannel0001|Ethernet12", "runner.selected", "true", "runner.actor_lacpdu_info.state", "61")
	}, func(s *sonic.State) bool {
		p, _ := s.PortByName("Ethernet12")
		var l sflow.LAGPortStats
		return sonic.LAGPortStats(s, p, &l) && l.AttachedAggID == 1001 && l.ActorOperState == 61
	})
	step("LAG member unselected by teamd", func() {
		srv.HSet(redistest.StateDB, "LAG_MEMBER_TABLE|PortChannel0001|Ethernet12", "runner.selected", "false")
	}, func(s *sonic.State) bool {
		p, _ := s.PortByName("Ethernet12")
		var l sflow.LAGPortStats
		return sonic.LAGPortStats(s, p, &l) && l.AttachedAggID == 0
	})
	// Without teamd's state, as hsflowd: attached, the system's MAC, a
	// static member's states (Aggregation, in sync, collecting and
	// distributing while its link is up).
	step("LAG member's teamd state gone", func() {
		srv.Del(redistest.StateDB, "LAG_MEMBER_TABLE|PortChannel0001|Ethernet12")
	}, func(s *sonic.State) bool {
		p, _ := s.PortByName("Ethernet12")
		var l sflow.LAGPortStats
		return sonic.LAGPortStats(s, p, &l) && l.AttachedAggID == 1001 && l.ActorOperState == 60 && l.ActorAdminState == 4 &&
			l.ActorSystemID == [6]byte{0x52, 0x54, 0, 0x12, 0x34, 0x56} && l.PartnerOperSystemID == [6]byte{}
	})
	step("ifindex changed", func() { srv.HSet(redistest.StateDB, "PORT_INDEX_TABLE|Ethernet20", "ifindex", "4242") },
		func(s *sonic.State) bool { p, _ := s.PortByName("Ethernet20"); return p.OSIndex == 4242 })
	step("port re-created (new OID)", func() {
		srv.HSet(redistest.CountersDB, "COUNTERS_PORT_NAME_MAP", "Ethernet24", "oid:0x1000000000abc")
	}, func(s *sonic.State) bool { p, _ := s.PortByName("Ethernet24"); return p.OID == "oid:0x1000000000abc" })
	if !c.TakeReset(25) || c.TakeReset(25) {
		t.Error("an OID change: want one counter reset of ifIndex 25")
	}
	step("port removed", func() { srv.CLI(redistest.CountersDB, "HDEL", "COUNTERS_PORT_NAME_MAP", "Ethernet124") },
		func(s *sonic.State) bool { _, ok := s.PortByName("Ethernet124"); return !ok })
}

// TestWaitReady: no port is reported before SYSTEM_READY (configuration
// is), then at once when it comes; without it, after waitReady.
func TestWaitReady(t *testing.T) {
	srv := redistest.Start(t)
	f := fixture()
	f.Ready = false
	f.Write(srv)
	c, _ := run(t, srv, sonic.Options{})
	st := waitFor(t, c, 5*time.Second, "configuration", func(s *sonic.State) bool { return len(s.Config.Collectors) == 2 })
	if st.Ready || len(st.Ports) != 0 {
		t.Fatalf("before SYSTEM_READY: ready %v, %d ports", st.Ready, len(st.Ports))
	}
	srv.HSet(redistest.StateDB, "SYSTEM_READY|SYSTEM_STATE", "Status", "UP")
	waitFor(t, c, time.Second, "ports after SYSTEM_READY", func(s *sonic.State) bool { return s.Ready && len(s.Ports) == 33 })

	srv2 := redistest.Start(t)
	f.Write(srv2)
	c2, _ := run(t, srv2, sonic.Options{WaitReady: 1500 * time.Millisecond})
	start := time.Now()
	waitFor(t, c2, 5*time.Second, "ports after waitReady", func(s *sonic.State) bool { return s.Ready && len(s.Ports) == 33 })
	if el := time.Since(start); el < time.Second {
		t.Errorf("ports after %v, before waitReady", el)
	}
}

// TestRedisLoss: a Redis that goes away leaves the last state in force;
// the client reconnects with backoff when it returns.
func TestRedisLoss(t *testing.T) {
	srv := redistest.Start(t)
	fixture().Write(srv)
	c, _ := run(t, srv, sonic.Options{})
	waitFor(t, c, 5*time.Second, "ports", func(s *sonic.State) bool { return len(s.Ports) == 33 })
	srv.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for c.Connected.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if c.Connected.Load() {
		t.Fatal("still connected to a killed Redis")
	}
	if st := c.State(); len(st.Ports) != 33 || len(st.Config.Collectors) != 2 {
		t.Fatalf("state lost with Redis: %d ports, %d collectors", len(st.Ports), len(st.Config.Collectors))
	}
	srv.Start() // empty: nothing persisted
	fixture().Write(srv)
	srv.HSet(redistest.ConfigDB, "SFLOW|global", "polling_interval", "60")
	waitFor(t, c, 10*time.Second, "the state after Redis returned", func(s *sonic.State) bool { return s.Config.Polling == 60 })
	if c.Reconnects.Load() == 0 {
		t.Error("no reconnect counted")
	}
}

func TestTopology(t *testing.T) {
	dir := t.TempDir()
	pw := dir + "/pw"
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := `{"INSTANCES":{"redis":{"hostname":"127.0.0.1","port":6379,"unix_socket_path":"/var/run/redis/redis.sock","password_path":"` + pw + `"},
	  "r2":{"hostname":"127.0.0.1","port":6380}},
	 "DATABASES":{"APPL_DB":{"id":0,"separator":":","instance":"redis"},"COUNTERS_DB":{"id":2,"separator":":","instance":"r2"},
	  "CONFIG_DB":{"id":4,"separator":"|","instance":"redis"},"STATE_DB":{"id":6,"separator":"|","instance":"redis"}},"VERSION":"1.0"}`
	path := dir + "/db.json"
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	topo, err := sonic.LoadTopology(path)
	if err != nil {
		t.Fatal(err)
	}
	o, err := topo.Options(sonic.ConfigDB, true)
	if err != nil || o.Network != "unix" || o.Addr != "/var/run/redis/redis.sock" || o.DB != 4 || o.Password != "s3cret" {
		t.Errorf("CONFIG_DB options %+v %v", o, err)
	}
	if o, _ := topo.Options(sonic.ConfigDB, false); o.Network != "tcp" || o.Addr != "127.0.0.1:6379" {
		t.Errorf("CONFIG_DB over TCP: %s %s", o.Network, o.Addr)
	}
	if o, _ := topo.Options(sonic.CountersDB, true); o.Network != "tcp" || o.Addr != "127.0.0.1:6380" || o.DB != 2 {
		t.Errorf("COUNTERS_DB on the second instance: %+v", o)
	}
	if topo.Sep(sonic.ConfigDB) != "|" || topo.Sep(sonic.ApplDB) != ":" {
		t.Error("separators")
	}
	bad := strings.Replace(good, `"STATE_DB":{"id":6,"separator":"|","instance":"redis"}`, `"STATE_DB":{"id":6,"separator":"|","instance":"nowhere"}`, 1)
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sonic.LoadTopology(path); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("a database on an unknown instance: %v", err)
	}
}

func TestPortUtilIndex(t *testing.T) {
	for name, want := range map[string]uint32{"Ethernet0": 1, "Ethernet4": 5, "Ethernet124": 125, "PortChannel0001": 1001,
		"PortChannel42": 1042, "Vlan1000": 3000, "eth0": 10000, "Ethernet-BP0": 9000, "Ethernet-IB0": 11000, "Ethernet-Rec1": 12001} {
		if got, ok := sonic.PortUtilIndex(name); !ok || got != want {
			t.Errorf("%s: %d %v, want %d", name, got, ok, want)
		}
	}
	for _, name := range []string{"lo", "docker0", "Ethernet", "EthernetX", "PortChannel"} {
		if _, ok := sonic.PortUtilIndex(name); ok {
			t.Errorf("%s has an index", name)
		}
	}
}
