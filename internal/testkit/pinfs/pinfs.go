// Package pinfs gives a test a BPF file system (bpffs) of its own to pin
// the sampler's maps and links in (dataplane.Config.PinDir, the daemon's
// -pin-dir), never the machine's /sys/fs/bpf.
//
// Dir mounts a fresh bpffs on a temporary directory and returns a pin
// directory inside it; the test's cleanup unmounts it. Unmounting drops
// every pin left there, also when the test failed half-way: the links a
// daemon pinned detach when their last reference goes, so nothing
// outlives the test. Processes started through nsenter --net share the
// test's mount namespace and see the pins; `ip netns exec` would remount
// /sys and hide them, which is why the labs use nsenter.
package pinfs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Magic is BPF_FS_MAGIC, the f_type statfs(2) reports for a bpffs.
const Magic = 0xcafe4a11

// Dir returns a new directory path (not created) on a bpffs mounted for
// this test alone.
func Dir(t testing.TB) string {
	t.Helper()
	mnt, err := os.MkdirTemp("", "hhit-bpffs-")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("bpf", mnt, "bpf", 0, "mode=0700"); err != nil {
		os.Remove(mnt)
		t.Fatalf("pinfs: mounting a bpffs on %s: %v", mnt, err)
	}
	t.Cleanup(func() {
		// MNT_DETACH: a daemon still holding the directory open (a test
		// that failed before stopping it) does not keep the mount.
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("pinfs: unmounting %s: %v", mnt, err)
		}
		if err := os.Remove(mnt); err != nil {
			t.Errorf("pinfs: %v", err)
		}
	})
	return filepath.Join(mnt, "sflowswitchd")
}

// Entries returns the names pinned under dir (none when dir is gone).
func Entries(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("pinfs: %v", err)
	}
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name()
	}
	return names
}
