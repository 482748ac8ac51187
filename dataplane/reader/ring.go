package reader

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
)

// metaSize is the size of the fixed part of a ring record, struct
// sample_meta (dataplane/bpf/sampler.h), as bpf2go generated its Go twin
// bpf.SamplerSampleMeta from the object's BTF (dataplane/bpf/gen.go): regenerating
// the object regenerates the layout read here. It is the offset of the
// header bytes (data[]), not the Go struct's size: Go pads a struct that
// ends in a zero-size field, C does not (bpf's TestGeneratedLayouts).
const metaSize = int(unsafe.Offsetof(bpf.SamplerSampleMeta{}.Data))

// Flags of a ring record (dataplane/bpf/sample_info.h SAMPLE_F_*): what its Meta
// holds beyond the frame.
const (
	SampleEgress     = 1 << 0 // sampled leaving the port; InIfIndex is where it came in
	SampleRoute      = 1 << 1 // Meta.Route's destination answer is valid
	SampleSrcRoute   = 1 << 2 // Meta.Route's source answer is valid
	SampleFIBGen     = 1 << 3 // Meta.Route.Gen is the FIB generation both lookups saw
	SamplePoolSum    = 1 << 4 // CPUPool is every CPU's pool of the port in this direction, at this frame
	SampleTransit    = 1 << 5 // the record waited for its frame to leave: Transit says how that ended
	SampleQueue      = 1 << 6 // Transit.Depth: the frame went through a qdisc
	SampleTunnel     = 1 << 7 // Meta.Tunnel is the kernel's tunnel metadata of the frame (dataplane/bpf/tunnel.h)
	SampleTunnelPort = 1 << 8 // the port is a tunnel device (PortKind): the sample may have tunnel records
)

// RawSample is one kernel sample as a worker's Source delivers it, from
// the worker's ring or from a monitor port's AF_XDP socket.
type RawSample struct {
	IfIndex   uint32 // the sampled port: ingress, or egress with SampleEgress
	FrameLen  uint32 // full length of the sampled frame
	RxQueue   uint32 // RX queue the frame arrived on
	CPU       uint32 // CPU that took the sample
	Timestamp uint64 // CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns)
	// Rate is the power-of-two rate the kernel took this sample at, which
	// can differ from the port's current configuration while it changes.
	Rate uint32
	// CPUPool is the port's pool in the sampled direction when this frame
	// was sampled, this frame included: every CPU's with SamplePoolSum,
	// else CPU's alone (0 when unknown: monitor mode).
	CPUPool uint64
	// Flags are the record's Sample* flags; 0 for monitor samples.
	Flags uint32
	// InIfIndex is, for an egress sample, the port the frame came in on
	// (0: made on this host).
	InIfIndex uint32
	// Transit is what became of the frame, with SampleTransit.
	Transit Transit
	// Meta is the whole ring record (its route block valid as Flags
	// say); nil for monitor samples. Like Header it aliases the
	// ring and is valid only during the callback.
	Meta *bpf.SamplerSampleMeta
	// Header holds the first bytes of the frame. It aliases the reader's
	// memory (for a ring: the ring itself, reused by the kernel once Read
	// returns) and is valid only during the callback it is passed to.
	Header []byte
}

// How a transit wait ended (RawSample.Transit.Status; dataplane/bpf/sample_info.h
// TRANSIT_*).
const (
	TransitSent     = 1 // the frame left through Transit.OutIfIndex
	TransitDropped  = 2 // freed as dropped (kfree_skb)
	TransitConsumed = 3 // delivered on this host, or replaced by a copy (consume_skb)
	TransitStale    = 4 // not seen again within a second
)

// Transit is what became of a sample's frame after it was sampled
// (RawSample.Transit, valid with SampleTransit).
type Transit struct {
	// Status is TransitSent, TransitDropped, TransitConsumed or
	// TransitStale.
	Status uint32
	// DoneNs is when the wait ended (CLOCK_MONOTONIC, as Timestamp):
	// for TransitSent, when the frame left the port's qdisc for its
	// driver.
	DoneNs uint64
	// OutIfIndex and Queue are the port and transmit queue it left by
	// (TransitSent).
	OutIfIndex uint32
	Queue      uint32
	// Depth is the bytes the port's qdisc held ahead of it, with
	// SampleQueue.
	Depth uint32
}

// ringReader reads the records of one worker's ring buffer straight from
// the ring's memory mapping, a batch of records per call (the layout is
// the kernel's, kernel/bpf/ringbuf.c; see ringView). It never waits: the
// worker's Source polls the ring's FD. Used by one goroutine at a time.
type ringReader struct {
	ring      ringView
	s         RawSample
	malformed atomic.Uint64
	// handled is, during a batch, the position of the record being
	// handed to fn (every record before it is handled), and stored the
	// consumer_pos last stored (commit).
	handled, stored uintptr
}

// ringView is the memory mapping of a BPF ring buffer map, as the kernel
// lays it out for user space (kernel/bpf/ringbuf.c, ringbuf_map_mmap): the
// first page holds consumer_pos, the only page user space may write; the
// second holds producer_pos, followed by the data area, which is mapped
// twice in a row so that a record that wraps around the end of the ring is
// contiguous in memory. Positions are byte counters that only grow; a
// position's offset in the data area is pos & mask.
type ringView struct {
	consPage, prodPage []byte
	cons, prod         *uintptr // consumer_pos, producer_pos (unsigned long)
	data               []byte   // 2 * size bytes: the data area twice
	mask               uintptr  // size - 1
}

// Ring record header (struct bpf_ringbuf_hdr): u32 len, u32 pg_off. The
// kernel sets busyBit in len when it reserves a record and clears it on
// submit; discardBit marks a record the program discarded.
const (
	ringHdrSize = 8
	busyBit     = 1 << 31
	discardBit  = 1 << 30
)

// mapRing maps the ring buffer map fd of size bytes (a power of two and a
// multiple of the page size, as Config.check ensures).
func mapRing(fd, size int) (ringView, error) {
	page := os.Getpagesize()
	cons, err := unix.Mmap(fd, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return ringView{}, fmt.Errorf("mapping consumer page: %w", err)
	}
	prod, err := unix.Mmap(fd, int64(page), page+2*size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return ringView{}, errors.Join(fmt.Errorf("mapping producer page and data: %w", err), unix.Munmap(cons))
	}
	return ringView{
		consPage: cons,
		prodPage: prod,
		cons:     (*uintptr)(unsafe.Pointer(&cons[0])),
		prod:     (*uintptr)(unsafe.Pointer(&prod[0])),
		data:     prod[page:],
		mask:     uintptr(size - 1),
	}, nil
}

// unmap releases the mapping.
func (v *ringView) unmap() error {
	err := errors.Join(unix.Munmap(v.prodPage), unix.Munmap(v.consPage))
	*v = ringView{}
	return err
}

// batch hands every committed record between consumer_pos and
// producer_pos to fn and then releases their space to the kernel. busy
// reports that it stopped at a record still being written.
//
// Memory ordering (kernel/bpf/ringbuf.c): the kernel writes a record's
// header with busyBit set, then advances producer_pos with a release
// store; the program fills the record and submit clears busyBit with an
// xchg (a full barrier). So producer_pos is loaded once with an acquire
// load (Go's atomic loads are sequentially consistent), after which every
// header up to it is visible; each header's len is again read atomically
// (acquire), pairing with the xchg, so that a record seen without busyBit
// has its data visible too. Records are committed out of order across
// CPUs, so the walk stops at the first busy one. consumer_pos is stored
// with a release store once after the batch: the kernel may reuse the
// space only after we are done reading it, and fn does not block. Header
// slices passed to fn alias the ring, which is why they are valid only
// during the callback. fn may store consumer_pos earlier, up to the record
// it is handed (commit), before it sends what the records before made.
func (r *ringReader) batch(fn func(*RawSample)) (n int, busy bool, err error) {
	v := &r.ring
	prod := atomic.LoadUintptr(v.prod)
	cons := atomic.LoadUintptr(v.cons)
	r.stored = cons
	defer func() { r.handled = r.stored }() // a commit outside a batch stores nothing
	for cons != prod {
		if prod-cons < ringHdrSize {
			err = fmt.Errorf("dataplane: reading ring: %d bytes left, short of a record header", prod-cons)
			break
		}
		off := cons & v.mask
		l := atomic.LoadUint32((*uint32)(unsafe.Pointer(&v.data[off])))
		if l&busyBit != 0 {
			busy = true
			break
		}
		dataLen := uintptr(l &^ (busyBit | discardBit))
		total := (ringHdrSize + dataLen + 7) &^ 7
		if total > prod-cons {
			err = fmt.Errorf("dataplane: reading ring: record of %d bytes, %d left", total, prod-cons)
			break
		}
		if l&discardBit == 0 {
			// The data area is mapped twice, so the record is contiguous
			// even when it wraps around the end of the ring.
			if r.decode(v.data[off+ringHdrSize : off+ringHdrSize+dataLen : off+ringHdrSize+dataLen]) {
				r.handled = cons
				fn(&r.s)
				n++
			} else {
				r.malformed.Add(1)
			}
		}
		cons += total
	}
	if cons != r.stored {
		atomic.StoreUintptr(v.cons, cons)
		r.stored = cons
	}
	return n, busy, err
}

// commit stores consumer_pos up to the record being handed to the batch's
// fn: the records before it are handled, and a process that takes the
// ring over after a SIGKILL does not read them again. fn calls it (on the
// reading goroutine) before it sends datagrams made of those records, so
// that a record whose sample may have reached a collector is never read
// and sent twice (each record is one sampled frame; sFlow has no way to
// tell a repeated sample); a record handled but not sent at a kill is
// lost instead, which its data source's sample sequence numbers show (a
// gap). One store per send, not per record: consumer_pos is read by every
// CPU that reserves a record.
func (r *ringReader) commit() {
	if r.handled != r.stored {
		atomic.StoreUintptr(r.ring.cons, r.handled)
		r.stored = r.handled
	}
}

// decode fills r.s from a record; false when the record is malformed.
//
// The record is read in place as the generated struct: the BPF object is
// little-endian (bpfel), as is every host it loads on, and a record's data
// starts 8-byte aligned (the data area is page-aligned, each record's
// position a multiple of 8 and its header 8 bytes; kernel/bpf/ringbuf.c),
// as the struct's 64-bit fields need (the check is there for safety
// only). Only the fields before data are read, the metaSize bytes the
// length check covers.
func (r *ringReader) decode(b []byte) bool {
	if len(b) < metaSize || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%unsafe.Alignof(bpf.SamplerSampleMeta{}) != 0 {
		return false
	}
	m := (*bpf.SamplerSampleMeta)(unsafe.Pointer(unsafe.SliceData(b)))
	hl := m.HeaderLen
	if uint64(hl) > uint64(len(b)-metaSize) {
		return false
	}
	r.s = RawSample{
		IfIndex:   m.Ifindex,
		FrameLen:  m.FrameLen,
		RxQueue:   m.RxQueue,
		CPU:       m.Cpu,
		Timestamp: m.TimestampNs,
		Rate:      m.SampleRate,
		CPUPool:   m.Pool,
		Flags:     m.Flags,
		InIfIndex: m.InIfindex,
		Transit: Transit{Status: m.Transit.Status, DoneNs: m.Transit.DoneNs,
			OutIfIndex: m.Transit.OutIfindex, Queue: uint32(m.Transit.Queue), Depth: m.Transit.Depth},
		Meta:   m,
		Header: b[metaSize : metaSize+int(hl)],
	}
	return true
}
