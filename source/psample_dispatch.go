package source

// Several workers: one socket.
//
// Every socket joined to psample's packets group receives every sample of
// every group, so with a socket per worker the kernel queued each sample
// once per worker, and every reader parsed every sample to keep its own
// ports' (with W workers, W times the work). In listen-only mode each
// worker's reader also saw the whole group's sequence and charged its own
// socket's gaps to its own ports, among which were other workers' samples
// that their sockets did receive: the drops fields added up to more than
// the losses. Instead the first worker's reader (the leader) alone reads
// the socket, follows the groups' sequences (rules mode: each port's own
// groups; listen-only: the group's, each gap charged to the port of the
// next sample, whichever worker's it is, so the drops fields add up to
// every loss), reads the pools, and hands the other workers' samples to
// them through a queue each (single producer, single consumer,
// preallocated: no lock and no allocation per sample), waking each once
// per batch of messages. The leader reads the socket only once every
// queue has room for a whole read (PsampleReader.waitRoom): a follower
// slower than the samples leaves them in the socket's buffer, whose
// overflow the kernel counts in the groups' sequences (drops, exactly). A
// sample a full queue cannot take all the same (a stop) is counted in its
// port's drops.

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/agent"
)

// queueSlots is the number of samples a follower's queue holds: twice
// what one read of the socket hands on (psample.Conn.MaxPerRead), so that
// the first reader reads again while a follower still sends the last
// read's (PsampleReader.waitRoom).
const queueSlots = 2048

// queuedSample is one sample in a follower's queue: the worker's sample
// and its header bytes (the PacketSample's Header points into hdr when it
// is handed on).
type queuedSample struct {
	ps  agent.PacketSample
	hdr [agent.MaxHeaderBytes]byte
}

// psQueue is a follower worker's queue: the leader pushes, the follower
// pops; head and tail are the only shared words.
type psQueue struct {
	slots      []queuedSample
	head, tail atomic.Uint64 // next to pop, next to push
	efd        int           // eventfd: samples queued, or Wake
	wakeReq    atomic.Bool
	kicked     bool // touched by the leader only: samples pushed since its last kick
}

func newPsQueue() (*psQueue, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("psample: eventfd: %w", err)
	}
	return &psQueue{slots: make([]queuedSample, queueSlots), efd: efd}, nil
}

// push copies ps into the queue; false when it is full.
func (q *psQueue) push(ps *agent.PacketSample) bool {
	t := q.tail.Load()
	if t-q.head.Load() == uint64(len(q.slots)) {
		return false
	}
	s := &q.slots[t%uint64(len(q.slots))]
	s.ps = *ps
	n := copy(s.hdr[:], ps.Header)
	s.ps.Header = s.hdr[:n:n]
	q.tail.Store(t + 1)
	q.kicked = true
	return true
}

// free is the number of samples the queue can take now.
func (q *psQueue) free() uint64 { return uint64(len(q.slots)) - (q.tail.Load() - q.head.Load()) }

// kick wakes the follower if samples were pushed since the last kick.
func (q *psQueue) kick() error {
	if !q.kicked {
		return nil
	}
	q.kicked = false
	return q.signal()
}

// signal writes the eventfd.
func (q *psQueue) signal() error {
	var one = [8]byte{1}
	if _, err := unix.Write(q.efd, one[:]); err != nil && !errors.Is(err, unix.EAGAIN) {
		return fmt.Errorf("psample: waking a worker: %w", err)
	}
	return nil
}

// tryRead hands fn every queued sample, without waiting, and re-arms the
// eventfd first (a reader that waits on it elsewhere: MixedReader).
func (q *psQueue) tryRead(fn func(*agent.PacketSample)) int {
	var b [8]byte
	_, _ = unix.Read(q.efd, b[:]) // reset; EAGAIN when nothing was written
	return q.drain(fn)
}

// waitReadable waits up to timeout until a sample is queued or the
// eventfd was written.
func (q *psQueue) waitReadable(timeout time.Duration) (bool, error) {
	if q.head.Load() != q.tail.Load() {
		return true, nil
	}
	pfd := []unix.PollFd{{Fd: int32(q.efd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, int(timeout/time.Millisecond))
	if err != nil && !errors.Is(err, unix.EINTR) {
		return false, fmt.Errorf("psample: waiting for samples: %w", err)
	}
	return n > 0, nil
}

// drain hands fn every queued sample and returns how many.
func (q *psQueue) drain(fn func(*agent.PacketSample)) int {
	h, t := q.head.Load(), q.tail.Load()
	for i := h; i != t; i++ {
		fn(&q.slots[i%uint64(len(q.slots))].ps)
		q.head.Store(i + 1)
	}
	return int(t - h)
}

// read is a follower's ReadSamples: what is queued, or a wait until
// deadline, a push or Wake.
func (q *psQueue) read(deadline time.Time, fn func(*agent.PacketSample)) (int, error) {
	for {
		if n := q.drain(fn); n > 0 {
			return n, nil
		}
		if q.wakeReq.Swap(false) {
			return 0, nil
		}
		timeout := -1
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			timeout = int((d + time.Millisecond - 1) / time.Millisecond)
		}
		pfd := []unix.PollFd{{Fd: int32(q.efd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, timeout); err != nil && !errors.Is(err, unix.EINTR) {
			return 0, fmt.Errorf("psample: waiting for samples: %w", err)
		}
		var b [8]byte
		_, _ = unix.Read(q.efd, b[:]) // reset; EAGAIN when nothing was written
	}
}

// wake makes the follower's read return at once.
func (q *psQueue) wake() error {
	q.wakeReq.Store(true)
	return q.signal()
}

func (q *psQueue) close() error {
	return unix.Close(q.efd)
}
