package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/internal/autofile"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/redistest"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// sonicLab is a SONiC switch for SONiC mode's tests: a real redis-server
// holding SONiC's tables (testkit/redistest), 32 front-panel ports as veth
// pairs named as SONiC names them (Ethernet0 .. Ethernet124, their peers
// soeN, all in the switch namespace), PortChannel0001 of Ethernet0 and
// Ethernet4, Vlan1000 (a bridge of that name) with Ethernet8, and a
// management device "mgmt" leading to a namespace of its own with the
// mgmt-VRF collector 198.18.6.2. The main table routes 198.18.6.2 through
// mgmt0 to the lab's collector namespace, which drops it: only a socket
// bound to mgmt reaches that collector.
type sonicLab struct {
	lab     *netlab.Lab
	srv     *redistest.Server
	mgmtNS  string
	auto    string // hsflowd.auto
	c1, c2  *collector
	p1, p2  uint16
	mgmtCol netip.Addr
}

const sonicPorts = 32

func newSonicLab(t *testing.T) *sonicLab {
	t.Helper()
	netlab.RequireRoot(t)
	lab := netlab.New(t, 1)
	sl := &sonicLab{lab: lab, srv: redistest.Start(t), mgmtNS: lab.Prefix + "-somg", p1: 6343, p2: 6344,
		mgmtCol: netip.MustParseAddr("198.18.6.2")}
	run := func(ns string, args ...string) {
		t.Helper()
		if out, err := lab.Run(ns, args[0], args[1:]...); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for i := 0; i < sonicPorts; i++ {
		name := redistest.PortName(i)
		run(lab.Switch, "ip", "link", "add", name, "type", "veth", "peer", "name", fmt.Sprintf("soe%d", i))
		run(lab.Switch, "ip", "link", "set", name, "up")
		run(lab.Switch, "ip", "link", "set", fmt.Sprintf("soe%d", i), "up")
	}
	run(lab.Switch, "ip", "link", "add", "Vlan1000", "type", "bridge")
	run(lab.Switch, "ip", "link", "set", "Ethernet8", "master", "Vlan1000")
	run(lab.Switch, "ip", "link", "set", "Vlan1000", "up")
	if out, err := hostCmd("ip", "netns", "add", sl.mgmtNS); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { _, _ = hostCmd("ip", "netns", "del", sl.mgmtNS) })
	run(lab.Switch, "ip", "link", "add", "mgmt", "type", "veth", "peer", "name", "somgc", "netns", sl.mgmtNS)
	run(lab.Switch, "ip", "addr", "add", "198.18.6.1/24", "dev", "mgmt")
	run(lab.Switch, "ip", "link", "set", "mgmt", "up")
	run(sl.mgmtNS, "ip", "addr", "add", "198.18.6.2/24", "dev", "somgc")
	run(sl.mgmtNS, "ip", "link", "set", "somgc", "up")
	run(sl.mgmtNS, "ip", "link", "set", "lo", "up")
	run(lab.Switch, "ip", "route", "add", "198.18.6.2/32", "via", lab.CollectorAddr.String(), "dev", "mgmt0")
	sl.c1 = listen(t, lab, sl.p1)
	sl.c2 = listenIn(t, lab, sl.mgmtNS, sl.mgmtCol, sl.p2)
	redistest.Fixture{
		Ports:   sonicPorts,
		OSIndex: func(name string) int { return lab.LinkIndex(lab.Switch, name) },
		LAG:     "PortChannel0001", Members: []string{"Ethernet0", "Ethernet4"},
		VLAN: "Vlan1000", VLANMember: "Ethernet8",
		Collectors: map[string][]string{
			"col1": {"collector_ip", lab.CollectorAddr.String(), "collector_port", strconv.Itoa(int(sl.p1))},
			"col2": {"collector_ip", sl.mgmtCol.String(), "collector_port", strconv.Itoa(int(sl.p2)), "collector_vrf", "mgmt"},
		},
		Global: []string{"admin_state", "up", "polling_interval", "5", "agent_id", "mgmt0", "sample_direction", "rx"},
		Ready:  true,
		MAC:    "52:54:00:12:34:56",
	}.Write(sl.srv)
	sl.auto = filepath.Join(t.TempDir(), "hsflowd.auto")
	return sl
}

// hostCmd runs a command in the test's own namespace (ip netns add/del).
func hostCmd(name string, args ...string) ([]byte, error) {
	return osexec.Command(name, args...).CombinedOutput()
}

// listenIn is listen in namespace ns on addr.
func listenIn(t *testing.T, lab *netlab.Lab, ns string, addr netip.Addr, port uint16) *collector {
	t.Helper()
	c := &collector{port: port, done: make(chan struct{})}
	err := lab.Do(ns, func() (err error) {
		c.conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, port)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	go c.read()
	t.Cleanup(c.close)
	return c
}

// sonicSources are the data sources SONiC mode must report: the ports by
// SONiC's ifIndex (Ethernet4i → 4i+1) and the LAG (1001).
func sonicSources() map[uint32]bool {
	m := map[uint32]bool{1001: true}
	for i := 0; i < sonicPorts; i++ {
		m[uint32(4*i+1)] = true
	}
	return m
}

// polledSources returns the ifIndex data sources of the counter samples
// received, with how many samples each.
func polledSources(dgs []datagram) map[uint32]int {
	out := map[uint32]int{}
	for _, dg := range dgs {
		for _, s := range dg.our.Samples {
			if cs, ok := s.(*sflow.CounterSample); ok && cs.Source.Type == sflow.SourceIfIndex {
				out[cs.Source.Index]++
			}
		}
	}
	return out
}

// TestSonicRedis runs the daemon in SONiC mode against a real Redis: the
// counter samples of every SONiC port and of the LAG carry SONiC's
// ifIndex and COUNTERS_DB's values (goflow2 and tshark agree), nothing
// else is reported, the mgmt-VRF collector is reached through the mgmt
// device, hsflowd.auto is written as hsflowd writes it, the LAG members
// carry lag_port_stats (tshark agrees), host_adapters lists the SONiC
// ports by SONiC ifIndex, `show` names Redis as the source of its
// settings, and redis-cli changes apply live without a restart (sequence
// numbers and uptime continue).
func TestSonicRedis(t *testing.T) {
	sl := newSonicLab(t)
	lab := sl.lab
	cfg := filepath.Join(t.TempDir(), "sflowswitchd.conf")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("sonic = true\nsonic_db_config = %q\nsonic_auto_file = %q\nworkers = 1\n",
		sl.srv.DBConfig, sl.auto)), 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	d := startDaemon(t, lab, "-config", cfg, "-state-dir", state)
	want := sonicSources()
	timeout := testutil.Scaled(15 * time.Second)
	dgs := sl.c1.waitFor(t, timeout, "a counter sample of every SONiC port and the LAG", func(dgs []datagram) bool {
		return len(polledSources(dgs)) >= len(want)
	})
	for idx := range polledSources(dgs) {
		if !want[idx] {
			t.Errorf("counter samples of ifIndex %d, not a SONiC port (the VLAN, a Linux-only port?)", idx)
		}
	}
	// COUNTERS_DB's values, which are not the netdevs', by SONiC ifIndex,
	// read by our decoder and goflow2.
	for i := 0; i < sonicPorts; i++ {
		idx := uint32(4*i + 1)
		cs := counterSamplesOf(dgs, sflow.DataSource{Type: sflow.SourceIfIndex, Index: idx})
		if len(cs) == 0 {
			t.Fatalf("no counter sample of %s (ifIndex %d)", redistest.PortName(i), idx)
		}
		var ifc *sflow.IfCounters
		var name string
		for _, r := range cs[0].records {
			switch v := r.(type) {
			case *sflow.IfCounters:
				ifc = v
			case *sflow.PortName:
				name = v.PortName
			}
		}
		if ifc == nil || ifc.IfIndex != idx || ifc.IfInOctets != redistest.Counter(i, 0, 0) || ifc.IfOutOctets != redistest.Counter(i, 8, 0) ||
			ifc.IfInUcastPkts != uint32(redistest.Counter(i, 1, 0)) || ifc.IfOutErrors != uint32(redistest.Counter(i, 14, 0)) ||
			ifc.IfSpeed != 100_000_000_000 || ifc.IfStatus != 3 {
			t.Errorf("%s: if_counters %+v", redistest.PortName(i), ifc)
		}
		if name != redistest.PortName(i) {
			t.Errorf("ifIndex %d: port_name %q", idx, name)
		}
	}
	checkGoflowCounters(t, dgs, 5, redistest.Counter(1, 0, 0), redistest.Counter(1, 8, 0))
	checkGoflowCounters(t, dgs, 1001, redistest.Counter(0, 0, 0)+redistest.Counter(1, 0, 0), redistest.Counter(0, 8, 0)+redistest.Counter(1, 8, 0))
	var one datagram
	for _, dg := range dgs {
		if polled := polledSources([]datagram{dg}); polled[1001] > 0 {
			one = dg
		}
	}
	rows := tsharkFields(t, []datagram{one}, sl.p1, "sflow_245.ifindex", "sflow_245.ifinoct", "sflow_245.ifoutoct")
	found := false
	for i, idx := range rows[0]["sflow_245.ifindex"] {
		// The evidence, as tshark reads one datagram.
		t.Logf("tshark: if_counters ifIndex %s in octets %s out octets %s", idx, rows[0]["sflow_245.ifinoct"][i], rows[0]["sflow_245.ifoutoct"][i])
		if idx == "1001" {
			found = true
			if rows[0]["sflow_245.ifinoct"][i] != fmt.Sprint(redistest.Counter(0, 0, 0)+redistest.Counter(1, 0, 0)) {
				t.Errorf("tshark: LAG in octets %s", rows[0]["sflow_245.ifinoct"][i])
			}
		}
	}
	if !found {
		t.Errorf("tshark finds no if_counters of ifIndex 1001: %v", rows[0])
	}
	checkSonicLAGMembers(t, dgs, sl.p1)
	checkSonicHostAdapters(t, lab, sl.c1, timeout)
	// `show` names Redis, by database, key and field, as the source of
	// each setting it gave; the file's stay the file's.
	out, err := osexec.Command(daemonBin, "show", "-state-dir", state).CombinedOutput()
	if err != nil {
		t.Fatalf("show: %v\n%s", err, out)
	}
	t.Logf("show:\n%s", out)
	for _, w := range [][]string{
		{"agent address:", lab.AgentAddr.String(), "[redis CONFIG_DB SFLOW|global agent_id]"},
		{"polling:", "5s", "[redis CONFIG_DB SFLOW|global polling_interval]"},
		{"receiver 1", lab.CollectorAddr.String(), "[redis CONFIG_DB SFLOW_COLLECTOR|col1, SFLOW_COLLECTOR|col2]"},
		{"  direction ", `"ingress"`, "[redis CONFIG_DB SFLOW|global sample_direction]"},
		{"  agent_interface ", `"mgmt0"`, "[redis CONFIG_DB SFLOW|global agent_id]"},
		{"  workers ", "1", "[file]"},
		{"  Ethernet4 ", " 5 ", "[the ASIC's, per sample (SONiC's SFLOW_SESSION)]"},
	} {
		if !lineWith(string(out), w...) {
			t.Errorf("show has no line with %q", w)
		}
	}
	// The mgmt-VRF collector gets the same, through the mgmt device.
	sl.c2.waitFor(t, timeout, "datagrams at the mgmt-VRF collector", func(dgs []datagram) bool { return len(polledSources(dgs)) > 0 })
	// hsflowd.auto as hsflowd writes it (host-sflow hsflowd.c
	// syncOutputFile): its header, then the settings in its order, the
	// configured agent device (agent_id) before the collectors, the
	// elected agentIP after them, ds_index last.
	auto := waitAuto(t, sl.auto, time.Second, func(s string) bool { return strings.Contains(s, "collector=") })
	var keys []string
	for _, l := range strings.Split(strings.TrimSpace(auto), "\n")[1:] {
		k, _, _ := strings.Cut(l, "=")
		keys = append(keys, k)
	}
	if wantKeys := "rev_start hostname sampling header datagram polling agent collector collector agentIP ds_index rev_end"; !strings.HasPrefix(auto, autofile.Header) ||
		strings.Join(keys, " ") != wantKeys {
		t.Errorf("hsflowd.auto's lines %q, want %q after hsflowd's header:\n%s", keys, wantKeys, auto)
	}
	for _, line := range []string{"agentIP=" + lab.AgentAddr.String(), "agent=mgmt0", "polling=5",
		"collector=" + lab.CollectorAddr.String() + "\n", "collector=198.18.6.2/6344/mgmt/"} {
		if !strings.Contains(auto, line) {
			t.Errorf("hsflowd.auto lacks %q:\n%s", line, auto)
		}
	}

	// Live: a collector's port changes (applied within a second, seen in
	// hsflowd.auto), a port's SAI object changes (its counter samples
	// restart their sequence numbers: a discontinuity, not a jump), a
	// counter moves.
	c3 := listen(t, lab, 6345)
	before := time.Now()
	sl.srv.HSet(redistest.ConfigDB, "SFLOW_COLLECTOR|col1", "collector_port", "6345")
	waitAuto(t, sl.auto, time.Second, func(s string) bool { return strings.Contains(s, lab.CollectorAddr.String()+" 6345") })
	t.Logf("collector change applied (hsflowd.auto rewritten) in %v", time.Since(before).Round(time.Millisecond))
	newOID := "oid:0x1000000000fed"
	sl.srv.Pipe(redistest.CountersDB, []string{
		strings.Replace(redistest.CountersCmds(3, 1), "COUNTERS:"+redistest.PortOID(3), "COUNTERS:"+newOID, 1),
		"HSET COUNTERS_PORT_NAME_MAP Ethernet12 " + newOID,
		redistest.CountersCmds(5, 1),
	})
	lastSeq := lastDatagramSeq(sl.c1.snapshot(t))
	newValues := func(dgs []datagram, idx uint32, port int) []counterRec {
		var out []counterRec
		for _, c := range counterSamplesOf(dgs, sflow.DataSource{Type: sflow.SourceIfIndex, Index: idx}) {
			if ifc := ifcOf([]counterRec{c}); ifc != nil && ifc.IfInOctets == redistest.Counter(port, 0, 1) {
				out = append(out, c)
			}
		}
		return out
	}
	dgs3 := c3.waitFor(t, timeout, "counter samples of Ethernet12 and Ethernet20 with their new counters at the new collector port", func(dgs []datagram) bool {
		return len(newValues(dgs, 13, 3)) > 0 && len(newValues(dgs, 21, 5)) > 0
	})
	// Ethernet12's first sample with its new SAI object's counters
	// restarts the sequence (a discontinuity); Ethernet20's counters moved
	// on the same object: its sequence goes on.
	// A poll right at the change may still have gone to the old port:
	// both collectors' samples, in order.
	both := append(sl.c1.snapshot(t), dgs3...)
	sort.SliceStable(both, func(i, j int) bool { return both[i].at.Before(both[j].at) })
	if s := newValues(both, 13, 3); s[0].seq != 1 {
		t.Errorf("Ethernet12 made anew (OID changed): its first counter sample on the new object has sequence %d (all: %v), want 1",
			s[0].seq, seqsOf(counterSamplesOf(both, sflow.DataSource{Type: sflow.SourceIfIndex, Index: 13})))
	}
	// The mgmt collector's poller of the same port (another instance)
	// restarts too.
	mg := sl.c2.waitFor(t, timeout, "Ethernet12's new counters at the mgmt collector", func(dgs []datagram) bool { return len(newValues(dgs, 13, 3)) > 0 })
	if s := newValues(mg, 13, 3); s[0].seq != 1 {
		t.Errorf("Ethernet12 at the mgmt collector: first counter sample on the new object has sequence %d, want 1", s[0].seq)
	}
	if s := newValues(both, 21, 5); s[0].seq < 2 {
		t.Errorf("Ethernet20: counter sample sequence %d, want it continued", s[0].seq)
	}
	// Uptime keeps growing: no restart.
	if dgs3[0].our.Uptime <= dgs[0].our.Uptime || lastSeq == 0 {
		t.Errorf("uptime %d after %d: restarted?", dgs3[0].our.Uptime, dgs[0].our.Uptime)
	}

	// admin_state down stops sending; up resumes, the sequence continues.
	sl.srv.HSet(redistest.ConfigDB, "SFLOW|global", "admin_state", "down")
	waitAuto(t, sl.auto, time.Second, func(s string) bool { return !strings.Contains(s, "collector=") })
	down := time.Now()
	time.Sleep(testutil.Scaled(6 * time.Second)) // past a polling interval
	for _, dg := range c3.snapshot(t) {
		if dg.at.After(down.Add(200 * time.Millisecond)) {
			t.Fatalf("a datagram at %v, after admin_state down at %v", dg.at, down)
		}
	}
	seqDown := lastDatagramSeq(c3.snapshot(t))
	sl.srv.HSet(redistest.ConfigDB, "SFLOW|global", "admin_state", "up")
	after := c3.waitFor(t, timeout, "datagrams after admin_state up", func(dgs []datagram) bool { return lastDatagramSeq(dgs) > seqDown })
	if last := after[len(after)-1]; last.our.Uptime <= dgs3[0].our.Uptime {
		t.Errorf("uptime restarted: %d", last.our.Uptime)
	}
	// SIGHUP reads the file and flags again; Redis's settings stay over
	// them (the file names no collector: without them nothing would be
	// sent).
	hup := time.Now()
	d.signal(t, syscall.SIGHUP)
	waitNewCounters(t, c3, hup.Add(time.Second), "counter samples after SIGHUP")
	if auto := waitAuto(t, sl.auto, time.Second, func(s string) bool { return true }); !strings.Contains(auto, lab.CollectorAddr.String()+" 6345") {
		t.Errorf("hsflowd.auto after SIGHUP lost Redis's collector:\n%s", auto)
	}
	if out, err := osexec.Command(daemonBin, "show", "-state-dir", state).CombinedOutput(); err != nil ||
		!lineWith(string(out), "polling:", "[redis CONFIG_DB SFLOW|global polling_interval]") || !lineWith(string(out), "  workers ", "[file]") {
		t.Errorf("show after SIGHUP (%v): Redis's polling or the file's workers lost their source:\n%s", err, out)
	}
	// A bad value is reported and skipped alone.
	sl.srv.HSet(redistest.ApplDB, "PORT_TABLE:Ethernet16", "speed", "fast")
	deadline := time.Now().Add(timeout)
	for {
		m, err := fetchMetrics(lab)
		if err == nil {
			if v, ok := m.get("sflowswitchd_sonic_bad_values_total", `table="PORT_TABLE"`); ok && v == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sonic_bad_values_total{table=\"PORT_TABLE\"} 1 (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(d.log(), "bad value in Redis") {
		t.Error("the bad value is not in the log")
	}
	// Redis gone: retried with backoff, the last configuration and
	// counters keep running.
	sl.srv.Kill()
	gone := time.Now()
	waitNewCounters(t, c3, gone.Add(time.Second), "counter samples while Redis is gone")
	if m, err := fetchMetrics(lab); err != nil {
		t.Error(err)
	} else if !slices.Contains(m, "sflowswitchd_sonic_redis_connected 0") {
		t.Errorf("no sflowswitchd_sonic_redis_connected 0 while Redis is gone")
	}
}

// checkGoflowCounters checks goflow2's reading of the if_counters of
// ifIndex idx.
func checkGoflowCounters(t *testing.T, dgs []datagram, idx uint32, in, out uint64) {
	t.Helper()
	for _, dg := range dgs {
		for _, s := range dg.gf.Samples {
			cs, ok := s.(goflow.CounterSample)
			if !ok || cs.Header.SourceIdType != 0 || cs.Header.SourceIdValue != idx {
				continue
			}
			for _, r := range cs.Records {
				if v, ok := r.Data.(goflow.IfCounters); ok {
					t.Logf("goflow2: source ifIndex %d: if_counters ifIndex %d speed %d in octets %d in ucast %d out octets %d out errors %d",
						cs.Header.SourceIdValue, v.IfIndex, v.IfSpeed, v.IfInOctets, v.IfInUcastPkts, v.IfOutOctets, v.IfOutErrors)
					if v.IfIndex != idx || v.IfInOctets != in || v.IfOutOctets != out {
						t.Errorf("goflow2: if_counters of %d: %+v, want in %d out %d", idx, v, in, out)
					}
					return
				}
			}
		}
	}
	t.Errorf("goflow2 finds no if_counters of ifIndex %d", idx)
}

func ifcOf(cs []counterRec) *sflow.IfCounters {
	if len(cs) == 0 {
		return nil
	}
	for _, r := range cs[0].records {
		if v, ok := r.(*sflow.IfCounters); ok {
			return v
		}
	}
	return nil
}

func seqsOf(cs []counterRec) []uint32 {
	var out []uint32
	for _, c := range cs {
		out = append(out, c.seq)
	}
	return out
}

func lastDatagramSeq(dgs []datagram) uint32 {
	var s uint32
	for _, dg := range dgs {
		s = max(s, dg.our.SequenceNumber)
	}
	return s
}

// waitAuto waits up to d for hsflowd.auto to satisfy ok and returns it.
func waitAuto(t *testing.T, path string, d time.Duration, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(testutil.Scaled(d))
	for {
		b, _ := os.ReadFile(path) // absent until the daemon writes it
		if ok(string(b)) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("hsflowd.auto after %v:\n%s", d, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkSonicLAGMembers: the counter samples of PortChannel0001's members
// carry lag_port_stats (sFlow LAG counters, 0:7) built from Redis, as
// our decoder and tshark read them: the system's MAC (DEVICE_METADATA,
// teamd's actor system), the partner teamd sees, the LAG's SONiC ifIndex
// 1001 as the aggregator of the selected member Ethernet0 and 0 for
// Ethernet4, which teamd did not select; teamd's state bytes; no PDU
// counters (SONiC keeps none).
func checkSonicLAGMembers(t *testing.T, dgs []datagram, port uint16) {
	t.Helper()
	actor, partner := [6]byte{0x52, 0x54, 0, 0x12, 0x34, 0x56}, [6]byte{0x52, 0x54, 0, 0xaa, 0xbb, 0xcc}
	want := map[uint32]sflow.LAGPortStats{
		1: {ActorSystemID: actor, PartnerOperSystemID: partner, AttachedAggID: 1001, ActorAdminState: 5, ActorOperState: 61, PartnerOperState: 61},
		5: {ActorSystemID: actor, ActorAdminState: 5, ActorOperState: 69, PartnerOperState: 2},
	}
	for k, w := range want {
		w.SetUnavailable()
		want[k] = w
	}
	const (
		fActor   = "sflow.lag_port.actor_system_id"
		fPartner = "sflow.lag_port.partner_oper_system_id"
		fAgg     = "sflow.lag_port.attached_agg_id"
		fLACPDU  = "sflow.lag_port.lacpdus.rx"
	)
	byTshark := map[uint32]bool{}
	for _, dg := range dgs {
		var order []uint32
		for _, s := range dg.our.Samples {
			cs, ok := s.(*sflow.CounterSample)
			if !ok {
				continue
			}
			for _, r := range cs.Records {
				l, ok := r.(*sflow.LAGPortStats)
				if !ok {
					continue
				}
				w, member := want[cs.Source.Index]
				if !member {
					t.Errorf("lag_port_stats in the counter sample of ifIndex %d, not a LAG member", cs.Source.Index)
					continue
				}
				if *l != w {
					t.Errorf("ifIndex %d: lag_port_stats %+v, want %+v", cs.Source.Index, *l, w)
				}
				order = append(order, cs.Source.Index)
			}
		}
		fresh := false
		for _, idx := range order {
			fresh = fresh || !byTshark[idx]
		}
		if !fresh {
			continue
		}
		// The same datagram as tshark reads it.
		r := tsharkFields(t, []datagram{dg}, port, fActor, fPartner, fAgg, fLACPDU)[0]
		if len(r[fAgg]) != len(order) {
			t.Fatalf("tshark: %d lag_port_stats, our decoder %d (%v): %v", len(r[fAgg]), len(order), order, r)
		}
		for i, idx := range order {
			w := want[idx]
			byTshark[idx] = true
			t.Logf("tshark: LAG member ifIndex %d: lag_port_stats actor %s partner %s attached agg %s LACPDUs rx %s", idx, r[fActor][i], r[fPartner][i], r[fAgg][i], r[fLACPDU][i])
			if r[fActor][i] != net.HardwareAddr(w.ActorSystemID[:]).String() || r[fPartner][i] != net.HardwareAddr(w.PartnerOperSystemID[:]).String() ||
				r[fAgg][i] != strconv.FormatUint(uint64(w.AttachedAggID), 10) || r[fLACPDU][i] != strconv.FormatUint(uint64(sflow.CounterUnavailable32), 10) {
				t.Errorf("tshark: ifIndex %d's lag_port_stats %s %s %s %s, want %+v", idx, r[fActor][i], r[fPartner][i], r[fAgg][i], r[fLACPDU][i], w)
			}
		}
	}
	for idx := range want {
		if !byTshark[idx] {
			t.Errorf("no lag_port_stats in the counter samples of LAG member ifIndex %d", idx)
		}
	}
}

// checkSonicHostAdapters: the host counter sample's host_adapters (2001)
// lists every SONiC port by SONiC's ifIndex with its netdev's MAC, read by
// our decoder and, byte by byte, from the datagram itself (neither
// goflow2 nor tshark decodes host_adapters).
func checkSonicHostAdapters(t *testing.T, lab *netlab.Lab, c *collector, timeout time.Duration) {
	t.Helper()
	want := map[uint32][6]byte{}
	for i := 0; i < sonicPorts; i++ {
		link, err := netnsutil.Link(lab.Switch, redistest.PortName(i))
		if err != nil || len(link.Attrs().HardwareAddr) != 6 {
			t.Fatalf("%s: %v %v", redistest.PortName(i), link, err)
		}
		want[uint32(4*i+1)] = [6]byte(link.Attrs().HardwareAddr)
	}
	host := sflow.DataSource{Type: sflow.SourceEntPhysicalEntry, Index: 1}
	var dg datagram
	var ha *sflow.HostAdapters
	c.waitFor(t, timeout, "a host counter sample with host_adapters", func(dgs []datagram) bool {
		for _, d := range dgs {
			for _, s := range d.our.Samples {
				if cs, ok := s.(*sflow.CounterSample); ok && cs.Source == host {
					for _, r := range cs.Records {
						if v, ok := r.(*sflow.HostAdapters); ok {
							dg, ha = d, v
						}
					}
				}
			}
		}
		return ha != nil
	})
	got := map[uint32][6]byte{}
	for _, a := range ha.Adapters {
		if len(a.MACAddresses) != 1 {
			t.Errorf("host_adapters: ifIndex %d with %d MACs", a.IfIndex, len(a.MACAddresses))
			continue
		}
		got[a.IfIndex] = a.MACAddresses[0]
	}
	if !maps.Equal(got, want) {
		t.Errorf("host_adapters (our decoder) %v, want the SONiC ports by SONiC ifIndex with their MACs %v", got, want)
	}
	// The record as sent: format 2001, length, then per adapter its
	// ifIndex, one MAC, the MAC padded to 8 bytes (sflow_host.txt
	// host_adapters).
	raw := dg.raw
	at := bytes.Index(raw, []byte{0, 0, 0x07, 0xd1})
	if at < 0 || len(raw) < at+12 {
		t.Fatalf("no host_adapters record (0:2001) in the datagram")
	}
	n := int(binary.BigEndian.Uint32(raw[at+8:]))
	fromWire := map[uint32][6]byte{}
	for i, off := 0, at+12; i < n && off+16 <= len(raw); i, off = i+1, off+16 {
		if binary.BigEndian.Uint32(raw[off+4:]) != 1 {
			t.Fatalf("host_adapters on the wire: adapter %d has %d MACs", i, binary.BigEndian.Uint32(raw[off+4:]))
		}
		fromWire[binary.BigEndian.Uint32(raw[off:])] = [6]byte(raw[off+8 : off+14])
	}
	if !maps.Equal(fromWire, want) {
		t.Errorf("host_adapters on the wire %v, want %v", fromWire, want)
	}
	first, last := fromWire[1], fromWire[125]
	t.Logf("host_adapters: %d adapters, e.g. ifIndex 1 MAC %s, ifIndex 125 MAC %s", n, net.HardwareAddr(first[:]), net.HardwareAddr(last[:]))
}
