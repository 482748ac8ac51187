package inforce

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestWriteRead: the file is replaced whole (nothing left beside it),
// readable by the state directory's readers only, and read back the same.
func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	st := State{Version: "1", PID: 7, Written: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC),
		Agent: Agent{Address: "198.18.0.1", Why: "agent_address set", Source: "file"},
		Ports: []Port{{Name: "swp1", IfIndex: 3, Rate: 1000, KernelRate: 512, Direction: "ingress", RateSource: "sampling: file"}}}
	for i := 0; i < 2; i++ {
		if err := Write(path, st); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Read(path)
	if err != nil || !reflect.DeepEqual(got, st) {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("files left in the directory: %v", es)
	}
	var b strings.Builder
	if err := Render(&b, State{}); err != nil || !strings.Contains(b.String(), "agent address:  none") || !strings.Contains(b.String(), "none sampled") {
		t.Errorf("an empty state renders as:\n%s", b.String())
	}
}
