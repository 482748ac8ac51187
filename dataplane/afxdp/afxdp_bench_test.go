package afxdp

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
)

// pinThread locks the calling goroutine to its OS thread and that thread
// to one CPU. The goroutine must exit without unlocking, so the runtime
// discards the pinned thread.
func pinThread(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu % runtime.NumCPU())
	return unix.SchedSetaffinity(0, &set)
}

// threadCPU returns the CPU time the calling OS thread has used.
func threadCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// BenchmarkReceive measures frames per second delivered into user space
// through Receive, with the receiver pinned to CPU 0 and a traffic source
// pinned to CPU 1. One op is one frame received. Metrics:
//
//	frames/s          frames received per wall-clock second
//	rx-cpu-ns/frame   receiver thread CPU time (user+sys) per frame
//	xsk-drops/op      RxDropped+RxRingFull per frame received
//
// Sources:
//
//	af_packet: 60-byte frames written one per syscall into vethA from nsA;
//	  veth runs XDP and the copy into the UMEM in the sender's softirq,
//	  so the sender usually bounds the rate.
//	live_frames: BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES runs the
//	  same XDP program on 60-byte frames "received" on vethB queue 0, in
//	  batches of 64, so the redirect into the socket happens at the
//	  kernel's rate and the receiver is the one under pressure.
func BenchmarkReceive(b *testing.B) {
	requireRoot(b)
	b.Run("af_packet", func(b *testing.B) {
		benchReceive(b, func(p *vethPair, x *xdpRedirect, stop *atomic.Bool) error {
			ps := newPacketSender(b, p)
			frame := testFrameLen(1, 60)
			for !stop.Load() {
				if err := ps.send(frame); err != nil {
					return err
				}
			}
			return nil
		})
	})
	b.Run("live_frames", func(b *testing.B) {
		benchReceive(b, func(p *vethPair, x *xdpRedirect, stop *atomic.Bool) error {
			// The ingress ifindex in the context is resolved in the
			// caller's netns: run from this (pinned, never unlocked)
			// thread switched into nsB.
			if err := netnsutil.Enter(p.nsB); err != nil {
				return err
			}
			frame := testFrameLen(1, 60)
			ctx := [6]uint32{0, uint32(len(frame)), 0, uint32(p.ifB), 0, 0} // struct xdp_md
			for !stop.Load() {
				_, err := x.prog.Run(&ebpf.RunOptions{
					Data:    frame,
					Context: ctx[:],
					Repeat:  1 << 14,
					Flags:   unix.BPF_F_TEST_XDP_LIVE_FRAMES,
				})
				if err != nil {
					return fmt.Errorf("BPF_PROG_RUN live frames: %w", err)
				}
			}
			return nil
		})
	})
}

// benchReceive sets up a pair, XDP and a default socket, starts source on
// a goroutine pinned to CPU 1 and receives b.N frames on CPU 0.
func benchReceive(b *testing.B, source func(*vethPair, *xdpRedirect, *atomic.Bool) error) {
	p := newVethPair(b, 0)
	x := attachRedirect(b, p)
	s := openSocket(b, p, x, Options{})

	var stop atomic.Bool
	srcErr := make(chan error, 1)
	go func() {
		if err := pinThread(1); err != nil {
			srcErr <- err
			return
		}
		srcErr <- source(p, x, &stop)
	}()

	type result struct {
		got          int
		elapsed, cpu time.Duration
		err          error
	}
	done := make(chan result, 1)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		if err := pinThread(0); err != nil {
			done <- result{err: err}
			return
		}
		var bytes int
		fn := func(f []byte) { bytes += len(f) }
		cpu0, err := threadCPU()
		if err != nil {
			done <- result{err: err}
			return
		}
		start := time.Now()
		got := 0
		for got < b.N {
			n, err := s.Receive(fn)
			if err != nil {
				done <- result{err: err}
				return
			}
			if n == 0 {
				if _, err := s.Poll(10 * time.Millisecond); err != nil {
					done <- result{err: err}
					return
				}
			}
			got += n
		}
		elapsed := time.Since(start)
		cpu1, err := threadCPU()
		done <- result{got: got, elapsed: elapsed, cpu: cpu1 - cpu0, err: err}
	}()
	r := <-done
	b.StopTimer()
	stop.Store(true)
	if err := <-srcErr; err != nil {
		b.Fatalf("source: %v", err)
	}
	if r.err != nil {
		b.Fatalf("receiver: %v", r.err)
	}
	st, err := s.Stats()
	if err != nil {
		b.Fatalf("Stats: %v", err)
	}
	if r.got == 0 {
		b.Fatal(errors.New("no frames received"))
	}
	b.ReportMetric(float64(r.got)/r.elapsed.Seconds(), "frames/s")
	b.ReportMetric(float64(r.cpu.Nanoseconds())/float64(r.got), "rx-cpu-ns/frame")
	b.ReportMetric(float64(st.RxDropped+st.RxRingFull)/float64(r.got), "xsk-drops/op")
}
