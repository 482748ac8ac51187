package privilege

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckAgentXSocket creates real unix sockets with the modes snmpd's
// agentXPerms would give them and checks that only a world-writable one
// (or directory) is reported.
func TestCheckAgentXSocket(t *testing.T) {
	for _, tc := range []struct {
		sock, dir os.FileMode
		warn      bool
	}{
		{0o600, 0o700, false},
		{0o660, 0o750, false},
		{0o777, 0o755, true},
		{0o600, 0o777, true},
		{0o600, 0o777 | os.ModeSticky, false},
	} {
		dir := filepath.Join(t.TempDir(), "agentx")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "master")
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.sock); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, tc.dir); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		CheckAgentXSocket(slog.New(slog.NewTextHandler(&buf, nil)), path)
		l.Close()
		if got := strings.Contains(buf.String(), "world-writable"); got != tc.warn {
			t.Errorf("socket %v dir %v: warned %v, want %v: %s", tc.sock, tc.dir, got, tc.warn, buf.String())
		}
	}
}

// TestLogCapabilities checks the start-up report of this process's
// capabilities (the test runs as root: everything present, so only the
// CAP_SYS_ADMIN note).
func TestLogCapabilities(t *testing.T) {
	eff, err := effectiveCaps()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	LogCapabilities(slog.New(slog.NewTextHandler(&buf, nil)))
	if eff&(1<<capSysAdmin) != 0 && !strings.Contains(buf.String(), "does not need") {
		t.Errorf("CAP_SYS_ADMIN held but not reported: %s", buf.String())
	}
	if eff&(1<<39) == 0 && !strings.Contains(buf.String(), "CAP_BPF") {
		t.Errorf("CAP_BPF missing but not reported: %s", buf.String())
	}
}
