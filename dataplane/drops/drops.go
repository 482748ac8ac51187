// Dropped-packet notifications (docs/spec/sflow_drops.md): the
// skb:kfree_skb program (dataplane/bpf/drops.c), its perf buffers of notifications
// (one per CPU: bpf_skb_output, which copies the frame's paged bytes too,
// writes only there) and the doorbell ring that wakes their
// reader, its exact per-reason and per-port counters, the kernel's reason
// names (BTF) and the drop locations' function names (/proc/kallsyms).
package drops

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/perf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
)

// Defaults and limits of Config.
const (
	// DefaultLimit is the notifications per second the host agent
	// sends by default (hsflowd dropmon limit).
	DefaultLimit = 100
	// DefaultHeaderBytes is sFlowEsMaximumHeaderSize's default.
	DefaultHeaderBytes = 128
	// MaxHeaderBytes is the largest header copy of drops.c.
	MaxHeaderBytes = 256
	// DefaultRingBytes is the size of each CPU's notification buffer:
	// at the default limit and header size it holds more than three
	// seconds of notifications even if all of them happen on one CPU
	// (a record is at most 48 + 256 bytes plus 12 bytes of perf framing).
	// The buffers are locked memory: 64 KiB per CPU stays below the
	// kernel's perf_event_mlock_kb allowance (516 KiB per CPU by default),
	// so a daemon without CAP_IPC_LOCK can open them.
	DefaultRingBytes = 64 << 10
)

// Config configures the drop program.
type Config struct {
	// Netns is the inode number of the network namespace whose drops are
	// reported; 0 means the namespace of the calling process
	// (/proc/self/ns/net). Drops elsewhere are neither reported nor counted.
	Netns uint64
	// Limit is the notifications per second (a budget shared by all
	// CPUs); 0 counts drops without notifying any.
	Limit uint32
	// HeaderBytes is how many bytes of each dropped packet are copied,
	// from its MAC header, 0..MaxHeaderBytes.
	HeaderBytes int
	// RingBytes is the size of each CPU's notification buffer (a power of
	// two >= the page size); 0 = DefaultRingBytes. Fixed at open.
	RingBytes int
	// PinDir, when set, is a directory on a BPF file system where the
	// attached program and its maps are pinned, so that they outlive the
	// process (Release): the program keeps counting every drop while no
	// process runs (an upgrade's exec, a crash and restart), and the
	// next Open with the same program adopts it, its counters going on.
	// Fixed at open.
	PinDir string
}

// Event is one notification. Header aliases the reader's buffer and is
// valid only during the callback.
type Event struct {
	// Reason is the kernel's enum skb_drop_reason value, ReasonName its
	// name without the SKB_DROP_REASON_ prefix (from the kernel's BTF).
	Reason     uint32
	ReasonName string
	// Location is the kfree_skb call site; Symbol the kernel function
	// containing it ("" when /proc/kallsyms hides addresses).
	Location uint64
	Symbol   string
	// InIfIndex is the port the packet came in on (0: made locally);
	// OutIfIndex the port of an egress drop (0: not an egress drop).
	InIfIndex  uint32
	OutIfIndex uint32
	// Queue is the skb's transmit queue (meaningful for egress drops).
	Queue uint32
	CPU   uint32
	// TimestampNs is CLOCK_MONOTONIC at the drop.
	TimestampNs uint64
	// FrameLen is the packet's length from the start of Header's protocol
	// header; HeaderProto is the sflow header_protocol of Header (1
	// Ethernet, 11 IPv4, 12 IPv6, 0 no header copied). Header is the
	// packet's first min(HeaderBytes, FrameLen) bytes, wherever the skb
	// held them (linear area, page fragments, frag_list).
	FrameLen    uint32
	HeaderProto uint32
	Header      []byte
	// PagedLen is the skb's data_len at the drop: how many of the
	// packet's bytes were outside its linear area (page fragments or
	// frag_list). Diagnostic: the tests use it to show a paged drop.
	PagedLen uint32
}

// Stats are the drop program's totals, summed over CPUs. Every drop is
// notified, suppressed or lost to a full buffer:
// Drops == Notified + Suppressed + RingFull.
type Stats struct {
	Drops      uint64 // drops in the namespace
	Notified   uint64 // notifications written to the perf buffer
	Suppressed uint64 // notifications over the per-second limit
	// RingFull are notifications the program could not write: its call to
	// bpf_skb_output failed (this CPU's buffer was full). The program
	// counts each failure itself, so this is exact and immediate.
	RingFull uint64
	// BufferLost are the lost records the perf buffers reported to the
	// reader so far (PERF_RECORD_LOST). Every one of them is also a
	// failed write counted in RingFull; the kernel reports them only
	// when the buffer next accepts a record, so BufferLost <= RingFull.
	BufferLost uint64
	// Uncounted are drops missing from the per-reason or per-port counts
	// (their maps were full); always 0 unless 4096 reasons or 65536 ports.
	Uncounted uint64
}

// Lost returns the notifications lost in the kernel: suppressed by the
// limit plus those the buffer could not take (the larger of the
// program's count and the reader's lost records, which can only be the
// program's; the discarded_packet drops field).
func (s Stats) Lost() uint64 { return s.Suppressed + max(s.RingFull, s.BufferLost) }

// Drops is the loaded and attached drop program.
type Drops struct {
	objs    bpf.DropsObjects
	link    link.Link
	rd      *perf.Reader // the notifications, never waited on
	rec     perf.Record
	bell    *ringbuf.Reader // the doorbell: Read waits here
	bellRec ringbuf.Record
	fixed   bpf.DropsDropEvent // decode's copy of a record's fixed fields
	reasons map[uint32]string
	syms    *kernelSymbols
	netns   uint64
	// bufLost sums the lost records the reader saw (Stats.BufferLost).
	bufLost atomic.Uint64
	// pinned is the directory the program and its maps are pinned in
	// ("" none); adopted says they were an earlier process's, and
	// adoptedNotified is then the program's notified count before this
	// process's buffers took notifications (Adopted); stale are the
	// folders of pinned programs of other builds, replaced the programs
	// this Open detached (Replaced).
	pinned          string
	adopted         bool
	adoptedNotified uint64
	stale           []string
	replaced        []ReplacedProgram

	mu  sync.Mutex // guards cfg
	cfg Config
}

// netnsInode returns the inode number of the process's network namespace.
func netnsInode() (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/net", &st); err != nil {
		return 0, fmt.Errorf("drops: network namespace of the process: %w", err)
	}
	return st.Ino, nil
}

// NetnsInode returns the inode number of a network namespace file such as
// /run/netns/NAME.
func NetnsInode(path string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("drops: network namespace %s: %w", path, err)
	}
	return st.Ino, nil
}

func (c *Config) validate() error {
	if c.HeaderBytes < 0 || c.HeaderBytes > MaxHeaderBytes {
		return fmt.Errorf("drops: drop header bytes %d not in 0..%d", c.HeaderBytes, MaxHeaderBytes)
	}
	if c.RingBytes == 0 {
		c.RingBytes = DefaultRingBytes
	}
	if page := os.Getpagesize(); c.RingBytes < page || bits.OnesCount(uint(c.RingBytes)) != 1 {
		return fmt.Errorf("drops: drop RingBytes %d is not a power of two >= page size %d", c.RingBytes, page)
	}
	if c.Netns > 0xffffffff {
		return fmt.Errorf("drops: netns inode %d does not fit 32 bits", c.Netns)
	}
	return nil
}

// Open loads drops.c, configures it, attaches it to skb:kfree_skb and
// opens its per-CPU buffers. Reason names come from the running kernel's BTF and
// function names from /proc/kallsyms, both read once here (so before any
// privilege is dropped).
func Open(cfg Config) (*Drops, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Netns == 0 {
		ino, err := netnsInode()
		if err != nil {
			return nil, err
		}
		cfg.Netns = ino
	}
	reasons, err := kernelDropReasons()
	if err != nil {
		return nil, err
	}
	d := &Drops{reasons: reasons, syms: loadKernelSymbols("/proc/kallsyms"), netns: cfg.Netns}
	spec, err := bpf.LoadDrops()
	if err != nil {
		return nil, fmt.Errorf("drops: loading drops spec: %w", err)
	}
	spec.Maps[bpf.DropsMapDoorbell].MaxEntries = uint32(os.Getpagesize())
	if cfg.PinDir != "" {
		d.pinned = filepath.Join(cfg.PinDir, programFingerprint(spec))
		ok, err := d.adopt()
		if err != nil {
			return nil, err
		}
		if ok {
			if err := d.open(cfg, nil); err != nil {
				return nil, errors.Join(err, d.closeAll())
			}
			return d, nil
		}
	}
	if err := spec.Variables[bpf.DropsVarConsumedReason].Set(consumedReason(reasons)); err != nil {
		return nil, fmt.Errorf("drops: setting the consumed reason: %w", err)
	}
	if err := bpf.LoadAndAssign(spec, &d.objs, nil); err != nil {
		return nil, bpf.LoadError("drops: loading drops", err)
	}
	if err := d.open(cfg, func() error {
		d.retire()
		var err error
		d.link, err = link.AttachTracing(link.TracingOptions{Program: d.objs.KfreeSkbDrops})
		if err != nil {
			return fmt.Errorf("drops: attaching to skb:kfree_skb: %w", err)
		}
		return nil
	}); err != nil {
		return nil, errors.Join(err, d.closeAll())
	}
	if d.pinned != "" {
		if err := d.pin(); err != nil {
			return nil, errors.Join(err, d.Close())
		}
	}
	return d, nil
}

// open configures the program and opens its buffers and doorbell; attach,
// when not nil, attaches it (after the buffers, so that no notification
// finds them missing).
func (d *Drops) open(cfg Config, attach func() error) error {
	if err := d.Configure(cfg); err != nil {
		return err
	}
	if d.adopted {
		// Before this process's buffers are in the map: the
		// notifications written so far went to the earlier process's
		// buffers (or failed, counted ring_full, once it was gone).
		st, err := d.Stats()
		if err != nil {
			return err
		}
		d.adoptedNotified = st.Notified
	}
	// One buffer per online CPU. Its watermark is nearly its size: perf
	// would otherwise wake the reader (an irq_work, a self-interrupt)
	// for every record, waiting or not; the doorbell ring wakes it only
	// when it waits (dataplane/bpf/drops.c). Read never waits on these buffers: a
	// deadline in the past makes each read take what they hold.
	var err error
	d.rd, err = perf.NewReaderWithOptions(d.objs.Events, cfg.RingBytes, perf.ReaderOptions{Watermark: cfg.RingBytes - 1})
	if err != nil {
		return fmt.Errorf("drops: drop notification buffers: %w", err)
	}
	d.rd.SetDeadline(drainNow)
	d.bell, err = ringbuf.NewReader(d.objs.Doorbell)
	if err != nil {
		return fmt.Errorf("drops: drop notification doorbell: %w", err)
	}
	if attach != nil {
		return attach()
	}
	return nil
}

// FunctionNames reports whether drop locations can be named
// (extended_function): /proc/kallsyms showed this process the kernel's
// text addresses. The kernel hides them (all zero) from a process without
// CAP_SYSLOG unless kernel.kptr_restrict is 0 and
// kernel.perf_event_paranoid is at most 1; the daemon's least-privilege
// capability set does not include CAP_SYSLOG.
func (d *Drops) FunctionNames() bool { return len(d.syms.addrs) > 0 }

// Configure changes the limit and header size (Netns and RingBytes are
// fixed at open and ignored here). It takes effect for the next drop.
func (d *Drops) Configure(cfg Config) error {
	if cfg.HeaderBytes < 0 || cfg.HeaderBytes > MaxHeaderBytes {
		return fmt.Errorf("drops: drop header bytes %d not in 0..%d", cfg.HeaderBytes, MaxHeaderBytes)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	c := bpf.DropsDropConfig{NetnsIno: uint32(d.netns), Limit: cfg.Limit, HeaderBytes: uint32(cfg.HeaderBytes)}
	if err := d.objs.Config.Put(uint32(0), &c); err != nil {
		return fmt.Errorf("drops: writing drop config: %w", err)
	}
	cfg.Netns = d.netns
	d.cfg = cfg
	return nil
}

// Config returns the configuration in force.
func (d *Drops) Config() Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

// Close detaches the program and frees its maps (and their pins); a
// blocked Read returns os.ErrClosed.
func (d *Drops) Close() error {
	var errs []error
	if d.pinned != "" {
		errs = append(errs, unpinAll(filepath.Dir(d.pinned)))
	}
	return errors.Join(append(errs, d.closeAll())...)
}

// closeAll closes the process's descriptors: the program stays attached
// only if pinned.
func (d *Drops) closeAll() error {
	var errs []error
	if d.link != nil {
		if err := d.link.Close(); err != nil {
			errs = append(errs, fmt.Errorf("drops: detaching drops: %w", err))
		}
	}
	if d.bell != nil {
		if err := d.bell.Close(); err != nil {
			errs = append(errs, fmt.Errorf("drops: closing drop notification doorbell: %w", err))
		}
	}
	if d.rd != nil {
		if err := d.rd.Close(); err != nil {
			errs = append(errs, fmt.Errorf("drops: closing drop notification buffers: %w", err))
		}
	}
	if err := d.objs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("drops: closing drops: %w", err))
	}
	return errors.Join(errs...)
}

// Wake makes a blocked Read return (nil error) once it has delivered
// what is in the buffers.
func (d *Drops) Wake() error { return d.bell.Flush() }

// Program returns the attached kfree_skb program (for its run-time
// statistics in benchmarks).
func (d *Drops) Program() *ebpf.Program { return d.objs.KfreeSkbDrops }

// SetDeadline bounds the next Read (zero: no deadline). It must not be
// called while a Read is blocked (use Wake).
func (d *Drops) SetDeadline(t time.Time) { d.bell.SetDeadline(t) }

// dropEventHeader is the size of a drop record's fixed fields (struct
// drop_event in dataplane/bpf/drops.c), the offset of its header bytes in the Go
// twin bpf2go generated from the object's BTF (bpf.DropsDropEvent,
// dataplane/bpf/gen.go): regenerating the object regenerates the layout read here.
// The record holds header_len header bytes after them (a perf record may
// carry up to 7 bytes of padding after those).
const dropEventHeader = int(unsafe.Offsetof(bpf.DropsDropEvent{}.Data))

// drainNow is a deadline in the past: the perf reader returns
// os.ErrDeadlineExceeded once it has emptied every CPU's buffer, never
// waiting.
var drainNow = time.Unix(1, 0)

// Read waits for notifications and calls fn for each one ready, without
// waiting again once at least one was delivered. It returns the number
// delivered; os.ErrDeadlineExceeded after SetDeadline's time,
// os.ErrClosed after Close, and nil (possibly with 0: after Wake, or for a
// doorbell whose notification an earlier call took) otherwise. ev is
// reused between calls: fn must not keep it or its Header.
func (d *Drops) Read(ev *Event, fn func(*Event)) (int, error) {
	// Wait for the doorbell (a notification was written), then empty the
	// doorbell ring: one wake-up stands for everything written so far.
	waitErr := d.bell.ReadInto(&d.bellRec)
	for waitErr == nil && d.bell.AvailableBytes() > 0 {
		waitErr = d.bell.ReadInto(&d.bellRec)
	}
	switch {
	case errors.Is(waitErr, ringbuf.ErrClosed):
		return 0, os.ErrClosed
	case waitErr != nil && !errors.Is(waitErr, ringbuf.ErrFlushed) && !errors.Is(waitErr, os.ErrDeadlineExceeded):
		return 0, fmt.Errorf("drops: drop notification doorbell: %w", waitErr)
	}
	// Woken, flushed (Wake) or at the deadline: take what the buffers
	// hold (every notification rings after it is written, so after the
	// doorbell it is there).
	n, err := d.drain(ev, fn)
	if err != nil {
		return n, err
	}
	if n == 0 && errors.Is(waitErr, os.ErrDeadlineExceeded) {
		return 0, os.ErrDeadlineExceeded
	}
	return n, nil
}

// drain delivers every notification the perf buffers hold, without
// waiting.
func (d *Drops) drain(ev *Event, fn func(*Event)) (int, error) {
	n := 0
	for {
		if err := d.rd.ReadInto(&d.rec); err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				return n, nil // every buffer emptied
			case errors.Is(err, perf.ErrClosed):
				return n, os.ErrClosed
			}
			return n, fmt.Errorf("drops: drop notification buffers: %w", err)
		}
		if d.rec.LostSamples > 0 {
			d.bufLost.Add(d.rec.LostSamples)
			continue
		}
		if !d.decode(d.rec.RawSample, ev) {
			continue
		}
		fn(ev)
		n++
	}
}

// decode fills ev from a perf record; false for a record too short for
// the header length it states.
//
// The fixed fields are copied into the generated struct and read from it:
// the BPF object is little-endian (bpfel), as is every host it loads on.
// They are copied rather than read in place because a record is shorter
// than the struct (it carries header_len of data's 256 bytes).
func (d *Drops) decode(b []byte, ev *Event) bool {
	if len(b) < dropEventHeader {
		return false
	}
	f := &d.fixed
	copy(unsafe.Slice((*byte)(unsafe.Pointer(f)), dropEventHeader), b)
	hl := int(f.HeaderLen)
	if hl > MaxHeaderBytes || dropEventHeader+hl > len(b) {
		return false
	}
	ev.Location = f.Location
	ev.TimestampNs = f.TimestampNs
	ev.Reason = f.Reason
	ev.InIfIndex = f.InIfindex
	ev.OutIfIndex = f.OutIfindex
	ev.FrameLen = f.FrameLen
	ev.HeaderProto = uint32(f.HeaderProto)
	ev.Queue = uint32(f.Queue)
	ev.CPU = uint32(f.Cpu)
	// f.HeadLen says how the header was split between the record and the
	// skb copy; it is contiguous here.
	ev.PagedLen = f.PagedLen
	ev.Header = b[dropEventHeader : dropEventHeader+hl]
	ev.ReasonName = d.ReasonName(ev.Reason)
	ev.Symbol = d.syms.lookup(ev.Location)
	return true
}

// ReasonName returns the kernel's name of drop reason code (without the
// SKB_DROP_REASON_ prefix), or "REASON_<code>" for a code the kernel's BTF
// does not name (a subsystem's reason).
func (d *Drops) ReasonName(code uint32) string {
	if n, ok := d.reasons[code]; ok {
		return n
	}
	return fmt.Sprintf("REASON_%d", code)
}

// Stats sums the program's per-CPU totals.
func (d *Drops) Stats() (Stats, error) {
	var per []bpf.DropsDropStats
	if err := d.objs.Stats.Lookup(uint32(0), &per); err != nil {
		return Stats{}, fmt.Errorf("drops: reading drop stats: %w", err)
	}
	s := Stats{BufferLost: d.bufLost.Load()} // the reader's, not per CPU: no namesake in DropsDropStats
	bpf.SumPerCPU(&s, per)
	return s, nil
}

// ReasonCounts returns the exact drops per kernel reason code, summed
// over CPUs.
func (d *Drops) ReasonCounts() (map[uint32]uint64, error) {
	core, err := sumPerCPU(d.objs.ReasonDrops)
	if err != nil {
		return nil, err
	}
	ext, err := sumPerCPU(d.objs.ReasonDropsExt)
	if err != nil {
		return nil, err
	}
	for k, v := range core {
		if v != 0 {
			ext[k] = v
		}
	}
	return ext, nil
}

// PortCounts returns the exact drops per port ifindex (the egress port of
// an egress drop, else the ingress port; 0 for locally made packets).
func (d *Drops) PortCounts() (map[uint32]uint64, error) {
	return sumPerCPU(d.objs.PortDrops)
}

func sumPerCPU(m *ebpf.Map) (map[uint32]uint64, error) {
	out := map[uint32]uint64{}
	var k uint32
	var per []uint64
	it := m.Iterate()
	for it.Next(&k, &per) {
		out[k] = bpf.Sum(per)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("drops: reading drop counts of %s: %w", m, err)
	}
	return out, nil
}

// kernelDropReasons reads enum skb_drop_reason from the running kernel's
// BTF, so that a newer kernel's reasons are named without a code change.
// noConsumedReason is the consumed_reason of a kernel without SKB_CONSUMED:
// a value no drop reason has.
const noConsumedReason = 0xffffffff

// consumedReason returns the value of SKB_CONSUMED ("CONSUMED" in
// kernelDropReasons' names) in the running kernel's enum, or
// noConsumedReason when the kernel has none (before Linux 6.3 the value 1
// is SKB_DROP_REASON_NOT_SPECIFIED, a real drop).
func consumedReason(names map[uint32]string) uint32 {
	for v, n := range names {
		if n == "CONSUMED" {
			return v
		}
	}
	return noConsumedReason
}

func kernelDropReasons() (map[uint32]string, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("drops: kernel BTF: %w", err)
	}
	var e *btf.Enum
	if err := spec.TypeByName("skb_drop_reason", &e); err != nil {
		return nil, fmt.Errorf("drops: enum skb_drop_reason in kernel BTF: %w", err)
	}
	names := make(map[uint32]string, len(e.Values))
	for _, v := range e.Values {
		n := v.Name
		switch {
		case len(n) > len("SKB_DROP_REASON_") && n[:len("SKB_DROP_REASON_")] == "SKB_DROP_REASON_":
			n = n[len("SKB_DROP_REASON_"):]
		case len(n) > len("SKB_") && n[:len("SKB_")] == "SKB_":
			n = n[len("SKB_"):] // SKB_CONSUMED
		}
		if _, dup := names[uint32(v.Value)]; !dup {
			names[uint32(v.Value)] = n
		}
	}
	return names, nil
}

// TrialLoad loads the drop program and its maps through the kernel's
// verifier, as Open does, then unloads them, attaching nothing
// (sflowswitchd -check-config).
func TrialLoad() error {
	reasons, err := kernelDropReasons()
	if err != nil {
		return err
	}
	spec, err := bpf.LoadDrops()
	if err != nil {
		return fmt.Errorf("drops: loading drops spec: %w", err)
	}
	if err := spec.Variables[bpf.DropsVarConsumedReason].Set(consumedReason(reasons)); err != nil {
		return fmt.Errorf("drops: setting the consumed reason: %w", err)
	}
	spec.Maps[bpf.DropsMapDoorbell].MaxEntries = uint32(os.Getpagesize())
	var objs bpf.DropsObjects
	if err := bpf.LoadAndAssign(spec, &objs, nil); err != nil {
		return bpf.LoadError("drops: loading drops", err)
	}
	return objs.Close()
}
