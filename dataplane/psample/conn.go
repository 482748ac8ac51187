package psample

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ConnConfig sizes a Conn.
type ConnConfig struct {
	// Batch is the most messages one recvmmsg reads (default 64).
	Batch int
	// MsgBytes is the buffer of one message (default 2048): a sample's
	// headers take about 100 bytes, the rest holds DATA (the rule's
	// truncation, or as much as fits: a longer message is read cut short,
	// and its DATA keeps the first bytes).
	MsgBytes int
	// RcvBuf is the socket's receive buffer (SO_RCVBUF, default 4 MiB;
	// SO_RCVBUFFORCE is tried first, which CAP_NET_ADMIN allows beyond
	// net.core.rmem_max).
	RcvBuf int
	// Holdoff is how long Read lets samples gather after the first one
	// woke it, before it reads them (default DefaultHoldoff; negative:
	// none). The kernel wakes a waiting reader at every sample it
	// multicasts, so without it a reader that keeps up pays a wake-up, a
	// recvmmsg and a counter read per sample; with it, one per Holdoff
	// at most, whatever the rate. A BPF ring's reader is woken per batch
	// of samples in the same way (dataplane.Config.WakeupBytes). The
	// cost: a sample leaves up to Holdoff later; the socket's buffer
	// (RcvBuf) must hold what arrives meanwhile (4 MiB: about 3000
	// samples, 1.5 million samples/s at 2 ms). Wake cuts it short.
	Holdoff time.Duration
	// Intake chooses how samples come in (default IntakeAuto: the tap
	// where the kernel allows it, else netlink).
	Intake Intake
	// TapRingBytes is the tap's ring buffer (default
	// DefaultTapRingBytes; a power of two, at least a page).
	TapRingBytes int
}

// DefaultHoldoff is ConnConfig.Holdoff's default.
const DefaultHoldoff = 2 * time.Millisecond

func (c *ConnConfig) defaults() {
	if c.Batch <= 0 {
		c.Batch = 64
	}
	if c.MsgBytes <= 0 {
		c.MsgBytes = 2048
	}
	if c.RcvBuf <= 0 {
		c.RcvBuf = 4 << 20
	}
	if c.Holdoff == 0 {
		c.Holdoff = DefaultHoldoff
	}
}

// mmsghdr is struct mmsghdr (recvmmsg(2)).
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// Conn is a netlink socket joined to psample's packets group, in the
// network namespace of the thread that opened it (psample multicasts a
// sample in the namespace of the rule that took it). Read waits for
// samples and reads them in batches; Wake cuts a wait short. One reader at
// a time; Wake and the counters may be used from any goroutine.
type Conn struct {
	fd, wake int
	family   Family
	bufs     []byte
	msgs     []mmsghdr
	iovs     []unix.Iovec
	msgBytes int
	holdoff  time.Duration
	s        Sample
	batch    uint64
	pfd      [2]unix.PollFd

	// Overruns counts the times the socket reported ENOBUFS: its buffer
	// was full and the kernel dropped samples. How many it dropped the
	// GROUP_SEQ gaps tell (Seq).
	Overruns atomic.Uint64
	// Received counts sample messages read; Malformed the messages that
	// did not parse (counted, skipped).
	Received  atomic.Uint64
	Malformed atomic.Uint64

	// OnGroup, when set (before the first Read), is told of every group
	// the kernel made (created) or freed, as it announces them on the
	// family's "config" group (psample_group_notify): a group made anew
	// numbers its samples from 0, whatever its number was before, and a
	// reader following its GROUP_SEQ starts again (Seq.Reset). Called
	// from Read, on the reader's goroutine.
	OnGroup func(group uint32, created bool)

	// OnLost, when set (before the first Read), is told of the samples of
	// group the tap could not deliver (its ring was full): the tap's
	// loss accounting, exact, in place of GROUP_SEQ gaps. Called from
	// Read and TryRead, on the reader's goroutine. TapLost sums them.
	OnLost  func(group uint32, n uint64)
	TapLost atomic.Uint64

	// tap, when not nil, is the intake (IntakeTap): fd is then -1 and
	// pfd[0] polls the tap's ring. tapErr says why Open fell back to
	// netlink (IntakeAuto).
	tap    *tap
	tapErr error
}

// Open opens a Conn in the calling thread's network namespace: with the
// tap where cfg.Intake allows it and the kernel lets it attach, else with
// a netlink socket (Intake and TapErr tell which, and why).
func Open(cfg ConnConfig) (*Conn, error) {
	fam, err := GetFamily()
	if err != nil {
		return nil, err
	}
	if cfg.Intake == IntakeNetlink {
		return openFamily(cfg, fam, true)
	}
	c, terr := openTapConn(cfg, fam)
	if terr == nil {
		return c, nil
	}
	if cfg.Intake == IntakeTap {
		return nil, terr
	}
	if c, err = openFamily(cfg, fam, true); err != nil {
		return nil, err
	}
	c.tapErr = terr
	return c, nil
}

// openTapConn opens a Conn whose intake is the tap.
func openTapConn(cfg ConnConfig, fam Family) (*Conn, error) {
	cfg.defaults()
	t, err := openTap(cfg.TapRingBytes)
	if err != nil {
		return nil, err
	}
	c := &Conn{fd: -1, wake: -1, family: fam, holdoff: cfg.Holdoff, tap: t}
	if c.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, errors.Join(fmt.Errorf("psample: eventfd: %w", err), c.Close())
	}
	c.pfd = [2]unix.PollFd{{Fd: int32(t.objs.Samples.FD()), Events: unix.POLLIN}, {Fd: int32(c.wake), Events: unix.POLLIN}}
	return c, nil
}

// Intake tells how the Conn receives samples: IntakeTap or IntakeNetlink.
func (c *Conn) Intake() Intake {
	if c.tap != nil {
		return IntakeTap
	}
	return IntakeNetlink
}

// TapErr is why Open did not use the tap (IntakeAuto fell back to
// netlink), nil otherwise.
func (c *Conn) TapErr() error { return c.tapErr }

// TapStats returns the tap program's counters (a map read: for metrics
// and tests, not per sample); zero for a netlink Conn.
func (c *Conn) TapStats() (TapStats, error) {
	if c.tap == nil {
		return TapStats{}, nil
	}
	return c.tap.stats()
}

// openFamily opens a Conn reading the messages of family fam, joined to
// its packets group when join (without: it receives only what is sent to
// it, for tests that synthesize the kernel's messages).
func openFamily(cfg ConnConfig, fam Family, join bool) (*Conn, error) {
	cfg.defaults()
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, fmt.Errorf("psample: netlink socket: %w", err)
	}
	c := &Conn{fd: fd, wake: -1, family: fam, msgBytes: cfg.MsgBytes, holdoff: cfg.Holdoff}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		c.Close()
		return nil, fmt.Errorf("psample: bind: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, cfg.RcvBuf); err != nil {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, cfg.RcvBuf); err != nil {
			c.Close()
			return nil, fmt.Errorf("psample: SO_RCVBUF: %w", err)
		}
	}
	if join {
		if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, int(fam.Packets)); err != nil {
			c.Close()
			return nil, fmt.Errorf("psample: joining multicast group %s/%s (%d): %w", FamilyName, GroupPacket, fam.Packets, err)
		}
		if fam.Config != 0 {
			if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, int(fam.Config)); err != nil {
				c.Close()
				return nil, fmt.Errorf("psample: joining multicast group %s/%s (%d): %w", FamilyName, GroupConfig, fam.Config, err)
			}
		}
	}
	if c.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		c.Close()
		return nil, fmt.Errorf("psample: eventfd: %w", err)
	}
	c.bufs = make([]byte, cfg.Batch*cfg.MsgBytes)
	c.msgs = make([]mmsghdr, cfg.Batch)
	c.iovs = make([]unix.Iovec, cfg.Batch)
	for i := range c.msgs {
		c.iovs[i].Base = &c.bufs[i*cfg.MsgBytes]
		c.iovs[i].SetLen(cfg.MsgBytes)
		c.msgs[i].hdr.Iov = &c.iovs[i]
		c.msgs[i].hdr.SetIovlen(1)
	}
	c.pfd = [2]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(c.wake), Events: unix.POLLIN}}
	return c, nil
}

// OpenSynthetic opens a Conn that reads messages of family fam sent to it
// (Addr) rather than the kernel's multicast group: the ASIC attributes
// no software path produces are tested by sending the kernel's message
// layout to it from another netlink socket (root: CAP_NET_ADMIN).
func OpenSynthetic(cfg ConnConfig, fam Family) (*Conn, error) { return openFamily(cfg, fam, false) }

// PortID is the Conn socket's netlink port id (where OpenSynthetic's
// messages are sent).
func (c *Conn) PortID() (uint32, error) {
	sa, err := unix.Getsockname(c.fd)
	if err != nil {
		return 0, fmt.Errorf("psample: getsockname: %w", err)
	}
	nl, ok := sa.(*unix.SockaddrNetlink)
	if !ok {
		return 0, fmt.Errorf("psample: getsockname: %T", sa)
	}
	return nl.Pid, nil
}

// Family returns the psample family the Conn reads.
func (c *Conn) Family() Family { return c.family }

// maxRounds bounds the recvmmsg calls of one Read, so that a flood still
// lets the caller send what it made and take its configuration.
const maxRounds = 16

// Read waits until deadline for samples, then hands every sample already
// queued (up to maxRounds batches) to fn and returns how many. With none
// before the deadline, or woken by Wake, it returns 0 and an error
// satisfying errors.Is(err, os.ErrDeadlineExceeded). The Sample and its
// Data are valid only during fn. No allocation.
func (c *Conn) Read(deadline time.Time, fn func(*Sample)) (int, error) {
	if c.tap != nil {
		return c.tapRead(deadline, fn)
	}
	n := 0
	for round := 0; round < maxRounds; round++ {
		got, err := c.recv()
		if err != nil {
			return n, err
		}
		if got == 0 {
			break
		}
		for i := 0; i < got; i++ {
			n += c.deliver(i, fn)
		}
		if got < len(c.msgs) {
			break
		}
	}
	if n > 0 {
		return n, nil
	}
	if err := c.wait(deadline); err != nil {
		return 0, err
	}
	if err := c.hold(deadline); err != nil {
		return 0, err
	}
	for round := 0; round < maxRounds; round++ {
		got, err := c.recv()
		if err != nil {
			return n, err
		}
		for i := 0; i < got; i++ {
			n += c.deliver(i, fn)
		}
		if got < len(c.msgs) {
			break
		}
	}
	if n == 0 {
		return 0, os.ErrDeadlineExceeded
	}
	return n, nil
}

// TryRead hands fn the samples already queued (up to maxRounds batches),
// without waiting, and returns how many.
func (c *Conn) TryRead(fn func(*Sample)) (int, error) {
	if c.tap != nil {
		return c.tapDrain(fn)
	}
	n := 0
	for round := 0; round < maxRounds; round++ {
		got, err := c.recv()
		if err != nil {
			return n, err
		}
		for i := 0; i < got; i++ {
			n += c.deliver(i, fn)
		}
		if got < len(c.msgs) {
			break
		}
	}
	return n, nil
}

// WaitReadable waits up to timeout until a sample is queued, for a reader
// that waits on something else and must be woken for samples (a worker
// whose ports are sampled both ways: source's MixedReader).
func (c *Conn) WaitReadable(timeout time.Duration) (bool, error) {
	pfd := []unix.PollFd{{Fd: c.pfd[0].Fd, Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, int(timeout/time.Millisecond))
	if err != nil && !errors.Is(err, unix.EINTR) {
		return false, fmt.Errorf("psample: poll: %w", err)
	}
	return n > 0, nil
}

// deliver parses message i of the last batch and hands it to fn.
func (c *Conn) deliver(i int, fn func(*Sample)) int {
	m := &c.msgs[i]
	b := c.bufs[i*c.msgBytes : i*c.msgBytes+min(int(m.len), c.msgBytes)]
	c.s.Batch = c.batch
	ok, err := ParseMessage(b, c.family.ID, &c.s)
	if err != nil {
		c.Malformed.Add(1)
		return 0
	}
	if !ok {
		if group, created, isGroup := ParseGroupMessage(b, c.family.ID); isGroup && c.OnGroup != nil {
			c.OnGroup(group, created)
		}
		return 0
	}
	if m.hdr.Flags&unix.MSG_TRUNC != 0 {
		c.s.Truncated = true
	}
	c.Received.Add(1)
	fn(&c.s)
	return 1
}

// recv reads one batch without waiting; 0 when nothing is queued.
// ENOBUFS (the socket overran) is counted and the read goes on.
func (c *Conn) recv() (int, error) {
	for {
		for i := range c.msgs {
			c.msgs[i].len = 0
			c.msgs[i].hdr.Flags = 0
		}
		r, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(c.fd), uintptr(unsafe.Pointer(&c.msgs[0])),
			uintptr(len(c.msgs)), unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
			c.batch++
			return int(r), nil
		case unix.EAGAIN:
			return 0, nil
		case unix.EINTR:
			continue
		case unix.ENOBUFS:
			c.Overruns.Add(1)
			continue
		}
		return 0, fmt.Errorf("psample: recvmmsg: %w", errno)
	}
}

// wait polls the socket and the wake-up eventfd until deadline.
func (c *Conn) wait(deadline time.Time) error {
	for {
		ms := -1
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return os.ErrDeadlineExceeded
			}
			ms = int((d + time.Millisecond - 1) / time.Millisecond)
		}
		c.pfd[0].Revents, c.pfd[1].Revents = 0, 0
		n, err := unix.Poll(c.pfd[:], ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("psample: poll: %w", err)
		}
		if n == 0 {
			return os.ErrDeadlineExceeded
		}
		if c.pfd[1].Revents != 0 {
			var b [8]byte
			_, _ = unix.Read(c.wake, b[:]) // drain; EAGAIN is fine
			if c.pfd[0].Revents == 0 {
				return os.ErrDeadlineExceeded
			}
		}
		if c.tap == nil && c.pfd[0].Revents&unix.POLLERR != 0 && c.pfd[0].Revents&unix.POLLIN == 0 {
			// An overrun shows as a socket error: read it, count it.
			if _, err := c.recv(); err != nil {
				return err
			}
		}
		return nil
	}
}

// MaxPerRead is the most samples one Read or TryRead hands on.
func (c *Conn) MaxPerRead() int {
	if c.tap != nil {
		return tapMaxPerRead
	}
	return maxRounds * len(c.msgs)
}

// Pause waits for d (no later than deadline) unless Wake cuts it short,
// and reports whether it did: a reader that must not read yet (its
// consumers are full) waits without missing a Wake.
func (c *Conn) Pause(d time.Duration, deadline time.Time) (bool, error) {
	if !deadline.IsZero() {
		d = min(d, time.Until(deadline))
	}
	ms := int((d + time.Millisecond - 1) / time.Millisecond)
	if ms <= 0 {
		return false, nil
	}
	pfd := c.pfd[1:]
	pfd[0].Revents = 0
	if _, err := unix.Poll(pfd, ms); err != nil && !errors.Is(err, unix.EINTR) {
		return false, fmt.Errorf("psample: poll: %w", err)
	}
	if pfd[0].Revents == 0 {
		return false, nil
	}
	var b [8]byte
	_, _ = unix.Read(c.wake, b[:]) // drain; EAGAIN is fine
	return true, nil
}

// hold lets samples gather for the holdoff (no later than deadline), once
// a sample has woken the reader; Wake cuts it short.
func (c *Conn) hold(deadline time.Time) error {
	if c.holdoff <= 0 {
		return nil
	}
	_, err := c.Pause(c.holdoff, deadline)
	return err
}

// Wake makes a waiting Read return at once.
func (c *Conn) Wake() error {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], 1)
	if _, err := unix.Write(c.wake, b[:]); err != nil && !errors.Is(err, unix.EAGAIN) {
		return fmt.Errorf("psample: waking the reader: %w", err)
	}
	return nil
}

// Close closes the socket, or detaches the tap.
func (c *Conn) Close() error {
	var errs []error
	if c.tap != nil {
		errs = append(errs, c.tap.close())
		c.tap = nil
	}
	if c.fd >= 0 {
		errs = append(errs, unix.Close(c.fd))
		c.fd = -1
	}
	if c.wake >= 0 {
		errs = append(errs, unix.Close(c.wake))
		c.wake = -1
	}
	return errors.Join(errs...)
}

// tapRead is Read with the tap: the records the ring holds when they are
// a batch already (tap.batchBytes), else a wait for the first (the
// ring's FD polls readable when it holds one), the holdoff, and the
// records then. A reader that read what had come in while it handled the
// last batch would read batches of a few samples each, paying the
// per-batch work (the ports' counters, RTM_GETSTATS; the worker's sends)
// for every few samples: measured under BenchmarkPathCPU, the pool reads
// alone cost a fifth of the path's CPU per sample that way. As the
// samplers' rings wake their reader per batch (dataplane.Config.
// WakeupBytes), the tap's reader reads per holdoff.
func (c *Conn) tapRead(deadline time.Time, fn func(*Sample)) (int, error) {
	if c.holdoff <= 0 || c.tap.backlog() >= c.tap.batchBytes {
		if n, err := c.tapDrain(fn); n > 0 || err != nil {
			return n, err
		}
	}
	if err := c.wait(deadline); err != nil {
		return 0, err
	}
	if err := c.hold(deadline); err != nil {
		return 0, err
	}
	n, err := c.tapDrain(fn)
	if n == 0 && err == nil {
		return 0, os.ErrDeadlineExceeded
	}
	return n, err
}

// tapDrain charges the tap's losses (OnLost), then hands fn the records
// the ring holds (up to tapMaxPerRead), without waiting. The losses come
// first, so that the samples read next carry them in their drops.
func (c *Conn) tapDrain(fn func(*Sample)) (int, error) {
	lerr := c.tap.losses(c.lostTap)
	c.batch++
	n, bad, err := c.tap.read(&c.s, c.batch, tapMaxPerRead, fn)
	c.Received.Add(uint64(n))
	c.Malformed.Add(uint64(bad))
	return n, errors.Join(lerr, err)
}

// lostTap counts and hands on the tap's losses of group.
func (c *Conn) lostTap(group uint32, n uint64) {
	c.TapLost.Add(n)
	if c.OnLost != nil {
		c.OnLost(group, n)
	}
}
