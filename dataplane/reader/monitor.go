package reader

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/afxdp"
	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
)

// Monitor is the user-space end of a monitor-mode port (docs/ARCHITECTURE.md, "Packet
// sampling", monitor path): one AF_XDP socket per RX queue of the port,
// each installed in the sampler's XSKMAP at its queue's key (XSKMap), so the
// sampler redirects every sampled frame of that queue into it.
//
// Where a sampled frame can end (sflow_version_5.txt section 4,
// flow_sample.drops: nothing is lost silently):
//   - received here (Receive);
//   - the redirect found no socket: counted in PortCounters.Drops by the
//     sampler;
//   - the socket could not queue it (RX ring full, fill ring empty, frame
//     too long): counted by the socket and reported by Drops.
//
// Receive, FDs, Drops and Close are for the one goroutine that owns the
// Monitor (the AF_XDP sockets are not safe for concurrent use). Unbind may
// be called from any goroutine.
type Monitor struct {
	xsks    XSKMap
	ifindex int
	header  int
	socks   []*afxdp.Socket
	queues  []int
	keys    []uint32
	// recv[i] is socket i's frame callback, made once: a closure per
	// Receive call would allocate.
	recv []func([]byte)
	fn   func(*RawSample)
	s    RawSample

	mu      sync.Mutex // guards unbound and closed against Unbind
	unbound bool
	closed  bool
}

// XSKMap is the sampler's XSKMAP as one monitor port's sockets go in and
// out of it (dataplane.Dataplane.SetPort makes it for a monitor port).
type XSKMap interface {
	// MaxQueues is how many RX queues of the port have a key.
	MaxQueues() int
	// Key is the XSKMAP key of RX queue queue of the port.
	Key(queue int) (uint32, error)
	// Set puts socket fd into the XSKMAP at key.
	Set(key uint32, fd int) error
	// Unset removes the entries at keys, unless the port was detached
	// (or detached and attached again) since the XSKMap was made: its
	// keys may belong to another attachment by then. Safe to call from
	// any goroutine.
	Unset(keys []uint32) error
	// Do runs fn in the port's network namespace.
	Do(fn func() error) error
}

// OpenMonitor opens the AF_XDP sockets of the port ifindex, attached in
// monitor mode: one per RX queue, bound in the port's network namespace
// (copy mode unless opts.ZeroCopy and the driver supports it; veth has no
// zero-copy), and puts each in the XSKMAP at its key. Receive hands out
// the first headerBytes bytes of each frame.
//
// The RX queues are counted with netlink (IFLA_NUM_RX_QUEUES). That is the
// number of queues the device allocated, which can exceed the number in
// use (veth allocates one per possible CPU): a bind to a queue past the
// last real one fails with EINVAL, and the queues before it are all there
// are. A port with more queues than x.MaxQueues is refused: frames of the
// queues beyond would be redirected at another port's keys.
func OpenMonitor(x XSKMap, ifindex, headerBytes int, opts afxdp.Options) (*Monitor, error) {
	m := &Monitor{xsks: x, ifindex: ifindex, header: headerBytes}
	err := x.Do(func() error { return m.openSockets(opts) })
	if err == nil {
		err = m.install()
	}
	if err != nil {
		if cerr := m.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, fmt.Errorf("dataplane: monitor ifindex %d: %w", ifindex, err)
	}
	return m, nil
}

// openSockets binds one socket per RX queue; it runs in the port's
// netns (afxdp.Open resolves the ifindex where the socket is created).
func (m *Monitor) openSockets(opts afxdp.Options) error {
	l, err := netlink.LinkByIndex(m.ifindex)
	if err != nil {
		return fmt.Errorf("link: %w", err)
	}
	n := max(l.Attrs().NumRxQueues, 1)
	maxq := m.xsks.MaxQueues()
	for q := 0; q < n; q++ {
		if q == maxq {
			// Does the port really use more queues than we have keys for?
			s, err := afxdp.Open(m.ifindex, q, opts)
			if err != nil {
				break
			}
			if err := s.Close(); err != nil {
				return err
			}
			return fmt.Errorf("port has more than %d RX queues (Config.MaxQueues)", maxq)
		}
		s, err := afxdp.Open(m.ifindex, q, opts)
		if q > 0 && errors.Is(err, unix.EINVAL) {
			break // past the last queue in use
		}
		if err != nil {
			return fmt.Errorf("RX queue %d: %w", q, err)
		}
		m.add(s, q)
	}
	return nil
}

// add registers socket s of RX queue q with its frame callback.
func (m *Monitor) add(s *afxdp.Socket, q int) {
	queue := uint32(q)
	m.socks = append(m.socks, s)
	m.queues = append(m.queues, q)
	m.recv = append(m.recv, func(f []byte) {
		h := f
		if len(h) > m.header {
			h = h[:m.header]
		}
		// AF_XDP copy mode carries no metadata: CPU, Timestamp and Rate
		// stay 0 (Rate 0: the port's configured rate).
		m.s = RawSample{IfIndex: uint32(m.ifindex), FrameLen: uint32(len(f)), RxQueue: queue, Header: h}
		m.fn(&m.s)
	})
}

// install puts every socket into the XSKMAP at its queue's key.
func (m *Monitor) install() error {
	for i, s := range m.socks {
		key, err := m.xsks.Key(m.queues[i])
		if err != nil {
			return err
		}
		if err := m.xsks.Set(key, s.FD()); err != nil {
			return err
		}
		m.keys = append(m.keys, key)
	}
	return nil
}

// IfIndex returns the port's ifindex.
func (m *Monitor) IfIndex() int { return m.ifindex }

// Queues returns how many RX queues (sockets) the monitor serves.
func (m *Monitor) Queues() int { return len(m.socks) }

// Receive drains every socket without blocking and hands each frame to fn
// as a RawSample (IfIndex, FrameLen = the frame's length, RxQueue, Header =
// its first headerBytes bytes; CPU, Timestamp and Rate are 0: the frame
// carries no metadata, and Rate 0 stands for the port's configured rate).
// The sample and its Header are valid only during fn. Receive does not
// allocate and makes no system call per frame. It returns how many frames
// it delivered.
func (m *Monitor) Receive(fn func(*RawSample)) (int, error) {
	if m.closed {
		return 0, fmt.Errorf("dataplane: monitor ifindex %d receive: %w", m.ifindex, os.ErrClosed)
	}
	m.fn = fn
	total := 0
	for i, s := range m.socks {
		n, err := s.Receive(m.recv[i])
		total += n
		if err != nil {
			return total, fmt.Errorf("dataplane: monitor ifindex %d queue %d: %w", m.ifindex, m.queues[i], err)
		}
	}
	return total, nil
}

// FDs returns the sockets' file descriptors, to poll for POLLIN (frames
// waiting) together with other descriptors. The slice is a copy.
func (m *Monitor) FDs() []int {
	fds := make([]int, len(m.socks))
	for i, s := range m.socks {
		fds[i] = s.FD()
	}
	return fds
}

// Drops returns the sampled frames the sockets lost after the redirect:
// the sum over the sockets of RxDropped + RxRingFull (XDP_STATISTICS). A
// fill-ring-empty loss is counted in both RxDropped and
// RxFillRingEmptyDescs (see package afxdp, Stats), so the latter is not
// added. It costs one getsockopt per socket.
func (m *Monitor) Drops() (uint64, error) {
	if m.closed {
		return 0, fmt.Errorf("dataplane: monitor ifindex %d drops: %w", m.ifindex, os.ErrClosed)
	}
	var sum uint64
	for i, s := range m.socks {
		st, err := s.Stats()
		if err != nil {
			return 0, fmt.Errorf("dataplane: monitor ifindex %d queue %d: %w", m.ifindex, m.queues[i], err)
		}
		// Without the extended struct (Linux < 5.9) RxDropped already
		// includes the ring-full drops and RxRingFull is 0.
		sum += st.RxDropped + st.RxRingFull
	}
	return sum, nil
}

// Stats returns the sockets' XDP_STATISTICS, summed (one getsockopt per
// socket; Extended only when every socket has the extended struct).
func (m *Monitor) Stats() (afxdp.Stats, error) {
	per := make([]afxdp.Stats, len(m.socks))
	sum := afxdp.Stats{Extended: len(m.socks) > 0}
	for i, s := range m.socks {
		st, err := s.Stats()
		if err != nil {
			return afxdp.Stats{}, fmt.Errorf("dataplane: monitor ifindex %d queue %d: %w", m.ifindex, m.queues[i], err)
		}
		per[i] = st
		sum.Extended = sum.Extended && st.Extended
	}
	bpf.SumPerCPU(&sum, per)
	return sum, nil
}

// Unbind removes the sockets from the XSKMAP: from then on the sampler
// counts the port's sampled frames as drops (no socket) instead of
// redirecting them, and Receive still returns what is queued. It does
// nothing if the port was detached (or detached and attached again) since
// OpenMonitor: its keys may belong to another attachment by then, and the
// kernel removes a socket from every XSKMAP when it is closed anyway.
// Unbind is safe to call from any goroutine and more than once.
func (m *Monitor) Unbind() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unbound {
		return nil
	}
	m.unbound = true
	if err := m.xsks.Unset(m.keys); err != nil {
		return fmt.Errorf("dataplane: monitor ifindex %d unbind: %w", m.ifindex, err)
	}
	return nil
}

// Close unbinds the sockets (Unbind) and closes them; frames still queued
// are discarded. It is safe to call more than once.
func (m *Monitor) Close() error {
	errs := []error{m.Unbind()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	for _, s := range m.socks {
		errs = append(errs, s.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dataplane: monitor ifindex %d close: %w", m.ifindex, err)
	}
	return nil
}
