package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Layout of struct sample_meta (bpf/sampler.c), the fixed part of a ring
// record. The BPF object is little-endian (bpfel).
const (
	metaIfIndex   = 0
	metaFrameLen  = 4
	metaRxQueue   = 8
	metaCPU       = 12
	metaTimestamp = 16
	metaHeaderLen = 24
	metaRate      = 28
	metaPool      = 32
	metaSize      = 40
)

// RawSample is one kernel sample as read from a worker's ring.
type RawSample struct {
	IfIndex   uint32 // ingress ifindex
	FrameLen  uint32 // full length of the sampled frame
	RxQueue   uint32 // RX queue the frame arrived on
	CPU       uint32 // CPU that took the sample
	Timestamp uint64 // CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns)
	// Rate is the power-of-two rate the kernel took this sample at, which
	// can differ from the port's current configuration while it changes.
	Rate uint32
	// CPUPool is the port's pool on CPU as it was when this frame was
	// sampled, this frame included (0 when unknown: monitor mode).
	CPUPool uint64
	// Header holds the first bytes of the frame. It aliases the reader's
	// memory (for a ring: the ring itself, reused by the kernel once Read
	// returns) and is valid only during the callback it is passed to.
	Header []byte
}

// RingReader reads the samples of one worker's ring buffer straight from
// the ring's memory mapping, a batch of records per Read (the layout is the
// kernel's, kernel/bpf/ringbuf.c; see ringView). It is used by one
// goroutine at a time (the worker); Wake and Close may be called from any
// goroutine, and Close unblocks a pending Read.
type RingReader struct {
	ring ringView
	// epfd waits for the ring (EPOLLIN on the map FD) and for wake, an
	// eventfd that Wake and Close write to.
	epfd   int
	wake   *os.File
	wakeFD int // wake's descriptor (wake.Fd would make it blocking)
	events [2]unix.EpollEvent
	// deadline is the caller's (SetDeadline); poll bounds each wait, because
	// the program submits without waking the reader until the ring fills
	// up (sampler.c wakeup_bytes).
	deadline  time.Time
	poll      time.Duration
	s         RawSample
	malformed uint64
	// mu is held by Read for the whole call and by Close to release the
	// mapping and descriptors, so they are never released under a Read.
	// Only the worker takes it, except once at Close: it costs one
	// uncontended lock per batch, not per record.
	mu     sync.Mutex
	closed atomic.Bool
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

// Ring returns the reader of worker's ring, creating it on first use (and
// again after the previous reader was closed).
func (d *Dataplane) Ring(worker int) (*RingReader, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkRing(worker); err != nil {
		return nil, fmt.Errorf("dataplane: ring %d: %w", worker, err)
	}
	if r := d.readers[worker]; r != nil && !r.closed.Load() {
		return r, nil
	}
	r, err := newRingReader(d.rings[worker].FD(), d.cfg.RingBytes, d.cfg.RingPoll)
	if err != nil {
		return nil, fmt.Errorf("dataplane: ring %d reader: %w", worker, err)
	}
	d.readers[worker] = r
	return r, nil
}

// newRingReader maps the ring of map fd (size data bytes) and sets up the
// epoll set Read waits in.
func newRingReader(fd, size int, poll time.Duration) (_ *RingReader, err error) {
	r := &RingReader{epfd: -1, poll: poll}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.release())
		}
	}()
	if r.ring, err = mapRing(fd, size); err != nil {
		return nil, err
	}
	wfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("wake eventfd: %w", err)
	}
	// An *os.File, so that a Wake racing with Close writes to a closed
	// file (an error), never to a reused descriptor number.
	r.wake = os.NewFile(uintptr(wfd), "ring-wake")
	r.wakeFD = wfd
	if r.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		r.epfd = -1
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	for _, f := range []int{fd, wfd} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(f)}
		if err := unix.EpollCtl(r.epfd, unix.EPOLL_CTL_ADD, f, &ev); err != nil {
			return nil, fmt.Errorf("epoll_ctl add fd %d: %w", f, err)
		}
	}
	return r, nil
}

// release unmaps the ring and closes the descriptors; it tolerates a
// partly built reader.
func (r *RingReader) release() error {
	var errs []error
	if r.ring.data != nil {
		errs = append(errs, r.ring.unmap())
	}
	if r.epfd >= 0 {
		if err := unix.Close(r.epfd); err != nil {
			errs = append(errs, fmt.Errorf("closing epoll fd: %w", err))
		}
		r.epfd = -1
	}
	if r.wake != nil {
		if err := r.wake.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing wake eventfd: %w", err))
		}
	}
	return errors.Join(errs...)
}

// RingFD returns the file descriptor of worker's ring buffer map. It polls
// readable (POLLIN) while samples are waiting, so a consumer can wait on
// the ring and on AF_XDP sockets (Monitor.FDs) in one poll. The descriptor
// belongs to the Dataplane: do not close it.
func (d *Dataplane) RingFD(worker int) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkRing(worker); err != nil {
		return -1, fmt.Errorf("dataplane: ring %d fd: %w", worker, err)
	}
	return d.rings[worker].FD(), nil
}

// checkRing reports whether worker names a ring of the open Dataplane.
// Called with mu held.
func (d *Dataplane) checkRing(worker int) error {
	if d.closed {
		return os.ErrClosed
	}
	if worker < 0 || worker >= len(d.rings) {
		return fmt.Errorf("worker not in 0..%d", len(d.rings)-1)
	}
	return nil
}

// Read blocks until at least one sample is available, then hands every
// sample already in the ring to fn, without allocating, and returns how
// many it delivered. A busy ring costs no syscall; an empty ring one
// epoll_wait. After Close it returns an error matching os.ErrClosed; when a
// deadline (SetDeadline) passes with an empty ring, one matching
// os.ErrDeadlineExceeded. A Wake makes a waiting Read return at once, with
// the samples in the ring or none.
//
// The wait is cut into slices of at most the ring poll interval
// (Config.RingPoll): the program wakes the reader only once the ring holds
// Config.WakeupBytes, so below that, samples are picked up by the timer.
func (r *RingReader) Read(fn func(*RawSample)) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	spins := 0
	for {
		if r.closed.Load() {
			return 0, fmt.Errorf("dataplane: reading ring: %w", os.ErrClosed)
		}
		n, busy, err := r.batch(fn)
		if n > 0 || err != nil {
			return n, err
		}
		if busy && spins < maxBusySpins {
			// The program is between reserve and submit on another CPU
			// (XDP runs to completion in softirq): the record is ready
			// in a moment, a wait would delay it by a poll slice.
			spins++
			runtime.Gosched()
			continue
		}
		spins = 0
		now := time.Now()
		if !r.deadline.IsZero() && !now.Before(r.deadline) {
			return 0, fmt.Errorf("dataplane: reading ring: %w", os.ErrDeadlineExceeded)
		}
		wait := r.poll
		if !r.deadline.IsZero() && r.deadline.Sub(now) < wait {
			wait = r.deadline.Sub(now)
		}
		woken, err := r.wait(wait)
		if err != nil {
			return 0, err
		}
		if woken {
			if r.closed.Load() {
				return 0, fmt.Errorf("dataplane: reading ring: %w", os.ErrClosed)
			}
			n, _, err := r.batch(fn)
			return n, err
		}
	}
}

// maxBusySpins bounds how often Read retries a ring whose first record is
// still being written before it waits instead.
const maxBusySpins = 1000

// wait blocks in epoll_wait for at most d (rounded up to a millisecond);
// woken reports that Wake or Close interrupted it (the wake eventfd is
// drained).
func (r *RingReader) wait(d time.Duration) (woken bool, err error) {
	ms := int((d + time.Millisecond - 1) / time.Millisecond)
	for {
		n, err := unix.EpollWait(r.epfd, r.events[:], ms)
		if err == unix.EINTR {
			continue // a signal: wait again (the slice may stretch; Read rechecks the deadline)
		}
		if err != nil {
			return false, fmt.Errorf("dataplane: waiting for ring: epoll_wait: %w", err)
		}
		for _, ev := range r.events[:n] {
			if int(ev.Fd) == r.wakeFD {
				var buf [8]byte
				// Reading resets the counter; nonblocking, so EAGAIN
				// (nothing to reset) is harmless.
				if _, err := unix.Read(int(ev.Fd), buf[:]); err != nil && err != unix.EAGAIN {
					return false, fmt.Errorf("dataplane: draining ring wake eventfd: %w", err)
				}
				woken = true
			}
		}
		return woken, nil
	}
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
// during the callback.
func (r *RingReader) batch(fn func(*RawSample)) (n int, busy bool, err error) {
	v := &r.ring
	prod := atomic.LoadUintptr(v.prod)
	cons := atomic.LoadUintptr(v.cons)
	start := cons
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
				fn(&r.s)
				n++
			} else {
				r.malformed++
			}
		}
		cons += total
	}
	if cons != start {
		atomic.StoreUintptr(v.cons, cons)
	}
	return n, busy, err
}

// decode fills r.s from a record; false when the record is malformed.
func (r *RingReader) decode(b []byte) bool {
	if len(b) < metaSize {
		return false
	}
	hl := binary.LittleEndian.Uint32(b[metaHeaderLen:])
	if uint64(hl) > uint64(len(b)-metaSize) {
		return false
	}
	r.s = RawSample{
		IfIndex:   binary.LittleEndian.Uint32(b[metaIfIndex:]),
		FrameLen:  binary.LittleEndian.Uint32(b[metaFrameLen:]),
		RxQueue:   binary.LittleEndian.Uint32(b[metaRxQueue:]),
		CPU:       binary.LittleEndian.Uint32(b[metaCPU:]),
		Timestamp: binary.LittleEndian.Uint64(b[metaTimestamp:]),
		Rate:      binary.LittleEndian.Uint32(b[metaRate:]),
		CPUPool:   binary.LittleEndian.Uint64(b[metaPool:]),
		Header:    b[metaSize : metaSize+int(hl)],
	}
	return true
}

// Malformed returns how many records were skipped because they were too
// short for their header length (never expected; a layout mismatch).
func (r *RingReader) Malformed() uint64 { return r.malformed }

// SetDeadline makes Read return os.ErrDeadlineExceeded once t has passed
// and the ring is empty; the zero time removes the deadline.
func (r *RingReader) SetDeadline(t time.Time) { r.deadline = t }

// Wake makes a Read that is waiting for samples return at once (with the
// samples already in the ring, or none), so that the reader's goroutine can
// attend to something else, such as a configuration change. A Wake while
// no Read waits makes the next wait return at once.
func (r *RingReader) Wake() error {
	if err := r.kick(); err != nil {
		return fmt.Errorf("dataplane: waking ring reader: %w", err)
	}
	return nil
}

// kick adds one to the wake eventfd.
func (r *RingReader) kick() error {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, err := r.wake.Write(one[:])
	return err
}

// Close unblocks a pending Read and releases the reader. Calling it again
// returns nil.
func (r *RingReader) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	if err := r.kick(); err != nil {
		return fmt.Errorf("dataplane: closing ring reader: waking reader: %w", err)
	}
	r.mu.Lock() // a pending Read has returned
	defer r.mu.Unlock()
	if err := r.release(); err != nil {
		return fmt.Errorf("dataplane: closing ring reader: %w", err)
	}
	return nil
}
