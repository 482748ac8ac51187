// Package pin is the pin directory of the sampler's state: its lock, the
// meta map that says what the state is, the layout fingerprint and sizes
// an adopting process must share, the names of its entries, and the
// shared maps pinned or adopted there. Package dataplane decides what is
// adopted and attaches the ports (Open, Release and Cleanup).
//
// Pinning: the sampler outlives its process. With Config.PinDir set, every
// map the sampler's programs share and every port's BPF link are pinned in
// a directory of a BPF file system (bpffs) of the daemon's own, so that
// after a SIGKILL, a crash or an exec (an upgrade in place) the samplers
// stay attached and keep counting into the same counters and rings. The
// next Open in that directory adopts them: it loads its own programs (the
// new code), puts them in place of the old ones atomically (the sampled
// path through the pinned program array, each port's program through its
// pinned link, or the clsact filter's replace), maps the same counters and
// rings (whose consumer position is in the ring itself) and carries on.
// Nothing is re-attached: no frame goes uncounted.
//
// The directory holds
//
//	meta            what the state is: its layout fingerprint, the sizes
//	                the maps were made with, the clsact owner id
//	map_<name>      the shared maps of dataplane/bpf/sampler.h (map_take_progs and
//	                map_tc_take_progs: the program arrays of the sampled
//	                paths), map_ports (ifindex -> slot, hook, attach mode),
//	                map_agent_state (the agent's state memory: sequence
//	                numbers, uptime, pool bases; StateMemory),
//	                map_tc_out_counters (the egress samplers' counters,
//	                read by the program that takes over; egress ports'
//	                directions are in map_ports)
//	ring_<worker>   each worker's ring buffer
//	link_<ifindex>  each port's XDP or TCX link (clsact filters are found
//	                by their handle and owner id, dataplane/clsact)
//	drops/          the drop notification program's pins, a folder per
//	                build (dataplane/drops Config.PinDir)
//
// State made by another layout (another program version whose maps mean
// something else, or other sizes: workers, ring_bytes, max_ports) is never
// read: Open detects it (the fingerprint and sizes in meta), logs what
// differs, detaches and unpins it, and starts afresh. Exactly one process
// uses a directory at a time: Open takes an exclusive flock(2) on it
// (refused while another process holds it), which a Handover passes
// across exec. Close (a clean stop) detaches and unpins everything and
// removes the directory; Release (before an exec) leaves it all in place
// for the next process; Cleanup removes what a crashed process left when
// no daemon will start again.
package pin

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
)

// bpffsMagic is BPF_FS_MAGIC, statfs(2)'s f_type of a BPF file system.
const bpffsMagic = 0xcafe4a11

// OwnerBytes is the length of a clsact owner id (16 hex digits in a
// filter's name).
const OwnerBytes = 8

// Names in the pin directory.
const (
	MetaName   = "meta"
	MapPrefix  = "map_"
	RingPrefix = "ring_"
	LinkPrefix = "link_"
	PortsMap   = "ports"
	StateMap   = "agent_state"
	TCTake     = "tc_take_progs"
	// EgressCounters is the egress samplers' counters (package
	// dataplane/egress, pin.go): kept when they end, read by the program
	// that takes over.
	EgressCounters = "tc_out_counters"
)

// layoutVersion is part of the layout fingerprint: bump it when a pinned
// map's meaning changes while its BTF stays the same (a field's unit, the
// meaning of sample_meta.pool).
const layoutVersion = 1

// MetaMagic and MetaFormat identify the meta map's value. The owner id
// stays at offset 16 in every format, so that any later format can still
// find the clsact filters of a state it cannot otherwise read.
var MetaMagic = [8]byte{'s', 'f', 'l', 'w', 'p', 'i', 'n', 0}

const MetaFormat = 1

// Meta is the meta map's only value (little-endian).
type Meta struct {
	Magic  [8]byte
	Format uint32
	_      uint32
	Owner  [OwnerBytes]byte // the clsact owner id (offset 16)
	Layout [32]byte         // LayoutFingerprint
	Sizes  Sizes
	// Created is when the state was made (Unix seconds): for log lines.
	Created int64
}

// Sizes are the sizes the pinned maps were made with; adopting needs
// the same.
type Sizes struct {
	CPUSlots  uint32
	Workers   uint32
	RingBytes uint32
	MaxPorts  uint32
	MaxQueues uint32
	// PoolMode is what sample_meta.pool holds (poolMode).
	PoolMode uint32
	// Transit is Config.TransitEntries (transit_pending's size; 0 off).
	Transit uint32
}

// Differs names the sizes of o that are not those of s.
func (s Sizes) Differs(o Sizes) string {
	var d []string
	add := func(name string, a, b uint32) {
		if a != b {
			d = append(d, fmt.Sprintf("%s %d -> %d", name, b, a))
		}
	}
	add("possible CPUs", s.CPUSlots, o.CPUSlots)
	add("workers", s.Workers, o.Workers)
	add("ring bytes", s.RingBytes, o.RingBytes)
	add("max ports", s.MaxPorts, o.MaxPorts)
	add("max queues", s.MaxQueues, o.MaxQueues)
	add("pool mode", s.PoolMode, o.PoolMode)
	add("transit entries", s.Transit, o.Transit)
	return strings.Join(d, ", ")
}

// PortValue is map_ports' value: how a port is attached.
type PortValue struct {
	Slot     uint32
	Attach   uint8 // attachCode; 0: not sampled at ingress (egress only)
	OwnQdisc uint8 // clsact: the owner created the qdisc
	// Dirs are the directions the port is sampled in (dataplane.Direction;
	// 0, as states written before it: ingress).
	Dirs uint8
	_    uint8
}

// State is an open pin directory.
type State struct {
	Dir  string
	Lock *os.File // the directory, flock'ed
	Meta Meta
	// Adopt is set when the directory holds state this Open adopts.
	Adopt bool
	// Replaced is why the state found there was replaced instead:
	// "layout", "sizes", "unreadable", "damaged" ("" for none).
	Replaced string
	// Ports is map_ports (made or adopted by package dataplane).
	Ports *ebpf.Map
}

// Handover returns what is passed across an exec: the lock's descriptor
// and ownerFD, the clsact owner's socket.
func (p *State) Handover(ownerFD int) *Handover {
	return &Handover{LockFD: int(p.Lock.Fd()), OwnerFD: ownerFD, lock: p.Lock}
}

// Handover is what a Dataplane passes to the next program across an exec
// (Release; Config.Handover): the descriptors, kept open over the exec,
// of the pin directory's lock and of the clsact owner's socket, so that
// neither is free for a moment.
type Handover struct {
	LockFD  int
	OwnerFD int
	// lock keeps the lock's *os.File referenced until the exec (its
	// finalizer would close the descriptor).
	lock *os.File
}

// CheckDir reports whether dir can be a pin directory: on a BPF file
// system (its parent, when it does not exist yet), not its root, holding
// nothing but what the daemon makes (guard.go).
func CheckDir(dir string) error {
	p := dir
	for {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			if st.Type != bpffsMagic {
				return fmt.Errorf("%s is not on a BPF file system (mount -t bpf bpf %s)", dir, p)
			}
			return checkEntries(dir)
		}
		if !errors.Is(err, unix.ENOENT) || p == "/" {
			return fmt.Errorf("pin directory %s: %w", dir, err)
		}
		p = filepath.Dir(p)
	}
}

// Lock creates dir if needed and takes its exclusive lock.
func Lock(dir string, h *Handover) (*os.File, error) {
	if h != nil && h.LockFD >= 0 {
		f := h.lock // a Handover of this process (tests): its *os.File owns the descriptor
		if f == nil {
			f = os.NewFile(uintptr(h.LockFD), dir)
		}
		unix.CloseOnExec(h.LockFD)
		// The lock came with the descriptor; taking it again is a no-op
		// for its holder, and proves the descriptor is that directory's.
		if err := unix.Flock(h.LockFD, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			return nil, fmt.Errorf("pin directory %s: the handed-over lock: %w", dir, err)
		}
		return f, nil
	}
	if err := CheckDir(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the pin directory: %w", err)
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the pin directory: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("pin directory %s is in use by another running sflowswitchd (each daemon needs a pin directory of its own)", dir)
		}
		return nil, fmt.Errorf("locking the pin directory %s: %w", dir, err)
	}
	return f, nil
}

// MetaSpec is the meta map: one value.
func MetaSpec() *ebpf.MapSpec {
	return &ebpf.MapSpec{Name: "sflow_meta", Type: ebpf.Array, KeySize: 4,
		ValueSize: uint32(binary.Size(Meta{})), MaxEntries: 1}
}

// PortsSpec is map_ports.
func PortsSpec(maxPorts int) *ebpf.MapSpec {
	return &ebpf.MapSpec{Name: "sflow_ports", Type: ebpf.Hash, KeySize: 4,
		ValueSize: uint32(binary.Size(PortValue{})), MaxEntries: uint32(maxPorts)}
}

// StateSpec is map_agent_state: words 64-bit words, mmap-able.
func StateSpec(words int) *ebpf.MapSpec {
	return &ebpf.MapSpec{Name: "sflow_state", Type: ebpf.Array, KeySize: 4,
		ValueSize: 8, MaxEntries: uint32(words), Flags: unix.BPF_F_MMAPABLE}
}

// ReadMeta returns the meta value pinned in dir; ok is false when there is
// none, or it is not ours.
func ReadMeta(dir string) (v Meta, ok bool, err error) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, MetaName), nil)
	if errors.Is(err, os.ErrNotExist) {
		return v, false, nil
	}
	if err != nil {
		return v, false, fmt.Errorf("reading %s: %w", MetaName, err)
	}
	defer m.Close()
	b := make([]byte, m.ValueSize())
	if err := m.Lookup(uint32(0), b); err != nil {
		return v, false, fmt.Errorf("reading %s: %w", MetaName, err)
	}
	if len(b) < 24 || [8]byte(b[:8]) != MetaMagic {
		return v, false, nil
	}
	copy(v.Owner[:], b[16:24])
	if binary.LittleEndian.Uint32(b[8:]) != MetaFormat || len(b) != binary.Size(v) {
		v.Format = binary.LittleEndian.Uint32(b[8:])
		return v, true, nil
	}
	if _, err := binary.Decode(b, binary.LittleEndian, &v); err != nil {
		return v, false, fmt.Errorf("decoding %s: %w", MetaName, err)
	}
	return v, true, nil
}

// WriteMeta pins v as dir's meta map (replacing one there).
func WriteMeta(dir string, v Meta) error {
	m, err := ebpf.NewMap(MetaSpec())
	if err != nil {
		return fmt.Errorf("creating %s: %w", MetaName, err)
	}
	defer m.Close()
	b, err := binary.Append(nil, binary.LittleEndian, v)
	if err != nil {
		return err
	}
	if err := m.Put(uint32(0), b); err != nil {
		return fmt.Errorf("writing %s: %w", MetaName, err)
	}
	path := filepath.Join(dir, MetaName)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("replacing %s: %w", MetaName, err)
	}
	if err := m.Pin(path); err != nil {
		return fmt.Errorf("pinning %s: %w", MetaName, err)
	}
	return nil
}

// OwnerID is the owner id of v as its text form ("" when none).
func (v Meta) OwnerID() string {
	if v.Owner == [OwnerBytes]byte{} {
		return ""
	}
	return hex.EncodeToString(v.Owner[:])
}

// LayoutFingerprint hashes what the programs of this binary and the
// pinned maps must agree on: each shared map's type, key and value sizes
// and flags, the layout of the structs in them and of the ring record
// (field names, offsets and sizes from the objects' BTF), and
// layoutVersion.
func LayoutFingerprint(xdp, tc *ebpf.CollectionSpec) ([32]byte, error) {
	h := sha256.New()
	fmt.Fprintf(h, "layout %d\n", layoutVersion)
	for _, cs := range []*ebpf.CollectionSpec{xdp, tc} {
		names := make([]string, 0, len(cs.Maps))
		for n := range cs.Maps {
			if !strings.HasPrefix(n, ".") { // .rodata: the loader's constants
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			m := cs.Maps[n]
			fmt.Fprintf(h, "map %s %v %d %d %#x %s\n", n, m.Type, m.KeySize, m.ValueSize, m.Flags, describeType(m.Value))
		}
	}
	for _, name := range []string{"sample_meta", "sample_hand"} {
		var s *btf.Struct
		if err := xdp.Types.TypeByName(name, &s); err != nil {
			return [32]byte{}, fmt.Errorf("layout fingerprint: %s: %w", name, err)
		}
		fmt.Fprintf(h, "type %s\n", describeType(s))
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// describeType is a struct's members (name, bit offset, size), or the
// type's size.
func describeType(t btf.Type) string {
	if t == nil {
		return "-"
	}
	s, ok := btf.UnderlyingType(t).(*btf.Struct)
	if !ok {
		n, _ := btf.Sizeof(t)
		return strconv.Itoa(n)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s{", s.Name)
	for _, m := range s.Members {
		n, _ := btf.Sizeof(m.Type)
		fmt.Fprintf(&b, "%s@%d:%d;", m.Name, m.Offset, n)
	}
	b.WriteString("}")
	return b.String()
}

// Names lists dir.
func Names(dir string) []string {
	es, _ := os.ReadDir(dir)
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// Path is the path of name in the pin directory.
func (p *State) Path(name string) string { return filepath.Join(p.Dir, name) }

// LinkPath is the pin of ifindex's link.
func (p *State) LinkPath(ifindex int) string {
	return p.Path(LinkPrefix + strconv.Itoa(ifindex))
}

// pinnedMaps are the sampler's maps that live in the pin directory, by
// the object's map name.
var pinnedMaps = []string{
	bpf.SamplerMapCounters, bpf.SamplerMapPortConfigs, bpf.SamplerMapPortConfigsHigh,
	bpf.SamplerMapRings, bpf.SamplerMapXsks, bpf.SamplerMapSampleHands, bpf.SamplerMapTakeProgs,
}

// AdoptMaps loads the pinned maps for LoadAndAssign's MapReplacements.
func (p *State) AdoptMaps() (map[string]*ebpf.Map, error) {
	out := map[string]*ebpf.Map{}
	for _, n := range pinnedMaps {
		m, err := ebpf.LoadPinnedMap(p.Path(MapPrefix+n), nil)
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, fmt.Errorf("adopting pinned map %s: %w", n, err)
		}
		out[n] = m
	}
	return out, nil
}

// PinMaps pins the freshly loaded maps of objs.
func (p *State) PinMaps(objs *bpf.SamplerObjects) error {
	byName := map[string]*ebpf.Map{
		bpf.SamplerMapCounters: objs.Counters, bpf.SamplerMapPortConfigs: objs.PortConfigs,
		bpf.SamplerMapPortConfigsHigh: objs.PortConfigsHigh, bpf.SamplerMapRings: objs.Rings,
		bpf.SamplerMapXsks: objs.Xsks, bpf.SamplerMapSampleHands: objs.SampleHands,
		bpf.SamplerMapTakeProgs: objs.TakeProgs,
	}
	for _, n := range pinnedMaps {
		if err := byName[n].Pin(p.Path(MapPrefix + n)); err != nil {
			return fmt.Errorf("pinning map %s: %w", n, err)
		}
	}
	return nil
}

// DropsDir is the folder of the drop notification program's pins
// (dataplane/drops Config.PinDir).
const DropsDir = "drops"

// UnpinAll removes the pin directory after Close detached the ports.
func (p *State) UnpinAll() error {
	var errs []error
	for _, name := range Names(p.Dir) {
		if !OwnName(name) {
			continue // not the daemon's: left, and so is the directory
		}
		rm := os.Remove
		if name == DropsDir {
			rm = os.RemoveAll // a folder (normally gone with the drop program)
		}
		if err := rm(p.Path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unpinning %s: %w", name, err))
		}
	}
	if err := os.Remove(p.Dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("removing the pin directory: %w", err))
	}
	return errors.Join(errs...)
}

// Map returns the map pinned as map_<name>, or makes it from spec and
// pins it. Without a pin directory (p nil) it only makes it.
func (p *State) Map(name string, spec *ebpf.MapSpec) (*ebpf.Map, error) {
	if p == nil {
		return ebpf.NewMap(spec)
	}
	path := p.Path(MapPrefix + name)
	if p.Adopt {
		m, err := ebpf.LoadPinnedMap(path, nil)
		if err == nil {
			return m, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("adopting pinned map %s: %w", name, err)
		}
	}
	m, err := ebpf.NewMap(spec)
	if err != nil {
		return nil, err
	}
	if err := m.Pin(path); err != nil {
		return nil, errors.Join(fmt.Errorf("pinning map %s: %w", name, err), m.Close())
	}
	return m, nil
}

// Ring returns worker w's ring: adopted, or made from spec (and pinned;
// p nil: only made).
func (p *State) Ring(w int, spec *ebpf.MapSpec) (*ebpf.Map, error) {
	if p == nil {
		return ebpf.NewMap(spec)
	}
	path := p.Path(RingPrefix + strconv.Itoa(w))
	if p.Adopt {
		return ebpf.LoadPinnedMap(path, nil)
	}
	m, err := ebpf.NewMap(spec)
	if err != nil {
		return nil, err
	}
	if err := m.Pin(path); err != nil {
		return nil, errors.Join(fmt.Errorf("pinning ring %d: %w", w, err), m.Close())
	}
	return m, nil
}
