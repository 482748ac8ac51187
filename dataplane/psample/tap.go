package psample

// The tap intake: psample's samples read in place from a BPF ring buffer
// filled by an fentry program on psample_sample_packet
// (dataplane/bpf/psample_tap.c), in place of the netlink socket. The
// netlink intake costs the reader, per sample, a message the kernel
// allocates, multicasts, queues, copies out and frees; the tap costs a
// record in a ring the reader maps, read with no system call (a poll
// when the ring is empty, as the samplers' rings: dataplane/reader).
//
// What the tap changes, seen from a Sample:
//   - no GROUP_SEQ (HasSeq unset): the tap's losses are the records the
//     program could not reserve (the ring was full), counted per group in
//     the kernel and handed to Conn.OnLost, exactly, rather than inferred
//     from sequence gaps;
//   - the ifindexes are the kernel's 32-bit ones (netlink carries 16
//     bits);
//   - no TIMESTAMP, no tunnel key, no user cookie (the agent uses none);
//   - the header bytes are min(frame, truncation, MaxHeaderBytes) of the
//     skb's linear area; a frame whose wanted bytes were not all linear
//     comes with the linear ones and Truncated set (counted in
//     TapStats.ShortCopies).
//
// Attaching takes a reference on the psample module (the BPF trampoline
// of a module function holds one), so `modprobe -r psample` fails while
// the tap is attached; act_sample and the switch drivers hold it anyway.
// The family then cannot be made anew under the reader.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
)

// Intake says how a Conn receives the kernel's samples.
type Intake int

const (
	// IntakeAuto is the tap where the kernel lets it attach (fentry on a
	// module function: module BTF, CAP_BPF and CAP_PERFMON), else netlink.
	IntakeAuto Intake = iota
	// IntakeNetlink is the netlink socket joined to psample's packets
	// group.
	IntakeNetlink
	// IntakeTap is the tap only: Open fails where it cannot attach.
	IntakeTap
)

// String names the intake as the logs and metrics do.
func (i Intake) String() string {
	switch i {
	case IntakeNetlink:
		return "netlink"
	case IntakeTap:
		return "tap"
	}
	return "auto"
}

// DefaultTapRingBytes is ConnConfig.TapRingBytes's default: 4 MiB, as
// the netlink socket's buffer (about 13000 records of 256 header bytes).
const DefaultTapRingBytes = 4 << 20

// tapMaxPerRead bounds the records one Read hands on, as maxRounds
// batches of the socket do.
const tapMaxPerRead = 1024

// tapRecordSize is the fixed part of a ring record (struct tap_sample),
// the offset of its header bytes.
const tapRecordSize = int(unsafe.Offsetof(bpf.PsampleTapTapSample{}.Data))

// The tap_sample flags (dataplane/bpf/psample_tap.c TAP_F_*).
const (
	tapOutTC       = 1
	tapOutTCOcc    = 2
	tapLatency     = 4
	tapProbability = 8
	tapShort       = 16
)

// LostUnknownGroup is the group OnLost names for the tap's losses whose
// group the kernel could not record (its table of groups full).
const LostUnknownGroup = math.MaxUint32

// TapStats are the tap program's counters, summed over the CPUs.
type TapStats struct {
	Seen        uint64 // calls of psample_sample_packet for this namespace
	Delivered   uint64 // records written
	Lost        uint64 // records that found the ring full
	ShortCopies uint64 // records with fewer header bytes than wanted
}

// tap is a Conn's BPF intake.
type tap struct {
	objs bpf.PsampleTapObjects
	lnk  link.Link
	ring tapRing
	// lostMem maps lost_total; lost points at its counter.
	lostMem  []byte
	lost     *uint64
	lastLost uint64
	// groupLost is each group's count of lost records last charged.
	groupLost map[uint32]uint64
	values    []uint64 // one per possible CPU
	// batchBytes is the backlog read at once, without the holdoff: a
	// sixteenth of the ring (Conn.tapRead).
	batchBytes uintptr
}

// tapRing is the memory mapping of the tap's BPF ring buffer (the
// kernel's layout, kernel/bpf/ringbuf.c: consumer page, producer page,
// the data area mapped twice), as dataplane/reader's ringView.
type tapRing struct {
	consPage, prodPage []byte
	cons, prod         *uintptr
	data               []byte
	mask               uintptr
}

// Ring record header (struct bpf_ringbuf_hdr).
const (
	ringHdrSize = 8
	busyBit     = 1 << 31
	discardBit  = 1 << 30
)

// netnsInode is the inode number of the calling thread's network
// namespace (the psample groups' namespace).
func netnsInode() (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return 0, fmt.Errorf("psample: stat /proc/thread-self/ns/net: %w", err)
	}
	return st.Ino, nil
}

// openTap loads the tap program for the calling thread's namespace,
// attaches it to psample_sample_packet and maps its ring.
func openTap(ringBytes int) (*tap, error) {
	if ringBytes <= 0 {
		ringBytes = DefaultTapRingBytes
	}
	page := os.Getpagesize()
	if ringBytes < page || ringBytes&(ringBytes-1) != 0 {
		return nil, fmt.Errorf("psample: tap ring of %d bytes: a power of two, at least a page", ringBytes)
	}
	ino, err := netnsInode()
	if err != nil {
		return nil, err
	}
	spec, err := bpf.LoadPsampleTap()
	if err != nil {
		return nil, fmt.Errorf("psample: tap spec: %w", err)
	}
	spec.Maps[bpf.PsampleTapMapSamples].MaxEntries = uint32(ringBytes)
	if err := spec.Variables[bpf.PsampleTapVarNetnsIno].Set(uint32(ino)); err != nil {
		return nil, fmt.Errorf("psample: tap netns: %w", err)
	}
	t := &tap{groupLost: map[uint32]uint64{}, batchBytes: uintptr(ringBytes / 16)}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		return nil, fmt.Errorf("psample: loading the tap: %w", err)
	}
	t.lnk, err = link.AttachTracing(link.TracingOptions{Program: t.objs.PsampleTap, AttachType: ebpf.AttachTraceFEntry})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("psample: attaching the tap to psample_sample_packet: %w", err), t.close())
	}
	if t.ring, err = mapTapRing(t.objs.Samples.FD(), ringBytes); err != nil {
		return nil, errors.Join(err, t.close())
	}
	if t.lostMem, err = unix.Mmap(t.objs.LostTotal.FD(), 0, page, unix.PROT_READ, unix.MAP_SHARED); err != nil {
		return nil, errors.Join(fmt.Errorf("psample: mapping the tap's lost count: %w", err), t.close())
	}
	t.lost = (*uint64)(unsafe.Pointer(&t.lostMem[0]))
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, errors.Join(err, t.close())
	}
	t.values = make([]uint64, cpus)
	return t, nil
}

// mapTapRing maps the ring buffer map fd of size bytes.
func mapTapRing(fd, size int) (tapRing, error) {
	page := os.Getpagesize()
	cons, err := unix.Mmap(fd, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return tapRing{}, fmt.Errorf("psample: mapping the tap ring's consumer page: %w", err)
	}
	prod, err := unix.Mmap(fd, int64(page), page+2*size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return tapRing{}, errors.Join(fmt.Errorf("psample: mapping the tap ring: %w", err), unix.Munmap(cons))
	}
	return tapRing{
		consPage: cons, prodPage: prod,
		cons: (*uintptr)(unsafe.Pointer(&cons[0])),
		prod: (*uintptr)(unsafe.Pointer(&prod[0])),
		data: prod[page:], mask: uintptr(size - 1),
	}, nil
}

// close detaches the program (the module's reference goes with it) and
// releases everything.
func (t *tap) close() error {
	var errs []error
	if t.lnk != nil {
		errs = append(errs, t.lnk.Close())
		t.lnk = nil
	}
	if t.ring.consPage != nil {
		errs = append(errs, unix.Munmap(t.ring.prodPage), unix.Munmap(t.ring.consPage))
		t.ring = tapRing{}
	}
	if t.lostMem != nil {
		errs = append(errs, unix.Munmap(t.lostMem))
		t.lostMem, t.lost = nil, nil
	}
	errs = append(errs, t.objs.Close())
	return errors.Join(errs...)
}

// backlog is the bytes the ring holds (committed or not).
func (t *tap) backlog() uintptr {
	return atomic.LoadUintptr(t.ring.prod) - atomic.LoadUintptr(t.ring.cons)
}

// read hands fn up to max committed records, in ring order, decoded into
// s, and releases their space; it stops at a record still being written.
// Memory ordering as dataplane/reader's ringReader.batch: producer_pos
// loaded (acquire), each header's len loaded atomically (pairs with the
// kernel's xchg at submit), consumer_pos stored (release) once after the
// records were handed on.
func (t *tap) read(s *Sample, batch uint64, max int, fn func(*Sample)) (n int, malformed int, err error) {
	v := &t.ring
	prod := atomic.LoadUintptr(v.prod)
	cons := atomic.LoadUintptr(v.cons)
	start := cons
	for cons != prod && n < max {
		if prod-cons < ringHdrSize {
			err = fmt.Errorf("psample: tap ring: %d bytes left, short of a record header", prod-cons)
			break
		}
		off := cons & v.mask
		l := atomic.LoadUint32((*uint32)(unsafe.Pointer(&v.data[off])))
		if l&busyBit != 0 {
			break
		}
		dataLen := uintptr(l &^ (busyBit | discardBit))
		total := (ringHdrSize + dataLen + 7) &^ 7
		if total > prod-cons {
			err = fmt.Errorf("psample: tap ring: record of %d bytes, %d left", total, prod-cons)
			break
		}
		if l&discardBit == 0 {
			b := v.data[off+ringHdrSize : off+ringHdrSize+dataLen : off+ringHdrSize+dataLen]
			if decodeTap(b, s) {
				s.Batch = batch
				fn(s)
				n++
			} else {
				malformed++
			}
		}
		cons += total
	}
	if cons != start {
		atomic.StoreUintptr(v.cons, cons)
	}
	return n, malformed, err
}

// decodeTap fills s from a ring record; false when it is malformed. The
// record is read in place as the generated struct (little endian, 8-byte
// aligned: see dataplane/reader's decode).
func decodeTap(b []byte, s *Sample) bool {
	if len(b) < tapRecordSize || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%unsafe.Alignof(bpf.PsampleTapTapSample{}) != 0 {
		return false
	}
	m := (*bpf.PsampleTapTapSample)(unsafe.Pointer(unsafe.SliceData(b)))
	hl := int(m.HeaderLen)
	if hl > len(b)-tapRecordSize {
		return false
	}
	*s = Sample{
		Has:      HasOrigSize | HasGroup | HasRate | HasProto,
		IIfIndex: m.InIfindex, OIfIndex: m.OutIfindex,
		OrigSize: m.OrigSize, Group: m.Group, Rate: m.Rate,
		Proto: m.Proto,
		Data:  b[tapRecordSize : tapRecordSize+hl],
	}
	if m.InIfindex != 0 {
		s.Has |= HasIIf
	}
	if m.OutIfindex != 0 {
		s.Has |= HasOIf
	}
	if hl > 0 {
		s.Has |= HasData
	}
	if m.Flags&tapProbability != 0 {
		s.Has |= HasProbability
		s.Probability, s.Rate = m.Rate, ProbabilityRate(m.Rate)
	}
	if m.Flags&tapOutTC != 0 {
		s.Has |= HasOutTC
		s.OutTC = uint32(m.OutTc)
	}
	if m.Flags&tapOutTCOcc != 0 {
		s.Has |= HasOutTCOcc
		s.OutTCOcc = m.OutTcOcc
	}
	if m.Flags&tapLatency != 0 {
		s.Has |= HasLatency
		s.Latency = m.Latency
	}
	s.Truncated = m.Flags&tapShort != 0
	return true
}

// losses hands fn the records lost since its last call, by group (one
// memory load when none was; the groups' per-CPU counts, a map walk,
// only when some were). Losses the kernel could not put to a group go to
// LostUnknownGroup.
func (t *tap) losses(fn func(group uint32, n uint64)) error {
	total := atomic.LoadUint64(t.lost)
	if total == t.lastLost {
		return nil
	}
	delta := total - t.lastLost
	var charged uint64
	var group uint32
	it := t.objs.GroupLost.Iterate()
	for it.Next(&group, &t.values) {
		var sum uint64
		for _, v := range t.values {
			sum += v
		}
		if d := sum - t.groupLost[group]; d > 0 {
			t.groupLost[group] = sum
			charged += d
			if fn != nil {
				fn(group, d)
			}
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("psample: reading the tap's losses: %w", err)
	}
	// A record counted in lost_total before its group's count (the
	// program adds to the total first) is charged at the next call.
	t.lastLost += charged
	if rest := delta - charged; rest > 0 && t.objs.GroupLost.MaxEntries() > 0 && t.groupsFull() {
		t.lastLost += rest
		if fn != nil {
			fn(LostUnknownGroup, rest)
		}
	}
	return nil
}

// groupsFull tells whether group_lost holds as many groups as it can.
func (t *tap) groupsFull() bool {
	return uint32(len(t.groupLost)) >= t.objs.GroupLost.MaxEntries()
}

// stats sums the program's per-CPU counters.
func (t *tap) stats() (TapStats, error) {
	var per []bpf.PsampleTapTapStats
	if err := t.objs.Stats.Lookup(uint32(0), &per); err != nil {
		return TapStats{}, fmt.Errorf("psample: reading the tap's counters: %w", err)
	}
	var s TapStats
	for _, c := range per {
		s.Seen += c.Seen
		s.Delivered += c.Delivered
		s.Lost += c.Lost
		s.ShortCopies += c.ShortCopies
	}
	return s, nil
}

// ErrNoTap is returned by ProbeTap when the kernel cannot take the tap:
// no psample, or no fentry on its module's functions (module BTF, Linux
// 5.11), or a verifier that refuses the program.
var ErrNoTap = errors.New("the kernel cannot attach the psample tap (fentry on psample_sample_packet: psample and its module BTF)")

// ProbeTap is the feature probe of the tap: the psample family (its
// module loaded), then the tap program loaded against
// psample_sample_packet, CO-RE relocated and verified; nothing attached.
// A refusal for lack of privilege (EPERM) comes back as it is.
func ProbeTap() error {
	if err := ProbePsample(); err != nil {
		return fmt.Errorf("%w: %w", ErrNoTap, err)
	}
	spec, err := bpf.LoadPsampleTap()
	if err != nil {
		return fmt.Errorf("psample: tap spec: %w", err)
	}
	spec.Maps[bpf.PsampleTapMapSamples].MaxEntries = uint32(os.Getpagesize())
	var objs bpf.PsampleTapObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		if errors.Is(err, unix.EPERM) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrNoTap, err)
	}
	return objs.Close()
}
