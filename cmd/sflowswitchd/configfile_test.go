package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/config"
)

// TestConfigFileLimits: -config on an endless file
// (/dev/zero), a FIFO nobody writes, a directory or a file above
// config.MaxConfigBytes is refused at once with a message, never read without a
// limit or waited on.
func TestConfigFileLimits(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.conf")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", config.MaxConfigBytes)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, want string }{
		{"/dev/zero", "not a regular file"},
		{fifo, "not a regular file"},
		{dir, "not a regular file"},
		{big, "larger than"},
	} {
		done := make(chan error, 1)
		go func() { _, err := loadArgs(t, "-config", c.file); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("-config %s: %v, want an error containing %q", c.file, err, c.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("-config %s: still reading after 5 s", c.file)
		}
	}
	ok := filepath.Join(dir, "ok.conf")
	if err := os.WriteFile(ok, []byte("sampling = 512\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := loadArgs(t, "-config", ok); err != nil || s.Sampling != 512 {
		t.Fatalf("normal file: %+v %v", s.Sampling, err)
	}
}
