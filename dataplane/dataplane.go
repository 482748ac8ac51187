// Sampler core: loading the XDP sampler (package bpf), attaching it to
// ports, run-time port configuration through BPF maps. A Dataplane lives in
// the network namespace of the goroutine that called Open; every operation
// that resolves an ifindex runs in that namespace, whatever thread calls
// it. The package documentation is in doc.go.

package dataplane

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/bits"
	"os"
	"strings"
	"sync"

	"github.com/sflowswitchd/sflowswitchd/dataplane/egress"

	"github.com/sflowswitchd/sflowswitchd/dataplane/portstats"

	"github.com/sflowswitchd/sflowswitchd/dataplane/transit"

	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"

	"github.com/sflowswitchd/sflowswitchd/dataplane/clsact"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
	"github.com/sflowswitchd/sflowswitchd/dataplane/pin"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// MaxIfIndex is the exclusive upper bound of the ifindexes whose config
// lives in the BPF array indexed directly by ifindex (the per-packet fast
// path, see dataplane/bpf/sampler.h, MAX_IFINDEX). Ports with a larger ifindex (any
// positive 32-bit value the kernel gives) are configured in a hash map
// instead: they are sampled the same way at the cost of a hash lookup.
const MaxIfIndex = 65536

// MaxPortsLimit is the largest Config.MaxPorts: a port slot costs 64 bytes
// per possible CPU of locked kernel memory (counters), MaxQueues XSKMAP
// entries (8 bytes each) and a hash entry for large ifindexes. With the
// default 64 queues, 2^18 ports take the largest XSKMAP allowed here
// (2^24 entries, 128 MiB).
const MaxPortsLimit = 1 << 18

// MaxHeaderBytes is the largest header copy per sample.
const MaxHeaderBytes = 256

// MaxRingBytes bounds Config.RingBytes (a sanity limit well below the
// kernel's; a worker's ring is kernel memory that is never swapped).
const MaxRingBytes = 1 << 30

// CheckRingBytes reports whether n is a valid ring size: the kernel wants
// a power of two and a multiple of the page size (BPF_MAP_TYPE_RINGBUF).
func CheckRingBytes(n int) error {
	page := os.Getpagesize()
	if n < page || n > MaxRingBytes || bits.OnesCount(uint(n)) != 1 {
		return fmt.Errorf("%d is not a power of two from the page size (%d) to %d", n, page, MaxRingBytes)
	}
	return nil
}

// Defaults for zero Config fields.
const (
	// DefaultRingBytes is a worker's ring size unless configured: 4 MiB,
	// 21 845 records of a 128-byte header at TC (192 bytes each) or
	// 23 831 at XDP (176): a 20 000-sample burst with its worker off the
	// CPU, or some 40 ms of samples at 0.5 M/s. Chosen from
	// BenchmarkRingBurst (bench/ring.sh; bench/README.md, "Ring size"):
	// on the 2-core lab, idle and beside a CPU-bound process, 1 MiB lost
	// samples in 5 of 6 rounds of ten 20 000-sample bursts (up to 39 % of
	// a burst), 2 MiB in none but in one burst of an earlier run under a
	// heavier load, 4 and 8 MiB never. Kernel memory: RingBytes per worker.
	DefaultRingBytes = 4 << 20
	// DefaultWakeupBytes is the default wake-up mark: a quarter of the
	// 1 MiB ring it was measured with (bench/README.md, "After batching
	// wake-ups"), kept when the ring grew.
	DefaultWakeupBytes = 256 << 10
	DefaultMaxPorts    = 256
	DefaultMaxQueues   = 64
)

// Config configures Open. Zero fields take the defaults.
type Config struct {
	// Workers is the number of sample consumers, one ring buffer each.
	// Default 1.
	Workers int
	// RingBytes is the size of each worker's ring buffer: a power of two
	// and a multiple of the page size. Default DefaultRingBytes.
	RingBytes int
	// MaxPorts bounds the number of ports attached at the same time
	// (counter slots), 1..MaxPortsLimit. Default DefaultMaxPorts. The
	// kernel memory it reserves is about MaxPorts * (64 * possible CPUs +
	// 8 * MaxQueues + 100) bytes.
	MaxPorts int
	// WakeupBytes is how full a worker's ring must be before the program
	// wakes its reader; below it the samples wait for the reader's
	// deadline (Source.Read; a worker's one-second tick). This spares a
	// wake-up per sample at low and moderate sample rates and lets an
	// idle reader sleep. Default DefaultWakeupBytes, at most RingBytes/4
	// (a batch of about 1 400 samples; a larger ring adds room for bursts,
	// not latency); negative: wake the reader for every sample.
	WakeupBytes int
	// MaxQueues is the number of RX queues per port reserved in the
	// XSKMAP for monitor mode. Default DefaultMaxQueues.
	MaxQueues int
	// Hook is where ports' samplers run (HookAuto by default: TC ingress
	// on veth, XDP elsewhere). Monitor ports always use XDP.
	Hook Hook
	// TCMode is how ports sampled at TC ingress are attached: TCModeAuto
	// (default) uses a TCX link where the kernel has TCX and a clsact
	// cls_bpf filter elsewhere. Not a daemon setting: TCModeClsact exists
	// so that tests and benchmarks run the pre-6.6 path on newer kernels.
	TCMode TCMode
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger
	// Features are the running kernel's features; nil probes them in
	// Open (features.ProbeFeatures). Tests pass a copy with features
	// switched off to exercise the degraded paths.
	Features *features.Features
	// PinDir is a directory on a BPF file system (CheckDir) where the
	// sampler's maps and links are pinned, so that they outlive the
	// process and the next Open there adopts them (pin.go); "" pins
	// nothing (the samplers end with the process). One directory per
	// running Dataplane.
	PinDir string
	// Handover are the descriptors the previous program of this process
	// passed across exec (Release); nil otherwise.
	Handover *pin.Handover
	// StateWords is the size, in 64-bit words, of the agent's state
	// memory (Pinned.StateMemory), pinned with the maps; 0: none.
	StateWords int
	// TransitEntries is how many sampled frames may wait at once to be
	// followed to where they leave (package transit, dataplane/bpf/transit.h), on every
	// port sampled at TC; 0 follows none and loads no transit program.
	// DefaultTransitEntries is a sensible value.
	TransitEntries int
}

// DefaultTransitEntries is how many sampled frames may wait at once to be
// followed (Config.TransitEntries, when on): a parked record is about
// 450 bytes of preallocated kernel memory, so 4096 take about 1.8 MiB.
const DefaultTransitEntries = 4096

// Mode is a port's sample delivery path (values shared with dataplane/bpf/sampler.h).
type Mode uint32

const (
	// ModeInline copies sampled headers into the owning worker's ring and
	// never alters forwarding. The zero Mode in a PortConfig means inline.
	ModeInline Mode = 1
	// ModeMonitor redirects sampled frames into AF_XDP sockets and drops
	// all other frames (for mirror/SPAN/TAP ports carrying a copy).
	ModeMonitor Mode = 2
)

// String returns "inline" or "monitor".
func (m Mode) String() string {
	switch m {
	case ModeInline:
		return "inline"
	case ModeMonitor:
		return "monitor"
	}
	return fmt.Sprintf("Mode(%d)", uint32(m))
}

// PortConfig is the sampling configuration of one port.
type PortConfig struct {
	// Rate is the kernel sampling rate: a power of two >= 1; a frame is
	// sampled with probability 1/Rate.
	Rate uint32
	// Mode is the delivery path; 0 means ModeInline.
	Mode Mode
	// HeaderBytes is how many leading bytes of a sampled frame are copied
	// (1..MaxHeaderBytes).
	HeaderBytes int
	// Worker is the index of the ring the port's samples go to.
	Worker int
	// Direction is which way the port's frames are sampled; 0 means
	// sflow.DirectionIngress. A monitor port is sampled at ingress only.
	Direction sflow.Direction
	// Kind tells the sampled path what it may read of a tunnel device's
	// frames (PortKind, KindOf); PortPlain otherwise.
	Kind PortKind
	// ConfiguredRate is the rate configured on the port, which the
	// agent's sub-sampling makes exact on top of Rate (logged beside it;
	// 0 = Rate).
	ConfiguredRate uint32
	// Hook is the port's own hook, HookXDP or HookTC, over Config.Hook;
	// HookAuto (0): Config.Hook's choice. Taken at attach: UpdatePort
	// keeps the port where it is.
	Hook Hook
}

// ErrNotAttached is returned for operations on a port that is not attached.
var ErrNotAttached = errors.New("port not attached")

// ErrNoPortSlot is an attach refused because every port slot
// (Config.MaxPorts) is in use (errors.Is).
var ErrNoPortSlot = errors.New("port slots in use")

// port is the state of one attached port. link, prog, hook and mode are
// its ingress attachment (nil link and prog: not sampled at ingress), out
// its egress one (nil: not sampled at egress).
type port struct {
	link attachment    // BPF link (XDP, TCX) or cls_bpf filter (clsact)
	prog *ebpf.Program // the port's own instance of xdp_sampler or tc_sampler
	hook Hook          // HookXDP or HookTC
	mode string        // AttachNative, AttachGeneric, AttachTCX or AttachClsact
	out  *egress.Port
	slot uint32
	cfg  PortConfig
	// pinned: the link is pinned in the pin directory (pin.go).
	pinned bool
}

// Dataplane is the loaded sampler: programs, maps, attached ports.
type Dataplane struct {
	cfg  Config
	log  *slog.Logger
	ns   netns.NsHandle
	objs bpf.SamplerObjects
	// spec is the sampler as loaded, kept to load each port's own
	// instance of xdp_sampler (portProgram).
	spec *ebpf.CollectionSpec
	// features of the kernel, probed once at Open.
	features *features.Features
	transit  *transit.Transit // sampled frames followed to where they leave (when On)
	// tc is the TC sampler's shared part, loaded with the first TC port
	// (under mu).
	tc *tcObjects
	// egress is the egress sampler's shared part, loaded with the first
	// port sampled at egress (under mu); its counters are in stats.
	// without the lock.
	egress *egress.Sampler
	// egressShared is what the egress sampler shares with the XDP
	// sampler (set at load).
	egressShared egress.Shared
	// fib is the FIB generation counter (fibgen.go); nil without it.
	fib *fibGen
	// owner names this Dataplane's clsact filters and says it lives;
	// filters adds and adopts them (package clsact).
	owner   *clsact.Owner
	filters clsact.Filters

	cpuSlots int
	rings    []*ebpf.Map

	// stats are the attached ports' counters, read without a lock.
	stats Stats

	mu        sync.Mutex
	ports     map[int]*port
	freeSlots []uint32
	sources   []*reader.Source
	closed    bool

	// mon holds the monitor ports' AF_XDP sockets (SetPort); monMu
	// serialises SetPort and RemovePort.
	monMu sync.Mutex
	mon   reader.MonitorPorts

	// pinned is the state pinned in the pin directory: what Open
	// adopted, the agent's state memory.
	pinned Pinned
	// released: the pins stay at Close (Release, a failed Open);
	// handingOver: the lock and owner descriptors stay open (Release).
	released, handingOver bool
}

// Open loads the sampler into the kernel once, in the calling goroutine's
// network namespace, and removes what a crashed or killed earlier run left
// there: legacy-mode XDP attachments of our programs, and our TC filters
// (clsact) whose owner is dead. With Config.PinDir it adopts the pinned
// state of an earlier run of the same layout (the samplers it left
// attached, their counters and rings), or replaces pinned state of another
// layout (pin.go).
func Open(cfg Config) (*Dataplane, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	fs := cfg.Features
	if fs == nil {
		fs = features.ProbeFeatures()
	}
	// Refused before anything is loaded, naming every missing feature,
	// rather than as an opaque verifier or map-creation error.
	if err := fs.RequiredErr(); err != nil {
		return nil, fmt.Errorf("dataplane: the XDP sampler cannot run here: %w", err)
	}
	ns, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("dataplane: current netns: %w", err)
	}
	d := &Dataplane{
		cfg:      cfg,
		log:      cfg.Logger,
		ns:       ns,
		ports:    make(map[int]*port),
		features: fs,
	}
	d.stats.mon = &d.mon
	if err := d.load(); err != nil {
		return nil, errors.Join(err, d.closeFailed())
	}
	for s := cfg.MaxPorts - 1; s >= 0; s-- {
		d.freeSlots = append(d.freeSlots, uint32(s))
	}
	if fs.Has(features.FeatureKernCtx) {
		if err := d.startFIBGen(); err != nil {
			d.log.Warn("FIB generation unavailable: samples carry no extended_router", "err", err)
		}
	}
	if err := d.inNetns(d.removeStaleLegacy); err != nil {
		return nil, errors.Join(fmt.Errorf("dataplane: cleaning up stale XDP programs: %w", err), d.closeFailed())
	}
	err = d.inNetns(func() error {
		o, err := d.claimOwner()
		if err != nil {
			return err
		}
		d.owner = o
		d.filters = clsact.Filters{NS: d.ns, Owner: o, Log: d.log}
		if d.pinned.pin != nil && !d.pinned.pin.Adopt {
			// Written last: state without meta is replaced, never read.
			if _, err := hex.Decode(d.pinned.pin.Meta.Owner[:], []byte(o.ID())); err != nil {
				return err
			}
			if err := pin.WriteMeta(d.pinned.pin.Dir, d.pinned.pin.Meta); err != nil {
				return err
			}
		}
		if err := clsact.RemoveStale(d.log); err != nil {
			return fmt.Errorf("cleaning up stale TC filters: %w", err)
		}
		if d.pinned.pin != nil && d.pinned.pin.Adopt {
			return d.adoptPorts()
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("dataplane: %w", err), d.closeFailed())
	}
	if d.pinned.pin != nil {
		d.log.Info("sampler state pinned", "pin_dir", d.pinned.pin.Dir, "adopted", d.pinned.pin.Adopt, "ports", len(d.ports))
	}
	d.transit = transit.New(&d.objs, d.log)
	if d.cfg.TransitEntries > 0 {
		// A setting the kernel cannot serve stays small: sampling runs,
		// samples carry no transit records.
		if err := d.transit.Start(d.features, d.cfg.WakeupBytes, d.spec, &d.objs); err != nil {
			d.log.Warn("transit records off: sampled frames are not followed to where they leave", "err", err)
		}
	}
	if err := d.rewriteConfigs(); err != nil {
		return nil, errors.Join(fmt.Errorf("dataplane: port configs: %w", err), d.closeFailed())
	}
	return d, nil
}

// closeFailed undoes a failed Open without touching pinned state: it is
// either adopted (and must stay, attached) or was made by this Open and
// is replaced by the next one.
func (d *Dataplane) closeFailed() error {
	if d.pinned.pin != nil {
		d.released = true
	}
	// Descriptors handed over stay open: the previous program takes them
	// back (a rollback).
	d.handingOver = d.cfg.Handover != nil
	return d.Close()
}

// claimOwner is this Dataplane's clsact owner: the one handed over across
// exec, the pinned state's (whose filters it adopts), or a new one.
func (d *Dataplane) claimOwner() (*clsact.Owner, error) {
	if h := d.cfg.Handover; h != nil && h.OwnerFD >= 0 {
		return clsact.OwnerFromFD(h.OwnerFD)
	}
	if d.pinned.pin != nil && d.pinned.pin.Adopt {
		if id := d.pinned.pin.Meta.OwnerID(); id != "" {
			o, err := clsact.BindOwner(id)
			if errors.Is(err, unix.EADDRINUSE) {
				return nil, fmt.Errorf("the pinned state's TC filters belong to a live process (owner %s)", id)
			}
			if err != nil {
				return nil, fmt.Errorf("binding the owner socket of the pinned TC filters: %w", err)
			}
			return o, nil
		}
	}
	return clsact.NewOwner()
}

func (c *Config) setDefaults() error {
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.RingBytes == 0 {
		c.RingBytes = DefaultRingBytes
	}
	if c.MaxPorts == 0 {
		c.MaxPorts = DefaultMaxPorts
	}
	if c.WakeupBytes == 0 {
		c.WakeupBytes = min(DefaultWakeupBytes, c.RingBytes/4)
	}
	if c.WakeupBytes < 0 {
		c.WakeupBytes = 0
	}
	if c.MaxQueues == 0 {
		c.MaxQueues = DefaultMaxQueues
	}
	switch {
	case c.Workers < 0:
		return fmt.Errorf("dataplane: Workers %d < 0", c.Workers)
	case CheckRingBytes(c.RingBytes) != nil:
		return fmt.Errorf("dataplane: RingBytes: %w", CheckRingBytes(c.RingBytes))
	case c.MaxPorts < 0 || c.MaxPorts > MaxPortsLimit:
		return fmt.Errorf("dataplane: MaxPorts %d outside 1..%d", c.MaxPorts, MaxPortsLimit)
	case c.MaxQueues < 0 || c.MaxQueues*c.MaxPorts > 1<<24:
		return fmt.Errorf("dataplane: MaxQueues %d x MaxPorts %d above %d XSKMAP entries", c.MaxQueues, c.MaxPorts, 1<<24)
	}
	return nil
}

// load sizes the maps from the config, loads the collection, creates the
// per-worker ring buffers and maps the counters.
func (d *Dataplane) load() error {
	spec, cpus, err := samplerSpec(&d.cfg, d.features)
	if err != nil {
		return err
	}
	d.cpuSlots = cpus
	rings := spec.Maps[bpf.SamplerMapRings]
	if d.cfg.PinDir != "" {
		layout, sizes, err := pinIdentity(&d.cfg, spec, cpus)
		if err != nil {
			return err
		}
		if err := d.inNetns(func() error { return d.openPins(layout, sizes, spec) }); err != nil {
			return fmt.Errorf("dataplane: pin directory: %w", err)
		}
	}
	var repl map[string]*ebpf.Map
	if d.pinned.pin != nil && d.pinned.pin.Adopt {
		// The pinned maps, which hold the counters, configs and rings
		// of the samplers still attached (LoadAndAssign checks that
		// each matches its spec, and clones it).
		if repl, err = d.pinned.pin.AdoptMaps(); err != nil {
			return fmt.Errorf("dataplane: %w", err)
		}
		defer func() {
			for _, m := range repl {
				m.Close()
			}
		}()
	}
	if err := bpf.LoadAndAssign(spec, &d.objs, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return bpf.LoadError("dataplane: loading sampler", err)
	}
	d.spec = spec
	if d.pinned.pin != nil && !d.pinned.pin.Adopt {
		if err := d.pinned.pin.PinMaps(&d.objs); err != nil {
			return errors.Join(fmt.Errorf("dataplane: %w", err), d.closeObjects())
		}
	}
	// The sampled path of every port's program (dataplane/bpf/sampler.c
	// xdp_take_sample), reached by tail call. Adopted state: this
	// replaces the previous program's in one step, so the ports' old
	// programs reach the new sampled path until their links are updated.
	if err := d.objs.TakeProgs.Put(uint32(0), d.objs.XdpTakeSample); err != nil {
		return errors.Join(fmt.Errorf("dataplane: installing xdp_take_sample: %w", err), d.closeObjects())
	}
	for w := 0; w < d.cfg.Workers; w++ {
		m, err := d.pinned.pin.Ring(w, rings.InnerMap)
		if err != nil {
			return errors.Join(fmt.Errorf("dataplane: ring %d: %w", w, err), d.closeObjects())
		}
		d.rings = append(d.rings, m)
		if err := d.objs.Rings.Put(uint32(w), m); err != nil {
			return errors.Join(fmt.Errorf("dataplane: installing ring %d: %w", w, err), d.closeObjects())
		}
	}
	if d.pinned.pin != nil {
		if d.pinned.pin.Ports, err = d.pinned.pin.Map(pin.PortsMap, pin.PortsSpec(d.cfg.MaxPorts)); err != nil {
			return errors.Join(fmt.Errorf("dataplane: %w", err), d.closeObjects())
		}
	}
	if d.cfg.StateWords > 0 {
		if err := d.pinned.mapState(d.cfg.StateWords, d.log); err != nil {
			return errors.Join(err, d.closeObjects())
		}
	}
	d.sources = make([]*reader.Source, d.cfg.Workers)
	cp, err := portstats.Map(d.objs.Counters, d.cfg.MaxPorts, cpus)
	if err != nil {
		return errors.Join(err, d.closeObjects())
	}
	d.stats.counters = cp
	d.egressShared = egress.Shared{Spec: spec, Objs: &d.objs, CPUSlots: cpus, MaxPorts: d.cfg.MaxPorts,
		WakeupBytes: d.cfg.WakeupBytes, Pin: d.pinned.pin, Log: d.log}
	return nil
}

// samplerSpec is the sampler's collection as cfg sizes it, and the number
// of possible CPUs.
func samplerSpec(cfg *Config, fs *features.Features) (*ebpf.CollectionSpec, int, error) {
	spec, err := bpf.LoadSampler()
	if err != nil {
		return nil, 0, fmt.Errorf("dataplane: loading sampler spec: %w", err)
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, 0, fmt.Errorf("dataplane: possible CPUs: %w", err)
	}
	if err := spec.Variables[bpf.SamplerVarCpuSlots].Set(uint32(cpus)); err != nil {
		return nil, 0, fmt.Errorf("dataplane: setting cpu_slots: %w", err)
	}
	if err := spec.Variables[bpf.SamplerVarWakeupBytes].Set(uint64(cfg.WakeupBytes)); err != nil {
		return nil, 0, fmt.Errorf("dataplane: setting wakeup_bytes: %w", err)
	}
	spec.Maps[bpf.SamplerMapCounters].MaxEntries = uint32(cfg.MaxPorts * cpus)
	rings := spec.Maps[bpf.SamplerMapRings]
	rings.MaxEntries = uint32(cfg.Workers)
	spec.Maps[bpf.SamplerMapRingIdle].MaxEntries = uint32(max(cfg.Workers, 1))
	rings.InnerMap.MaxEntries = uint32(cfg.RingBytes)
	spec.Maps[bpf.SamplerMapXsks].MaxEntries = uint32(cfg.MaxPorts * cfg.MaxQueues)
	spec.Maps[bpf.SamplerMapPortConfigsHigh].MaxEntries = uint32(cfg.MaxPorts)
	spec.Maps[bpf.SamplerMapTransitPending].MaxEntries = uint32(max(1, cfg.TransitEntries))
	if !fs.Has(features.FeatureXSKMap) {
		// Kernel without AF_XDP (CONFIG_XDP_SOCKETS=n): the program's
		// bpf_redirect_map still needs a redirect map. An empty DEVMAP
		// verifies the same way; monitor mode, its only user, is refused
		// by AttachPort.
		spec.Maps[bpf.SamplerMapXsks].Type = ebpf.DevMap
	}
	return spec, cpus, nil
}

// pinIdentity is what pinned state must share with this program to be
// adopted: the layout fingerprint of its objects and the sizes of cfg.
func pinIdentity(cfg *Config, spec *ebpf.CollectionSpec, cpus int) ([32]byte, pin.Sizes, error) {
	tcSpec, err := bpf.LoadTcSampler()
	if err != nil {
		return [32]byte{}, pin.Sizes{}, fmt.Errorf("dataplane: loading TC sampler spec: %w", err)
	}
	layout, err := pin.LayoutFingerprint(spec, tcSpec)
	if err != nil {
		return [32]byte{}, pin.Sizes{}, fmt.Errorf("dataplane: %w", err)
	}
	return layout, pin.Sizes{CPUSlots: uint32(cpus), Workers: uint32(cfg.Workers), RingBytes: uint32(cfg.RingBytes),
		MaxPorts: uint32(cfg.MaxPorts), MaxQueues: uint32(cfg.MaxQueues), Transit: uint32(cfg.TransitEntries)}, nil
}

// CheckAdopt tells, without changing anything, what Open with cfg would
// do with the state pinned in cfg.PinDir: adopt it (true), or replace it
// (false, and why: nothing there, another layout, other sizes). An error
// means Open would fail (a required kernel feature missing, a bad Config).
// The upgrade in place runs it in the new program before the old one
// lets go.
func CheckAdopt(cfg Config) (bool, string, error) {
	if err := cfg.setDefaults(); err != nil {
		return false, "", err
	}
	fs := cfg.Features
	if fs == nil {
		fs = features.ProbeFeatures()
	}
	if err := fs.RequiredErr(); err != nil {
		return false, "", fmt.Errorf("dataplane: the XDP sampler cannot run here: %w", err)
	}
	spec, cpus, err := samplerSpec(&cfg, fs)
	if err != nil {
		return false, "", err
	}
	if cfg.PinDir == "" {
		return false, "nothing pinned (no pin directory)", nil
	}
	layout, sizes, err := pinIdentity(&cfg, spec, cpus)
	if err != nil {
		return false, "", err
	}
	old, ok, err := pin.ReadMeta(cfg.PinDir)
	switch {
	case err != nil:
		return false, "pinned state unreadable: " + err.Error(), nil
	case !ok:
		return false, "no pinned state", nil
	case old.Format != pin.MetaFormat || old.Layout != layout:
		return false, "pinned state of another layout", nil
	case old.Sizes != sizes:
		return false, "pinned state made with other sizes: " + sizes.Differs(old.Sizes), nil
	}
	// What Open will adopt, opened now: a damaged directory is replaced
	// (said here), not found out by the new program half-way.
	if err := pin.CheckAdoptable(cfg.PinDir, spec, cfg.Workers, cfg.MaxPorts); err != nil {
		return false, "pinned state damaged (replaced, a gap in the data): " + err.Error(), nil
	}
	return true, "adopts the pinned samplers", nil
}

// closeObjects closes the ring maps and the sampler's programs and maps.
func (d *Dataplane) closeObjects() error {
	var errs []error
	for w, m := range d.rings {
		if err := m.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing ring %d: %w", w, err))
		}
	}
	d.rings = nil
	if d.pinned.stateMem != nil {
		if err := unix.Munmap(d.pinned.stateMem[:cap(d.pinned.stateMem)]); err != nil {
			errs = append(errs, fmt.Errorf("unmapping the agent state: %w", err))
		}
		d.pinned.stateMem = nil
	}
	for _, m := range []*ebpf.Map{d.pinned.state, d.pinned.portsMap()} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	d.pinned.state = nil
	if err := d.tc.close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the TC sampler: %w", err))
	}
	d.tc = nil
	if err := d.fib.close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the FIB generation counter: %w", err))
	}
	d.fib = nil
	d.stats.egress.Store(nil)
	if err := d.egress.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the egress sampler: %w", err))
	}
	d.egress = nil
	if err := d.objs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing sampler objects: %w", err))
	}
	return errors.Join(errs...)
}

// modeAvailable refuses monitor mode on a kernel without AF_XDP: a
// monitor port drops the frames it does not redirect, so without sockets
// to read them it must not be attached at all.
func (d *Dataplane) modeAvailable(m Mode) error {
	if m != ModeMonitor {
		return nil
	}
	if err := d.features.Need(features.FeatureXSKMap, features.FeatureAFXDP); err != nil {
		return fmt.Errorf("monitor mode unavailable: %w", err)
	}
	return nil
}

// Transit is the following of sampled frames to where they leave the
// switch: whether it is on, and the counts of the records parked.
func (d *Dataplane) Transit() *transit.Transit { return d.transit }

// Features returns the kernel features probed at Open.
func (d *Dataplane) Features() *features.Features { return d.features }

// Close detaches every port, closes the sample sources (and the sockets
// of monitor ports) and unloads the sampler; with a pin directory it also
// unpins everything and removes the directory (a clean stop leaves
// nothing). Call it after the goroutines reading sources and counters
// have stopped: it unmaps their memory.
func (d *Dataplane) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	var errs []error
	for ifindex, p := range d.ports {
		if d.released {
			// The pin keeps the link, and the link its program, attached;
			// a filter holds its program by itself. The egress sampler
			// is not pinned: it is detached below, and the program that
			// takes over attaches it anew.
			if l, ok := p.link.(link.Link); ok {
				errs = append(errs, l.Close())
			}
		} else {
			if err := d.pinned.forget(ifindex, p); err != nil {
				errs = append(errs, fmt.Errorf("ifindex %d: %w", ifindex, err))
			}
			if err := p.closeIngress(); err != nil {
				errs = append(errs, fmt.Errorf("detaching ifindex %d: %w", ifindex, err))
			}
		}
		if err := p.out.Close(); err != nil {
			errs = append(errs, fmt.Errorf("detaching ifindex %d at egress: %w", ifindex, err))
		}
		delete(d.ports, ifindex)
	}
	sources := d.sources
	d.sources = nil
	d.mu.Unlock()

	// A source closes its monitor ports' sockets after its pending Read
	// has returned.
	for _, s := range sources {
		if s != nil {
			if err := s.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	d.monMu.Lock()
	d.mon.Reset()
	d.monMu.Unlock()
	if err := d.transit.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing transit: %w", err))
	}
	if d.stats.counters != nil {
		if err := d.stats.counters.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := d.closeObjects(); err != nil {
		errs = append(errs, err)
	}
	if d.pinned.pin != nil && !d.released {
		if err := d.pinned.pin.UnpinAll(); err != nil {
			errs = append(errs, err)
		}
	}
	if !d.handingOver {
		// After the ports: the owner's name says its filters are live.
		if err := d.owner.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the owner socket: %w", err))
		}
		if d.pinned.pin != nil {
			errs = append(errs, d.pinned.pin.Lock.Close())
		}
	}
	d.ns.Close()
	return errors.Join(errs...)
}

// Release ends this Dataplane before an exec of the next program of this
// process (an upgrade in place): like Close, but every port stays attached
// and counting, and everything stays pinned, for the next program's Open
// to adopt; the pin directory's lock and the clsact owner's socket stay
// open across the exec (returned, for Config.Handover). Samples the ports
// take meanwhile wait in the rings (or are counted as drops when a ring
// is full; a monitor port's, whose sockets close, always are). It needs a
// pin directory.
func (d *Dataplane) Release() (*pin.Handover, error) {
	if d.pinned.pin == nil {
		return nil, errors.New("dataplane: release: nothing is pinned (no pin directory)")
	}
	d.mu.Lock()
	d.released, d.handingOver = true, true
	d.mu.Unlock()
	h := d.pinned.pin.Handover(d.owner.FD())
	err := d.Close()
	for _, fd := range []int{h.LockFD, h.OwnerFD} {
		if _, ferr := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); ferr != nil {
			err = errors.Join(err, fmt.Errorf("dataplane: keeping fd %d over exec: %w", fd, ferr))
		}
	}
	return h, err
}

func (pc *PortConfig) validate(workers int) error {
	if pc.Mode == 0 {
		pc.Mode = ModeInline
	}
	if pc.Direction == 0 {
		pc.Direction = sflow.DirectionIngress
	}
	switch {
	case pc.Direction&^sflow.DirectionBoth != 0:
		return fmt.Errorf("unknown direction %d", pc.Direction)
	case pc.Mode == ModeMonitor && pc.Direction != sflow.DirectionIngress:
		return fmt.Errorf("a monitor port is sampled at ingress only, not %s", pc.Direction)
	case pc.Rate == 0 || bits.OnesCount32(pc.Rate) != 1:
		return fmt.Errorf("rate %d is not a power of two", pc.Rate)
	case pc.Mode != ModeInline && pc.Mode != ModeMonitor:
		return fmt.Errorf("unknown mode %d", pc.Mode)
	case pc.HeaderBytes < 1 || pc.HeaderBytes > MaxHeaderBytes:
		return fmt.Errorf("header bytes %d not in 1..%d", pc.HeaderBytes, MaxHeaderBytes)
	case pc.Worker < 0 || pc.Worker >= workers:
		return fmt.Errorf("worker %d not in 0..%d", pc.Worker, workers-1)
	case pc.Hook != HookAuto && pc.Hook != HookXDP && pc.Hook != HookTC:
		return fmt.Errorf("a port's hook is auto, xdp or tc, not %s", pc.Hook)
	}
	return nil
}

// bpfConfig is the kernel form of a port's config.
func (d *Dataplane) bpfConfig(pc PortConfig, slot uint32) bpf.SamplerPortConfig {
	return bpf.SamplerPortConfig{
		SampleMask:  pc.Rate - 1,
		Mode:        uint32(pc.Mode),
		HeaderBytes: uint32(pc.HeaderBytes),
		Worker:      uint32(pc.Worker),
		Slot:        slot,
		XskBase:     d.xskBase(slot),
		Kind:        uint32(pc.Kind),
		Flags:       d.portFlags(pc),
		SkipScale:   skipScale(pc.Rate),
	}
}

// portFlag* are port_config.flags (dataplane/bpf/sampler.h PORT_F_*).
const portFlagTransit = 1 << 0

// portFlags are the kernel flags of a port's config: with transit on,
// every port's sampled frames are followed where they have an sk_buff
// (TC ports; the XDP sampler ignores the flag).
func (d *Dataplane) portFlags(PortConfig) uint32 {
	var f uint32
	if d.transit.On() {
		f |= portFlagTransit
	}
	return f
}

// rewriteConfigs writes every attached port's config again (after
// transit was started: the ports adopted before carry the flags of the
// program that attached them).
func (d *Dataplane) rewriteConfigs() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for ifindex, p := range d.ports {
		bc := d.bpfConfig(p.cfg, p.slot)
		if err := d.configMap(uint32(ifindex)).Put(uint32(ifindex), &bc); err != nil {
			errs = append(errs, fmt.Errorf("ifindex %d: %w", ifindex, err))
		}
	}
	return errors.Join(errs...)
}

// xskBase is the XSKMAP key of RX queue 0 of the port in counter slot
// slot: each slot owns MaxQueues consecutive keys.
func (d *Dataplane) xskBase(slot uint32) uint32 {
	return slot * uint32(d.cfg.MaxQueues)
}

// AttachPort starts sampling on ifindex: it writes the port's config, then
// attaches the port's sampler at the hook Config.Hook chooses for it: XDP
// in native (driver) mode, falling back to generic (skb) mode, or TC
// ingress (a TCX link, or a cls_bpf filter on a clsact qdisc where the
// kernel has no TCX). AttachMode reports which. Under HookAuto a port that
// TC ingress refuses (see package clsact) is sampled with XDP instead. Links
// are owned by this process: if it dies, the kernel detaches the program;
// a filter stays until the next Open removes it.
func (d *Dataplane) AttachPort(ifindex int, pc PortConfig) error {
	if err := pc.validate(d.cfg.Workers); err != nil {
		return fmt.Errorf("dataplane: attach ifindex %d: %w", ifindex, err)
	}
	if ifindex <= 0 || int64(ifindex) > math.MaxUint32 {
		return fmt.Errorf("dataplane: attach ifindex %d: outside 1..%d", ifindex, uint32(math.MaxUint32))
	}
	if err := d.modeAvailable(pc.Mode); err != nil {
		return fmt.Errorf("dataplane: attach ifindex %d: %w", ifindex, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("dataplane: attach ifindex %d: %w", ifindex, os.ErrClosed)
	}
	if _, ok := d.ports[ifindex]; ok {
		return fmt.Errorf("dataplane: attach ifindex %d: already attached", ifindex)
	}
	if len(d.freeSlots) == 0 {
		return fmt.Errorf("dataplane: attach ifindex %d: all %d %w", ifindex, d.cfg.MaxPorts, ErrNoPortSlot)
	}
	slot := d.freeSlots[len(d.freeSlots)-1]
	if pc.Kind == PortPlain {
		// A tunnel device's samples carry its outer header
		// (dataplane/bpf/tunnel.h): the kind is the link's, read here once (a
		// link's kind never changes).
		pc.Kind = d.linkKind(ifindex)
	}

	// Zero the slot before its config points at it: a previous user's
	// in-flight increments cannot leak into this port's pool.
	d.stats.counters.Zero(slot)
	key := uint32(ifindex)
	bc := d.bpfConfig(pc, slot)
	if err := d.configMap(key).Put(key, &bc); err != nil {
		return fmt.Errorf("dataplane: attach ifindex %d: writing config: %w", ifindex, err)
	}
	p := &port{slot: slot, cfg: pc}
	err := d.inNetns(func() error {
		if pc.Direction.Has(sflow.DirectionIngress) {
			if err := d.attachIngress(p, ifindex, pc.Mode); err != nil {
				return err
			}
		}
		if pc.Direction.Has(sflow.DirectionEgress) {
			if err := d.attachEgressPort(p, ifindex); err != nil {
				return errors.Join(err, p.closeIngress())
			}
		}
		return nil
	})
	if err != nil {
		if cerr := d.clearConfig(key); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return fmt.Errorf("dataplane: attach ifindex %d: %w", ifindex, err)
	}
	d.freeSlots = d.freeSlots[:len(d.freeSlots)-1]
	d.ports[ifindex] = p
	d.stats.publish(d.ports)
	{
		// Only the ingress attachment is pinned (and adopted by the next
		// program); an egress sampler is attached anew after a take-over,
		// its count read from its pinned counters (egress.Ended).
		if err := d.pinned.record(ifindex, p); err != nil {
			// Sampled, but a crash or upgrade would lose the port: said.
			d.log.Warn("port attached but not pinned: a crash or an upgrade detaches it", "ifindex", ifindex, "err", err)
		}
	}
	// The configured rate (exported in sampling_rate) beside the kernel's
	// power of two, which the agent sub-samples to it exactly.
	rate := pc.ConfiguredRate
	if rate == 0 {
		rate = pc.Rate
	}
	d.log.Info("sampler attached", "port", d.linkName(ifindex), "ifindex", ifindex, "direction", pc.Direction, "hook", p.hook, "mode", p.mode,
		"egress_mode", p.egressMode(), "rate", rate, "kernel_rate", pc.Rate, "delivery", pc.Mode.String(), "worker", pc.Worker, "slot", slot)
	return nil
}

// attachIngress attaches p's ingress sampler at the hook Config.Hook
// chooses for the port (hookFor): under HookAuto a port that TC ingress
// refuses is sampled with XDP instead. Runs in the port's netns; called
// with mu held.
func (d *Dataplane) attachIngress(p *port, ifindex int, m Mode) error {
	hook := d.hookFor(ifindex, m)
	auto := d.cfg.Hook == HookAuto
	if (p.cfg.Hook == HookXDP || p.cfg.Hook == HookTC) && m != ModeMonitor {
		hook, auto = p.cfg.Hook, false // the port's own
	}
	l, prog, mode, err := d.attachHook(hook, ifindex, p.slot, m)
	if err != nil && hook == HookTC && auto && !outOfResources(err) {
		// Auto picked TC for a veth port: XDP samples it too, at a
		// higher cost, and runs before TC anyway. Not when the
		// process ran out of descriptors or memory: XDP would fail
		// alike, and the port is retried at TC.
		d.log.Warn("TC ingress refused the sampler, sampling with XDP instead", "ifindex", ifindex, "err", bpf.FirstLine(err))
		hook = HookXDP
		l, prog, mode, err = d.attachHook(hook, ifindex, p.slot, m)
	}
	if err != nil {
		return err
	}
	p.link, p.prog, p.hook, p.mode = l, prog, hook, mode
	return nil
}

// attachEgressPort attaches p's egress sampler, its egress counters
// zeroed first. Runs in the port's netns; called with mu held.
func (d *Dataplane) attachEgressPort(p *port, ifindex int) error {
	if d.egress == nil {
		// The egress sampler's shared part, loaded with the first port
		// sampled at egress.
		e, err := egress.Load(d.egressShared)
		if err != nil {
			return err
		}
		d.egress = e
		d.stats.egress.Store(e.Pages())
	}
	tcx := d.cfg.TCMode != TCModeClsact && d.features.Has(features.FeatureTCX)
	out, err := d.egress.Attach(ifindex, p.slot, tcx, d.filters, p.ownsQdisc())
	if err != nil {
		return err
	}
	p.out = out
	return nil
}

// closeIngress detaches and unloads p's ingress sampler, if any.
func (p *port) closeIngress() error {
	if p.link == nil {
		return nil
	}
	err := errors.Join(p.link.Close(), p.prog.Close())
	p.link, p.prog, p.hook, p.mode = nil, nil, 0, ""
	return err
}

// direction is the directions p's samplers are attached in.
func (p *port) direction() sflow.Direction {
	var d sflow.Direction
	if p.link != nil {
		d |= sflow.DirectionIngress
	}
	if p.out != nil {
		d |= sflow.DirectionEgress
	}
	return d
}

// egressMode is p's egress attach mode, "" when it is not sampled at
// egress.
func (p *port) egressMode() string {
	switch {
	case p.out == nil:
		return ""
	case p.out.TCX():
		return AttachTCX
	}
	return AttachClsact
}

// setDirection attaches and detaches p's samplers so that it is sampled
// in dir, its config already written for mode m. A direction added starts
// from zeroed counters. It reports whether the ingress sampler was
// attached anew (for m: no program swap needed). Called with mu held.
func (d *Dataplane) setDirection(p *port, ifindex int, dir sflow.Direction, m Mode) (freshIngress bool, err error) {
	old := p.cfg.Direction
	err = d.inNetns(func() error {
		if dir.Has(sflow.DirectionIngress) && !old.Has(sflow.DirectionIngress) {
			d.stats.counters.Zero(p.slot)
			if err := d.attachIngress(p, ifindex, m); err != nil {
				return err
			}
			freshIngress = true
			if err := d.pinned.record(ifindex, p); err != nil {
				d.log.Warn("port attached but not pinned: a crash or an upgrade detaches it", "ifindex", ifindex, "err", err)
			}
		}
		if dir.Has(sflow.DirectionEgress) && !old.Has(sflow.DirectionEgress) {
			if err := d.attachEgressPort(p, ifindex); err != nil {
				return err
			}
		}
		// Detach after attaching: a port moving from one direction to
		// the other keeps a qdisc it created in between.
		if !dir.Has(sflow.DirectionIngress) && old.Has(sflow.DirectionIngress) {
			if err := d.pinned.forget(ifindex, p); err != nil {
				d.log.Warn("unpinning the port's ingress sampler", "ifindex", ifindex, "err", err)
			}
			if err := p.closeIngress(); err != nil {
				d.log.Warn("detaching the port's ingress sampler", "ifindex", ifindex, "err", err)
			}
		}
		if !dir.Has(sflow.DirectionEgress) && old.Has(sflow.DirectionEgress) {
			if err := p.out.Close(); err != nil {
				d.log.Warn("detaching the port's egress sampler", "ifindex", ifindex, "err", err)
			}
			p.out = nil
		}
		return nil
	})
	if err == nil {
		d.log.Info("sampler direction changed", "ifindex", ifindex, "from", old, "to", dir,
			"hook", p.hook, "mode", p.mode, "egress_mode", p.egressMode())
	}
	return freshIngress, err
}

// updatePort changes a port's rate, mode, header size or worker through the
// config map only; the program stays attached and counters keep running.
// The 24-byte config is not updated atomically: a frame arriving during the
// update may see a mix of the old and new config, which is harmless.
func (d *Dataplane) updatePort(ifindex int, pc PortConfig) error {
	if err := pc.validate(d.cfg.Workers); err != nil {
		return fmt.Errorf("dataplane: update ifindex %d: %w", ifindex, err)
	}
	if err := d.modeAvailable(pc.Mode); err != nil {
		return fmt.Errorf("dataplane: update ifindex %d: %w", ifindex, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.ports[ifindex]
	if !ok {
		return fmt.Errorf("dataplane: update ifindex %d: %w", ifindex, ErrNotAttached)
	}
	if pc.Kind == PortPlain {
		pc.Kind = p.cfg.Kind // the link's, found at attach
	}
	pc.Hook = p.cfg.Hook // where it was attached
	freshIngress := false
	if pc.Direction != p.cfg.Direction {
		// The config first, for the new mode: a sampler attached now
		// reads it.
		bc := d.bpfConfig(pc, p.slot)
		if err := d.configMap(uint32(ifindex)).Put(uint32(ifindex), &bc); err != nil {
			return fmt.Errorf("dataplane: update ifindex %d: %w", ifindex, err)
		}
		fresh, err := d.setDirection(p, ifindex, pc.Direction, pc.Mode)
		// The directions the port is sampled in now, whatever failed.
		p.cfg.Direction = p.direction()
		d.stats.publish(d.ports)
		if rerr := d.pinned.record(ifindex, p); rerr != nil {
			d.log.Warn("port's directions not pinned: a crash or an upgrade takes it for its former ones", "ifindex", ifindex, "err", rerr)
		}
		if err != nil {
			return fmt.Errorf("dataplane: update ifindex %d: %w", ifindex, err)
		}
		freshIngress = fresh
	}
	switch {
	case freshIngress || !pc.Direction.Has(sflow.DirectionIngress):
		// Attached for pc.Mode just now, or not sampled at ingress.
	case pc.Mode != p.cfg.Mode && p.hook == HookTC:
		// Only XDP can deliver a monitor port's frames (AF_XDP): the port
		// moves to an XDP link, attached before the TC link goes. A
		// monitor port's XDP program drops or redirects every frame, so
		// none reaches TC ingress and none is counted twice meanwhile.
		if err := d.moveToXDP(ifindex, p, pc.Mode); err != nil {
			return fmt.Errorf("dataplane: update ifindex %d: %w", ifindex, err)
		}
	case pc.Mode != p.cfg.Mode:
		// The mode is compiled into the port's program (what an unsampled
		// frame gets): swap in a new instance, atomically (BPF link
		// update). The config is written after, so a frame that sees the
		// new config already runs the new program.
		prog, err := d.portProgram(ifindex, p.slot, pc.Mode)
		if err != nil {
			return fmt.Errorf("dataplane: update ifindex %d: %w", ifindex, err)
		}
		if err := p.link.Update(prog); err != nil {
			return errors.Join(fmt.Errorf("dataplane: update ifindex %d: replacing program: %w", ifindex, err), prog.Close())
		}
		old := p.prog
		p.prog = prog
		if err := old.Close(); err != nil {
			d.log.Warn("closing the port's previous program", "ifindex", ifindex, "err", err)
		}
	}
	bc := d.bpfConfig(pc, p.slot)
	if err := d.configMap(uint32(ifindex)).Put(uint32(ifindex), &bc); err != nil {
		return fmt.Errorf("dataplane: update ifindex %d: %w", ifindex, err)
	}
	p.cfg = pc
	return nil
}

// portProgram loads the port's own instance of xdp_sampler: the shared
// maps, and the port's ifindex, counter slot and mode as constants, so that
// an unsampled frame needs neither its ingress ifindex nor the config map
// (dataplane/bpf/sampler.h, "Per-port constants"). The instance is a few dozen
// instructions (the sampled path is the shared xdp_take_sample), so its
// verification per attach or mode change is short; never per packet.
func (d *Dataplane) portProgram(ifindex int, slot uint32, mode Mode) (*ebpf.Program, error) {
	spec := d.spec.Copy()
	if err := bpf.PatchPortImms(spec.Programs[bpf.SamplerProgXdpSampler].Instructions, ifindex, slot, d.cpuSlots, uint32(mode)); err != nil {
		return nil, err
	}
	var o struct {
		Prog *ebpf.Program `ebpf:"xdp_sampler"`
	}
	// Only the maps the per-port program itself uses: the sampled path is
	// the shared xdp_take_sample, reached by tail call.
	err := bpf.LoadAndAssign(spec, &o, &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		bpf.SamplerMapCounters:    d.objs.Counters,
		bpf.SamplerMapSampleHands: d.objs.SampleHands,
		bpf.SamplerMapTakeProgs:   d.objs.TakeProgs,
	}})
	if err != nil {
		return nil, bpf.LoadError("loading the port's sampler", err)
	}
	return o.Prog, nil
}

// DetachPort removes the port's link and config and zeroes its counter
// slot, which becomes free for reuse.
func (d *Dataplane) DetachPort(ifindex int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.ports[ifindex]
	if !ok {
		return fmt.Errorf("dataplane: detach ifindex %d: %w", ifindex, ErrNotAttached)
	}
	var errs []error
	hook, dir := p.hook, p.direction()
	if err := d.pinned.forget(ifindex, p); err != nil {
		errs = append(errs, err)
	}
	if err := p.closeIngress(); err != nil {
		errs = append(errs, fmt.Errorf("detaching at ingress: %w", err))
	}
	if err := p.out.Close(); err != nil {
		errs = append(errs, fmt.Errorf("detaching at egress: %w", err))
	}
	if err := d.clearConfig(uint32(ifindex)); err != nil {
		errs = append(errs, err)
	}
	delete(d.ports, ifindex)
	d.stats.publish(d.ports)
	d.stats.counters.Zero(p.slot)
	if d.egress != nil {
		d.egress.Pages().Zero(p.slot)
	}
	d.freeSlots = append(d.freeSlots, p.slot)
	d.log.Info("sampler detached", "ifindex", ifindex, "direction", dir, "hook", hook, "slot", p.slot)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dataplane: detach ifindex %d: %w", ifindex, err)
	}
	return nil
}

// configMap is the BPF map holding the config of ifindex key: the array
// for small ifindexes, the hash map for the others.
func (d *Dataplane) configMap(key uint32) *ebpf.Map {
	if key < MaxIfIndex {
		return d.objs.PortConfigs
	}
	return d.objs.PortConfigsHigh
}

func (d *Dataplane) clearConfig(key uint32) error {
	if key >= MaxIfIndex {
		if err := d.objs.PortConfigsHigh.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("clearing config of ifindex %d: %w", key, err)
		}
		return nil
	}
	var zero bpf.SamplerPortConfig
	if err := d.objs.PortConfigs.Put(key, &zero); err != nil {
		return fmt.Errorf("clearing config of ifindex %d: %w", key, err)
	}
	return nil
}

// AttachMode reports how the sampler is attached to ifindex: AttachNative,
// AttachGeneric (XDP), AttachTCX or AttachClsact (TC ingress), or "" when
// not attached.
func (d *Dataplane) AttachMode(ifindex int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.ports[ifindex]; ok {
		return p.mode
	}
	return ""
}

// outOfResources reports whether err is the process running out of
// descriptors or memory (EMFILE, ENFILE, ENOMEM): transient, unlike a
// hook refusing the program. cilium/ebpf's BTF load errors carry the
// errno in their text only.
func outOfResources(err error) bool {
	for _, e := range []unix.Errno{unix.EMFILE, unix.ENFILE, unix.ENOMEM} {
		if errors.Is(err, e) || strings.Contains(err.Error(), e.Error()) {
			return true
		}
	}
	return false
}
