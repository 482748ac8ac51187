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

// maxInterrupted bounds the runs interrupted by a signal before Run gives
// up with EINTR.
const maxInterrupted = 100

// Run runs prog repeat times on data with context ctx and returns the
// program's return value and the kernel-measured mean duration per run
// in ns.
func Run(prog *ebpf.Program, data []byte, ctx *MD, repeat uint32) (ret, durationNs uint32, err error) {
	attr := struct {
		progFD, retval, dataSizeIn, dataSizeOut uint32
		dataIn, dataOut                         uint64
		repeat, duration                        uint32
		ctxSizeIn, ctxSizeOut                   uint32
		ctxIn, ctxOut                           uint64
		flags, cpu, batchSize                   uint32
		_                                       uint32
	}{
		progFD:     uint32(prog.FD()),
		dataSizeIn: uint32(len(data)),
		dataIn:     uint64(uintptr(unsafe.Pointer(&data[0]))),
		repeat:     repeat,
		ctxSizeIn:  uint32(unsafe.Sizeof(*ctx)),
		ctxIn:      uint64(uintptr(unsafe.Pointer(ctx))),
	}
	// The kernel stops a test run with EINTR when a signal is pending,
	// and the Go runtime signals its threads (SIGURG, async preemption):
	// run again, as cilium/ebpf's Program.Run does. The duration is that
	// of the run that completed.
	var errno unix.Errno
	for range maxInterrupted {
		_, _, errno = unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		if errno != unix.EINTR {
			break
		}
	}
	runtime.KeepAlive(data)
	runtime.KeepAlive(ctx)
	if errno != 0 {
		return 0, 0, fmt.Errorf("BPF_PROG_TEST_RUN: %w", errno)
	}
	return attr.retval, attr.duration, nil
}
