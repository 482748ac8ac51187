package app

import (
	"bytes"
	"container/list"
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
	"time"
	"unicode/utf8"

	"github.com/sflowswitchd/sflowswitchd/internal/ratelog"
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
	// recency orders the named applications by when they were last
	// seen, least recently first (also across restarts: the state file
	// keeps the order), to pick which index to take over when maxNamed
	// are assigned; elems are its elements by name.
	recency *list.List
	elems   map[string]*list.Element
	// nextFree is where the search for a free index starts.
	nextFree uint32
	// saveFailed is set after a failed write, so a broken state
	// directory logs once per failure streak, not per new application.
	saveFailed bool
	// dirty: an assignment changed since the last write (written within
	// a second, by flush); reordered: only when names were last seen
	// (written within stateReorderWrite).
	dirty, reordered bool
	lastWrite        time.Time
	writes           uint64 // files written (tests)
	// takeovers logs indexes taken over, at most once a second: a sender
	// cycling through names would otherwise log a line per name.
	takeovers *ratelog.Limiter
}

// stateFile is the state file's format.
type stateFile struct {
	Version      int               `json:"version"`
	Applications map[string]uint32 `json:"applications"`
}

const stateVersion = 1

// maxStateBytes bounds the state file read at start-up.
const maxStateBytes = 4 << 20

// maxNamed bounds the names kept (and written): beyond it, a new name
// takes over the index of the one seen least recently that is not
// running (any local process can create names, and
// the file grew past maxStateBytes, after which the next start found it
// damaged and every index was lost). A name is at most 32 bytes, 192 in
// JSON (control characters escaped as \u00XX); an entry at most about
// 210 bytes, so a full file is at most about 1.7 MB: always read back.
const maxNamed = 8192

// stateReorderWrite is how often a change of recency alone (which names
// were seen last: the eviction order) is written.
const stateReorderWrite = time.Minute

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
	r := &registry{live: map[string]uint32{}, named: map[string]uint32{}, used: map[uint32]string{},
		recency: list.New(), elems: map[string]*list.Element{}, nextFree: NamedIndexBase,
		path: path, log: log, maxLive: 4 * max(maxSources, 1),
		takeovers: ratelog.New(log, slog.LevelWarn, "application data source index taken over from the application seen least recently", time.Second)}
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
		r.named, r.used, r.elems = map[string]uint32{}, map[uint32]string{}, map[string]*list.Element{}
		r.recency.Init()
		log.Error("application state file damaged: rebuilding it; applications without a service port get new data source indexes",
			"file", path, "err", err)
		if rerr := os.Rename(path, path+".damaged"); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			log.Error("application state file: cannot set the damaged file aside", "file", path, "err", rerr)
		}
		r.dirty = true
		r.flush(true)
		return r
	}
	log.Info("application data source indexes loaded", "file", path, "applications", len(r.named))
	return r
}

// parse reads a state file strictly: right version, valid names, indexes
// in range and unique, at most maxNamed of them. The applications are in
// the order they were last seen, least recently first (write): that order
// is their recency at start.
func (r *registry) parse(b []byte) error {
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	if st.Version != stateVersion {
		return fmt.Errorf("version %d, want %d", st.Version, stateVersion)
	}
	if len(st.Applications) > maxNamed {
		return fmt.Errorf("%d applications, at most %d", len(st.Applications), maxNamed)
	}
	order, err := applicationOrder(b)
	if err != nil {
		return err
	}
	for _, name := range order {
		idx, ok := st.Applications[name]
		if !ok {
			continue
		}
		if _, dup := r.named[name]; dup {
			return fmt.Errorf("application %q given twice", name)
		}
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
		r.elems[name] = r.recency.PushBack(name)
	}
	return nil
}

// applicationOrder returns the names of the "applications" object of a
// state file in file order (a JSON object has none for encoding/json).
func applicationOrder(b []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, err
		}
		if key != "applications" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, err
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return nil, fmt.Errorf("applications: not a JSON object: %v", err)
		}
		var names []string
		for dec.More() {
			name, err := dec.Token()
			if err != nil {
				return nil, err
			}
			n, ok := name.(string)
			if !ok {
				return nil, fmt.Errorf("applications: key %v", name)
			}
			var idx json.RawMessage
			if err := dec.Decode(&idx); err != nil {
				return nil, err
			}
			names = append(names, n)
		}
		return names, nil
	}
	return nil, nil
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
		r.touch(name)
		return idx
	}
	if idx, ok := r.named[name]; ok {
		r.remember(name, idx)
		r.touch(name)
		return idx
	}
	return 0
}

// touch makes named application name the most recently seen (under mu).
func (r *registry) touch(name string) {
	if e := r.elems[name]; e != nil && e != r.recency.Back() {
		r.recency.MoveToBack(e)
		r.reordered = true
	}
}

// assign gives application name (without a port) its index: the one it
// has, else the lowest free one, written to the state file within a
// second (flush). When maxNamed names (or all 50000 indexes) are
// assigned, the index of the application seen least recently (across
// restarts: the file keeps the order) that is not running is taken over
// (hsflowd, which numbers applications anew at each start, never runs
// out; here a sender cycling through names cannot lock others out for
// good, nor grow the file).
func (r *registry) assign(name string) (uint32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if idx, ok := r.named[name]; ok {
		r.remember(name, idx)
		return idx, nil
	}
	idx, ok := uint32(0), false
	if len(r.named) < maxNamed {
		idx, ok = r.freeIndex()
	}
	if !ok {
		running := make(map[uint32]bool, len(r.live))
		for _, i := range r.live {
			running[i] = true
		}
		// Least recently seen first; running ones (at most maxLive) are
		// skipped.
		var oldest *list.Element
		for e := r.recency.Front(); e != nil; e = e.Next() {
			if !running[r.named[e.Value.(string)]] {
				oldest = e
				break
			}
		}
		if oldest == nil {
			return 0, reject(ReasonTooManySources, "application %q: every data source index for applications without a service port is in use", name)
		}
		from := r.recency.Remove(oldest).(string)
		idx = r.named[from]
		delete(r.named, from)
		delete(r.elems, from)
		r.takeovers.Log("index", idx, "from", from, "to", name)
	}
	r.named[name] = idx
	r.used[idx] = name
	r.elems[name] = r.recency.PushBack(name)
	r.dirty = true
	r.remember(name, idx)
	return idx, nil
}

// freeIndex returns the lowest free index from nextFree on, wrapping
// once (under mu): indexes are freed only by a take-over, which reuses
// the index at once, so the search rarely looks at more than one.
func (r *registry) freeIndex() (uint32, bool) {
	const n = namedIndexEnd - NamedIndexBase
	for k := uint32(0); k < n; k++ {
		i := NamedIndexBase + (r.nextFree-NamedIndexBase+k)%n
		if _, taken := r.used[i]; !taken {
			r.nextFree = i + 1
			if r.nextFree == namedIndexEnd {
				r.nextFree = NamedIndexBase
			}
			return i, true
		}
	}
	return 0, false
}

func (r *registry) remember(name string, idx uint32) {
	if old, ok := r.live[name]; ok && old == idx {
		return
	}
	if len(r.live) < r.maxLive {
		r.live[name] = idx
	}
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

// flush writes the assignments if they changed (or, every
// stateReorderWrite, if only their recency did; final: at once), so that
// a burst of new names costs one write a second, not one write and fsync
// each. The engine calls it at every flush tick and when it stops; a
// crash loses at most the last second's new names. A failure is logged
// (once per streak) and the assignments stay in memory.
func (r *registry) flush(final bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.path == "" || !r.dirty && (!r.reordered || !final && time.Since(r.lastWrite) < stateReorderWrite) {
		return
	}
	err := r.write()
	r.lastWrite = time.Now()
	r.writes++
	if err != nil && !r.saveFailed {
		r.log.Error("application state file not written: data source indexes of applications without a service port may change at restart",
			"file", r.path, "err", err)
	}
	if err == nil && r.saveFailed {
		r.log.Info("application state file written again", "file", r.path)
	}
	r.saveFailed = err != nil
	r.dirty = err != nil
	r.reordered = false
}

// encodeState is the state file: stateFile's format, the applications in
// the order they were last seen (least recently first), names that are
// not valid UTF-8 left out (JSON would change them; they keep their index
// while the daemon runs). Names are written as they are: no HTML escaping
// ("<" is not \u003c).
func (r *registry) encodeState() ([]byte, error) {
	names := make([]string, 0, len(r.named))
	for e := r.recency.Front(); e != nil; e = e.Next() {
		if n := e.Value.(string); utf8.ValidString(n) {
			names = append(names, n)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	fmt.Fprintf(&buf, "{\n  \"version\": %d,\n  \"applications\": {", stateVersion)
	for i, n := range names {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString("\n    ")
		if err := enc.Encode(n); err != nil {
			return nil, err
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
		fmt.Fprintf(&buf, ": %d", r.named[n])
	}
	if len(names) > 0 {
		buf.WriteString("\n  ")
	}
	buf.WriteString("}\n}\n")
	return buf.Bytes(), nil
}

// write writes the assignments atomically (under mu): a temporary file in
// the same directory, synced, renamed over the state file, and the
// directory synced.
func (r *registry) write() error {
	b, err := r.encodeState()
	if err != nil {
		return err
	}
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
