package handover

import (
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/mib"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestStateAcrossExec: the State an upgrade passes travels in a memfd
// named by the environment (Env), with the descriptors it names kept open
// over exec; Take reads it back, marks them close-on-exec again and
// removes the variable.
func TestStateAcrossExec(t *testing.T) {
	r, w, err := os.Pipe() // two descriptors standing for the lock and owner
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	st := State{LockFD: int(r.Fd()), OwnerFD: int(w.Fd()), ExeFD: -1, InstanceLockFD: -1, Args: []string{"sflowswitchd", "-x"}, From: "v1", StoppedNs: Monotonic()}
	env, err := st.Env()
	if err != nil {
		t.Fatal(err)
	}
	var v string
	for _, e := range env {
		if after, ok := strings.CutPrefix(e, Env+"="); ok {
			v = after
		}
	}
	if v == "" {
		t.Fatalf("%s not in the exec's environment", Env)
	}
	for _, fd := range []int{st.LockFD, st.OwnerFD} {
		if f, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || f&unix.FD_CLOEXEC != 0 {
			t.Errorf("descriptor %d: flags %#x (%v), want open over exec", fd, f, err)
		}
	}
	t.Setenv(Env, v)
	got, err := Take()
	if err != nil || got == nil {
		t.Fatalf("Take: %v %v", got, err)
	}
	if got.From != "v1" || got.LockFD != st.LockFD || got.OwnerFD != st.OwnerFD || got.ExeFD != -1 ||
		len(got.Args) != 2 || got.Args[1] != "-x" || got.StoppedNs != st.StoppedNs {
		t.Errorf("Take: %+v, want %+v", *got, st)
	}
	if _, ok := os.LookupEnv(Env); ok {
		t.Errorf("%s still set after Take", Env)
	}
	for _, fd := range []int{st.LockFD, st.OwnerFD} {
		if f, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); f&unix.FD_CLOEXEC == 0 {
			t.Errorf("descriptor %d not close-on-exec after Take", fd)
		}
	}
	if h, err := Take(); h != nil || err != nil {
		t.Errorf("second Take: %v %v, want nothing", h, err)
	}
}

// TestTakeRefusesGarbage: a variable that names no readable State is an
// error, never a State.
func TestTakeRefusesGarbage(t *testing.T) {
	t.Setenv(Env, "not-a-number")
	if h, err := Take(); h != nil || err == nil {
		t.Errorf("Take of %q: %v %v, want an error", "not-a-number", h, err)
	}
}

// TestSNMPStore: the snapshot is kept in the state directory with its
// receivers' remaining time counting down from the save; Remove deletes
// it and a missing one loads empty.
func TestSNMPStore(t *testing.T) {
	dir := t.TempDir()
	s := NewSNMPStore(dir, 1<<20)
	snap := mib.Snapshot{
		Receivers: []mib.SnapshotReceiver{{Index: 2, Owner: "hl", Remaining: time.Minute, Port: 6344}},
		Samplers:  []mib.SnapshotRow{{Source: sflow.DataSource{Index: 7}, Instance: 2, Receiver: 2, Value: 8}},
	}
	if err := s.Save(snap); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	got, err := NewSNMPStore(dir, 1<<20).Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Receivers) != 1 || got.Receivers[0].Owner != "hl" || len(got.Samplers) != 1 || got.Samplers[0].Value != 8 {
		t.Fatalf("loaded %+v", got)
	}
	if r := got.Receivers[0].Remaining; r > time.Minute-20*time.Millisecond || r < 50*time.Second {
		t.Errorf("remaining %v, want a minute less the time since the save", r)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(); err != nil || len(got.Receivers) != 0 {
		t.Errorf("after Remove: %+v %v", got, err)
	}
}
