package mib

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"

	"github.com/sflowswitchd/sflowswitchd/snmpd"
)

const snmpdPath = "/usr/sbin/snmpd"

// mibsDir is the shared MIB directory (SFLOW-MIB and its imports) for
// net-snmp's tools: ../shared/mibs from the repository root.
var mibsDir = filepath.Join("..", "..", "shared", "mibs")

// testSnmpd is a net-snmp snmpd master agent run as a child process with
// everything (config, AgentX socket, log, persistent state) in a temp dir,
// answering SNMP on a free UDP port of the host loopback.
type testSnmpd struct {
	tb     testing.TB
	dir    string
	conf   string
	sock   string
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
}

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
	// The snmpd.conf lines of mib/README.md, with test paths.
	conf := fmt.Sprintf(`master agentx
agentXSocket unix:%s
agentXPerms 0600 0700
agentXTimeout 5
agentXRetries 1
view sflowView included .1.3.6.1.4.1.14706
rwcommunity private 127.0.0.1 -V sflowView
rocommunity public 127.0.0.1 -V sflowView
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
// system configuration.
func (s *testSnmpd) env() []string {
	return append(os.Environ(), "SNMP_PERSISTENT_DIR="+filepath.Join(s.dir, "persist"),
		"SNMPCONFPATH="+s.dir, "MIBS=", "MIBDIRS="+mibsDir)
}

// start runs snmpd in the foreground with only our config and waits for
// its AgentX socket.
func (s *testSnmpd) start() {
	s.tb.Helper()
	if err := os.Remove(s.sock); err != nil && !os.IsNotExist(err) {
		s.tb.Fatal(err)
	}
	cmd := exec.Command(snmpdPath, "-f", "-C", "-c", s.conf,
		"-Lf", filepath.Join(s.dir, "snmpd.log"), "-p", filepath.Join(s.dir, "snmpd.pid"))
	cmd.Env = s.env()
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("start snmpd: %v", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) {
		_ = c.Wait() // a killed snmpd exits non-zero, as expected
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

// client returns an SNMPv2c manager session with community.
func (s *testSnmpd) client(tb testing.TB, community string) *gosnmp.GoSNMP {
	tb.Helper()
	g := &gosnmp.GoSNMP{Target: "127.0.0.1", Port: uint16(s.port), Community: community,
		Version: gosnmp.Version2c, Timeout: 2 * time.Second, Retries: 1, MaxRepetitions: 50}
	if err := g.Connect(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = g.Conn.Close() })
	return g
}

// tool runs a net-snmp command-line tool (snmpwalk, snmpset, ...) against
// s with the SFLOW-MIB loaded from the shared MIB directory, so names
// resolve both ways.
func (s *testSnmpd) tool(name string, args ...string) (string, error) {
	full := append([]string{"-v2c", "-c", "private", "-M", mibsDir, "-m", "SFLOW-MIB", "-t", "3", "-r", "1",
		fmt.Sprintf("127.0.0.1:%d", s.port)}, args...)
	cmd := exec.Command(name, full...)
	cmd.Env = s.env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runSubagent serves h to s from this process until the test ends.
func runSubagent(tb testing.TB, s *testSnmpd, h snmpd.Handler) *snmpd.Subagent {
	tb.Helper()
	sa, err := snmpd.New(snmpd.Config{Address: s.sock, Subtree: Subtree, Description: "sflowswitchd mib test",
		Handler: h, Timeout: 2 * time.Second, PingInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := sa.Run(ctx); err != nil {
			tb.Errorf("subagent Run: %v", err)
		}
	})
	tb.Cleanup(func() { cancel(); wg.Wait() })
	deadline := time.Now().Add(5 * time.Second)
	for !sa.Connected() {
		if time.Now().After(deadline) {
			tb.Fatal("subagent not registered within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return sa
}

// pdu converts a test varbind to a gosnmp one.
func pdu(v snmpd.Variable) gosnmp.SnmpPDU {
	p := gosnmp.SnmpPDU{Name: "." + v.Name.String()}
	switch v.Type {
	case snmpd.Integer:
		p.Type, p.Value = gosnmp.Integer, int(v.Value.(int32))
	case snmpd.OctetString:
		p.Type, p.Value = gosnmp.OctetString, v.Value.([]byte)
	case snmpd.Gauge32:
		p.Type, p.Value = gosnmp.Gauge32, uint(v.Value.(uint32))
	case snmpd.IPAddress:
		p.Type, p.Value = gosnmp.IPAddress, net.IP(v.Value.([]byte)).String()
	default:
		panic(fmt.Sprintf("test varbind type %s not converted", v.Type))
	}
	return p
}

// snmpSet sends one SET through snmpd and returns its error status and
// index (transport errors fail the test).
func snmpSet(tb testing.TB, g *gosnmp.GoSNMP, vbs ...snmpd.Variable) (snmpd.ErrorStatus, int) {
	tb.Helper()
	pdus := make([]gosnmp.SnmpPDU, len(vbs))
	for i, v := range vbs {
		pdus[i] = pdu(v)
	}
	res, err := g.Set(pdus)
	if err != nil {
		tb.Fatalf("SET %v: %v", vbs, err)
	}
	return snmpd.ErrorStatus(res.Error), int(res.ErrorIndex)
}

func mustSNMPSet(tb testing.TB, g *gosnmp.GoSNMP, vbs ...snmpd.Variable) {
	tb.Helper()
	if st, i := snmpSet(tb, g, vbs...); st != snmpd.NoError {
		tb.Fatalf("SET %v: %s at %d", vbs, st, i)
	}
}

// snmpWalk walks the whole SFLOW-MIB through snmpd with GETBULK and
// renders it as name=value lines.
func snmpWalk(tb testing.TB, g *gosnmp.GoSNMP) []gosnmp.SnmpPDU {
	tb.Helper()
	res, err := g.BulkWalkAll(".1.3.6.1.4.1.14706")
	if err != nil {
		tb.Fatalf("walk: %v", err)
	}
	return res
}

func dumpPDUs(ps []gosnmp.SnmpPDU) string {
	s := ""
	for _, p := range ps {
		s += fmt.Sprintf("%s=%v\n", p.Name, p.Value)
	}
	return s
}
