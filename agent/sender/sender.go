// Package sender is the one datagram sender of the agent: it packs samples
// into sFlow datagrams for one collector and sends them from one connected
// UDP socket. The switch agent's workers and the application sub-agents
// both send through it, so they share one set of rules:
//
//   - sequence numbers: each datagram of a stream gets the next
//     sample_datagram_v5 sequence_number; a stream replaced by a new one
//     (collector reconfigured) hands its last number over, so the collector
//     sees no gap and no repeat;
//   - uptime at send time: sflow_version_5.txt asks for the uptime "as close
//     to datagram transmission time as possible", so it is written into each
//     datagram right before the system call that sends it, not when the
//     datagram was begun;
//   - flush when full and once a second: a datagram is complete when the
//     next sample does not fit; the owner calls Flush on its one-second tick
//     (sflow_agent_design.txt: a sample waits at most a second);
//   - batched sends: complete datagrams wait in a batch that goes out in one
//     sendmmsg(2) when it is full, when the owner has nothing more to encode
//     for now (SendQueued: the ring is drained, the queue empty), or at the
//     tick; at most Flush's interval passes between a datagram's completion
//     and its send;
//   - counted losses: every datagram the socket refuses is counted with its
//     samples (SendErrors, SamplesUnsent) in each set of Counters (the
//     owner's totals, the collector's); a full socket buffer or an
//     unreachable collector costs counted datagrams, never a blocked sender;
//   - a socket that cannot be opened (no route yet, a host name not
//     resolved yet) is tried again with backoff, its datagrams counted as
//     refused meanwhile; sockets never have SO_BROADCAST, so a broadcast
//     collector address is refused by the kernel instead of flooding a
//     subnet.
//
// A Sender is used by one goroutine. Steady-state use allocates nothing.
package sender

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// defaultBatch is the number of datagrams sent per system call when Config
// leaves it 0. 32 datagrams of 1400 bytes (45 KB) are well inside the
// default socket send buffer (net.core.wmem_default, 208 KB), and past ~16
// datagrams per call the system call's own cost is a small share of the
// per-datagram network stack work (BenchmarkSend).
const defaultBatch = 32

// MaxBatchBytes bounds the datagram buffers of a sender with the default
// batch: larger datagrams mean fewer per batch (9000 bytes: 7; 65507: 1),
// so a stream costs at most about 64 KiB whatever the collector's maximum
// datagram size (the memory budget, docs/reference/bounds.md). 32 datagrams of
// the default 1400 bytes fit.
const MaxBatchBytes = 64 << 10

// writerOverhead is a datagram writer's buffer beyond the maximum
// datagram size (sflow.NewDatagramWriter).
const writerOverhead = 256

// Counters are where a sender counts what it did. Each field may be nil
// (not counted); the owner points them at its own statistics (its totals,
// shared by all its senders; its counters of the collector).
type Counters struct {
	// Datagrams and Bytes count datagrams the socket took.
	Datagrams, Bytes *atomic.Uint64
	// SendErrors counts datagrams the socket refused; SamplesUnsent the
	// samples they held.
	SendErrors, SamplesUnsent *atomic.Uint64
	// TooLarge counts samples larger than the maximum datagram size.
	TooLarge *atomic.Uint64
}

func add(c *atomic.Uint64, n uint64) {
	if c != nil {
		c.Add(n)
	}
}

// Config configures a Sender.
type Config struct {
	// Collector is the UDP address datagrams go to.
	Collector netip.AddrPort
	// MaxDatagramSize bounds every datagram (0: sflow.DefaultMaxDatagramSize).
	MaxDatagramSize int
	// Agent is the agent address and SubAgent the sub_agent_id in every
	// datagram header.
	Agent    netip.Addr
	SubAgent uint32
	// LastSeq is the sequence number of the stream's last datagram before
	// this sender (0 for a new stream): the first datagram is LastSeq+1.
	LastSeq uint32
	// Batch is the number of datagrams sent per system call (0:
	// defaultBatch, fewer when they would take more than MaxBatchBytes;
	// 1: one write(2) per datagram).
	Batch int
	// NoGSO sends one datagram per message even where UDP GSO could
	// carry several (for comparisons; GSO is used where the kernel takes
	// it, and given up for good on the first refusal).
	NoGSO bool
	// Uptime returns the agent's uptime in ms, read at send time.
	Uptime func() uint32
	// LastSent, when not nil, is where the sequence number of the last
	// datagram handed to the socket is kept (agent/persist: it outlives
	// the process). It is written right before the system call, so that
	// a stream continued from it by another process never repeats a
	// number that may have reached the collector.
	LastSent *uint64
	// Counters are the sets of counters that each receive every count.
	Counters []Counters
	// Device, when set, is the device the datagrams leave through
	// (SO_BINDTODEVICE): a VRF's device sends through the VRF's routing
	// table (SONiC's collector_vrf mgmt), another device through its
	// routes only.
	Device string
	// BeforeSend, when not nil, is called before every system call that
	// sends datagrams (on the owner's goroutine): the owner marks the
	// input the datagrams were made of as consumed (the agent's ring
	// records: dataplane/reader's Source.Commit), so that a crash after the send
	// never makes them again.
	BeforeSend func()
}

// Backoff of the reconnection of a socket that could not be connected (no
// route yet, host name not resolved).
const (
	redialMin = time.Second
	redialMax = time.Minute
)

// errUnresolved is the send error of a collector whose host name has not
// been resolved yet (Config.Collector is not valid).
var errUnresolved = errors.New("collector host name not resolved yet")

// mmsghdr is struct mmsghdr of sendmmsg(2): Go pads it like C (to 64
// bytes on 64-bit systems).
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
}

// run is one message: datagrams slots[lo:hi], bytes long in all.
type run struct{ lo, hi, bytes int }

// ctrlLen is the control buffer of one message: a UDP_SEGMENT cmsg with
// the 16-bit segment size.
var ctrlLen = unix.CmsgSpace(2)

// Sender is one stream of datagrams to one collector.
type Sender struct {
	cfg  Config
	conn *net.UDPConn
	raw  syscall.RawConn

	// slots[:n] are complete datagrams waiting to be sent; slots[n] is the
	// datagram being filled, numbered seq.
	slots []*sflow.DatagramWriter
	n     int
	seq   uint32

	// While conn is nil (connecting failed with dialErr), connect tries
	// again at nextDial, waiting dialWait longer each time.
	dialErr  error
	dialWait time.Duration
	nextDial time.Time

	// calls counts send system calls (for tests and benchmarks).
	calls uint64

	// The system call's arguments and results: one iovec per datagram,
	// one message per run of datagrams (one datagram without GSO). sendFn
	// is built once so that sending does not allocate a closure per call.
	gso     bool
	msgs    []mmsghdr
	runs    []run
	iovs    []unix.Iovec
	ctrl    []byte
	lo, hi  int   // msgs[lo:hi] are to be sent
	done    int   // messages the call sent
	sendErr error // the call's error
	sendFn  func(fd uintptr) bool
}

// New returns a sender with a UDP socket connected to cfg.Collector. A
// socket that cannot be opened now is not an error: the sender counts its
// datagrams as refused and tries again with backoff (DialErr tells why).
func New(cfg Config) (*Sender, error) {
	if cfg.MaxDatagramSize == 0 {
		cfg.MaxDatagramSize = sflow.DefaultMaxDatagramSize
	}
	if cfg.Batch <= 0 {
		cfg.Batch = min(max(MaxBatchBytes/(cfg.MaxDatagramSize+writerOverhead), 1), defaultBatch)
	}
	if cfg.Uptime == nil {
		return nil, errors.New("sender: no uptime clock")
	}
	s := &Sender{
		cfg:   cfg,
		seq:   cfg.LastSeq + 1,
		slots: make([]*sflow.DatagramWriter, cfg.Batch),
		gso:   !cfg.NoGSO,
		msgs:  make([]mmsghdr, cfg.Batch),
		runs:  make([]run, cfg.Batch),
		iovs:  make([]unix.Iovec, cfg.Batch),
		ctrl:  make([]byte, cfg.Batch*ctrlLen),
	}
	for i := range s.slots {
		w, err := sflow.NewDatagramWriter(cfg.Agent, cfg.SubAgent, cfg.MaxDatagramSize)
		if err != nil {
			return nil, fmt.Errorf("sender to %s: %w", cfg.Collector, err)
		}
		s.slots[i] = w
	}
	s.connect()
	for i := 0; i < cfg.Batch; i++ {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&s.ctrl[i*ctrlLen]))
		h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
		h.SetLen(unix.CmsgLen(2))
	}
	// One non-blocking attempt per call (the socket is O_NONBLOCK and the
	// function never asks the poller to wait): a collector that cannot keep
	// up costs counted send errors, never a stalled worker.
	s.sendFn = func(fd uintptr) bool {
		s.done, s.sendErr = 0, nil
		s.calls++
		if s.hi-s.lo == 1 && s.runs[s.lo].hi-s.runs[s.lo].lo == 1 {
			b := s.slots[s.runs[s.lo].lo].Bytes()
			n, err := unix.Write(int(fd), b)
			if err != nil {
				s.sendErr = err
				return true
			}
			s.msgs[s.lo].len = uint32(n)
			s.done = 1
			return true
		}
		r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd,
			uintptr(unsafe.Pointer(&s.msgs[s.lo])), uintptr(s.hi-s.lo), 0, 0, 0)
		if errno != 0 {
			s.sendErr = errno
			return true
		}
		s.done = int(r)
		return true
	}
	s.slots[0].Begin(s.seq, 0)
	return s, nil
}

// Collector returns the address the sender sends to.
func (s *Sender) Collector() netip.AddrPort { return s.cfg.Collector }

// Add encodes sample smp into the current datagram. When smp does not fit,
// the datagram is complete (and the batch sent if that fills it) and smp
// starts the next one. It returns sflow.ErrSampleTooLarge, counted in
// TooLarge, when smp does not fit even in an empty datagram.
func (s *Sender) Add(smp sflow.Sample) error {
	err := s.slots[s.n].Add(smp)
	if errors.Is(err, sflow.ErrDatagramFull) {
		s.complete()
		err = s.slots[s.n].Add(smp)
	}
	if err != nil {
		for i := range s.cfg.Counters {
			add(s.cfg.Counters[i].TooLarge, 1)
		}
		return err
	}
	return nil
}

// complete closes the current datagram and begins the next, sending the
// batch first when it is full.
func (s *Sender) complete() {
	s.n++
	if s.n == len(s.slots) {
		s.send(s.n)
		s.n = 0
	}
	s.seq++
	s.slots[s.n].Begin(s.seq, 0) // uptime is set at send time
}

// Queued returns the number of complete datagrams waiting to be sent.
func (s *Sender) Queued() int { return s.n }

// SendQueued sends the complete datagrams waiting in the batch; the
// datagram being filled stays. Owners call it when they have nothing more
// to encode for now (a drained ring, an empty queue).
func (s *Sender) SendQueued() {
	if s.n == 0 {
		return
	}
	s.send(s.n)
	s.slots[0], s.slots[s.n] = s.slots[s.n], s.slots[0]
	s.n = 0
}

// Flush completes the current datagram if it holds a sample and sends
// every waiting datagram. Owners call it once a second.
func (s *Sender) Flush() {
	if s.slots[s.n].Len() > 0 {
		s.complete()
	}
	s.SendQueued()
}

// LastSeq returns the sequence number of the stream's last datagram that
// holds samples (sent, waiting or being filled): a sender replacing this
// one, while this one still sends what it holds, starts with LastSeq+1.
func (s *Sender) LastSeq() uint32 {
	if s.slots[s.n].Len() > 0 {
		return s.seq
	}
	return s.seq - 1
}

// DialErr returns why the sender has no socket now, nil when it has one.
func (s *Sender) DialErr() error { return s.dialErr }

// Close sends what is buffered, closes the socket and returns the sequence
// number of the last datagram sent: the next stream to this collector
// continues with the number after it, without a gap.
func (s *Sender) Close() (lastSeq uint32, err error) {
	s.Flush()
	if s.conn == nil {
		return s.seq - 1, nil
	}
	if err := s.conn.Close(); err != nil {
		return s.seq - 1, fmt.Errorf("sender to %s: closing socket: %w", s.cfg.Collector, err)
	}
	return s.seq - 1, nil
}

// send sends slots[:k], each with the uptime of now, and counts every
// datagram: sent, or refused with its samples.
func (s *Sender) send(k int) {
	if s.cfg.BeforeSend != nil {
		s.cfg.BeforeSend()
	}
	if s.cfg.LastSent != nil {
		atomic.StoreUint64(s.cfg.LastSent, uint64(s.slots[k-1].Seq()))
	}
	up := s.cfg.Uptime()
	for i := 0; i < k; i++ {
		w := s.slots[i]
		w.SetUptime(up)
		b := w.Bytes()
		s.iovs[i].Base = &b[0]
		s.iovs[i].SetLen(len(b))
	}
	if !s.connect() {
		s.refused(0, k)
		return
	}
	s.sendRange(0, k)
}

// sendRange sends slots[lo:k] in as few system calls as the kernel takes.
func (s *Sender) sendRange(lo, k int) {
	nm := s.messages(lo, k)
	for m := 0; m < nm; {
		s.lo, s.hi = m, nm
		if err := s.raw.Write(s.sendFn); err != nil {
			s.done, s.sendErr = 0, err // the socket is closed
		}
		for j := m; j < m+s.done; j++ {
			r := s.runs[j]
			if int(s.msgs[j].len) == r.bytes {
				s.sent(r.lo, r.hi)
			} else {
				s.refused(r.lo, r.hi)
			}
		}
		m += s.done
		if m == nm {
			return
		}
		r := s.runs[m]
		switch {
		case s.sendErr == nil:
			// The kernel took none and said nothing: do not spin.
			s.refused(r.lo, k)
			return
		case r.hi-r.lo > 1 && isNoGSO(s.sendErr):
			// The route cannot take UDP segmentation (a datagram larger
			// than its MTU, no checksum offload): send the rest, and
			// everything after, one datagram per message.
			s.gso = false
			s.sendRange(r.lo, k)
			return
		case errors.Is(s.sendErr, unix.EAGAIN) || isFatal(s.sendErr):
			// The socket buffer is full or the socket is gone: the rest
			// of the batch would fail the same way.
			s.refused(r.lo, k)
			return
		default:
			// An error of this message (such as ECONNREFUSED from an
			// earlier ICMP port unreachable): count it, try the next.
			s.refused(r.lo, r.hi)
			m++
		}
	}
}

// GSO limits: a message carries at most maxSegments datagrams (the
// kernel's UDP_MAX_SEGMENTS was 64 before Linux 6.x) and at most
// maxGSOBytes of UDP payload (the IP length field, less the UDP and IPv6
// headers).
const (
	maxSegments = 64
	maxGSOBytes = 65535 - 8 - 40
)

// messages builds the sendmmsg messages of slots[lo:k] in s.msgs[:n] and
// s.runs[:n] and returns n. With UDP GSO (UDP_SEGMENT, Linux 4.18) a run
// of datagrams of one size, optionally ended by one shorter datagram, is
// one message that the kernel passes through the stack as one packet and
// cuts at that size (where the collector's socket, or the device, receives
// it): the collector sees exactly the datagrams built here, at the cost of
// one traversal of the stack for the run. sFlow datagrams of a busy port
// are mostly the same size (same records, headers cut at the same length).
func (s *Sender) messages(lo, k int) int {
	n := 0
	for i := lo; i < k; {
		size := int(s.iovs[i].Len)
		j, total := i+1, size
		if s.gso {
			for j < k && j-i < maxSegments {
				l := int(s.iovs[j].Len)
				if l > size || total+l > maxGSOBytes {
					break
				}
				total += l
				j++
				if l < size { // a shorter datagram ends the run
					break
				}
			}
		}
		m := &s.msgs[n]
		m.hdr.Iov = &s.iovs[i]
		m.hdr.SetIovlen(j - i)
		m.len = 0
		if j-i > 1 {
			c := s.ctrl[n*ctrlLen : (n+1)*ctrlLen]
			binary.NativeEndian.PutUint16(c[unix.CmsgLen(0):], uint16(size))
			m.hdr.Control = &c[0]
			m.hdr.SetControllen(ctrlLen)
		} else {
			m.hdr.Control = nil
			m.hdr.SetControllen(0)
		}
		s.runs[n] = run{lo: i, hi: j, bytes: total}
		n++
		i = j
	}
	return n
}

// isNoGSO reports errors by which the kernel refuses a UDP GSO message
// as such (not the datagrams in it).
func isNoGSO(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EIO) || errors.Is(err, unix.EOPNOTSUPP) ||
		errors.Is(err, unix.ENOPROTOOPT) || errors.Is(err, unix.EMSGSIZE)
}

// sent counts slots[lo:hi] as sent.
func (s *Sender) sent(lo, hi int) {
	for j := lo; j < hi; j++ {
		n := uint64(s.iovs[j].Len)
		for i := range s.cfg.Counters {
			c := &s.cfg.Counters[i]
			add(c.Datagrams, 1)
			add(c.Bytes, n)
		}
	}
}

// isFatal reports errors after which no datagram of the batch can be sent.
func isFatal(err error) bool {
	var errno unix.Errno
	return !errors.As(err, &errno) || errno == unix.EBADF || errno == unix.ENOTSOCK
}

// refused counts slots[lo:hi] as refused by the socket.
func (s *Sender) refused(lo, hi int) {
	for j := lo; j < hi; j++ {
		for i := range s.cfg.Counters {
			c := &s.cfg.Counters[i]
			add(c.SendErrors, 1)
			add(c.SamplesUnsent, uint64(s.slots[j].Len()))
		}
	}
}

// connect makes sure s has a socket, trying again at most every
// redialMin..redialMax (doubling) while connecting fails. It reports
// whether s can send now.
func (s *Sender) connect() bool {
	if s.conn != nil {
		return true
	}
	now := time.Now()
	if now.Before(s.nextDial) {
		return false
	}
	conn, raw, err := dial(s.cfg.Collector, s.cfg.Device)
	if err != nil {
		s.dialWait = min(max(2*s.dialWait, redialMin), redialMax)
		s.nextDial = now.Add(s.dialWait)
		s.dialErr = err
		return false
	}
	s.conn, s.raw, s.dialWait, s.dialErr = conn, raw, 0, nil
	return true
}

// dial opens a connected UDP socket to ap with SO_BROADCAST off (Go turns
// it on for every IPv4 UDP socket): connecting to a broadcast address,
// limited or subnet-directed, then fails with EACCES instead of flooding a
// subnet. A device, when given, is bound before connecting.
func dial(ap netip.AddrPort, device string) (*net.UDPConn, syscall.RawConn, error) {
	if !ap.IsValid() {
		return nil, nil, errUnresolved
	}
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 0)
			if serr == nil && device != "" {
				// Before connect(2), so that the route is looked up
				// through the device (its VRF's table).
				if err := unix.BindToDevice(int(fd), device); err != nil {
					serr = fmt.Errorf("binding to device %s: %w", device, err)
				}
			}
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("udp", ap.String())
	if err != nil {
		return nil, nil, fmt.Errorf("socket to %s: %w", ap, err)
	}
	conn := c.(*net.UDPConn)
	raw, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("socket to %s: %w", ap, err)
	}
	return conn, raw, nil
}
