// Package afxdp is a minimal receive-only AF_XDP socket built on
// golang.org/x/sys/unix (no cgo, no libxdp).
//
// A Socket owns one UMEM, its fill and completion rings and an RX ring,
// bound to one queue of one interface. The caller loads an XDP program
// that redirects frames into an XSKMAP and stores Socket.FD() in that map
// under the queue index. Receive drains the RX ring in one batch without
// allocating and gives the frames straight back to the fill ring.
//
// A Socket is not safe for concurrent use: one goroutine receives on it
// (one socket per RX queue, as the monitor path of docs/ARCHITECTURE.md describes).
package afxdp

import (
	"errors"
	"fmt"
	"math/bits"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Option defaults.
const (
	DefaultNumFrames = 4096
	DefaultFrameSize = 2048
	DefaultRingSize  = 2048
)

// Options configures Open. Zero values select the defaults.
type Options struct {
	// NumFrames is the number of UMEM frames (default 4096).
	NumFrames int
	// FrameSize is the UMEM chunk size in bytes: a power of two from 2048
	// to the page size (aligned chunk mode; default 2048). In copy mode
	// the largest frame received is FrameSize-256 (XDP_PACKET_HEADROOM);
	// longer frames are dropped by the kernel and counted in RxDropped.
	FrameSize int
	// RxRingSize, FillRingSize and CompletionRingSize are ring sizes in
	// descriptors, powers of two (default 2048 each).
	RxRingSize         int
	FillRingSize       int
	CompletionRingSize int
	// ZeroCopy asks for XDP_ZEROCOPY first and falls back to XDP_COPY when
	// the driver refuses (veth has no zero-copy). Without it the socket is
	// bound in copy mode.
	ZeroCopy bool
	// NeedWakeup binds with XDP_USE_NEED_WAKEUP; Receive then wakes the
	// kernel only when it asks. It is on by default: the zero value of a
	// bool cannot mean "default true", so leaving NeedWakeup false keeps
	// it on, and DisableNeedWakeup turns it off.
	NeedWakeup bool
	// DisableNeedWakeup binds without XDP_USE_NEED_WAKEUP.
	DisableNeedWakeup bool
}

// withDefaults fills zero fields with the defaults and validates the rest.
func (o Options) withDefaults() (Options, error) {
	if o.NumFrames == 0 {
		o.NumFrames = DefaultNumFrames
	}
	if o.FrameSize == 0 {
		o.FrameSize = DefaultFrameSize
	}
	if o.RxRingSize == 0 {
		o.RxRingSize = DefaultRingSize
	}
	if o.FillRingSize == 0 {
		o.FillRingSize = DefaultRingSize
	}
	if o.CompletionRingSize == 0 {
		o.CompletionRingSize = DefaultRingSize
	}
	if o.NeedWakeup && o.DisableNeedWakeup {
		return o, errors.New("afxdp: NeedWakeup and DisableNeedWakeup both set")
	}
	o.NeedWakeup = !o.DisableNeedWakeup
	if o.NumFrames < 1 {
		return o, fmt.Errorf("afxdp: NumFrames %d must be positive", o.NumFrames)
	}
	page := unix.Getpagesize()
	if !isPow2(o.FrameSize) || o.FrameSize < 2048 || o.FrameSize > page {
		return o, fmt.Errorf("afxdp: FrameSize %d must be a power of two in [2048, %d]", o.FrameSize, page)
	}
	for _, r := range []struct {
		name string
		n    int
	}{{"RxRingSize", o.RxRingSize}, {"FillRingSize", o.FillRingSize}, {"CompletionRingSize", o.CompletionRingSize}} {
		if !isPow2(r.n) || r.n > 1<<30 {
			return o, fmt.Errorf("afxdp: %s %d must be a power of two", r.name, r.n)
		}
	}
	return o, nil
}

func isPow2(n int) bool { return n > 0 && bits.OnesCount(uint(n)) == 1 }

// Socket is a bound, receive-only AF_XDP socket with its own UMEM.
type Socket struct {
	fd        int
	zeroCopy  bool
	umem      []byte
	frameMask uint64
	rx        *rxRing
	fill      *fillRing
	// comp is the completion ring. Nothing is transmitted, but the kernel
	// refuses to bind a UMEM without fill and completion rings.
	comp ring
	// free is a stack of UMEM frame addresses owned by user space and not
	// in the fill ring: frames beyond the fill ring's capacity, and frames
	// Receive returned while the fill ring had no room.
	free   []uint64
	pollFD [1]unix.PollFd
	needWK bool
	closed bool
}

// Open creates an AF_XDP socket in the calling thread's network namespace,
// registers a UMEM, sets up and maps the fill, completion and RX rings,
// binds to (ifindex, queue) and pre-fills the fill ring.
//
// The ifindex is resolved in the network namespace the socket is created
// in, so callers working in a namespace must call Open from a thread
// switched into it.
func Open(ifindex, queue int, opts Options) (*Socket, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if ifindex <= 0 || queue < 0 {
		return nil, fmt.Errorf("afxdp: invalid ifindex %d or queue %d", ifindex, queue)
	}
	if o.ZeroCopy {
		s, err := open(ifindex, queue, o, unix.XDP_ZEROCOPY)
		if err == nil {
			return s, nil
		}
		// Drivers without zero-copy support (veth, most virtual devices)
		// refuse XDP_ZEROCOPY at bind time. The half-built socket is
		// already torn down; start over in copy mode.
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EPROTONOSUPPORT) {
			return nil, err
		}
	}
	return open(ifindex, queue, o, unix.XDP_COPY)
}

// open builds a socket bound with the given mode flag (XDP_COPY or
// XDP_ZEROCOPY); on error everything it created is released.
func open(ifindex, queue int, o Options, mode uint16) (s *Socket, err error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("afxdp: socket(AF_XDP): %w", err)
	}
	s = &Socket{fd: fd, zeroCopy: mode == unix.XDP_ZEROCOPY, needWK: o.NeedWakeup}
	defer func() {
		if err != nil {
			_ = s.Close() // the setup error is the one to report
			s = nil
		}
	}()

	umemLen := o.NumFrames * o.FrameSize
	s.umem, err = unix.Mmap(-1, 0, umemLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return s, fmt.Errorf("afxdp: mmap UMEM of %d bytes: %w", umemLen, err)
	}
	s.frameMask = ^uint64(o.FrameSize - 1)
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(&s.umem[0]))),
		Len:  uint64(umemLen),
		Size: uint32(o.FrameSize),
	}
	if err = setsockopt(fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return s, fmt.Errorf("afxdp: XDP_UMEM_REG: %w", err)
	}
	for _, r := range []struct {
		name string
		opt  int
		n    int
	}{
		{"XDP_UMEM_FILL_RING", unix.XDP_UMEM_FILL_RING, o.FillRingSize},
		{"XDP_UMEM_COMPLETION_RING", unix.XDP_UMEM_COMPLETION_RING, o.CompletionRingSize},
		{"XDP_RX_RING", unix.XDP_RX_RING, o.RxRingSize},
	} {
		if err = unix.SetsockoptInt(fd, unix.SOL_XDP, r.opt, r.n); err != nil {
			return s, fmt.Errorf("afxdp: %s size %d: %w", r.name, r.n, err)
		}
	}

	var off unix.XDPMmapOffsets
	offLen := uint32(unsafe.Sizeof(off))
	if err = getsockopt(fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), &offLen); err != nil {
		return s, fmt.Errorf("afxdp: XDP_MMAP_OFFSETS: %w", err)
	}
	if offLen != uint32(unsafe.Sizeof(off)) {
		// Kernels before 5.4 report offsets without the flags word; we
		// need it for need-wakeup, so refuse rather than guess.
		return s, fmt.Errorf("afxdp: XDP_MMAP_OFFSETS returned %d bytes, want %d (kernel too old)", offLen, unsafe.Sizeof(off))
	}

	fr, err := mapRing(fd, unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, uint32(o.FillRingSize), 8)
	if err != nil {
		return s, fmt.Errorf("afxdp: mmap fill ring: %w", err)
	}
	s.fill = newFillRing(fr, off.Fr)
	if s.comp, err = mapRing(fd, unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, uint32(o.CompletionRingSize), 8); err != nil {
		return s, fmt.Errorf("afxdp: mmap completion ring: %w", err)
	}
	rr, err := mapRing(fd, unix.XDP_PGOFF_RX_RING, off.Rx, uint32(o.RxRingSize), unsafe.Sizeof(unix.XDPDesc{}))
	if err != nil {
		return s, fmt.Errorf("afxdp: mmap RX ring: %w", err)
	}
	s.rx = newRxRing(rr, off.Rx)

	flags := mode
	if o.NeedWakeup {
		flags |= unix.XDP_USE_NEED_WAKEUP
	}
	sa := unix.SockaddrXDP{Flags: flags, Ifindex: uint32(ifindex), QueueID: uint32(queue)}
	if err = unix.Bind(fd, &sa); err != nil {
		return s, fmt.Errorf("afxdp: bind ifindex %d queue %d flags %#x: %w", ifindex, queue, flags, err)
	}

	// All frames start out owned by user space; give the kernel as many as
	// the fill ring holds and keep the rest on the free stack.
	s.free = make([]uint64, 0, o.NumFrames)
	for i := o.NumFrames - 1; i >= 0; i-- {
		s.free = append(s.free, uint64(i*o.FrameSize))
	}
	s.refill()
	s.pollFD[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	return s, nil
}

// FD returns the socket's file descriptor, to be stored in the XDP
// program's XSKMAP under the queue index the socket is bound to.
func (s *Socket) FD() int { return s.fd }

// ZeroCopy reports whether the socket is bound in zero-copy mode.
func (s *Socket) ZeroCopy() bool { return s.zeroCopy }

// Receive consumes every RX descriptor available now, in one batch, and
// calls fn with each frame. The frame slice aliases the UMEM and is valid
// only until fn returns. The frames then go back to the fill ring, and the
// kernel is woken if it asked for it (need-wakeup). Receive never blocks
// (use Poll to wait) and does not allocate. It returns the number of
// frames passed to fn.
//
// The socket is bound without XDP_USE_SG, so every descriptor holds a
// whole frame; frames longer than a UMEM frame are dropped by the kernel
// and counted in Stats.RxDropped.
func (s *Socket) Receive(fn func(frame []byte)) (int, error) {
	if s.closed {
		return 0, errors.New("afxdp: receive on closed socket")
	}
	if fn == nil {
		return 0, errors.New("afxdp: receive with nil callback")
	}
	n := s.rx.available()
	if n == 0 {
		return 0, s.wakeIfNeeded()
	}
	cons := s.rx.cons
	umemLen := uint64(len(s.umem))
	for i := uint32(0); i < n; i++ {
		d := &s.rx.descs[(cons+i)&s.rx.mask]
		addr, length := d.Addr, uint64(d.Len)
		// The kernel validates descriptors, but never trust shared memory
		// with a slice bound: a bad descriptor is skipped, not a panic.
		if end := addr + length; end <= umemLen && end >= addr {
			fn(s.umem[addr:end:end])
			s.free = append(s.free, addr&s.frameMask)
		}
	}
	s.rx.release(n)
	s.refill()
	return int(n), s.wakeIfNeeded()
}

// refill moves frames from the free stack into the fill ring, as many as
// it has room for, and publishes them.
func (s *Socket) refill() {
	room := s.fill.free()
	if room == 0 || len(s.free) == 0 {
		return
	}
	n := min(int(room), len(s.free))
	prod := s.fill.prod
	top := len(s.free)
	for i := 0; i < n; i++ {
		s.fill.addrs[(prod+uint32(i))&s.fill.mask] = s.free[top-1-i]
	}
	s.free = s.free[:top-n]
	s.fill.submit(prod + uint32(n))
}

// wakeIfNeeded kicks the driver with a non-blocking recvfrom when the
// kernel set XDP_RING_NEED_WAKEUP on the fill ring (as libxdp's
// xsk_ring_prod__needs_wakeup + recvfrom). In copy mode the kernel never
// sets it; in zero-copy mode the driver does when it ran out of fill
// entries.
func (s *Socket) wakeIfNeeded() error {
	if !s.needWK || !s.fill.needWakeup() {
		return nil
	}
	_, _, errno := unix.Syscall6(unix.SYS_RECVFROM, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	switch errno {
	case 0, unix.EAGAIN, unix.EBUSY, unix.ENOBUFS, unix.EINTR:
		return nil
	default:
		return fmt.Errorf("afxdp: wakeup: %w", errno)
	}
}

// Poll waits up to timeout for the socket to become readable (RX ring not
// empty). A negative timeout waits forever. It reports whether frames are
// ready; an interrupted wait returns false and no error.
func (s *Socket) Poll(timeout time.Duration) (bool, error) {
	if s.closed {
		return false, errors.New("afxdp: poll on closed socket")
	}
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	s.pollFD[0].Revents = 0
	n, err := unix.Poll(s.pollFD[:], ms)
	if err != nil {
		if errors.Is(err, unix.EINTR) {
			return false, nil
		}
		return false, fmt.Errorf("afxdp: poll: %w", err)
	}
	if n == 0 {
		return false, nil
	}
	if re := s.pollFD[0].Revents; re&(unix.POLLERR|unix.POLLNVAL) != 0 {
		return false, fmt.Errorf("afxdp: poll: revents %#x", re)
	}
	return s.pollFD[0].Revents&unix.POLLIN != 0, nil
}

// Close unmaps the rings and the UMEM and closes the socket. It is safe to
// call more than once.
func (s *Socket) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if s.rx != nil {
		errs = append(errs, s.rx.unmap())
	}
	if s.fill != nil {
		errs = append(errs, s.fill.unmap())
	}
	errs = append(errs, s.comp.unmap())
	if s.fd >= 0 {
		errs = append(errs, unix.Close(s.fd))
		s.fd = -1
	}
	// The kernel pins the UMEM pages until the socket is released, so
	// unmapping after close is the safe order either way.
	if s.umem != nil {
		errs = append(errs, unix.Munmap(s.umem))
		s.umem = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("afxdp: close: %w", err)
	}
	return nil
}

// setsockopt is a SOL_XDP setsockopt with a struct argument.
func setsockopt(fd, opt int, p unsafe.Pointer, size uintptr) error {
	_, _, errno := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), size, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// getsockopt is a SOL_XDP getsockopt with a struct argument; *size is the
// buffer size on input and the length the kernel wrote on output.
func getsockopt(fd, opt int, p unsafe.Pointer, size *uint32) error {
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(size)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}
