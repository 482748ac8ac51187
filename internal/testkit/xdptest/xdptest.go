// Package xdptest runs an XDP program in the kernel with BPF_PROG_TEST_RUN
// on one frame and an xdp_md context (so the program sees an ingress
// ifindex and RX queue), returning its verdict and the kernel's mean
// duration per run. cilium/ebpf's Program.Run returns no duration and
// Program.Benchmark takes no context, hence this small wrapper of the
// system call, shared by the dataplane's tests and the benchmarks.
package xdptest

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// MD is struct xdp_md (linux/bpf.h), the context of an XDP test run. The
// ingress ifindex is resolved in the network namespace of the calling
// thread.
type MD struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// Attr is the test member of union bpf_attr (include/uapi/linux/bpf.h),
// the argument of BPF_PROG_TEST_RUN. The system call is made directly
// because cilium/ebpf's Program.Run returns no duration, takes no context
// and repeats a run a signal interrupted in full (which would send more
// live frames than asked); the benchmarks need all three.
type Attr struct {
	ProgFD, Retval, DataSizeIn, DataSizeOut uint32
	DataIn, DataOut                         uint64
	Repeat, Duration                        uint32
	CtxSizeIn, CtxSizeOut                   uint32
	CtxIn, CtxOut                           uint64
	Flags, CPU, BatchSize                   uint32
	_                                       uint32
}

// TestRun makes one BPF_PROG_TEST_RUN system call with attr, whose data
// and context the caller keeps alive, and returns its errno (0: ran; EINTR:
// a signal stopped it, the caller decides whether to run again). It does
// not allocate.
func TestRun(attr *Attr) unix.Errno {
	_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN, uintptr(unsafe.Pointer(attr)), unsafe.Sizeof(*attr))
	return errno
}

// maxInterrupted bounds the runs interrupted by a signal before Run gives
// up with EINTR.
const maxInterrupted = 100

// Run runs prog repeat times on data with context ctx and returns the
// program's return value and the kernel-measured mean duration per run
// in ns.
func Run(prog *ebpf.Program, data []byte, ctx *MD, repeat uint32) (ret, durationNs uint32, err error) {
	attr := Attr{
		ProgFD:     uint32(prog.FD()),
		DataSizeIn: uint32(len(data)),
		DataIn:     uint64(uintptr(unsafe.Pointer(&data[0]))),
		Repeat:     repeat,
		CtxSizeIn:  uint32(unsafe.Sizeof(*ctx)),
		CtxIn:      uint64(uintptr(unsafe.Pointer(ctx))),
	}
	// The kernel stops a test run with EINTR when a signal is pending,
	// and the Go runtime signals its threads (SIGURG, async preemption):
	// run again, as cilium/ebpf's Program.Run does. The duration is that
	// of the run that completed.
	var errno unix.Errno
	for range maxInterrupted {
		if errno = TestRun(&attr); errno != unix.EINTR {
			break
		}
	}
	runtime.KeepAlive(data)
	runtime.KeepAlive(ctx)
	if errno != 0 {
		return 0, 0, fmt.Errorf("BPF_PROG_TEST_RUN: %w", errno)
	}
	return attr.Retval, attr.Duration, nil
}
