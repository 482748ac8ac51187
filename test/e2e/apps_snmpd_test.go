package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"
)

// snmpdPath is net-snmp's master agent (Debian package snmpd).
const snmpdPath = "/usr/sbin/snmpd"

// sharedMIBs is the shared MIB directory (APM-MIB and its imports) for
// net-snmp's tools, relative to this package.
var sharedMIBs = filepath.Join("..", "..", "..", "shared", "mibs")

// apmReportTransactionCount is the apmReportTransactionCount column of
// apmReportTable (APM-MIB, rmon 23 = 1.3.6.1.2.1.16.23; table apm.1.10,
// entry .1, column 3).
const apmReportTransactionCount = "1.3.6.1.2.1.16.23.1.10.1.3"

// apmReportControlAggregationType is column 3 of apmReportControlTable
// (apm.1.9.1.3).
const apmReportControlAggregationType = "1.3.6.1.2.1.16.23.1.9.1.3"

// e2eSnmpd is a net-snmp snmpd master agent run as a child process with
// everything (config, AgentX socket, log, persistent state) in a temp dir,
// answering SNMP on a free UDP port of the host loopback. The daemon in
// the lab's switch namespace reaches it through the unix AgentX socket
// (a file-system socket is reachable from every network namespace), as in
// mib/snmpd_helpers_test.go.
type e2eSnmpd struct {
	dir, sock string
	port      int
	cmd       *exec.Cmd
	exited    chan struct{}
}

// startSnmpd starts snmpd and waits for its AgentX socket; it is killed
// by PID at cleanup.
func startSnmpd(t *testing.T) *e2eSnmpd {
	t.Helper()
	if _, err := os.Stat(snmpdPath); err != nil {
		t.Fatalf("net-snmp snmpd not installed (Debian package snmpd): %v", err)
	}
	dir := t.TempDir()
	s := &e2eSnmpd{dir: dir, sock: filepath.Join(dir, "agentx.sock"), port: freeLoopbackUDPPort(t)}
	conf := fmt.Sprintf(`master agentx
agentXSocket unix:%s
agentXPerms 0600 0700
agentXTimeout 5
agentXRetries 1
rocommunity public 127.0.0.1
agentaddress udp:127.0.0.1:%d
`, s.sock, s.port)
	confPath := filepath.Join(dir, "snmpd.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "persist"), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(snmpdPath, "-f", "-C", "-c", confPath,
		"-Lf", filepath.Join(dir, "snmpd.log"), "-p", filepath.Join(dir, "snmpd.pid"))
	cmd.Env = s.env()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start snmpd: %v", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait() // a killed snmpd exits non-zero, as expected
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Errorf("kill snmpd pid %d: %v", cmd.Process.Pid, err)
			}
			<-s.exited
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(s.sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return s
		}
		select {
		case <-s.exited:
			t.Fatalf("snmpd exited at start; log:\n%s", s.log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("snmpd AgentX socket %s did not appear; log:\n%s", s.sock, s.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freeLoopbackUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := c.LocalAddr().(*net.UDPAddr).Port
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

// env keeps net-snmp (daemon and tools) away from /var/lib/snmp and the
// system configuration.
func (s *e2eSnmpd) env() []string {
	return append(os.Environ(), "SNMP_PERSISTENT_DIR="+filepath.Join(s.dir, "persist"),
		"SNMPCONFPATH="+s.dir, "MIBS=", "MIBDIRS="+sharedMIBs)
}

func (s *e2eSnmpd) log() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "snmpd.log"))
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// client returns an SNMPv2c manager session (community public).
func (s *e2eSnmpd) client(t *testing.T) *gosnmp.GoSNMP {
	t.Helper()
	g := &gosnmp.GoSNMP{Target: "127.0.0.1", Port: uint16(s.port), Community: "public",
		Version: gosnmp.Version2c, Timeout: 2 * time.Second, Retries: 1, MaxRepetitions: 50}
	if err := g.Connect(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Conn.Close() })
	return g
}

// waitAPMMIB waits until the daemon's APM-MIB session answers through
// snmpd: apmReportControlAggregationType.4 is applications(4).
func (s *e2eSnmpd) waitAPMMIB(t *testing.T, d *daemon) {
	t.Helper()
	g := s.client(t)
	g.Timeout, g.Retries = 500*time.Millisecond, 0
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := g.Get([]string{"." + apmReportControlAggregationType + ".4"})
		if err == nil && res.Variables[0].Type == gosnmp.Integer && gosnmp.ToBigInt(res.Variables[0].Value).Int64() == 4 {
			return
		}
		if !d.alive() || time.Now().After(deadline) {
			t.Fatalf("the daemon's APM-MIB is not reachable through snmpd (last: %v %+v); snmpd log:\n%s\ndaemon log:\n%s", err, res, s.log(), d.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// apmCountsGoSNMP walks apmReportTransactionCount of report control
// control with gosnmp (GETBULK through snmpd) and sums the values by
// application index (apmAppDirAppLocalIndex, the third index).
func (s *e2eSnmpd) apmCountsGoSNMP(t *testing.T, control uint32) map[uint32]uint64 {
	t.Helper()
	g := s.client(t)
	base := fmt.Sprintf("%s.%d", apmReportTransactionCount, control)
	pdus, err := g.BulkWalkAll("." + base)
	if err != nil {
		t.Fatalf("gosnmp walk of %s: %v", base, err)
	}
	sums := map[uint32]uint64{}
	for _, p := range pdus {
		if p.Type != gosnmp.Gauge32 {
			t.Errorf("%s: type %v, want Gauge32", p.Name, p.Type)
			continue
		}
		app, err := apmRowApp(strings.TrimPrefix(p.Name, "."), base)
		if err != nil {
			t.Error(err)
			continue
		}
		sums[app] += gosnmp.ToBigInt(p.Value).Uint64()
	}
	return sums
}

// apmCountsSnmpwalk does what apmCountsGoSNMP does with net-snmp's
// snmpwalk and the APM-MIB loaded (the object named, numeric output).
func (s *e2eSnmpd) apmCountsSnmpwalk(t *testing.T, control uint32) map[uint32]uint64 {
	t.Helper()
	cmd := exec.Command("snmpwalk", "-v2c", "-c", "public", "-t", "3", "-r", "1", "-On", "-Oq",
		"-M", sharedMIBs, "-m", "APM-MIB", fmt.Sprintf("127.0.0.1:%d", s.port),
		fmt.Sprintf("APM-MIB::apmReportTransactionCount.%d", control))
	cmd.Env = s.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("snmpwalk: %v\n%s", err, out)
	}
	base := fmt.Sprintf("%s.%d", apmReportTransactionCount, control)
	sums := map[uint32]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Errorf("snmpwalk line %q", line)
			continue
		}
		app, err := apmRowApp(strings.TrimPrefix(f[0], "."), base)
		if err != nil {
			t.Error(err)
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 32)
		if err != nil {
			t.Errorf("snmpwalk line %q: %v", line, err)
			continue
		}
		sums[app] += v
	}
	return sums
}

// apmRowApp returns the application index of an apmReportTable object
// under base (column.control): the index continues with apmReportIndex,
// then apmAppDirAppLocalIndex.
func apmRowApp(name, base string) (uint32, error) {
	rest, ok := strings.CutPrefix(name, base+".")
	if !ok {
		return 0, fmt.Errorf("object %s not under %s", name, base)
	}
	parts := strings.Split(rest, ".")
	if len(parts) < 3 {
		return 0, fmt.Errorf("object %s: short index", name)
	}
	v, err := strconv.ParseUint(parts[1], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("object %s: %w", name, err)
	}
	return uint32(v), nil
}
