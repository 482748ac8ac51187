// Package redistest runs a real redis-server for tests of SONiC mode
// (platform/sonic, the daemon, the end-to-end tests): on a unix socket in
// a temp dir of the test, with keyspace notifications on as SONiC's Redis
// runs (notify-keyspace-events AKE), no persistence and no TCP port, and a
// database_config.json in SONiC's format naming it. The process is killed
// by its PID when the test ends; Kill and Start let reconnection tests take
// it away and bring it back.
package redistest

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// ServerPath is the redis-server binary (Debian package redis-server,
// scripts/install-deps.sh's test profile).
const ServerPath = "/usr/bin/redis-server"

// CLIPath is redis-cli (Debian package redis-tools).
const CLIPath = "/usr/bin/redis-cli"

// Database ids and separators as SONiC's database_config.json has them
// (sonic-buildimage files/image_config/... database_config.json; hsflowd
// mod_sonic.c subscribes to CONFIG_DB as database 4).
const (
	ApplDB     = 0
	CountersDB = 2
	ConfigDB   = 4
	StateDB    = 6
)

// Server is a redis-server of a test.
type Server struct {
	t testing.TB
	// Dir holds the socket, the log and database_config.json.
	Dir string
	// Socket is the unix socket.
	Socket string
	// DBConfig is database_config.json naming Socket.
	DBConfig string
	cmd      *exec.Cmd
}

// Start runs a redis-server for t; it is killed when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := os.Stat(ServerPath); err != nil {
		testskip.Skip(t, "redis-server not installed (Debian package redis-server; scripts/install-deps.sh test)")
	}
	dir := t.TempDir()
	s := &Server{t: t, Dir: dir, Socket: filepath.Join(dir, "redis.sock"), DBConfig: filepath.Join(dir, "database_config.json")}
	cfg := map[string]any{
		"INSTANCES": map[string]any{
			"redis": map[string]any{"hostname": "127.0.0.1", "port": 6379, "unix_socket_path": s.Socket, "persistence_for_warm_boot": "yes"},
		},
		"DATABASES": map[string]any{
			"APPL_DB":         map[string]any{"id": ApplDB, "separator": ":", "instance": "redis"},
			"ASIC_DB":         map[string]any{"id": 1, "separator": ":", "instance": "redis"},
			"COUNTERS_DB":     map[string]any{"id": CountersDB, "separator": ":", "instance": "redis"},
			"LOGLEVEL_DB":     map[string]any{"id": 3, "separator": ":", "instance": "redis"},
			"CONFIG_DB":       map[string]any{"id": ConfigDB, "separator": "|", "instance": "redis"},
			"FLEX_COUNTER_DB": map[string]any{"id": 5, "separator": ":", "instance": "redis"},
			"STATE_DB":        map[string]any{"id": StateDB, "separator": "|", "instance": "redis"},
		},
		"VERSION": "1.0",
	}
	b, err := json.MarshalIndent(cfg, "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.DBConfig, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Start (re)starts the server after Kill.
func (s *Server) Start() {
	s.t.Helper()
	cmd := exec.Command(ServerPath, "--port", "0", "--unixsocket", s.Socket, "--unixsocketperm", "700",
		"--notify-keyspace-events", "AKE", "--save", "", "--appendonly", "no", "--databases", "16",
		"--dir", s.Dir, "--logfile", filepath.Join(s.Dir, "redis.log"), "--daemonize", "no")
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("unix", s.Socket); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Kill()
	log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	s.t.Fatalf("redis-server did not open %s: %s", s.Socket, log)
}

// Kill stops the server (by its PID) and waits for it.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL) // it may have exited already
	_ = s.cmd.Wait()                          // killed: the status says so
	s.cmd = nil
	_ = os.Remove(s.Socket) // a killed server leaves it
}

// CLI runs redis-cli on database db with args and returns its output; a
// failure fails the test.
func (s *Server) CLI(db int, args ...string) string {
	s.t.Helper()
	out, err := exec.Command(CLIPath, append([]string{"-s", s.Socket, "-n", fmt.Sprint(db)}, args...)...).CombinedOutput()
	if err != nil || strings.HasPrefix(string(out), "ERR") || strings.HasPrefix(string(out), "(error)") {
		s.t.Fatalf("redis-cli -n %d %s: %v: %s", db, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// HSet sets fields (name, value, ...) of hash key in database db with
// redis-cli, as SONiC's tools write them.
func (s *Server) HSet(db int, key string, fv ...string) {
	s.t.Helper()
	s.CLI(db, append([]string{"HSET", key}, fv...)...)
}

// Del deletes keys in database db.
func (s *Server) Del(db int, keys ...string) {
	s.t.Helper()
	s.CLI(db, append([]string{"DEL"}, keys...)...)
}

// Pipe sends commands (one per line, redis-cli's --pipe protocol is not
// used: the lines are redis-cli's inline syntax) to database db in one
// redis-cli run, for large fixtures.
func (s *Server) Pipe(db int, lines []string) {
	s.t.Helper()
	cmd := exec.Command(CLIPath, "-s", s.Socket, "-n", fmt.Sprint(db))
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "ERR") {
		s.t.Fatalf("redis-cli -n %d (%d commands): %v: %.500s", db, len(lines), err, out)
	}
}
