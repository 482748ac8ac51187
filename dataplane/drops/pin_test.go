package drops

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pinfs"
)

// TestPinnedReleaseAdopt: a program pinned (Config.PinDir) and released
// keeps counting while no process runs, and the next Open adopts it with
// its counters. Drops of the gap are counted, not notified: with no
// process's buffers in the map each write fails (ring_full), so that
// notified + suppressed + ring_full == drops holds across the gap and
// read == notified for the reads of both processes. Pause before Release
// stops the writes to the first process's buffers, so that what it drains
// then is every notification the program wrote (Adopted's count). Close
// detaches it and leaves nothing pinned.
func TestPinnedReleaseAdopt(t *testing.T) {
	lab := netlab.New(t, 3)
	dl := lab.SetupDrops(t)
	ino, err := NetnsInode("/run/netns/" + lab.Switch)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(pinfs.Dir(t), "drops")
	cfg := Config{Netns: ino, Limit: 1_000_000, HeaderBytes: DefaultHeaderBytes, PinDir: dir}
	d, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Adopted(); ok {
		t.Fatal("first Open adopted a program")
	}
	id := d.ProgramID()
	lab.SendFrames(t, 0, dl.ACLFrames(100))
	read := len(collectRecords(t, d, 300*time.Millisecond))
	lab.SendFrames(t, 0, dl.ACLFrames(20)) // written, read at the drain
	if err := d.Pause(); err != nil {
		t.Fatal(err)
	}
	read += len(collectRecords(t, d, 300*time.Millisecond))
	if err := d.Release(); err != nil {
		t.Fatal(err)
	}
	const gap = 50
	lab.SendFrames(t, 0, dl.ACLFrames(gap)) // no process

	d2, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d2.Close() })
	notified, ok := d2.Adopted()
	if !ok || d2.ProgramID() != id {
		t.Fatalf("second Open: adopted %v, program %d; want the pinned program %d", ok, d2.ProgramID(), id)
	}
	if notified != uint64(read) {
		t.Errorf("notifications written before the take-over %d, read by the first process %d", notified, read)
	}
	lab.SendFrames(t, 0, dl.ACLFrames(30))
	read2 := len(collectRecords(t, d2, 300*time.Millisecond))
	st, err := d2.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("read %d + %d, stats %+v, ACL drops (nft) %d", read, read2, st, dl.ACLDropped(t))
	if acl := dl.ACLDropped(t); st.Drops < acl || acl != 200 {
		t.Errorf("program counted %d drops, nft %d of 200 frames: the gap's drops not counted", st.Drops, acl)
	}
	if st.Notified+st.Suppressed+st.RingFull != st.Drops || uint64(read+read2) != st.Notified || st.RingFull < gap {
		t.Errorf("stats %+v, read %d: want notified + suppressed + ring_full == drops, read == notified, ring_full >= the gap's %d", st, read+read2, gap)
	}
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
	if es := pinfs.Entries(t, filepath.Dir(dir)); len(es) != 0 {
		t.Errorf("pinned after Close: %v", es)
	}
}

// TestPinnedReplaceOtherBuild: a pinned program of another build (its
// folder under another fingerprint) is not adopted: Open detaches it
// right before attaching its own and reports its final counts, the
// drops of the gap included, so that they can be carried over; the new
// program counts from 0 and nothing of the old one stays pinned.
func TestPinnedReplaceOtherBuild(t *testing.T) {
	lab := netlab.New(t, 3)
	dl := lab.SetupDrops(t)
	ino, err := NetnsInode("/run/netns/" + lab.Switch)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(pinfs.Dir(t), "drops")
	cfg := Config{Netns: ino, Limit: 1_000_000, HeaderBytes: DefaultHeaderBytes, PinDir: dir}
	d, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := d.ProgramID()
	lab.SendFrames(t, 0, dl.ACLFrames(40))
	read := len(collectRecords(t, d, 300*time.Millisecond))
	if err := d.Release(); err != nil {
		t.Fatal(err)
	}
	const gap = 25
	lab.SendFrames(t, 0, dl.ACLFrames(gap))
	// Another build's folder: the same program under another name.
	if err := os.Rename(d.pinned, filepath.Join(dir, "0000000000000000")); err != nil {
		t.Fatal(err)
	}
	d2, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d2.Close() })
	if _, ok := d2.Adopted(); ok || d2.ProgramID() == id {
		t.Fatalf("the program of another build adopted (program %d, was %d)", d2.ProgramID(), id)
	}
	r := d2.Replaced()
	if len(r) != 1 || r[0].Err != nil || r[0].ID != id {
		t.Fatalf("replaced %+v, want program %d", r, id)
	}
	st := r[0].Stats
	t.Logf("read %d; the replaced program's final counts %+v", read, st)
	if st.Drops != 40+gap || st.Notified != uint64(read) || st.RingFull != gap {
		t.Errorf("replaced program: %+v, want %d drops, %d notified (read), %d ring_full (the gap)", st, 40+gap, read, gap)
	}
	lab.SendFrames(t, 0, dl.ACLFrames(5))
	if n := len(collectRecords(t, d2, 300*time.Millisecond)); n != 5 {
		t.Errorf("the new program: %d notifications read, want 5", n)
	}
	if es := pinfs.Entries(t, dir); len(es) != 1 {
		t.Errorf("pinned: %v, want the new program's folder only", es)
	}
}
