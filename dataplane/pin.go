package dataplane

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
//	map_<name>      the shared maps of bpf/sampler.h (map_take_progs and
//	                map_tc_take_progs: the program arrays of the sampled
//	                paths), map_ports (ifindex -> slot, hook, attach mode),
//	                map_agent_state (the agent's state memory: sequence
//	                numbers, uptime, pool bases; StateMemory)
//	ring_<worker>   each worker's ring buffer
//	link_<ifindex>  each port's XDP or TCX link (clsact filters are found
//	                by their handle and owner id, clsact.go)
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

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/bpf"
)

// bpffsMagic is BPF_FS_MAGIC, statfs(2)'s f_type of a BPF file system.
const bpffsMagic = 0xcafe4a11

// Names in the pin directory.
const (
	pinMeta       = "meta"
	pinMapPrefix  = "map_"
	pinRingPrefix = "ring_"
	pinLinkPrefix = "link_"
	pinPortsMap   = "ports"
	pinStateMap   = "agent_state"
	pinTCTake     = "tc_take_progs"
)

// layoutVersion is part of the layout fingerprint: bump it when a pinned
// map's meaning changes while its BTF stays the same (a field's unit, the
// meaning of sample_meta.pool).
const layoutVersion = 1

// metaMagic and metaFormat identify the meta map's value. The owner id
// stays at offset 16 in every format, so that any later format can still
// find the clsact filters of a state it cannot otherwise read.
var metaMagic = [8]byte{'s', 'f', 'l', 'w', 'p', 'i', 'n', 0}

const metaFormat = 1

// pinMetaValue is the meta map's only value (little-endian).
type pinMetaValue struct {
	Magic  [8]byte
	Format uint32
	_      uint32
	Owner  [ownerIDLen / 2]byte // the clsact owner id (offset 16)
	Layout [32]byte             // layoutFingerprint
	Sizes  pinSizes
	// Created is when the state was made (Unix seconds): for log lines.
	Created int64
}

// pinSizes are the sizes the pinned maps were made with; adopting needs
// the same.
type pinSizes struct {
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

// differs names the sizes of o that are not those of s.
func (s pinSizes) differs(o pinSizes) string {
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

// pinPortValue is map_ports' value: how a port is attached.
type pinPortValue struct {
	Slot     uint32
	Attach   uint8 // attachCode
	OwnQdisc uint8 // clsact: the owner created the qdisc
	_        [2]uint8
}

// Attach modes as stored in map_ports.
var attachCodes = []string{1: AttachNative, 2: AttachGeneric, 3: AttachTCX, 4: AttachClsact}

func attachCode(mode string) uint8 {
	for i, m := range attachCodes {
		if m != "" && m == mode {
			return uint8(i)
		}
	}
	return 0
}

// pinState is an open pin directory.
type pinState struct {
	dir  string
	lock *os.File // the directory, flock'ed
	meta pinMetaValue
	// adopt is set when the directory holds state this Open adopts.
	adopt bool
	// replaced is why the state found was replaced (PinReplaced).
	replaced string
	ports    *ebpf.Map
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

// CheckPinDir reports whether dir can be a pin directory: on a BPF file
// system (its parent, when it does not exist yet), not its root, holding
// nothing but what the daemon makes (pinguard.go).
func CheckPinDir(dir string) error {
	p := dir
	for {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			if st.Type != bpffsMagic {
				return fmt.Errorf("%s is not on a BPF file system (mount -t bpf bpf %s)", dir, p)
			}
			return checkPinEntries(dir)
		}
		if !errors.Is(err, unix.ENOENT) || p == "/" {
			return fmt.Errorf("pin directory %s: %w", dir, err)
		}
		p = filepath.Dir(p)
	}
}

// lockPinDir creates dir if needed and takes its exclusive lock.
func lockPinDir(dir string, h *Handover) (*os.File, error) {
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
	if err := CheckPinDir(dir); err != nil {
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

// metaSpec is the meta map: one value.
func metaSpec() *ebpf.MapSpec {
	return &ebpf.MapSpec{Name: "sflow_meta", Type: ebpf.Array, KeySize: 4,
		ValueSize: uint32(binary.Size(pinMetaValue{})), MaxEntries: 1}
}

// portsSpec is map_ports.
func portsSpec(maxPorts int) *ebpf.MapSpec {
	return &ebpf.MapSpec{Name: "sflow_ports", Type: ebpf.Hash, KeySize: 4,
		ValueSize: uint32(binary.Size(pinPortValue{})), MaxEntries: uint32(maxPorts)}
}

// stateSpec is map_agent_state: words 64-bit words, mmap-able.
func stateSpec(words int) *ebpf.MapSpec {
	return &ebpf.MapSpec{Name: "sflow_state", Type: ebpf.Array, KeySize: 4,
		ValueSize: 8, MaxEntries: uint32(words), Flags: unix.BPF_F_MMAPABLE}
}

// readMeta returns the meta value pinned in dir; ok is false when there is
// none, or it is not ours.
func readMeta(dir string) (v pinMetaValue, ok bool, err error) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, pinMeta), nil)
	if errors.Is(err, os.ErrNotExist) {
		return v, false, nil
	}
	if err != nil {
		return v, false, fmt.Errorf("reading %s: %w", pinMeta, err)
	}
	defer m.Close()
	b := make([]byte, m.ValueSize())
	if err := m.Lookup(uint32(0), b); err != nil {
		return v, false, fmt.Errorf("reading %s: %w", pinMeta, err)
	}
	if len(b) < 24 || [8]byte(b[:8]) != metaMagic {
		return v, false, nil
	}
	copy(v.Owner[:], b[16:24])
	if binary.LittleEndian.Uint32(b[8:]) != metaFormat || len(b) != binary.Size(v) {
		v.Format = binary.LittleEndian.Uint32(b[8:])
		return v, true, nil
	}
	if _, err := binary.Decode(b, binary.LittleEndian, &v); err != nil {
		return v, false, fmt.Errorf("decoding %s: %w", pinMeta, err)
	}
	return v, true, nil
}

// writeMeta pins v as dir's meta map (replacing one there).
func writeMeta(dir string, v pinMetaValue) error {
	m, err := ebpf.NewMap(metaSpec())
	if err != nil {
		return fmt.Errorf("creating %s: %w", pinMeta, err)
	}
	defer m.Close()
	b, err := binary.Append(nil, binary.LittleEndian, v)
	if err != nil {
		return err
	}
	if err := m.Put(uint32(0), b); err != nil {
		return fmt.Errorf("writing %s: %w", pinMeta, err)
	}
	path := filepath.Join(dir, pinMeta)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("replacing %s: %w", pinMeta, err)
	}
	if err := m.Pin(path); err != nil {
		return fmt.Errorf("pinning %s: %w", pinMeta, err)
	}
	return nil
}

// ownerID is the owner id of v as its text form ("" when none).
func (v pinMetaValue) ownerID() string {
	if v.Owner == [ownerIDLen / 2]byte{} {
		return ""
	}
	return hex.EncodeToString(v.Owner[:])
}

// layoutFingerprint hashes what the programs of this binary and the
// pinned maps must agree on: each shared map's type, key and value sizes
// and flags, the layout of the structs in them and of the ring record
// (field names, offsets and sizes from the objects' BTF), and
// layoutVersion.
func layoutFingerprint(xdp, tc *ebpf.CollectionSpec) ([32]byte, error) {
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

// openPins locks the pin directory and decides whether its state is
// adopted (same layout and sizes) or replaced (anything else there is
// detached and unpinned, with a log line saying why). Runs in the
// Dataplane's namespace (clsact filters of replaced state).
func (d *Dataplane) openPins(layout [32]byte, sizes pinSizes, spec *ebpf.CollectionSpec) error {
	dir := d.cfg.PinDir
	lock, err := lockPinDir(dir, d.cfg.Handover)
	if err != nil {
		return err
	}
	p := &pinState{dir: dir, lock: lock}
	d.pin = p
	old, ok, err := readMeta(dir)
	if err != nil {
		d.log.Warn("pinned sampler state unreadable: replaced", "pin_dir", dir, "err", err)
	}
	p.meta = pinMetaValue{Magic: metaMagic, Format: metaFormat, Layout: layout, Sizes: sizes, Created: time.Now().Unix()}
	switch {
	case !ok && len(pinnedNames(dir)) == 0:
		return nil // a new directory
	case ok && old.Format == metaFormat && old.Layout == layout && old.Sizes == sizes:
		if err := checkAdoptable(dir, &d.cfg, spec); err != nil {
			p.replaced = "damaged"
			d.log.Error("pinned sampler state damaged: detached and replaced, pools and samples start afresh (a gap in the data)",
				"pin_dir", dir, "err", err)
			break
		}
		p.meta = old
		p.adopt = true
		return nil
	case !ok:
		p.replaced = "unreadable"
		d.log.Warn("pin directory holds state without a readable description: replaced", "pin_dir", dir, "entries", len(pinnedNames(dir)))
	case old.Format != metaFormat || old.Layout != layout:
		p.replaced = "layout"
		d.log.Warn("pinned sampler state of another layout (another sflowswitchd version): detached and replaced, pools and samples start afresh",
			"pin_dir", dir, "state_format", old.Format, "state_layout", hex.EncodeToString(old.Layout[:8]), "layout", hex.EncodeToString(layout[:8]))
	default:
		p.replaced = "sizes"
		d.log.Warn("pinned sampler state made with other sizes: detached and replaced, pools and samples start afresh",
			"pin_dir", dir, "differs", sizes.differs(old.Sizes))
	}
	return d.clearPins(old.ownerID())
}

// pinnedNames lists dir.
func pinnedNames(dir string) []string {
	es, _ := os.ReadDir(dir)
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// clearPins detaches and unpins everything in the pin directory: links
// are detached (unpinned, then closed: the last reference), the clsact
// filters of owner (the state's, "" if unknown) are deleted, maps are
// unpinned. Runs in the Dataplane's namespace.
func (d *Dataplane) clearPins(owner string) error {
	return clearPinDir(d.pin.dir, owner, d.log)
}

// clearPinDir is clearPins for any directory (Cleanup). Only the names
// the daemon makes are removed (ownPinName).
func clearPinDir(dir, owner string, log *slog.Logger) error {
	var errs []error
	for _, name := range pinnedNames(dir) {
		path := filepath.Join(dir, name)
		if !ownPinName(name) {
			log.Warn("pin directory entry the daemon does not make: left alone", "pin_dir", dir, "entry", name)
			continue
		}
		if strings.HasPrefix(name, pinLinkPrefix) {
			l, err := link.LoadPinnedLink(path, nil)
			if err == nil {
				errs = append(errs, l.Unpin(), l.Close())
				log.Info("pinned sampler link detached", "pin", name)
				continue
			}
			log.Warn("pinned link unreadable: unpinned", "pin", name, "err", err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unpinning %s: %w", name, err))
		}
	}
	if owner != "" {
		n, err := removeOwnerFilters(owner, log)
		errs = append(errs, err)
		if n > 0 {
			log.Info("TC filters of the pinned state removed", "owner", owner, "filters", n)
		}
	}
	return errors.Join(errs...)
}

// pinPath is the path of name in the pin directory.
func (p *pinState) path(name string) string { return filepath.Join(p.dir, name) }

// linkPath is the pin of ifindex's link.
func (p *pinState) linkPath(ifindex int) string {
	return p.path(pinLinkPrefix + strconv.Itoa(ifindex))
}

// pinnedMaps are the sampler's maps that live in the pin directory, by
// the object's map name.
var pinnedMaps = []string{
	bpf.SamplerMapCounters, bpf.SamplerMapPortConfigs, bpf.SamplerMapPortConfigsHigh,
	bpf.SamplerMapRings, bpf.SamplerMapXsks, bpf.SamplerMapSampleHands, bpf.SamplerMapTakeProgs,
}

// adoptMaps loads the pinned maps for LoadAndAssign's MapReplacements.
func (p *pinState) adoptMaps() (map[string]*ebpf.Map, error) {
	out := map[string]*ebpf.Map{}
	for _, n := range pinnedMaps {
		m, err := ebpf.LoadPinnedMap(p.path(pinMapPrefix+n), nil)
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

// pinMaps pins the freshly loaded maps of objs.
func (p *pinState) pinMaps(objs *bpf.SamplerObjects) error {
	byName := map[string]*ebpf.Map{
		bpf.SamplerMapCounters: objs.Counters, bpf.SamplerMapPortConfigs: objs.PortConfigs,
		bpf.SamplerMapPortConfigsHigh: objs.PortConfigsHigh, bpf.SamplerMapRings: objs.Rings,
		bpf.SamplerMapXsks: objs.Xsks, bpf.SamplerMapSampleHands: objs.SampleHands,
		bpf.SamplerMapTakeProgs: objs.TakeProgs,
	}
	for _, n := range pinnedMaps {
		if err := byName[n].Pin(p.path(pinMapPrefix + n)); err != nil {
			return fmt.Errorf("pinning map %s: %w", n, err)
		}
	}
	return nil
}

// mapPinned returns the map pinned as map_<name>, or makes it from spec and
// pins it. Without a pin directory it only makes it.
func (d *Dataplane) mapPinned(name string, spec *ebpf.MapSpec) (*ebpf.Map, error) {
	if d.pin == nil {
		return ebpf.NewMap(spec)
	}
	path := d.pin.path(pinMapPrefix + name)
	if d.pin.adopt {
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

// ringPinned returns worker w's ring: adopted, or made from spec (and
// pinned).
func (d *Dataplane) ringPinned(w int, spec *ebpf.MapSpec) (*ebpf.Map, error) {
	if d.pin == nil {
		return ebpf.NewMap(spec)
	}
	path := d.pin.path(pinRingPrefix + strconv.Itoa(w))
	if d.pin.adopt {
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

// recordPort writes how ifindex is attached to map_ports (and pins an XDP
// or TCX link). Called with mu held.
func (d *Dataplane) recordPort(ifindex int, p *port) error {
	if d.pin == nil {
		return nil
	}
	if l, ok := p.link.(link.Link); ok && !p.pinned {
		if err := l.Pin(d.pin.linkPath(ifindex)); err != nil {
			return fmt.Errorf("pinning the link: %w", err)
		}
		p.pinned = true
	}
	v := pinPortValue{Slot: p.slot, Attach: attachCode(p.mode)}
	if f, ok := p.link.(*clsactFilter); ok && f.ownQdisc {
		v.OwnQdisc = 1
	}
	if err := d.pin.ports.Put(uint32(ifindex), v); err != nil {
		return fmt.Errorf("recording the pinned port: %w", err)
	}
	return nil
}

// forgetPort unpins ifindex's link and record (before it is detached).
// Called with mu held.
func (d *Dataplane) forgetPort(ifindex int, p *port) error {
	if d.pin == nil {
		return nil
	}
	var errs []error
	if l, ok := p.link.(link.Link); ok && p.pinned {
		if err := l.Unpin(); err != nil {
			errs = append(errs, fmt.Errorf("unpinning the link: %w", err))
		}
		p.pinned = false
	}
	if err := d.pin.ports.Delete(uint32(ifindex)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, fmt.Errorf("forgetting the pinned port: %w", err))
	}
	return errors.Join(errs...)
}

// adoptPorts takes over the ports the pinned state had attached: each
// port's new program goes in place of the old one (link update, filter
// replace); a port that cannot be taken over (its device gone, its filter
// removed) is detached and forgotten, logged. Runs in the Dataplane's
// namespace, before anything else uses the Dataplane.
func (d *Dataplane) adoptPorts() error {
	type entry struct {
		ifindex uint32
		v       pinPortValue
	}
	var (
		es []entry
		k  uint32
		v  pinPortValue
	)
	it := d.pin.ports.Iterate()
	for it.Next(&k, &v) {
		es = append(es, entry{k, v})
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading the pinned ports: %w", err)
	}
	used := map[uint32]bool{}
	d.adopted = map[int]PortConfig{}
	for _, e := range es {
		ifindex := int(e.ifindex)
		p, err := d.adoptPort(ifindex, e.v, used)
		if err != nil {
			d.log.Warn("pinned port not taken over: detached, it is attached afresh if still configured",
				"ifindex", ifindex, "err", err)
			d.dropPinned(ifindex, e.v)
			continue
		}
		used[p.slot] = true
		d.ports[ifindex] = p
		d.adopted[ifindex] = p.cfg
		d.log.Info("sampler taken over", "ifindex", ifindex, "hook", p.hook, "mode", p.mode,
			"rate", p.cfg.Rate, "delivery", p.cfg.Mode.String(), "worker", p.cfg.Worker, "slot", p.slot)
	}
	d.freeSlots = d.freeSlots[:0]
	for s := d.cfg.MaxPorts - 1; s >= 0; s-- {
		if !used[uint32(s)] {
			d.freeSlots = append(d.freeSlots, uint32(s))
		}
	}
	d.publishSlots()
	return nil
}

// adoptPort takes over one pinned port.
func (d *Dataplane) adoptPort(ifindex int, v pinPortValue, used map[uint32]bool) (*port, error) {
	var bc bpf.SamplerPortConfig
	if err := d.configMap(uint32(ifindex)).Lookup(uint32(ifindex), &bc); err != nil {
		return nil, fmt.Errorf("its config: %w", err)
	}
	pc := PortConfig{Rate: bc.SampleMask + 1, Mode: Mode(bc.Mode), HeaderBytes: int(bc.HeaderBytes), Worker: int(bc.Worker),
		Kind: PortKind(bc.Kind)} // a tunnel device stays one: UpdatePort keeps the kind found at attach
	if err := pc.validate(d.cfg.Workers); err != nil {
		return nil, fmt.Errorf("its config: %w", err)
	}
	if bc.Slot != v.Slot || int(v.Slot) >= d.cfg.MaxPorts || used[v.Slot] {
		return nil, fmt.Errorf("counter slot %d (config %d) not valid", v.Slot, bc.Slot)
	}
	if int(v.Attach) >= len(attachCodes) || attachCodes[v.Attach] == "" {
		return nil, fmt.Errorf("unknown attach mode %d", v.Attach)
	}
	p := &port{slot: v.Slot, cfg: pc, mode: attachCodes[v.Attach], hook: HookXDP}
	if p.mode == AttachTCX || p.mode == AttachClsact {
		p.hook = HookTC
	}
	var prog *ebpf.Program
	var err error
	if p.hook == HookTC {
		prog, err = d.portProgramTC(ifindex, p.slot)
	} else {
		prog, err = d.portProgram(ifindex, p.slot, pc.Mode)
	}
	if err != nil {
		return nil, err
	}
	if p.mode == AttachClsact {
		err = d.inNetns(func() error {
			f, err := d.adoptFilter(ifindex, v.OwnQdisc != 0)
			if err != nil {
				return err
			}
			p.link = f
			return f.Update(prog)
		})
	} else {
		err = d.adoptLink(ifindex, p, prog)
	}
	if err != nil {
		return nil, errors.Join(err, prog.Close())
	}
	p.prog = prog
	return p, nil
}

// adoptLink opens ifindex's pinned link, checks it still holds that
// device, and puts prog in it.
func (d *Dataplane) adoptLink(ifindex int, p *port, prog *ebpf.Program) error {
	l, err := link.LoadPinnedLink(d.pin.linkPath(ifindex), nil)
	if err != nil {
		return fmt.Errorf("its pinned link: %w", err)
	}
	info, err := l.Info()
	if err != nil {
		return errors.Join(fmt.Errorf("its pinned link: %w", err), l.Close())
	}
	var dev uint32
	switch {
	case info.XDP() != nil:
		dev = info.XDP().Ifindex
	case info.TCX() != nil:
		dev = info.TCX().Ifindex
	}
	if int(dev) != ifindex {
		// 0: the device is gone and the link with it (defunct).
		return errors.Join(fmt.Errorf("its pinned link holds device %d (0: gone)", dev), l.Close())
	}
	if err := l.Update(prog); err != nil {
		return errors.Join(fmt.Errorf("putting the new program in its link: %w", err), l.Close())
	}
	p.link = l
	p.pinned = true
	return nil
}

// adoptFilter finds our clsact filter on ifindex, which must carry this
// Dataplane's owner id (the pinned state's).
func (d *Dataplane) adoptFilter(ifindex int, ownQdisc bool) (*clsactFilter, error) {
	cur, err := filterAt(sideIngress, ifindex)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, errors.New("its clsact filter is gone")
	}
	id, own, ok := parseTCFilterName(cur.Name)
	if !ok || id != d.owner.id {
		return nil, fmt.Errorf("the filter at its priority and handle is not the pinned state's (%q)", cur.Name)
	}
	return &clsactFilter{ns: d.ns, side: sideIngress, ifindex: ifindex, name: cur.Name, progID: ebpf.ProgramID(cur.Id),
		ownQdisc: own || ownQdisc, log: d.log}, nil
}

// dropPinned detaches and forgets a pinned port that was not taken over.
func (d *Dataplane) dropPinned(ifindex int, v pinPortValue) {
	path := d.pin.linkPath(ifindex)
	if l, err := link.LoadPinnedLink(path, nil); err == nil {
		if err := errors.Join(l.Unpin(), l.Close()); err != nil {
			d.log.Warn("detaching a pinned link", "ifindex", ifindex, "err", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		_ = os.Remove(path)
	}
	if attachCodes[min(int(v.Attach), len(attachCodes)-1)] == AttachClsact {
		_ = d.inNetns(func() error {
			if f, err := d.adoptFilter(ifindex, v.OwnQdisc != 0); err == nil {
				return f.Close()
			}
			return nil
		})
	}
	if err := d.clearConfig(uint32(ifindex)); err != nil {
		d.log.Warn("clearing a pinned port's config", "ifindex", ifindex, "err", err)
	}
	if int(v.Slot) < d.cfg.MaxPorts {
		d.counters.zero(v.Slot)
	}
	if err := d.pin.ports.Delete(uint32(ifindex)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		d.log.Warn("forgetting a pinned port", "ifindex", ifindex, "err", err)
	}
}

// AdoptedPorts returns the ports this Dataplane took over from pinned
// state at Open, with their configuration; nil when none.
func (d *Dataplane) AdoptedPorts() map[int]PortConfig {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[int]PortConfig, len(d.adopted))
	for k, v := range d.adopted {
		out[k] = v
	}
	return out
}

// Adopted reports whether Open took over pinned state.
func (d *Dataplane) Adopted() bool { return d.pin != nil && d.pin.adopt }

// PinDir is the pin directory ("" when nothing is pinned).
func (d *Dataplane) PinDir() string {
	if d.pin == nil {
		return ""
	}
	return d.pin.dir
}

// pinPorts is map_ports, nil without a pin directory.
func (d *Dataplane) pinPorts() *ebpf.Map {
	if d.pin == nil {
		return nil
	}
	return d.pin.ports
}

// unpinAll removes the pin directory after Close detached the ports.
func (p *pinState) unpinAll() error {
	var errs []error
	for _, name := range pinnedNames(p.dir) {
		if !ownPinName(name) {
			continue // not the daemon's: left, and so is the directory
		}
		if err := os.Remove(p.path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unpinning %s: %w", name, err))
		}
	}
	if err := os.Remove(p.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("removing the pin directory: %w", err))
	}
	return errors.Join(errs...)
}

// Cleanup removes what a daemon that is gone left in pin directory dir
// (sflowswitchd -cleanup): it detaches the pinned links, deletes the state's
// clsact filters in the calling thread's network namespace, unpins every
// map and removes the directory. It refuses while a daemon holds the
// directory. A directory that does not exist is no error.
func Cleanup(dir string, log *slog.Logger) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		log.Info("nothing pinned", "pin_dir", dir)
		return nil
	}
	lock, err := lockPinDir(dir, nil)
	if err != nil {
		return err
	}
	defer lock.Close()
	meta, ok, err := readMeta(dir)
	if n := len(pinnedNames(dir)); !ok && n > 0 {
		// Only the daemon's own state is removed: without its meta the
		// directory may be another tool's (or a daemon's that crashed
		// before writing it: remove it by hand, rm -r).
		return fmt.Errorf("cleaning up %s: no sflowswitchd state description (meta) among its %d entries (%v): not the daemon's pin directory, or damaged; nothing removed", dir, n, err)
	}
	n := len(pinnedNames(dir))
	err = clearPinDir(dir, meta.ownerID(), log)
	if rerr := os.Remove(dir); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, fmt.Errorf("removing the pin directory: %w", rerr))
	}
	if err != nil {
		return fmt.Errorf("cleaning up %s: %w", dir, err)
	}
	log.Info("pinned sampler state removed", "pin_dir", dir, "entries", n)
	return nil
}
