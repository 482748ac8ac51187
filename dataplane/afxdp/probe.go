package afxdp

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Probe reports whether the running kernel can give this package a
// socket: AF_XDP sockets (CONFIG_XDP_SOCKETS, Linux 4.18) whose
// XDP_MMAP_OFFSETS include the ring flags word that need-wakeup uses
// (Linux 5.4; Open refuses kernels without it). It creates one unbound
// socket and closes it; creating it needs CAP_NET_RAW.
func Probe() error {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
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
		return fmt.Errorf("XDP_MMAP_OFFSETS returned %d bytes, want %d: no need-wakeup ring flags (Linux 5.4)", n, unsafe.Sizeof(off))
	}
	return nil
}
