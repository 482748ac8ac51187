package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf/ringbuf"
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
	metaSize      = 32
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
	// Header holds the first bytes of the frame. It aliases the reader's
	// buffer and is valid only during the callback it is passed to.
	Header []byte
}

// RingReader reads the samples of one worker's ring buffer. It is used by
// one goroutine at a time (the worker); Close may be called from any
// goroutine and unblocks a pending Read.
type RingReader struct {
	rd *ringbuf.Reader
	// deadline is the caller's (SetDeadline); poll bounds each wait, because
	// the program submits without waking the reader until the ring fills
	// up (sampler.c wakeup_bytes).
	deadline  time.Time
	poll      time.Duration
	rec       ringbuf.Record
	s         RawSample
	malformed uint64
	closed    atomic.Bool
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
	rd, err := ringbuf.NewReader(d.rings[worker])
	if err != nil {
		return nil, fmt.Errorf("dataplane: ring %d reader: %w", worker, err)
	}
	r := &RingReader{rd: rd, poll: d.cfg.RingPoll}
	d.readers[worker] = r
	return r, nil
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
// os.ErrDeadlineExceeded.
//
// The wait is cut into slices of at most the ring poll interval
// (Config.RingPoll): the program wakes the reader only once the ring holds
// Config.WakeupBytes, so below that, samples are picked up by the timer.
func (r *RingReader) Read(fn func(*RawSample)) (int, error) {
	n := 0
	armed := false
	for {
		// Records already in the ring are read without waiting, so the
		// deadline is set before the first wait and after each poll slice,
		// not per record (SetDeadline takes the reader's lock). A wait
		// later in this call ends at the same deadline: at worst at once,
		// and Read returns the samples it has.
		if !armed {
			wait := time.Now().Add(r.poll)
			if !r.deadline.IsZero() && r.deadline.Before(wait) {
				wait = r.deadline
			}
			r.rd.SetDeadline(wait)
			armed = true
		}
		if err := r.rd.ReadInto(&r.rec); err != nil {
			if errors.Is(err, ringbuf.ErrFlushed) {
				return n, nil // woken by Wake
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if n > 0 {
					return n, nil
				}
				if r.deadline.IsZero() || time.Now().Before(r.deadline) {
					armed = false
					continue // only a poll slice ended
				}
			}
			return n, fmt.Errorf("dataplane: reading ring: %w", err)
		}
		if r.decode(r.rec.RawSample) {
			fn(&r.s)
			n++
		} else {
			r.malformed++
		}
		if r.rec.Remaining == 0 {
			return n, nil
		}
	}
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
// attend to something else, such as a configuration change.
func (r *RingReader) Wake() error {
	if err := r.rd.Flush(); err != nil {
		return fmt.Errorf("dataplane: waking ring reader: %w", err)
	}
	return nil
}

// Close unblocks a pending Read and releases the reader.
func (r *RingReader) Close() error {
	r.closed.Store(true)
	if err := r.rd.Close(); err != nil {
		return fmt.Errorf("dataplane: closing ring reader: %w", err)
	}
	return nil
}
