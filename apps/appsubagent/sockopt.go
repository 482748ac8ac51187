package appsubagent

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// getsockoptMeminfo reads SO_MEMINFO (an array of SK_MEMINFO_* u32) into
// mem; x/sys/unix has no wrapper for an array-valued option.
func getsockoptMeminfo(fd int, mem []uint32) error {
	l := uint32(len(mem) * 4)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&mem[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return nil
}
