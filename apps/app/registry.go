package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
)

// Data source indexes of applications that send no service_port: the
// host agent's range (hsflowd.h HSP_DEFAULT_APP_DSINDEX_START = 150000),
// one per application name, up to the client-side range at 200000
// (sflow_application.txt section 3).
const (
	NamedIndexBase = 150000
	namedIndexEnd  = clientIndexBase // exclusive
)

// registry maps applications to data source indexes. An application with
// a service port is on that port (the spec's rule). One without is on the
// data source its name was last seen on, else on the index assigned to
// its name: the host agent assigns 150000, 150001, ... in order of
// appearance and forgets them at restart; here the assignment is kept in
// a state file so that collectors see the same data source after a
// restart. It is safe for concurrent use.
type registry struct {
	mu    sync.Mutex
	live  map[string]uint32 // application name -> index last used
	named map[string]uint32 // name -> assigned index (persistent)
	used  map[uint32]string // assigned index -> name
	path  string            // state file; "" = not persisted
	log   *slog.Logger
	// maxLive bounds live (4 × the engine's data sources), so a flood of
	// names cannot grow it without bound.
	maxLive int
	// seen is when each named application was last resolved (a logical
	// clock; 0 = not since this start), to pick which index to take over
	// when all are assigned.
	seen map[string]uint64
	tick uint64
	// saveFailed is set after a failed write, so a broken state
	// directory logs once per failure streak, not per new application.
	saveFailed bool
}

// stateFile is the state file's format.
type stateFile struct {
	Version      int               `json:"version"`
	Applications map[string]uint32 `json:"applications"`
}

const stateVersion = 1

// maxStateBytes bounds the state file read at start-up: a file of the
// registry's at most 4*MaxSources names and their indexes is far smaller.
const maxStateBytes = 4 << 20

// readStateFile reads the state file: a regular file of at most
// maxStateBytes (a larger or special file is reported as damaged, never
// read to exhaustion or waited on).
func readStateFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err == nil && len(b) > maxStateBytes {
		err = fmt.Errorf("%s: larger than %d bytes", path, maxStateBytes)
	}
	return b, err
}

// newRegistry loads the state file at path ("" = no persistence). A
// missing file is an empty registry; a damaged one is reported, set aside
// as path.damaged and rebuilt: never fatal.
func newRegistry(path string, maxSources int, log *slog.Logger) *registry {
	r := &registry{live: map[string]uint32{}, named: map[string]uint32{}, used: map[uint32]string{}, seen: map[string]uint64{},
		path: path, log: log, maxLive: 4 * max(maxSources, 1)}
	if path == "" {
		return r
	}
	b, err := readStateFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return r
	}
	if err == nil {
		err = r.parse(b)
	}
	if err != nil {
		r.named, r.used = map[string]uint32{}, map[uint32]string{}
		log.Error("application state file damaged: rebuilding it; applications without a service port get new data source indexes",
			"file", path, "err", err)
		if rerr := os.Rename(path, path+".damaged"); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			log.Error("application state file: cannot set the damaged file aside", "file", path, "err", rerr)
		}
		r.save()
		return r
	}
	log.Info("application data source indexes loaded", "file", path, "applications", len(r.named))
	return r
}

// parse reads a state file strictly: right version, valid names, indexes
// in range and unique.
func (r *registry) parse(b []byte) error {
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	if st.Version != stateVersion {
		return fmt.Errorf("version %d, want %d", st.Version, stateVersion)
	}
	for name, idx := range st.Applications {
		if err := checkApp(name, 0); err != nil {
			return fmt.Errorf("application %q: %v", name, err)
		}
		if idx < NamedIndexBase || idx >= namedIndexEnd {
			return fmt.Errorf("application %q: index %d outside %d..%d", name, idx, NamedIndexBase, namedIndexEnd-1)
		}
		if other, dup := r.used[idx]; dup {
			return fmt.Errorf("index %d given to both %q and %q", idx, other, name)
		}
		r.named[name] = idx
		r.used[idx] = name
	}
	return nil
}

// resolve returns the data source index of application name with service
// port port (0 = none), or 0 for an application without a port whose name
// has no index yet: the engine assigns one (assign) when it has a slot
// for a new application.
func (r *registry) resolve(name string, port uint16) uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if port != 0 {
		r.remember(name, uint32(port))
		return uint32(port)
	}
	if idx, ok := r.live[name]; ok {
		return idx
	}
	if idx, ok := r.named[name]; ok {
		r.remember(name, idx)
		r.seen[name] = r.clock()
		return idx
	}
	return 0
}

// assign gives application name (without a port) its index: the one it
// has, else the lowest free one, written to the state file. When all
// 50000 are assigned, the index of the application seen least recently
// (never, since this start, first) that is not running is taken over
// (hsflowd, which numbers applications anew at each start, never runs
// out; here a sender cycling through names cannot lock others out for
// good).
func (r *registry) assign(name string) (uint32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if idx, ok := r.named[name]; ok {
		r.remember(name, idx)
		return idx, nil
	}
	idx, ok := uint32(0), false
	for i := uint32(NamedIndexBase); i < namedIndexEnd; i++ {
		if _, taken := r.used[i]; !taken {
			idx, ok = i, true
			break
		}
	}
	if !ok {
		running := map[uint32]bool{}
		for _, i := range r.live {
			running[i] = true
		}
		var oldest string
		for n, i := range r.named {
			if running[i] {
				continue
			}
			if !ok || r.seen[n] < r.seen[oldest] || r.seen[n] == r.seen[oldest] && n < oldest {
				oldest, idx, ok = n, i, true
			}
		}
		if !ok {
			return 0, reject(ReasonTooManySources, "application %q: every data source index for applications without a service port is in use", name)
		}
		delete(r.named, oldest)
		delete(r.seen, oldest)
		r.log.Warn("application data source index taken over from the application seen least recently",
			"index", idx, "from", oldest, "to", name)
	}
	r.named[name] = idx
	r.used[idx] = name
	r.seen[name] = r.clock()
	r.save()
	r.remember(name, idx)
	return idx, nil
}

func (r *registry) remember(name string, idx uint32) {
	if old, ok := r.live[name]; ok && old == idx {
		return
	}
	if len(r.live) < r.maxLive {
		r.live[name] = idx
	}
}

func (r *registry) clock() uint64 {
	r.tick++
	return r.tick
}

// forget drops the running applications on data source idx (it timed
// out or its slot was reclaimed).
func (r *registry) forget(idx uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, i := range r.live {
		if i == idx {
			delete(r.live, name)
		}
	}
}

// save writes the assignments atomically: a temporary file in the same
// directory, synced, renamed over the state file, and the directory
// synced. A failure is logged (once per streak) and the assignments stay
// in memory.
func (r *registry) save() {
	if r.path == "" {
		return
	}
	err := r.write()
	if err != nil && !r.saveFailed {
		r.log.Error("application state file not written: data source indexes of applications without a service port may change at restart",
			"file", r.path, "err", err)
	}
	if err == nil && r.saveFailed {
		r.log.Info("application state file written again", "file", r.path)
	}
	r.saveFailed = err != nil
}

func (r *registry) write() error {
	st := stateFile{Version: stateVersion, Applications: r.named}
	b, err := json.MarshalIndent(&st, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	dir := filepath.Dir(r.path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(r.path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: ENOENT, ignored
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Chmod(tmp.Name(), 0o640); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), r.path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// Assignments returns the persistent name -> index assignments, sorted by
// index (for tests and diagnostics).
func (e *Engine) Assignments() []NamedSource {
	r := e.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]NamedSource, 0, len(r.named))
	for n, i := range r.named {
		out = append(out, NamedSource{AppName: n, Index: i})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Index < out[b].Index })
	return out
}

// NamedSource is an application without a service port and the data
// source index assigned to it.
type NamedSource struct {
	AppName string
	Index   uint32
}
