// Package snmptest runs a real net-snmp snmpd master agent for tests of
// AgentX subagents (packages snmpd, mib, apps/apmmib).
//
// Start launches /usr/sbin/snmpd as a child process with everything it
// writes (snmpd.conf, AgentX socket, log, PID file, persistent state) in a
// temp dir of the test, answering SNMPv2c on a free UDP port of
// 127.0.0.1. The environment (Env) keeps the daemon and net-snmp's
// command-line tools away from /var/lib/snmp and the system configuration.
// The process is killed by its PID when the test ends; Kill and Restart let
// reconnection tests take the master away and bring it back.
//
// The package does not import package snmpd, so that snmpd's own internal
// tests can use it; Serve runs any subagent through the Agent interface.
package snmptest

import (
	"context"
	"fmt"
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

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// SnmpdPath is the net-snmp master agent binary; Start skips the test when
// it is not installed.
const SnmpdPath = "/usr/sbin/snmpd"

// startTimeout bounds the wait for snmpd's AgentX socket after a start.
const startTimeout = 10 * time.Second

// Options configure the snmpd that Start runs. The zero value gives a
// master agent with the read-write community "private" and no MIB files.
type Options struct {
	// RWCommunity is the read-write SNMPv2c community, from 127.0.0.1
	// only; empty means "private".
	RWCommunity string
	// ROCommunity, when set, adds a read-only community from 127.0.0.1.
	ROCommunity string
	// View, when set (e.g. ".1.3.6.1.4.1.14706"), limits both communities
	// to that subtree with a net-snmp "view" line, as a deployment
	// documented in mib/README.md would.
	View string
	// MIBDirs is the MIBDIRS of the environment, for tools that load MIB
	// modules by name; empty means the temp dir (no MIB files).
	MIBDirs string
}

// Snmpd is a running (or, after Kill, stopped) net-snmp master agent.
type Snmpd struct {
	// Dir is the temp dir holding snmpd.conf, snmpd.log and the socket.
	Dir string
	// SocketPath is the AgentX unix socket subagents connect to.
	SocketPath string
	// Port is the UDP port snmpd answers SNMP on, at 127.0.0.1.
	Port int
	// UDPAddr is "127.0.0.1:Port", the agent address for net-snmp tools.
	UDPAddr string
	// PID is the process ID of the current snmpd (changes on Restart).
	PID int

	tb      testing.TB
	conf    string
	mibDirs string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// Start writes the configuration for opts, starts snmpd and waits until
// its AgentX socket exists. snmpd is killed (by PID) when tb ends. A test
// is skipped when snmpd is not installed, except under CI (environment
// variable CI set), where `make test` installs it and its absence is a
// failure: nothing is skipped silently there.
func Start(tb testing.TB, opts Options) *Snmpd {
	tb.Helper()
	if _, err := os.Stat(SnmpdPath); err != nil {
		testskip.Skip(tb, "net-snmp snmpd not installed (make test installs it): %v", err)
	}
	dir := tb.TempDir()
	port := FreeUDPPort(tb)
	s := &Snmpd{Dir: dir, SocketPath: filepath.Join(dir, "agentx.sock"), Port: port,
		UDPAddr: fmt.Sprintf("127.0.0.1:%d", port), tb: tb,
		conf: filepath.Join(dir, "snmpd.conf"), mibDirs: opts.MIBDirs}
	if s.mibDirs == "" {
		s.mibDirs = dir
	}
	if err := os.WriteFile(s.conf, []byte(config(s.SocketPath, s.UDPAddr, opts)), 0o600); err != nil {
		tb.Fatalf("write snmpd.conf: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "persist"), 0o700); err != nil {
		tb.Fatalf("create snmpd persistent dir: %v", err)
	}
	s.start(tb)
	tb.Cleanup(s.Kill)
	return s
}

// config renders snmpd.conf: snmpd as AgentX master on a unix socket only
// we may use (agentXPerms), short AgentX timeouts so a dead subagent is
// noticed quickly, and SNMP on loopback only.
func config(sock, addr string, opts Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "master agentx\nagentXSocket unix:%s\nagentXPerms 0600 0700\nagentXTimeout 5\nagentXRetries 1\n", sock)
	view := ""
	if opts.View != "" {
		fmt.Fprintf(&b, "view testView included %s\n", opts.View)
		view = " -V testView"
	}
	rw := opts.RWCommunity
	if rw == "" {
		rw = "private"
	}
	fmt.Fprintf(&b, "rwcommunity %s 127.0.0.1%s\n", rw, view)
	if opts.ROCommunity != "" {
		fmt.Fprintf(&b, "rocommunity %s 127.0.0.1%s\n", opts.ROCommunity, view)
	}
	fmt.Fprintf(&b, "agentaddress udp:%s\n", addr)
	return b.String()
}

// FreeUDPPort asks the kernel for a free loopback UDP port. (Another
// process may take it before snmpd binds it; Start then fails loudly.)
func FreeUDPPort(tb testing.TB) int {
	tb.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("find a free UDP port: %v", err)
	}
	port := c.LocalAddr().(*net.UDPAddr).Port
	if err := c.Close(); err != nil {
		tb.Fatalf("close UDP probe socket: %v", err)
	}
	return port
}

// Env is the environment for snmpd and net-snmp's tools: the process
// environment plus a private persistent dir and config path (so nothing
// of /var/lib/snmp or /etc/snmp is read or written), no default MIB
// modules, and MIBDIRS from Options.
func (s *Snmpd) Env() []string {
	return append(os.Environ(),
		"SNMP_PERSISTENT_DIR="+filepath.Join(s.Dir, "persist"),
		"SNMPCONFPATH="+s.Dir,
		"MIBS=", "MIBDIRS="+s.mibDirs)
}

// start runs snmpd in the foreground (-f) with only our config (-C -c),
// logging to a file, and waits for its AgentX socket.
func (s *Snmpd) start(tb testing.TB) {
	tb.Helper()
	// A stale socket would make the wait below pass early.
	if err := os.Remove(s.SocketPath); err != nil && !os.IsNotExist(err) {
		tb.Fatalf("remove stale AgentX socket: %v", err)
	}
	cmd := exec.Command(SnmpdPath, "-f", "-C", "-c", s.conf,
		"-Lf", filepath.Join(s.Dir, "snmpd.log"), "-p", filepath.Join(s.Dir, "snmpd.pid"))
	cmd.Env = s.Env()
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start snmpd: %v", err)
	}
	s.cmd, s.exited, s.PID = cmd, make(chan struct{}), cmd.Process.Pid
	go func(c *exec.Cmd, done chan struct{}) {
		_ = c.Wait() // a killed snmpd exits non-zero, as expected
		close(done)
	}(cmd, s.exited)
	deadline := time.Now().Add(startTimeout)
	for {
		if fi, err := os.Stat(s.SocketPath); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return
		}
		select {
		case <-s.exited:
			tb.Fatalf("snmpd exited at start; log:\n%s", s.Log())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("snmpd socket %s did not appear; log:\n%s", s.SocketPath, s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill sends SIGKILL to our snmpd (by PID, never by name) and waits for it
// to exit. Killing a stopped snmpd does nothing.
func (s *Snmpd) Kill() {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.exited:
	default:
		if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil {
			s.tb.Errorf("kill snmpd pid %d: %v", s.PID, err)
		}
		<-s.exited
	}
	s.cmd = nil
}

// Restart kills snmpd if it still runs and starts it again with the same
// configuration, socket and port, waiting for the AgentX socket.
func (s *Snmpd) Restart(tb testing.TB) {
	tb.Helper()
	s.Kill()
	s.start(tb)
}

// Log returns snmpd's log file (or why it cannot be read), for failure
// messages.
func (s *Snmpd) Log() string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "snmpd.log"))
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// Client returns a connected SNMPv2c gosnmp manager session for community
// (2 s timeout, 1 retry, max-repetitions 50), closed when tb ends.
func (s *Snmpd) Client(tb testing.TB, community string) *gosnmp.GoSNMP {
	tb.Helper()
	g := &gosnmp.GoSNMP{Target: "127.0.0.1", Port: uint16(s.Port), Community: community,
		Version: gosnmp.Version2c, Timeout: 2 * time.Second, Retries: 1, MaxRepetitions: 50}
	if err := g.Connect(); err != nil {
		tb.Fatalf("gosnmp connect: %v", err)
	}
	tb.Cleanup(func() { _ = g.Conn.Close() })
	return g
}

// Tool runs a net-snmp command-line tool (snmpget, snmpwalk, snmpset,
// ...) with args, which must include the agent address (UDPAddr), in
// Env, and returns its combined output.
func (s *Snmpd) Tool(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = s.Env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Agent is an AgentX subagent as package snmpd's Subagent implements it:
// Run serves until ctx ends, Connected tells whether it is registered.
type Agent interface {
	Run(ctx context.Context) error
	Connected() bool
}

// Serve runs a until tb ends (its error, other than at the end, fails the
// test) and waits up to registerTimeout for it to register with s.
func (s *Snmpd) Serve(tb testing.TB, a Agent) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := a.Run(ctx); err != nil {
			tb.Errorf("subagent Run: %v", err)
		}
	})
	tb.Cleanup(func() { cancel(); wg.Wait() })
	s.WaitConnected(tb, a, registerTimeout)
}

// registerTimeout bounds the wait for a subagent to register.
const registerTimeout = 5 * time.Second

// WaitConnected waits up to d for a to be registered with snmpd and fails
// the test (with snmpd's log) if it is not.
func (s *Snmpd) WaitConnected(tb testing.TB, a Agent, d time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !a.Connected() {
		if time.Now().After(deadline) {
			tb.Fatalf("subagent not registered within %v; snmpd log:\n%s", d, s.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
