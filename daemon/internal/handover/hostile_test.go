package handover

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/mib"
)

// hostileLimit is the store's bound in these tests: the default MIB's
// (10 receivers, 3 instances, 4096 ports and 4094 VLANs).
var hostileLimit = SNMPLimit(10, 3, 4096+4094)

// TestHostileSNMPFileBounded: the snapshot file is read as one another
// process put there. A 600 MB (sparse) file, a symbolic link to
// /dev/zero, a FIFO with no writer and a file of garbage are each
// reported damaged at once (within 5 s; a FIFO used to block the start
// for good, SIGTERM ignored), set aside as snmp.json.damaged, and read
// with at most the limit allocated (the 600 MB file took the daemon to
// 702 MB; /dev/zero was read until the OOM killer came). The next Save
// and Load work. A watchdog ends the test binary if the heap passes
// 512 MB, rather than exhausting the machine.
func TestHostileSNMPFileBounded(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > 512<<20 {
				fmt.Fprintf(os.Stderr, "FAIL: TestHostileSNMPFileBounded: heap at %d MB reading the snapshot file\n", ms.HeapAlloc>>20)
				os.Exit(1)
			}
		}
	}()
	cases := []struct {
		name  string
		plant func(path string) error
	}{
		{"sparse 600 MB", func(p string) error {
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			if err := f.Truncate(600 << 20); err != nil {
				return err
			}
			return f.Close()
		}},
		{"symlink to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }},
		{"FIFO", func(p string) error { return unix.Mkfifo(p, 0o600) }},
		{"garbage", func(p string) error {
			return os.WriteFile(p, []byte(`{"at":1,"snapshot":{"receivers":[{"index":"x"`), 0o600)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, snmpFile)
			if err := c.plant(path); err != nil {
				t.Fatal(err)
			}
			var before fs
			before.stat(t, path)
			s := NewSNMPStore(dir, hostileLimit)
			type result struct {
				snap mib.Snapshot
				err  error
			}
			done := make(chan result, 1)
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			start := time.Now()
			go func() {
				snap, err := s.Load()
				done <- result{snap, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("Load still running after 5 s")
			}
			took := time.Since(start)
			runtime.ReadMemStats(&m1)
			alloc := m1.TotalAlloc - m0.TotalAlloc
			t.Logf("Load: %v in %v, %d KiB allocated (limit %d KiB)", r.err, took, alloc>>10, hostileLimit>>10)
			if r.err == nil || !errors.Is(r.err, ErrDamaged) {
				t.Errorf("Load: %v, want ErrDamaged", r.err)
			}
			defer hostileRow(t, "snmp.json: "+c.name, fmt.Sprintf("refused as damaged within 5 s, set aside, at most 2 × the limit (%d KiB) + 1 MiB allocated", hostileLimit>>10),
				fmt.Sprintf("%v, %d KiB allocated", took.Round(time.Microsecond), alloc>>10))
			if len(r.snap.Receivers)+len(r.snap.Samplers)+len(r.snap.Pollers) != 0 {
				t.Errorf("Load returned rows: %+v", r.snap)
			}
			if bound := uint64(2*hostileLimit + 1<<20); alloc > bound {
				t.Errorf("%d bytes allocated reading it, bound %d", alloc, bound)
			}
			if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s still there (%v): not set aside", snmpFile, err)
			}
			var after fs
			after.stat(t, path+".damaged")
			if after.mode.Type() != before.mode.Type() {
				t.Errorf("set aside as %v, was %v", after.mode.Type(), before.mode.Type())
			}
			// The store works on.
			snap := mib.Snapshot{Receivers: []mib.SnapshotReceiver{{Index: 2, Owner: "ho", Remaining: time.Minute, Port: 6343}}}
			if err := s.Save(snap); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Load(); err != nil || len(got.Receivers) != 1 {
				t.Errorf("Load after Save: %+v %v", got, err)
			}
		})
	}
}

type fs struct{ mode os.FileMode }

func (f *fs) stat(t *testing.T, p string) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	f.mode = fi.Mode()
}

// TestHostileSNMPWriteNoFollow: in a state directory that anyone may
// write (0777), user nobody plants snmp.json.tmp as a symbolic link to a
// root-only 0600 file. The daemon's write replaces the link, never
// writes through it: the root file keeps its content, and snmp.json is
// the daemon's regular 0600 file. CheckDir reports the directory (the
// daemon logs it loudly at start), and not a directory of its own user.
func TestHostileSNMPWriteNoFollow(t *testing.T) {
	testskip.Root(t) // a file of root's, a link of nobody's
	dir, err := os.MkdirTemp("", "ho-state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "root-only")
	const content = "root's alone\n"
	if err := os.WriteFile(secret, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(secret), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{snmpFile + ".tmp", snmpFile} {
		ln := exec.Command("ln", "-s", secret, filepath.Join(dir, name))
		ln.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if out, err := ln.CombinedOutput(); err != nil {
			t.Fatalf("ln -s as nobody: %v %s", err, out)
		}
	}
	if err := CheckDir(dir); err == nil {
		t.Errorf("CheckDir(%s, mode 0777): nil, want a complaint", dir)
	} else {
		t.Logf("CheckDir: %v", err)
	}
	s := NewSNMPStore(dir, hostileLimit)
	snap := mib.Snapshot{Receivers: []mib.SnapshotReceiver{{Index: 2, Owner: "ho", Remaining: time.Minute, Port: 6343}}}
	if err := s.Save(snap); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(secret)
	unchanged := err == nil && string(b) == content
	if !unchanged {
		t.Errorf("the root-only file now holds %q (%v), want %q", b, err, content)
	}
	fi, err := os.Lstat(filepath.Join(dir, snmpFile))
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
		t.Errorf("%s is %v owned by %d, want the daemon's regular 0600 file", snmpFile, fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
	}
	if _, err := os.Lstat(filepath.Join(dir, snmpFile+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s.tmp left behind: %v", snmpFile, err)
	}
	if got, err := s.Load(); err != nil || len(got.Receivers) != 1 || got.Receivers[0].Owner != "ho" {
		t.Errorf("Load: %+v %v", got, err)
	}
	hostileRow(t, "snmp.json.tmp and snmp.json planted by user nobody as links to a root-only 0600 file, in a 0777 state directory",
		"the root file unchanged; snmp.json the daemon's regular 0600 file; the directory reported",
		fmt.Sprintf("root file unchanged: %v; directory reported: %v", unchanged, CheckDir(dir) != nil))
	// A directory of the daemon's own, mode 0700 or 0755, is fine.
	own := t.TempDir()
	for _, mode := range []os.FileMode{0o700, 0o755} {
		if err := os.Chmod(own, mode); err != nil {
			t.Fatal(err)
		}
		if err := CheckDir(own); err != nil {
			t.Errorf("CheckDir(mode %04o): %v", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o770, 0o1777} {
		if err := os.Chmod(own, mode); err != nil {
			t.Fatal(err)
		}
		if err := CheckDir(own); err == nil {
			t.Errorf("CheckDir(mode %04o): nil, want a complaint", mode)
		}
	}
	if err := os.Chown(own, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(own, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := CheckDir(own); err == nil {
		t.Errorf("CheckDir(owned by nobody): nil, want a complaint")
	}
}

// hostileRow appends a case of the hostile table (`make hostile`: the
// file HOSTILE_REPORT names; test/e2e's recordHostile writes the others)
// and logs it.
func hostileRow(t *testing.T, c, bound, peak string) {
	t.Helper()
	row := fmt.Sprintf("| %s | %s | %s |\n", c, bound, peak)
	t.Logf("hostile report: %s", row)
	name := os.Getenv("HOSTILE_REPORT")
	if name == "" {
		return
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("hostile report: %v", err)
	}
	if _, err := f.WriteString(row); err != nil {
		f.Close()
		t.Fatalf("hostile report: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("hostile report: %v", err)
	}
}
