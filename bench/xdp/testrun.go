package main

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/xdptest"
)

// testRunner runs one XDP program with BPF_PROG_TEST_RUN on one frame, as
// if received on ifindex queue 0. The ingress ifindex is resolved in the
// network namespace of the calling thread: call run from a thread inside
// the port's namespace. The system call is made directly
// (xdptest.TestRun) because cilium/ebpf's Run does not return the
// kernel's measured duration and Benchmark takes no context: the
// benchmark needs both.
type testRunner struct {
	attr  xdptest.Attr
	frame []byte
	ctx   xdptest.MD
}

func newTestRunner(progFD int, frame []byte, ifindex int, live bool) *testRunner {
	r := &testRunner{frame: frame}
	r.ctx = xdptest.MD{DataEnd: uint32(len(frame)), IngressIfindex: uint32(ifindex)}
	r.attr = xdptest.Attr{
		ProgFD:     uint32(progFD),
		DataSizeIn: uint32(len(frame)),
		CtxSizeIn:  uint32(unsafe.Sizeof(r.ctx)),
	}
	if live {
		// Frames become real packets: XDP_REDIRECT reaches the AF_XDP
		// socket, XDP_PASS goes up the stack (Documentation/bpf/
		// bpf_prog_run.rst, "live frame mode").
		r.attr.Flags = unix.BPF_F_TEST_XDP_LIVE_FRAMES
	}
	return r
}

// runSkb executes a SchedCLS program repeat times on the frame, without a
// context (the kernel builds the skb) and returns the kernel's mean
// duration per run in ns.
func (r *testRunner) runSkb(repeat uint32) (uint32, error) {
	r.attr.CtxSizeIn = 0
	r.attr.Flags = 0
	r.attr.CtxIn = 0
	return r.call(repeat, "BPF_PROG_TEST_RUN of an skb")
}

// run executes the program repeat times in the kernel and returns the
// kernel's mean duration per run in ns (0 in live-frame mode, where the
// kernel does not measure it). It does not allocate.
func (r *testRunner) run(repeat uint32) (uint32, error) {
	r.attr.CtxIn = uint64(uintptr(unsafe.Pointer(&r.ctx)))
	return r.call(repeat, "BPF_PROG_TEST_RUN")
}

// call makes the test run, again as long as a signal interrupts it.
func (r *testRunner) call(repeat uint32, what string) (uint32, error) {
	r.attr.DataIn = uint64(uintptr(unsafe.Pointer(&r.frame[0])))
	r.attr.Repeat = repeat
	r.attr.Duration = 0
	for {
		switch errno := xdptest.TestRun(&r.attr); {
		case errno == 0:
			return r.attr.Duration, nil
		case errors.Is(errno, unix.EINTR):
			continue
		default:
			return 0, fmt.Errorf("%s (repeat %d): %w", what, repeat, errno)
		}
	}
}
