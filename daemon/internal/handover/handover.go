// Package handover carries the daemon's state from one program to the
// next: across the exec of an upgrade in place (State, in a memfd whose
// descriptor the environment names) and across any start that takes
// pinned samplers over (the SNMP-set part of the SFLOW-MIB, in a file of
// the state directory).
package handover

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/mib"
)

// Env names the descriptor of the State an exec'ing daemon passes on.
const Env = "SFLOWSWITCHD_HANDOVER"

// version of State's encoding; a program that reads another refuses it
// (and starts as after a crash: it adopts the pinned samplers anyway).
const version = 1

// State is what a daemon passes to the program it execs.
type State struct {
	Version int `json:"version"`
	// LockFD and OwnerFD are pin.Handover's descriptors: the pin
	// directory's lock and the clsact owner socket, open across the exec.
	LockFD  int `json:"lock_fd"`
	OwnerFD int `json:"owner_fd"`
	// InstanceLockFD is the network namespace's instance lock
	// (internal/instancelock), open across the exec: the upgraded
	// program is the same instance. -1: none (a program older than the
	// lock, whose successor takes it afresh).
	InstanceLockFD int `json:"instance_lock_fd"`
	// ExeFD is the previous program's executable, open across the exec:
	// a program that fails to start execs it again (a rollback). -1: none.
	ExeFD int `json:"exe_fd"`
	// Rollback: this exec is a rollback; a failure now is not rolled back
	// again.
	Rollback bool `json:"rollback,omitempty"`
	// Args are the previous program's arguments (os.Args): a rollback
	// runs it with them again, whatever the failed program was given.
	Args []string `json:"args"`
	// From is the previous program's revision.
	From string `json:"from"`
	// StoppedNs is when the previous program's workers had stopped, on
	// CLOCK_MONOTONIC (Monotonic): the handover's time is measured from it.
	StoppedNs uint64 `json:"stopped_ns"`
}

// Monotonic is CLOCK_MONOTONIC in nanoseconds: one clock for every
// program of this boot (Go's monotonic readings are per process).
func Monotonic() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}

// Write puts st in a memfd that stays open across exec and returns its
// descriptor, for Env.
func Write(st State) (int, error) {
	st.Version = version
	b, err := json.Marshal(st)
	if err != nil {
		return -1, err
	}
	fd, err := unix.MemfdCreate("sflowswitchd-handover", 0) // no MFD_CLOEXEC: it is for the next program
	if err != nil {
		return -1, fmt.Errorf("handover memfd: %w", err)
	}
	if _, err := unix.Pwrite(fd, b, 0); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("writing the handover: %w", err)
	}
	return fd, nil
}

// Take reads the State the previous program passed in the environment,
// closes its descriptor and removes Env; nil when this program was not
// exec'ed by one.
func Take() (*State, error) {
	v, ok := os.LookupEnv(Env)
	if !ok {
		return nil, nil
	}
	os.Unsetenv(Env)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 0 {
		return nil, fmt.Errorf("%s=%q: not a descriptor", Env, v)
	}
	f := os.NewFile(uintptr(fd), "handover")
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the handover: %w", err)
	}
	st := State{InstanceLockFD: -1} // absent from an older program's
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("decoding the handover: %w", err)
	}
	if st.Version != version {
		return nil, fmt.Errorf("handover of version %d, this program reads %d", st.Version, version)
	}
	for _, fd := range []int{st.LockFD, st.OwnerFD, st.ExeFD, st.InstanceLockFD} {
		if fd >= 0 {
			unix.CloseOnExec(fd) // passed on again explicitly when needed
		}
	}
	return &st, nil
}

// Env returns the environment of an exec with st: the process's own,
// Env set to the descriptor Write made, the descriptors st names kept
// open.
func (st State) Env() ([]string, error) {
	fd, err := Write(st)
	if err != nil {
		return nil, err
	}
	for _, k := range []int{st.LockFD, st.OwnerFD, st.ExeFD, st.InstanceLockFD} {
		if k < 0 {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(k), unix.F_SETFD, 0); err != nil {
			return nil, fmt.Errorf("keeping descriptor %d over exec: %w", k, err)
		}
	}
	env := []string{Env + "=" + strconv.Itoa(fd)}
	for _, e := range os.Environ() {
		if len(e) > len(Env) && e[:len(Env)+1] == Env+"=" {
			continue
		}
		env = append(env, e)
	}
	return env, nil
}

// snmpFile is the SNMP snapshot's name in the state directory.
const snmpFile = "snmp.json"

// snmpRecord is the SNMP snapshot as stored: the receivers' remaining
// time counts from At (CLOCK_MONOTONIC).
type snmpRecord struct {
	At       uint64       `json:"at"`
	Snapshot mib.Snapshot `json:"snapshot"`
}

// ErrDamaged marks a snapshot file that could not be read as one (not a
// regular file, larger than the limit, not the JSON the daemon writes):
// Load has set it aside as snmp.json.damaged.
var ErrDamaged = errors.New("damaged")

// SNMPLimit bounds the snapshot file read back for a MIB of receivers
// receiver rows and instances instances per data source, with at most
// sources data sources: every row written at its largest (an owner of 127
// characters escaped in JSON, a row of the largest numbers), with room to
// spare. A larger file is damaged, never read whole.
func SNMPLimit(receivers, instances, sources int) int64 {
	const perReceiver, perRow = 1024, 192
	return 64<<10 + int64(receivers)*perReceiver + 2*int64(instances)*int64(sources)*perRow
}

// SNMPStore keeps the MIB's SNMP-set part in a state directory.
type SNMPStore struct {
	dir   string
	limit int64
	last  []byte // the deadlines of the last write, to skip writing the same
}

// NewSNMPStore keeps the snapshot in dir; Load reads back at most limit
// bytes (SNMPLimit).
func NewSNMPStore(dir string, limit int64) *SNMPStore {
	return &SNMPStore{dir: dir, limit: limit}
}

// Save writes snap when it differs from the last one written (the
// receivers' deadlines, not their remaining time, are compared).
func (s *SNMPStore) Save(snap mib.Snapshot) error {
	now := Monotonic()
	key := snap
	key.Receivers = append([]mib.SnapshotReceiver(nil), snap.Receivers...)
	for i := range key.Receivers { // the deadline, rounded to a second
		key.Receivers[i].Remaining = (key.Receivers[i].Remaining + time.Duration(now)) / time.Second
	}
	kb, err := json.Marshal(key)
	if err != nil {
		return err
	}
	if string(kb) == string(s.last) {
		return nil
	}
	b, err := json.Marshal(snmpRecord{At: now, Snapshot: snap})
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(s.dir, snmpFile), b); err != nil {
		return err
	}
	s.last = kb
	return nil
}

// Load reads the snapshot, with the receivers' remaining time as of now;
// an empty snapshot when there is none. The file is read as one another
// process may have put there (the state directory is the administrator's):
// a regular file only, opened without following a symbolic link and
// without blocking (a FIFO), at most the store's limit. A file that is
// not a snapshot is renamed snmp.json.damaged and the error wraps
// ErrDamaged: the caller starts without the snapshot, never fails.
func (s *SNMPStore) Load() (mib.Snapshot, error) {
	name := filepath.Join(s.dir, snmpFile)
	b, err := readBounded(name, s.limit)
	if errors.Is(err, os.ErrNotExist) {
		return mib.Snapshot{}, nil
	}
	var r snmpRecord
	if err == nil {
		if err = json.Unmarshal(b, &r); err != nil {
			err = fmt.Errorf("%w: %w", ErrDamaged, err)
		}
	}
	if err != nil {
		if errors.Is(err, ErrDamaged) {
			if rerr := os.Rename(name, name+".damaged"); rerr != nil {
				err = fmt.Errorf("%w (not set aside: %v)", err, rerr)
			} else {
				err = fmt.Errorf("%w (set aside as %s.damaged)", err, snmpFile)
			}
		}
		return mib.Snapshot{}, fmt.Errorf("%s: %w", name, err)
	}
	now := Monotonic()
	for i := range r.Snapshot.Receivers {
		if now > r.At {
			r.Snapshot.Receivers[i].Remaining -= time.Duration(now - r.At)
		}
	}
	return r.Snapshot, nil
}

// readBounded reads name: a regular file of at most limit bytes. A
// symbolic link, a FIFO, a device or a larger file is ErrDamaged, never
// followed, waited on or read to the end.
func readBounded(name string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%w: a symbolic link", ErrDamaged)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: not a regular file (%s)", ErrDamaged, fi.Mode().Type())
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrDamaged, fi.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit { // grew while read
		return nil, fmt.Errorf("%w: more than %d bytes", ErrDamaged, limit)
	}
	return b, nil
}

// Remove deletes the snapshot (a clean stop: the next start begins
// afresh).
func (s *SNMPStore) Remove() error {
	err := os.Remove(filepath.Join(s.dir, snmpFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// writeFile replaces name with b atomically, mode 0600: a new file
// (name.tmp, created exclusively and never through a symbolic link:
// whatever another user planted under that name is removed first, not
// written through) renamed over name (a link planted as name is
// replaced, not followed).
func writeFile(name string, b []byte) error {
	tmp := name + ".tmp"
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	f, err := os.OpenFile(tmp, flags, 0o600)
	if errors.Is(err, os.ErrExist) {
		// Left by a crash, or planted: unlink removes the entry itself
		// (a link, not what it points to).
		if err = os.Remove(tmp); err == nil {
			f, err = os.OpenFile(tmp, flags, 0o600)
		}
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", tmp, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// CheckDir reports why dir is not safe for state only the daemon should
// write: it is not a directory, or not owned by the daemon's user (or
// root), or group or others may write it (anyone who can write it can
// plant or replace names in it, sticky bit or not). nil when it is safe
// or does not exist yet.
func CheckDir(dir string) error {
	var st unix.Stat_t
	err := unix.Lstat(dir, &st)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s: not a directory", dir)
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid && st.Uid != 0 {
		return fmt.Errorf("%s: owned by uid %d, not by the daemon's user (uid %d) or root", dir, st.Uid, uid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("%s: mode %04o: group or others may write it", dir, st.Mode&0o7777)
	}
	return nil
}
