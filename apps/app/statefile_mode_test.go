package app

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestStateFileNotWorldAccessible: the only file the daemon writes (the
// application state file) and the directory it creates are neither
// world-writable nor world-readable, whatever the umask (no file
// the daemon writes is world-writable).
func TestStateFileNotWorldAccessible(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "state")
	state := filepath.Join(dir, "apps.json")
	e := New(Config{StateFile: state})
	if _, err := e.reg.assign("inventory"); err != nil {
		t.Fatal(err)
	}
	e.reg.flush(false)
	for _, p := range []string{state, dir} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s not written: %v", p, err)
		}
		if m := fi.Mode().Perm(); m&0o007 != 0 || m&0o020 != 0 {
			t.Errorf("%s has mode %#o: accessible to others or writable by the group", p, m)
		}
	}
}
