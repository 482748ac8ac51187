package main

// Monitor ports (DESIGN.md, "Packet sampling": mirror/SPAN/TAP ports whose
// sampled frames arrive through AF_XDP sockets, one per RX queue). A
// worker's samples come from its BPF ring (inline ports) and from the
// sockets of the monitor ports it owns; sampleSource reads both.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/dataplane/afxdp"
)

// ringSampler is a worker's BPF ring as sampleSource uses it
// (*dataplane.RingReader).
type ringSampler interface {
	SetDeadline(t time.Time)
	Read(fn func(*dataplane.RawSample)) (int, error)
}

// monitorSockets are the AF_XDP sockets of one monitor port
// (*dataplane.Monitor). Receive, FDs, Drops and Close belong to the owning
// worker; Unbind may be called from any goroutine.
type monitorSockets interface {
	Receive(fn func(*dataplane.RawSample)) (int, error)
	FDs() []int
	Drops() (uint64, error)
	Unbind() error
	Close() error
}

// dropsRefresh is how often a worker re-reads its sockets' drop counters
// (one getsockopt per socket): PortPool, called per flow sample, may not
// make a system call, so it reports the value read last. Drops in a flow
// sample lag the kernel by at most this much, or by the worker's one-second
// tick when it is idle.
const dropsRefresh = 50 * time.Millisecond

// monitorPort is a monitor port registered with its owning worker.
type monitorPort struct {
	ifindex uint32
	worker  int
	sockets monitorSockets
	fds     []int
	// drops is sockets.Drops() as last read by the owning worker.
	drops atomic.Uint64
}

// monitorSet is an immutable snapshot of a worker's monitor ports, replaced
// as a whole (copy-on-write) when a port comes or goes.
type monitorSet struct {
	ports []*monitorPort
	nfds  int
}

var emptySet = &monitorSet{}

// with returns a copy of s plus p.
func (s *monitorSet) with(p *monitorPort) *monitorSet {
	ports := append(append(make([]*monitorPort, 0, len(s.ports)+1), s.ports...), p)
	return &monitorSet{ports: ports, nfds: s.nfds + len(p.fds)}
}

// without returns a copy of s without p.
func (s *monitorSet) without(p *monitorPort) *monitorSet {
	n := &monitorSet{ports: make([]*monitorPort, 0, len(s.ports))}
	for _, q := range s.ports {
		if q != p {
			n.ports = append(n.ports, q)
			n.nfds += len(q.fds)
		}
	}
	return n
}

// pastDeadline makes a ring read non-blocking: the reader checks the ring,
// then returns os.ErrDeadlineExceeded when it is empty.
var pastDeadline = time.Unix(1, 0)

// sampleSource is one worker's agent.SampleReader: its ring and the
// sockets of its monitor ports. ReadSamples drains both without blocking
// and, when both are empty, waits in one poll(2) on the ring buffer's FD,
// the sockets' FDs and a wake-up eventfd until the deadline.
//
// The set of monitor ports is published by the control goroutine with an
// atomic pointer and read once per batch: the sample path takes no lock
// (the mutex is taken only in the batch after the set changed). A removed
// port's sockets are closed by the worker itself once it has moved to a
// set without them, never while it may be reading them.
type sampleSource struct {
	ring   ringSampler
	ringFD int
	wakeFD int // eventfd: the control goroutine kicks a worker blocked in poll
	log    *slog.Logger

	set     atomic.Pointer[monitorSet]
	ack     atomic.Pointer[monitorSet] // the set the worker is using
	reading atomic.Bool                // the worker is inside ReadSamples
	wakeReq atomic.Bool                // Wake was called
	mu      sync.Mutex                 // serialises set writers; guards retired
	retired []*monitorPort             // removed ports whose sockets the worker closes

	// Worker-only state.
	seen        *monitorSet
	pfds        []unix.PollFd
	fn          func(*agent.PacketSample)
	ps          agent.PacketSample
	conv        func(*dataplane.RawSample) // made once: a closure per read allocates
	lastRefresh time.Time
	wakeBuf     [8]byte
}

func newSampleSource(ring ringSampler, ringFD int, log *slog.Logger) (*sampleSource, error) {
	wfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("wake-up eventfd: %w", err)
	}
	s := &sampleSource{ring: ring, ringFD: ringFD, wakeFD: wfd, log: log}
	s.set.Store(emptySet)
	s.conv = func(rs *dataplane.RawSample) {
		s.ps = agent.PacketSample{IfIndex: rs.IfIndex, FrameLen: rs.FrameLen, KernelRate: rs.Rate,
			CPU: rs.CPU, CPUPool: rs.CPUPool, Header: rs.Header}
		s.fn(&s.ps)
	}
	return s, nil
}

// ReadSamples implements agent.SampleReader.
func (s *sampleSource) ReadSamples(deadline time.Time, fn func(*agent.PacketSample)) (int, error) {
	s.reading.Store(true)
	defer s.reading.Store(false)
	s.fn = fn
	for {
		set := s.current()
		s.refreshDrops(set)
		n, err := s.drain(set)
		if err != nil || n > 0 {
			return n, err
		}
		if s.wakeReq.Swap(false) {
			return 0, nil // Wake: let the worker attend to its configuration
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return 0, os.ErrDeadlineExceeded
		}
		// A kick (Wake or a changed set) ends the wait; the loop then
		// picks up the set and the wake request.
		if err := s.wait(wait); err != nil {
			return 0, err
		}
	}
}

// Wake implements agent.Waker: a ReadSamples waiting in poll returns at
// once with what is there (maybe nothing), so a configuration change
// reaches the worker without waiting for samples or its next tick. A Wake
// while the worker is not waiting makes its next ReadSamples return
// without waiting.
func (s *sampleSource) Wake() error {
	s.wakeReq.Store(true)
	return s.kick()
}

// current loads the published set. After a change it closes the sockets
// of removed ports (the worker no longer holds a set containing them) and
// rebuilds the poll list.
func (s *sampleSource) current() *monitorSet {
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
	s.ack.Store(set)
	for _, p := range retired {
		if err := p.sockets.Close(); err != nil {
			s.log.Warn("closing the AF_XDP sockets of a removed monitor port", "ifindex", p.ifindex, "err", err)
		}
	}
	s.pfds = append(s.pfds[:0],
		unix.PollFd{Fd: int32(s.ringFD), Events: unix.POLLIN},
		unix.PollFd{Fd: int32(s.wakeFD), Events: unix.POLLIN})
	for _, p := range set.ports {
		for _, fd := range p.fds {
			s.pfds = append(s.pfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		}
	}
	s.lastRefresh = time.Time{} // new ports: read their drops now
	return set
}

// refreshDrops re-reads the drop counters of the set's sockets when the
// last read is older than dropsRefresh.
func (s *sampleSource) refreshDrops(set *monitorSet) {
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
func (s *sampleSource) drain(set *monitorSet) (int, error) {
	s.ring.SetDeadline(pastDeadline)
	n, err := s.ring.Read(s.conv)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return n, fmt.Errorf("ring: %w", err)
	}
	for _, p := range set.ports {
		m, err := p.sockets.Receive(s.conv)
		n += m
		if err != nil {
			return n, fmt.Errorf("monitor port %d: %w", p.ifindex, err)
		}
	}
	return n, nil
}

// wait blocks until the ring or a socket is readable, the worker is
// kicked, or d passes.
func (s *sampleSource) wait(d time.Duration) error {
	ms := int((d + time.Millisecond - 1) / time.Millisecond)
	for i := range s.pfds {
		s.pfds[i].Revents = 0
	}
	if _, err := unix.Poll(s.pfds, ms); err != nil && !errors.Is(err, unix.EINTR) {
		return fmt.Errorf("poll: %w", err)
	}
	for _, p := range s.pfds {
		if p.Revents&unix.POLLNVAL != 0 {
			return fmt.Errorf("poll: fd %d is not open", p.Fd)
		}
	}
	if s.pfds[1].Revents&unix.POLLIN != 0 {
		// Reset the eventfd (EAGAIN: already reset).
		if _, err := unix.Read(s.wakeFD, s.wakeBuf[:]); err != nil && !errors.Is(err, unix.EAGAIN) {
			return fmt.Errorf("reading wake-up eventfd: %w", err)
		}
	}
	return nil
}

// kick wakes the worker if it is blocked in poll, so it picks up a new set
// now rather than at its deadline.
func (s *sampleSource) kick() error {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	if _, err := unix.Write(s.wakeFD, one[:]); err != nil && !errors.Is(err, unix.EAGAIN) {
		return fmt.Errorf("waking worker: %w", err)
	}
	return nil
}

// add gives p's sockets to this worker.
func (s *sampleSource) add(p *monitorPort) error {
	s.mu.Lock()
	s.set.Store(s.set.Load().with(p))
	s.mu.Unlock()
	return s.kick()
}

// remove takes p out of the worker's set; the worker closes its sockets in
// its next batch.
func (s *sampleSource) remove(p *monitorPort) error {
	s.mu.Lock()
	s.set.Store(s.set.Load().without(p))
	s.retired = append(s.retired, p)
	s.mu.Unlock()
	return s.kick()
}

// close closes every monitor port's sockets and the eventfd. It is meant
// for after the worker stopped; should the worker still be reading, it
// waits (up to a few seconds) until the worker has let go of the sockets.
func (s *sampleSource) close() error {
	s.mu.Lock()
	ports := append(s.retired, s.set.Load().ports...)
	s.retired = nil
	s.set.Store(emptySet)
	s.mu.Unlock()
	err := s.kick()
	for deadline := time.Now().Add(3 * time.Second); s.reading.Load() && s.ack.Load() != emptySet && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	errs := []error{err}
	for _, p := range ports {
		errs = append(errs, p.sockets.Close())
	}
	errs = append(errs, unix.Close(s.wakeFD))
	return errors.Join(errs...)
}

// monitorPorts attaches, opens and closes the ports sampled in monitor mode
// and keeps each port's AF_XDP sockets with the worker that owns the port.
// dataplaneAdapter uses it for every port (inline ones too, so a port can
// change mode). Its methods are called by the control goroutine; PortPool
// also by the workers, without a lock.
type monitorPorts struct {
	dp      *dataplane.Dataplane
	log     *slog.Logger
	readers []*sampleSource

	mu    sync.Mutex // serialises SetPort, RemovePort, Close
	ports map[uint32]*monitorPort
	// byIndex is a copy of ports for PortPool (copy-on-write).
	byIndex atomic.Pointer[map[uint32]*monitorPort]
}

// newMonitorPorts makes the sample readers of workers workers (one ring
// each, workers as given to dataplane.Open) with no monitor port yet.
func newMonitorPorts(dp *dataplane.Dataplane, workers int, log *slog.Logger) (*monitorPorts, error) {
	m := &monitorPorts{dp: dp, log: log, ports: map[uint32]*monitorPort{}}
	m.publish()
	for w := 0; w < max(workers, 1); w++ {
		r, err := dp.Ring(w)
		if err != nil {
			return nil, errors.Join(err, m.Close())
		}
		fd, err := dp.RingFD(w)
		if err != nil {
			return nil, errors.Join(err, m.Close())
		}
		s, err := newSampleSource(r, fd, log)
		if err != nil {
			return nil, errors.Join(err, m.Close())
		}
		m.readers = append(m.readers, s)
	}
	return m, nil
}

// Reader returns worker w's sample reader (ring + monitor sockets), nil
// for a worker without a ring (the agent then only polls on it).
func (m *monitorPorts) Reader(w int) agent.SampleReader {
	if w < 0 || w >= len(m.readers) {
		return nil
	}
	return m.readers[w]
}

func (m *monitorPorts) publish() {
	c := make(map[uint32]*monitorPort, len(m.ports))
	for k, v := range m.ports {
		c[k] = v
	}
	m.byIndex.Store(&c)
}

// SetPort attaches the sampler to a new port or updates an attached one;
// a port in monitor mode also gets its AF_XDP sockets, owned by the
// port's worker. Frames the port samples before its sockets are in place
// are counted as drops by the sampler (redirect without a socket).
func (m *monitorPorts) SetPort(ifindex int, pc dataplane.PortConfig) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	idx := uint32(ifindex)
	old := m.ports[idx]
	err := m.dp.UpdatePort(ifindex, pc)
	attached := false
	if errors.Is(err, dataplane.ErrNotAttached) {
		err = m.dp.AttachPort(ifindex, pc)
		attached = err == nil
	}
	if err != nil {
		return err
	}
	monitor := pc.Mode == dataplane.ModeMonitor
	if old != nil && (!monitor || old.worker != pc.Worker) {
		// Back to inline, or another owner: a socket is read by one worker
		// only, so the old one goes and (for a new owner) a new one comes.
		if err := m.drop(old); err != nil {
			m.log.Warn("closing monitor sockets", "ifindex", ifindex, "err", err)
		}
		old = nil
	}
	if !monitor || old != nil {
		return nil
	}
	if pc.Worker < 0 || pc.Worker >= len(m.readers) {
		return fmt.Errorf("monitor port %d: worker %d has no reader", ifindex, pc.Worker)
	}
	// The full MaxHeaderBytes: the worker cuts each sample to its
	// sampler's header size, so a header size change needs no reopen.
	socks, err := m.dp.OpenMonitor(ifindex, dataplane.MaxHeaderBytes, afxdp.Options{})
	if err != nil {
		if attached {
			err = errors.Join(err, m.dp.DetachPort(ifindex))
		}
		return fmt.Errorf("monitor port %d: %w", ifindex, err)
	}
	p := &monitorPort{ifindex: idx, worker: pc.Worker, sockets: socks, fds: socks.FDs()}
	m.ports[idx] = p
	m.publish()
	if err := m.readers[pc.Worker].add(p); err != nil {
		return fmt.Errorf("monitor port %d: %w", ifindex, err)
	}
	m.log.Info("monitor port sampled through AF_XDP", "ifindex", ifindex, "sockets", len(p.fds), "worker", pc.Worker)
	return nil
}

// drop unbinds p's sockets now (the sampler counts later samples as drops)
// and hands them back to their worker to close.
func (m *monitorPorts) drop(p *monitorPort) error {
	err := p.sockets.Unbind()
	delete(m.ports, p.ifindex)
	m.publish()
	return errors.Join(err, m.readers[p.worker].remove(p))
}

// RemovePort stops sampling a port: its sockets are unbound before the
// sampler is detached (so the XSKMAP keys are free when the port's slot is
// reused). A port that has vanished took its attachment with it; that is
// not an error.
func (m *monitorPorts) RemovePort(ifindex int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	if p := m.ports[uint32(ifindex)]; p != nil {
		errs = append(errs, m.drop(p))
	}
	if err := m.dp.DetachPort(ifindex); err != nil && !errors.Is(err, dataplane.ErrNotAttached) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// PortPool returns the port's sample_pool and drops: the sampler's drops
// plus, for a monitor port, what its sockets lost after the redirect (as
// last read by the worker, see dropsRefresh). No lock, no system call.
func (m *monitorPorts) PortPool(ifindex uint32) (uint64, uint64) {
	c, err := m.dp.PortCounters(int(ifindex))
	if err != nil {
		return 0, 0
	}
	return c.Pool, c.Drops + m.SocketDrops(ifindex)
}

// SocketDrops returns what a monitor port's AF_XDP sockets lost, as last
// read by its worker (see dropsRefresh); 0 for an inline port. No lock, no
// system call.
func (m *monitorPorts) SocketDrops(ifindex uint32) uint64 {
	if p := (*m.byIndex.Load())[ifindex]; p != nil {
		return p.drops.Load()
	}
	return 0
}

// Close closes every monitor port's sockets; call it after the workers
// stopped and before the Dataplane is closed.
func (m *monitorPorts) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, r := range m.readers {
		errs = append(errs, r.close())
	}
	m.readers = nil
	m.ports = map[uint32]*monitorPort{}
	m.publish()
	return errors.Join(errs...)
}
