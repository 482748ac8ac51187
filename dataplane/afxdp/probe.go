package afxdp

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoNeedWakeup is Probe's error on a kernel whose AF_XDP rings have no
// flags word (before Linux 5.4): Open needs it for need-wakeup.
var ErrNoNeedWakeup = errors.New("AF_XDP rings without the need-wakeup flags word (Linux 5.4)")

// Probe reports whether the running kernel can give this package a
// socket: AF_XDP sockets (CONFIG_XDP_SOCKETS, Linux 4.18) whose
// XDP_MMAP_OFFSETS include the ring flags word that need-wakeup uses
// (Linux 5.4; Open refuses kernels without it). It creates one unbound
// socket and closes it; creating it needs CAP_NET_RAW. Nothing is bound,
// so no driver (and no XDP_USE_NEED_WAKEUP support of one) is involved.
//
// Its errors tell the causes apart: unix.EAFNOSUPPORT (no AF_XDP in the
// kernel) and ErrNoNeedWakeup (too old) mean the kernel lacks the
// feature; unix.EPERM means this process lacks CAP_NET_RAW, which the
// message says.
func Probe() error {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("socket(AF_XDP): %w: CAP_NET_RAW is needed", err)
	}
	if err != nil {
		return fmt.Errorf("socket(AF_XDP): %w", err)
	}
	defer unix.Close(fd)
	// The offsets are constants of the kernel's ring layout: no UMEM or
	// ring is needed to read them. A kernel before 5.4 answers with the
	// shorter layout without flags.
	var off unix.XDPMmapOffsets
	n := uint32(unsafe.Sizeof(off))
	if err := getsockopt(fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), &n); err != nil {
		return fmt.Errorf("XDP_MMAP_OFFSETS: %w", err)
	}
	if n != uint32(unsafe.Sizeof(off)) {
		return fmt.Errorf("XDP_MMAP_OFFSETS returned %d bytes, want %d: %w", n, unsafe.Sizeof(off), ErrNoNeedWakeup)
	}
	return nil
}
