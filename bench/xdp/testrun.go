package main

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// testRunAttr is the BPF_PROG_TEST_RUN member of union bpf_attr
// (include/uapi/linux/bpf.h, "test" struct). The syscall is made directly
// because cilium/ebpf's Run does not return the kernel's measured duration
// and Benchmark takes no context: the benchmark needs both.
type testRunAttr struct {
	progFD      uint32
	retval      uint32
	dataSizeIn  uint32
	dataSizeOut uint32
	dataIn      uint64
	dataOut     uint64
	repeat      uint32
	duration    uint32
	ctxSizeIn   uint32
	ctxSizeOut  uint32
	ctxIn       uint64
	ctxOut      uint64
	flags       uint32
	cpu         uint32
	batchSize   uint32
	_           uint32
}

// xdpMD is struct xdp_md, the XDP program context passed to test runs.
type xdpMD struct {
	data, dataEnd, dataMeta      uint32
	ingressIfindex, rxQueueIndex uint32
	egressIfindex                uint32
}

// testRunner runs one XDP program with BPF_PROG_TEST_RUN on one frame, as
// if received on ifindex queue 0. The ingress ifindex is resolved in the
// network namespace of the calling thread: call run from a thread inside
// the port's namespace.
type testRunner struct {
	attr  testRunAttr
	frame []byte
	ctx   xdpMD
}

func newTestRunner(progFD int, frame []byte, ifindex int, live bool) *testRunner {
	r := &testRunner{frame: frame}
	r.ctx = xdpMD{dataEnd: uint32(len(frame)), ingressIfindex: uint32(ifindex)}
	r.attr = testRunAttr{
		progFD:     uint32(progFD),
		dataSizeIn: uint32(len(frame)),
		ctxSizeIn:  uint32(unsafe.Sizeof(r.ctx)),
	}
	if live {
		// Frames become real packets: XDP_REDIRECT reaches the AF_XDP
		// socket, XDP_PASS goes up the stack (Documentation/bpf/
		// bpf_prog_run.rst, "live frame mode").
		r.attr.flags = unix.BPF_F_TEST_XDP_LIVE_FRAMES
	}
	return r
}

// runSkb executes a SchedCLS program repeat times on the frame, without a
// context (the kernel builds the skb) and returns the kernel's mean
// duration per run in ns.
func (r *testRunner) runSkb(repeat uint32) (uint32, error) {
	r.attr.ctxSizeIn = 0
	r.attr.flags = 0
	r.attr.dataIn = uint64(uintptr(unsafe.Pointer(&r.frame[0])))
	r.attr.ctxIn = 0
	r.attr.repeat = repeat
	r.attr.duration = 0
	for {
		_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN,
			uintptr(unsafe.Pointer(&r.attr)), unsafe.Sizeof(r.attr))
		switch {
		case errno == 0:
			return r.attr.duration, nil
		case errors.Is(errno, unix.EINTR):
			continue
		default:
			return 0, fmt.Errorf("BPF_PROG_TEST_RUN of an skb (repeat %d): %w", repeat, errno)
		}
	}
}

// run executes the program repeat times in the kernel and returns the
// kernel's mean duration per run in ns (0 in live-frame mode, where the
// kernel does not measure it). It does not allocate.
func (r *testRunner) run(repeat uint32) (uint32, error) {
	r.attr.dataIn = uint64(uintptr(unsafe.Pointer(&r.frame[0])))
	r.attr.ctxIn = uint64(uintptr(unsafe.Pointer(&r.ctx)))
	r.attr.repeat = repeat
	r.attr.duration = 0
	for {
		_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN,
			uintptr(unsafe.Pointer(&r.attr)), unsafe.Sizeof(r.attr))
		switch {
		case errno == 0:
			return r.attr.duration, nil
		case errors.Is(errno, unix.EINTR):
			continue
		default:
			return 0, fmt.Errorf("BPF_PROG_TEST_RUN (repeat %d): %w", repeat, errno)
		}
	}
}
