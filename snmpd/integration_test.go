package snmpd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"
)

const snmpdPath = "/usr/sbin/snmpd"

// testSnmpd is a net-snmp snmpd master agent run as a child process with
// everything (config, socket, logs, persistent state) in a temp dir.
type testSnmpd struct {
	tb     testing.TB
	dir    string
	conf   string
	sock   string
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
}

// freeUDPPort asks the kernel for a free loopback UDP port.
func freeUDPPort(tb testing.TB) int {
	tb.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := c.LocalAddr().(*net.UDPAddr).Port
	if err := c.Close(); err != nil {
		tb.Fatal(err)
	}
	return port
}

func newTestSnmpd(tb testing.TB) *testSnmpd {
	tb.Helper()
	if _, err := os.Stat(snmpdPath); err != nil {
		tb.Skipf("net-snmp snmpd not installed: %v", err)
	}
	dir := tb.TempDir()
	s := &testSnmpd{tb: tb, dir: dir, conf: filepath.Join(dir, "snmpd.conf"),
		sock: filepath.Join(dir, "agentx.sock"), port: freeUDPPort(tb)}
	// The lines the package doc recommends, with test paths.
	conf := fmt.Sprintf(`master agentx
agentXSocket unix:%s
agentXPerms 0600 0700
agentXTimeout 5
agentXRetries 1
rwcommunity private 127.0.0.1
agentaddress udp:127.0.0.1:%d
`, s.sock, s.port)
	if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "persist"), 0o700); err != nil {
		tb.Fatal(err)
	}
	s.start()
	tb.Cleanup(s.kill)
	return s
}

// env keeps net-snmp (daemon and tools) away from /var/lib/snmp and the
// system config.
func (s *testSnmpd) env() []string {
	return append(os.Environ(),
		"SNMP_PERSISTENT_DIR="+filepath.Join(s.dir, "persist"),
		"SNMPCONFPATH="+s.dir,
		"MIBS=", "MIBDIRS="+s.dir)
}

// start runs snmpd in the foreground (-f) with only our config (-C -c),
// logging to a file, and waits for its AgentX socket.
func (s *testSnmpd) start() {
	s.tb.Helper()
	_ = os.Remove(s.sock) // a stale socket would make the wait below pass early
	cmd := exec.Command(snmpdPath, "-f", "-C", "-c", s.conf,
		"-Lf", filepath.Join(s.dir, "snmpd.log"), "-p", filepath.Join(s.dir, "snmpd.pid"))
	cmd.Env = s.env()
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("start snmpd: %v", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) {
		_ = c.Wait() // exit status of a killed snmpd is expected to be non-zero
		close(done)
	}(cmd, s.exited)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(s.sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return
		}
		select {
		case <-s.exited:
			s.tb.Fatalf("snmpd exited at start; log:\n%s", s.log())
		default:
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("snmpd socket %s did not appear; log:\n%s", s.sock, s.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *testSnmpd) log() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "snmpd.log"))
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// kill sends SIGKILL to our snmpd (by PID) and waits for it.
func (s *testSnmpd) kill() {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.exited:
	default:
		if err := syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL); err != nil {
			s.tb.Errorf("kill snmpd pid %d: %v", s.cmd.Process.Pid, err)
		}
		<-s.exited
	}
	s.cmd = nil
}

func (s *testSnmpd) client(tb testing.TB) *gosnmp.GoSNMP {
	tb.Helper()
	g := &gosnmp.GoSNMP{Target: "127.0.0.1", Port: uint16(s.port), Community: "private",
		Version: gosnmp.Version2c, Timeout: 2 * time.Second, Retries: 1, MaxRepetitions: 50}
	if err := g.Connect(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = g.Conn.Close() })
	return g
}

// runSubagent runs a Subagent serving h against s until the test ends.
func runSubagent(tb testing.TB, s *testSnmpd, h Handler) *Subagent {
	tb.Helper()
	sa, err := New(Config{Address: s.sock, Subtree: MustParseOID("1.3.6.1.4.1.14706"),
		Description: "sflowswitchd snmpd test", Handler: h, Timeout: 2 * time.Second,
		PingInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := sa.Run(ctx); err != nil {
			tb.Errorf("Run: %v", err)
		}
	})
	tb.Cleanup(func() { cancel(); wg.Wait() })
	waitConnected(tb, sa, 5*time.Second)
	return sa
}

func waitConnected(tb testing.TB, sa *Subagent, d time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !sa.Connected() {
		if time.Now().After(deadline) {
			tb.Fatalf("subagent not registered within %v", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dot(o OID) string { return "." + o.String() }

func TestIntegrationSnmpd(t *testing.T) {
	s := newTestSnmpd(t)
	h := newMemHandler()
	sa := runSubagent(t, s, h)
	g := s.client(t)

	t.Run("Get", func(t *testing.T) {
		res, err := g.Get([]string{dot(oidName), dot(oidCount), dot(oidOctets), dot(oidAddr),
			dot(oidRateCol.Append(2)), dot(oidRateCol.Append(9)), dot(testBase.Append(9, 0))})
		if err != nil {
			t.Fatal(err)
		}
		v := res.Variables
		if len(v) != 7 {
			t.Fatalf("%d varbinds", len(v))
		}
		if v[0].Type != gosnmp.OctetString || string(v[0].Value.([]byte)) != "sflowswitchd-test" {
			t.Errorf("name = %v %v", v[0].Type, v[0].Value)
		}
		if v[1].Type != gosnmp.Integer || v[1].Value.(int) != 5 {
			t.Errorf("count = %v %v", v[1].Type, v[1].Value)
		}
		if v[2].Type != gosnmp.Counter64 || v[2].Value.(uint64) != 1<<40 {
			t.Errorf("octets = %v %v", v[2].Type, v[2].Value)
		}
		if v[3].Type != gosnmp.IPAddress || v[3].Value.(string) != "198.18.0.1" {
			t.Errorf("addr = %v %v", v[3].Type, v[3].Value)
		}
		if v[4].Type != gosnmp.Integer || v[4].Value.(int) != 20 {
			t.Errorf("rate.2 = %v %v", v[4].Type, v[4].Value)
		}
		if v[5].Type != gosnmp.NoSuchInstance {
			t.Errorf("rate.9 = %v, want NoSuchInstance", v[5].Type)
		}
		if v[6].Type != gosnmp.NoSuchObject {
			t.Errorf("base.9.0 = %v, want NoSuchObject", v[6].Type)
		}
	})

	t.Run("GetNext", func(t *testing.T) {
		res, err := g.GetNext([]string{dot(testBase), dot(oidRateCol.Append(3)), dot(oidBulkCol.Append(bulkRows))})
		if err != nil {
			t.Fatal(err)
		}
		v := res.Variables
		if v[0].Name != dot(oidName) {
			t.Errorf("next(base) = %s", v[0].Name)
		}
		if v[1].Name != dot(oidOwnerCol.Append(1)) || string(v[1].Value.([]byte)) != "owner-1" {
			t.Errorf("next(rate.3) = %s %v", v[1].Name, v[1].Value)
		}
		// Past our last object the master continues in its own MIB view
		// or reports endOfMibView; it must not be one of ours.
		if strings.HasPrefix(v[2].Name, dot(testBase)+".") {
			t.Errorf("next(last) = %s, still in our subtree", v[2].Name)
		}
	})

	t.Run("GetBulk", func(t *testing.T) {
		res, err := g.GetBulk([]string{dot(testBase), dot(oidRateCol)}, 1, 3)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range res.Variables {
			got = append(got, v.Name)
		}
		want := []string{dot(oidName), dot(oidRateCol.Append(1)), dot(oidRateCol.Append(2)), dot(oidRateCol.Append(3))}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("bulk = %v, want %v", got, want)
		}
	})

	t.Run("BulkWalk", func(t *testing.T) {
		pdus, err := g.BulkWalkAll(dot(testBase))
		if err != nil {
			t.Fatal(err)
		}
		if want := 4 + 6 + bulkRows; len(pdus) != want {
			t.Fatalf("walked %d objects, want %d", len(pdus), want)
		}
		for i, p := range pdus[10:] {
			if p.Name != dot(oidBulkCol.Append(uint32(i+1))) || gosnmp.ToBigInt(p.Value).Int64() != int64(i+1) {
				t.Fatalf("walk row %d = %s %v", i+1, p.Name, p.Value)
			}
		}
		var n int
		if err := g.Walk(dot(oidRateCol), func(gosnmp.SnmpPDU) error { n++; return nil }); err != nil || n != 3 {
			t.Errorf("walk of rate column: %d objects, %v", n, err)
		}
	})

	t.Run("Set", func(t *testing.T) {
		res, err := g.Set([]gosnmp.SnmpPDU{
			{Name: dot(oidRateCol.Append(1)), Type: gosnmp.Integer, Value: 777},
			{Name: dot(oidOwnerCol.Append(1)), Type: gosnmp.OctetString, Value: []byte("collector-a")},
		})
		if err != nil || res.Error != gosnmp.NoError {
			t.Fatalf("set: %v %v", err, res)
		}
		if h.value(oidRateCol.Append(1)) != int32(777) || string(h.value(oidOwnerCol.Append(1)).([]byte)) != "collector-a" {
			t.Fatal("set not applied")
		}
		res, err = g.Get([]string{dot(oidRateCol.Append(1))})
		if err != nil || res.Variables[0].Value.(int) != 777 {
			t.Fatalf("get after set: %v %v", err, res)
		}
	})

	t.Run("SetErrors", func(t *testing.T) {
		good := []gosnmp.SnmpPDU{
			{Name: dot(oidRateCol.Append(2)), Type: gosnmp.Integer, Value: 111},
			{Name: dot(oidOwnerCol.Append(2)), Type: gosnmp.OctetString, Value: []byte("x")},
			{Name: dot(oidRateCol.Append(3)), Type: gosnmp.Integer, Value: 333},
		}
		cases := []struct {
			name string
			bad  gosnmp.SnmpPDU
			at   int // 0-based position to put the bad varbind at
			want gosnmp.SNMPError
		}{
			{"wrongValue", gosnmp.SnmpPDU{Name: dot(oidRateCol.Append(1)), Type: gosnmp.Integer, Value: 5000}, 1, gosnmp.WrongValue},
			{"wrongType", gosnmp.SnmpPDU{Name: dot(oidRateCol.Append(1)), Type: gosnmp.OctetString, Value: []byte("5")}, 2, gosnmp.WrongType},
			{"notWritable", gosnmp.SnmpPDU{Name: dot(oidCount), Type: gosnmp.Integer, Value: 6}, 3, gosnmp.NotWritable},
			{"wrongLength", gosnmp.SnmpPDU{Name: dot(oidOwnerCol.Append(3)), Type: gosnmp.OctetString, Value: make([]byte, 40)}, 0, gosnmp.WrongLength},
		}
		before := map[string]any{}
		for _, p := range good {
			oid := MustParseOID(p.Name)
			before[p.Name] = h.value(oid)
		}
		for _, c := range cases {
			pdus := append([]gosnmp.SnmpPDU(nil), good[:c.at]...)
			pdus = append(pdus, c.bad)
			pdus = append(pdus, good[c.at:]...)
			res, err := g.Set(pdus)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if res.Error != c.want || int(res.ErrorIndex) != c.at+1 {
				t.Errorf("%s: got %v index %d, want %v index %d", c.name, res.Error, res.ErrorIndex, c.want, c.at+1)
			}
			for _, p := range good {
				if got := h.value(MustParseOID(p.Name)); fmt.Sprint(got) != fmt.Sprint(before[p.Name]) {
					t.Errorf("%s: %s changed to %v by a failed set", c.name, p.Name, got)
				}
			}
		}
		if h.value(oidCount) != int32(5) {
			t.Error("read-only scalar changed")
		}
	})

	t.Run("NetSnmpTools", func(t *testing.T) {
		out, err := s.tool("snmpget", dot(oidCount), dot(oidName))
		if err != nil {
			t.Fatalf("snmpget: %v\n%s", err, out)
		}
		want := dot(oidCount) + " = INTEGER: 5\n" + dot(oidName) + ` = STRING: "sflowswitchd-test"`
		if !strings.Contains(out, want) {
			t.Errorf("snmpget output:\n%s\nwant:\n%s", out, want)
		}
		out, err = s.tool("snmpwalk", dot(oidRateCol))
		if err != nil {
			t.Fatalf("snmpwalk: %v\n%s", err, out)
		}
		if n := strings.Count(out, "INTEGER:"); n != 3 || !strings.Contains(out, dot(oidRateCol.Append(1))+" = INTEGER: 777") {
			t.Errorf("snmpwalk output (%d rows):\n%s", n, out)
		}
	})

	t.Run("MasterRestart", func(t *testing.T) {
		before := sa.Reconnects()
		s.kill()
		// The subagent notices the loss (EOF) promptly.
		deadline := time.Now().Add(3 * time.Second)
		for sa.Connected() {
			if time.Now().After(deadline) {
				t.Fatal("subagent still connected after snmpd was killed")
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Second) // let the backoff grow a little
		s.start()
		started := time.Now()
		waitConnected(t, sa, 5*time.Second)
		t.Logf("re-registered %v after snmpd restart", time.Since(started))
		if sa.Reconnects() != before+1 {
			t.Errorf("reconnects = %d, want %d", sa.Reconnects(), before+1)
		}
		g := s.client(t)
		res, err := g.Get([]string{dot(oidRateCol.Append(1))})
		if err != nil || res.Variables[0].Type != gosnmp.Integer || res.Variables[0].Value.(int) != 777 {
			t.Fatalf("get after restart: %v %+v", err, res)
		}
	})
}

// tool runs a net-snmp command line tool against our snmpd with numeric
// OID output.
func (s *testSnmpd) tool(name string, oids ...string) (string, error) {
	args := append([]string{"-v2c", "-c", "private", "-On", "-t", "2", "-r", "1",
		fmt.Sprintf("127.0.0.1:%d", s.port)}, oids...)
	cmd := exec.Command(name, args...)
	cmd.Env = s.env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// BenchmarkGetThroughSnmpd measures one SNMP GET (two scalars) from gosnmp
// through snmpd and AgentX to the subagent and back.
func BenchmarkGetThroughSnmpd(b *testing.B) {
	s := newTestSnmpd(b)
	runSubagent(b, s, newMemHandler())
	g := s.client(b)
	oids := []string{dot(oidCount), dot(oidRateCol.Append(1))}
	b.ResetTimer()
	for b.Loop() {
		res, err := g.Get(oids)
		if err != nil || res.Variables[0].Type != gosnmp.Integer {
			b.Fatalf("get: %v %+v", err, res)
		}
	}
}

// BenchmarkWalkThroughSnmpd measures a GETBULK walk (max-repetitions 50) of
// the 1000-row test column through snmpd.
func BenchmarkWalkThroughSnmpd(b *testing.B) {
	s := newTestSnmpd(b)
	runSubagent(b, s, newMemHandler())
	g := s.client(b)
	b.ResetTimer()
	for b.Loop() {
		pdus, err := g.BulkWalkAll(dot(oidBulkCol))
		if err != nil || len(pdus) != bulkRows {
			b.Fatalf("walk: %d objects, %v", len(pdus), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/bulkRows, "ns/object")
}
