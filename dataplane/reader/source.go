package reader

// A worker's sample source: the one place where a kernel sample, inline
// (the worker's BPF ring) or from a monitor port (AF_XDP sockets), waits
// for and reaches the goroutine that encodes it.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Source delivers one worker's kernel samples: those of the worker's ring
// (inline ports) and those of the AF_XDP sockets of the monitor ports the
// worker owns. Read drains both without blocking and, when both are empty,
// waits until its deadline for one epoll set holding the ring buffer map's
// FD, the sockets' FDs and a wake-up eventfd. That wait is the only one on
// the sample path. The epoll FD itself waits in the Go runtime's network
// poller (with the deadline as its read deadline), not in a blocking
// system call: a worker parked there costs no thread of its own, and
// waking it does not make the runtime hand its processor back and forth
// (measured in bench/README.md, daemon part 4, "Idle cost").
//
// When a sample is picked up: the sampler wakes a waiting reader only once
// the ring holds Config.WakeupBytes (dataplane/bpf/sampler.h wakeup_bytes), so at
// high rates one wake-up carries a batch; below that, samples wait in the
// ring until the caller's deadline, which a worker sets to its next
// one-second tick, the moment it flushes its datagrams anyway. A sample is
// thus sent within about a second at any rate, and an idle worker wakes
// once a second (idle means asleep).
//
// Read is for one goroutine at a time (the worker). Wake and Close may be
// called from any goroutine; Close unblocks a pending Read. The set of
// monitor ports is published by the control goroutine (Add,
// Remove) with an atomic pointer and read once per batch: the sample
// path takes no lock shared with it. A removed port's sockets are closed
// by the worker itself once it has moved to a set without them, never
// while it may be reading them.
type Source struct {
	ring   ringBatcher
	ringFD int
	// wake is an eventfd: Wake, SetPort and Close kick a worker waiting
	// for samples. An *os.File, so that a kick racing with Close writes to a
	// closed file (an error), never to a reused descriptor number.
	wake   *os.File
	wakeFD int
	// ep is the epoll set, non-blocking, in the runtime's poller; epConn
	// waits for it; polled are the socket FDs in it besides the ring and
	// the eventfd.
	ep     *os.File
	epConn syscall.RawConn
	polled []int
	events [8]unix.EpollEvent
	log    *slog.Logger

	set     atomic.Pointer[monitorSet]
	wakeReq atomic.Bool // Wake was called
	mu      sync.Mutex  // serialises set writers; guards retired
	retired []*MonitorPort

	// readMu is held by Read for the whole call and by Close to release
	// the ring mapping, the sockets and the eventfd, so they are never
	// released under a Read. Only the worker takes it, except once at
	// Close: one uncontended lock per batch, not per sample.
	readMu  sync.Mutex
	closed  atomic.Bool
	release func() error // unmaps the ring (nil for a test ring)

	// idle is the ring's idle flag (ReadIdle); nil for a test ring.
	idle IdleFlag
	// fence is the target of the atomic operation that orders the idle
	// flag's store before the reader's look at the ring (ReadIdle).
	fence atomic.Uint32

	// Worker-only state.
	seen        *monitorSet
	lastRefresh time.Time
	wakeBuf     [8]byte
}

// ringBatcher is the ring as Source reads it: *ringReader, or a test ring.
type ringBatcher interface {
	// batch hands fn every committed record and releases their space;
	// busy reports that it stopped at a record still being written.
	batch(fn func(*RawSample)) (n int, busy bool, err error)
}

// MonitorSockets are the AF_XDP sockets of one monitor port
// (dataplane.Monitor).
// Receive, FDs, Drops and Close belong to the owning worker; Unbind may be
// called from any goroutine.
type MonitorSockets interface {
	Receive(fn func(*RawSample)) (int, error)
	FDs() []int
	Drops() (uint64, error)
	Unbind() error
	Close() error
}

// dropsRefresh is how often a worker re-reads its sockets' drop counters
// (one getsockopt per socket): dataplane.Stats.Pool, called per flow
// sample, may not make a system call, so it reports the value read last.
// Drops in a flow sample lag the kernel by at most this much, or by the
// worker's one-second tick when it is idle.
const dropsRefresh = 50 * time.Millisecond

// errDeadline is Read's error when its deadline passed: made once, as a
// worker meets it at every tick it has nothing to read.
var errDeadline = fmt.Errorf("dataplane: reading samples: %w", os.ErrDeadlineExceeded)

// maxBusySpins bounds how often Read retries a ring whose first record is
// still being written before it polls instead.
const maxBusySpins = 1000

// MonitorPort is a monitor port registered with its owning worker
// (NewMonitorPort).
type MonitorPort struct {
	ifindex uint32
	worker  int
	sockets MonitorSockets
	fds     []int
	// drops is sockets.Drops() as last read by the owning worker.
	drops atomic.Uint64
}

// NewMonitorPort is the monitor port ifindex, whose sockets worker reads.
func NewMonitorPort(ifindex uint32, worker int, sockets MonitorSockets) *MonitorPort {
	return &MonitorPort{ifindex: ifindex, worker: worker, sockets: sockets, fds: sockets.FDs()}
}

// IfIndex is the port's ifindex.
func (p *MonitorPort) IfIndex() uint32 { return p.ifindex }

// Worker is the worker that reads the port's sockets.
func (p *MonitorPort) Worker() int { return p.worker }

// Sockets are the port's sockets.
func (p *MonitorPort) Sockets() MonitorSockets { return p.sockets }

// monitorSet is an immutable snapshot of a worker's monitor ports, replaced
// as a whole (copy-on-write) when a port comes or goes.
type monitorSet struct {
	ports []*MonitorPort
}

var emptySet = &monitorSet{}

// with returns a copy of s plus p.
func (s *monitorSet) with(p *MonitorPort) *monitorSet {
	return &monitorSet{ports: append(append(make([]*MonitorPort, 0, len(s.ports)+1), s.ports...), p)}
}

// without returns a copy of s without p.
func (s *monitorSet) without(p *MonitorPort) *monitorSet {
	n := &monitorSet{ports: make([]*MonitorPort, 0, len(s.ports))}
	for _, q := range s.ports {
		if q != p {
			n.ports = append(n.ports, q)
		}
	}
	return n
}

// IdleFlag is a ring's idle flag (dataplane/bpf/ring.h ring_idle): set, the
// next record a program writes into the ring wakes its reader at once
// and clears it.
type IdleFlag interface {
	SetIdle(on bool) error
}

// OpenRing makes the source of the ring buffer map fd of size bytes (a
// power of two and a multiple of the page size): it maps the ring and
// reads its records in place. idle is the ring's idle flag (nil: none;
// ReadIdle then waits no longer than a second). Close unmaps it.
func OpenRing(fd, size int, idle IdleFlag, log *slog.Logger) (*Source, error) {
	v, err := mapRing(fd, size)
	if err != nil {
		return nil, err
	}
	r := &ringReader{ring: v}
	s, err := newSource(r, fd, log)
	if err != nil {
		return nil, errors.Join(err, v.unmap())
	}
	s.release = r.ring.unmap
	s.idle = idle
	return s, nil
}

// newSource makes a source reading ring (whose map FD polls readable while
// records are waiting).
func newSource(ring ringBatcher, ringFD int, log *slog.Logger) (*Source, error) {
	wfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("wake-up eventfd: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{ring: ring, ringFD: ringFD, wake: os.NewFile(uintptr(wfd), "source-wake"), wakeFD: wfd, log: log}
	s.set.Store(emptySet)
	if err := s.openEpoll(); err != nil {
		return nil, errors.Join(err, s.closeFiles())
	}
	return s, nil
}

// openEpoll makes the epoll set with the ring and the eventfd, in the
// runtime's poller (os.NewFile registers a non-blocking FD there).
func (s *Source) openEpoll() error {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		return errors.Join(fmt.Errorf("epoll fd non-blocking: %w", err), unix.Close(epfd))
	}
	s.ep = os.NewFile(uintptr(epfd), "source-epoll")
	if s.epConn, err = s.ep.SyscallConn(); err != nil {
		return fmt.Errorf("epoll fd: %w", err)
	}
	for _, fd := range []int{s.ringFD, s.wakeFD} {
		if err := s.epollCtl(unix.EPOLL_CTL_ADD, fd); err != nil {
			return err
		}
	}
	return nil
}

// epollCtl adds fd to (EPOLLIN, level-triggered) or deletes it from the
// epoll set.
func (s *Source) epollCtl(op, fd int) error {
	var cerr error
	err := s.epConn.Control(func(epfd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		cerr = unix.EpollCtl(int(epfd), op, fd, &ev)
	})
	if err = errors.Join(err, cerr); err != nil {
		return fmt.Errorf("epoll_ctl %d fd %d: %w", op, fd, err)
	}
	return nil
}

// closeFiles closes the eventfd and the epoll set.
func (s *Source) closeFiles() error {
	var errs []error
	if s.ep != nil {
		errs = append(errs, s.ep.Close())
	}
	return errors.Join(append(errs, s.wake.Close())...)
}

// Read hands fn every sample waiting in the ring and in the monitor
// sockets and returns how many; when there are none, it waits until some
// arrive (see Source for when the ring wakes it), Wake is called, or the
// deadline passes (the zero time: no deadline). It returns 0 and an error
// matching os.ErrDeadlineExceeded when the deadline passed with nothing
// to read, 0 and no error after a Wake, and an error matching os.ErrClosed
// after Close. The sample and its Header are valid only during fn. Read
// allocates nothing; a busy ring costs no system call.
func (s *Source) Read(deadline time.Time, fn func(*RawSample)) (int, error) {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	spins := 0
	for {
		if s.closed.Load() {
			return 0, fmt.Errorf("dataplane: reading samples: %w", os.ErrClosed)
		}
		set := s.current()
		s.refreshDrops(set)
		n, busy, err := s.drain(set, fn)
		if err != nil || n > 0 {
			return n, err
		}
		if busy && spins < maxBusySpins {
			// The program is between reserve and submit on another CPU
			// (XDP runs to completion in softirq): the record is ready
			// in a moment. The ring's FD polls readable meanwhile.
			spins++
			runtime.Gosched()
			continue
		}
		spins = 0
		if s.wakeReq.Swap(false) {
			return 0, nil // Wake: let the worker attend to its configuration
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return 0, errDeadline
		}
		// A kick (Wake, a changed set, Close) ends the wait; the loop
		// then picks up the set and the wake request.
		if err := s.wait(deadline); err != nil {
			return 0, err
		}
	}
}

// ReadIdle is Read for a reader with nothing to do: it sets the ring's idle
// flag first, so that the next record, however small the ring's unread
// data, wakes it (where Read leaves a few records for the deadline, which
// a busy worker sets to its next tick). A worker with no sample and no
// datagram to flush waits here until its next counter poll instead of
// waking every second. Without an idle flag the deadline is cut to a
// second from now, as Read's caller would set it.
//
// The flag's store is a system call followed by a full fence (an atomic
// read-modify-write) before Read first looks at the ring; the programs
// load the flag after an xchg on their record's header (ring.h
// ring_wake_idle). So a record is either seen here or wakes the reader.
// The flag is cleared on return (one more system call; an idle worker
// returns rarely).
func (s *Source) ReadIdle(deadline time.Time, fn func(*RawSample)) (int, error) {
	if s.idle == nil {
		if limit := time.Now().Add(time.Second); deadline.IsZero() || deadline.After(limit) {
			deadline = limit
		}
		return s.Read(deadline, fn)
	}
	if err := s.idle.SetIdle(true); err != nil {
		return 0, fmt.Errorf("dataplane: reading samples: setting the idle flag: %w", err)
	}
	s.fence.Add(1)
	n, err := s.Read(deadline, fn)
	if ferr := s.idle.SetIdle(false); ferr != nil && err == nil {
		err = fmt.Errorf("dataplane: reading samples: clearing the idle flag: %w", ferr)
	}
	return n, err
}

// Commit releases the ring's records before the one being handed to the
// Read callback it is called from, as handled: a program that takes the
// ring over after this one dies does not read them again (ringReader.
// commit). The callback calls it before it sends what those records
// made. No system call, no lock (it runs inside Read); a no-op outside a
// callback and for samples of a monitor port.
func (s *Source) Commit() {
	if r, ok := s.ring.(*ringReader); ok {
		r.commit()
	}
}

// Wake makes a Read that is waiting return at once with what is there
// (maybe nothing), so that a configuration change reaches the worker
// without waiting for samples or its deadline. A Wake while the worker is
// not waiting makes its next Read return without waiting.
func (s *Source) Wake() error {
	s.wakeReq.Store(true)
	if err := s.kick(); err != nil {
		return fmt.Errorf("dataplane: waking sample reader: %w", err)
	}
	return nil
}

// Closed reports whether Close was called.
func (s *Source) Closed() bool { return s.closed.Load() }

// Malformed returns how many ring records were skipped because they were
// too short for their header length (never expected; a layout mismatch).
func (s *Source) Malformed() uint64 {
	if r, ok := s.ring.(*ringReader); ok {
		return r.malformed.Load()
	}
	return 0
}

// current loads the published set. After a change it closes the sockets
// of removed ports (the worker no longer holds a set containing them) and
// rebuilds the poll list.
func (s *Source) current() *monitorSet {
	set := s.set.Load()
	if set == s.seen {
		return set
	}
	// Load the set again under the writers' lock: writers change the set
	// and the retired list together, so every port retired now is absent
	// from this set (a set loaded earlier may still hold a port retired
	// since).
	s.mu.Lock()
	set = s.set.Load()
	retired := s.retired
	s.retired = nil
	s.mu.Unlock()
	s.seen = set
	// The epoll set follows: sockets of ports gone leave it before they
	// are closed (their FD numbers may be reused at once), new ones join.
	want := map[int]bool{}
	for _, p := range set.ports {
		for _, fd := range p.fds {
			want[fd] = true
		}
	}
	kept := s.polled[:0]
	for _, fd := range s.polled {
		if want[fd] {
			kept = append(kept, fd)
			delete(want, fd)
		} else if err := s.epollCtl(unix.EPOLL_CTL_DEL, fd); err != nil {
			s.log.Warn("removing an AF_XDP socket from the worker's poll set", "fd", fd, "err", err)
		}
	}
	s.polled = kept
	for _, p := range retired {
		if err := p.sockets.Close(); err != nil {
			s.log.Warn("closing the AF_XDP sockets of a removed monitor port", "ifindex", p.ifindex, "err", err)
		}
	}
	for _, p := range set.ports {
		for _, fd := range p.fds {
			if !want[fd] {
				continue
			}
			if err := s.epollCtl(unix.EPOLL_CTL_ADD, fd); err != nil {
				s.log.Warn("adding an AF_XDP socket to the worker's poll set; the port is read on the worker's tick only", "ifindex", p.ifindex, "err", err)
				continue
			}
			s.polled = append(s.polled, fd)
		}
	}
	s.lastRefresh = time.Time{} // new ports: read their drops now
	return set
}

// refreshDrops re-reads the drop counters of the set's sockets when the
// last read is older than dropsRefresh.
func (s *Source) refreshDrops(set *monitorSet) {
	if len(set.ports) == 0 {
		return
	}
	now := time.Now()
	if now.Sub(s.lastRefresh) < dropsRefresh {
		return
	}
	s.lastRefresh = now
	for _, p := range set.ports {
		d, err := p.sockets.Drops()
		if err != nil {
			s.log.Warn("reading AF_XDP socket drops; the port's drops stay at their last value", "ifindex", p.ifindex, "err", err)
			continue
		}
		p.drops.Store(d)
	}
}

// drain hands fn every sample waiting in the ring and in the sockets.
func (s *Source) drain(set *monitorSet, fn func(*RawSample)) (int, bool, error) {
	n, busy, err := s.ring.batch(fn)
	if err != nil {
		return n, busy, fmt.Errorf("ring: %w", err)
	}
	for _, p := range set.ports {
		m, err := p.sockets.Receive(fn)
		n += m
		if err != nil {
			return n, busy, fmt.Errorf("monitor port %d: %w", p.ifindex, err)
		}
	}
	return n, busy, nil
}

// wait blocks until the ring or a socket is readable, the worker is
// kicked, or the deadline passes (zero: no deadline). The epoll FD is
// registered edge-triggered in the runtime's poller, so wait first asks
// the set itself (epoll_wait without blocking): events already pending
// return at once, and only an empty set parks the goroutine.
func (s *Source) wait(deadline time.Time) error {
	if err := s.ep.SetReadDeadline(deadline); err != nil {
		return fmt.Errorf("dataplane: waiting for samples: %w", err)
	}
	n := 0
	var werr error
	err := s.epConn.Read(func(epfd uintptr) bool {
		n, werr = unix.EpollWait(int(epfd), s.events[:], 0)
		if werr == unix.EINTR {
			n, werr = 0, nil
		}
		return werr != nil || n > 0
	})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil // Read finds the deadline passed
	}
	if err = errors.Join(err, werr); err != nil {
		return fmt.Errorf("dataplane: waiting for samples: epoll_wait: %w", err)
	}
	for _, ev := range s.events[:n] {
		if int(ev.Fd) == s.wakeFD {
			// Reset the eventfd (EAGAIN: already reset).
			if _, err := unix.Read(s.wakeFD, s.wakeBuf[:]); err != nil && !errors.Is(err, unix.EAGAIN) {
				return fmt.Errorf("dataplane: reading wake-up eventfd: %w", err)
			}
		}
	}
	return nil
}

// kick wakes the worker if it is waiting for samples, so it picks up a
// new set now rather than at its deadline.
func (s *Source) kick() error {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	if _, err := s.wake.Write(one[:]); err != nil && !errors.Is(err, unix.EAGAIN) {
		return err
	}
	return nil
}

// Add gives p's sockets to this worker.
func (s *Source) Add(p *MonitorPort) error {
	s.mu.Lock()
	s.set.Store(s.set.Load().with(p))
	s.mu.Unlock()
	return s.kick()
}

// Remove takes p out of the worker's set; the worker closes its sockets
// in its next batch (or Close does).
func (s *Source) Remove(p *MonitorPort) error {
	s.mu.Lock()
	s.set.Store(s.set.Load().without(p))
	s.retired = append(s.retired, p)
	s.mu.Unlock()
	return s.kick()
}

// Close unblocks a pending Read, waits until it has returned, and closes
// the sockets of the worker's monitor ports, the eventfd and the ring's
// mapping. Calling it again returns nil.
func (s *Source) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	errs := []error{s.kick()}
	s.readMu.Lock() // a pending Read has returned
	defer s.readMu.Unlock()
	s.mu.Lock()
	ports := append(s.retired, s.set.Load().ports...)
	s.retired = nil
	s.set.Store(emptySet)
	s.mu.Unlock()
	for _, p := range ports {
		errs = append(errs, p.sockets.Close())
	}
	errs = append(errs, s.closeFiles())
	if s.release != nil {
		errs = append(errs, s.release())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dataplane: closing sample source: %w", err)
	}
	return nil
}
