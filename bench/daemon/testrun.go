package main

// The testrun source of `live` (samples/s end to end): the
// frames come from BPF_PROG_TEST_RUN of the sampler program the dataplane
// attached to p1 and p2 (the port's own instance of xdp_sampler, with an
// xdp_md whose ingress_ifindex is the port), not from a NIC or veth. The
// 2-core machine cannot both generate 1.5 M frames/s over veth (trafgen
// needs ~1 us of CPU per frame) and run the agent; a test run costs the
// generator thread only the sampler itself (~0.25 us per sampled frame at
// rate 1) and the frame goes nowhere after XDP_PASS. Everything after the
// sampler is the daemon's real path: ring buffer, reader.Source via
// source, agent worker, sender (sendmmsg + GSO), UDP over veth into the
// collector namespace, the sink.

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// startTestrunSource starts the generator goroutine: locked to its OS
// thread, pinned to the last CPU, running each port's attached sampler
// f.batch times per BPF_PROG_TEST_RUN call, alternating the ports, until
// ctx ends. It returns a function that closes the programs.
func startTestrunSource(ctx context.Context, f *liveFlags, ports []string, ifidx []int,
	tid *atomic.Int64, frames *atomic.Uint64, errc chan<- error, wg *sync.WaitGroup) (func(), error) {
	progs := make([]*ebpf.Program, len(ports))
	closeAll := func() {
		for _, p := range progs {
			if p != nil {
				p.Close()
			}
		}
	}
	data := make([][]byte, len(ports))
	for i, p := range ports {
		var err error
		if progs[i], err = attachedProgram(p); err != nil {
			closeAll()
			return nil, err
		}
		src := i + 1
		data[i] = netlab.UDPFrame(netlab.HostMAC(src), netlab.HostMAC(3-src),
			netip.AddrPortFrom(netlab.HostAddr(src), 40000), netip.AddrPortFrom(netlab.HostAddr(3-src), 7000), make([]byte, max(f.frameLen-42, 0)))
	}
	cpu := numCPU() - 1
	fmt.Printf("# testrun source: BPF_PROG_TEST_RUN of the attached sampler of %v, %d runs per call, generator thread pinned to CPU %d\n", ports, f.batch, cpu)
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Locked: the thread's CPU time is the generator's (threadCPU),
		// and the ingress ifindex resolves in this thread's namespace
		// (the switch). The thread is not unlocked: its affinity was
		// changed, so it exits with the goroutine.
		runtime.LockOSThread()
		tid.Store(int64(syscall.Gettid()))
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- fmt.Errorf("pinning the generator to CPU %d: %w", cpu, err)
			return
		}
		if err := testrunFrames(ctx, progs, data, ifidx, f.batch, frames); err != nil && ctx.Err() == nil {
			errc <- err
		}
	}()
	return closeAll, nil
}

// testrunFrames runs progs[k] on data[k] "received" on ifindex[k]
// (BPF_PROG_TEST_RUN without live frames: the verdict is returned, the
// frame is not injected anywhere), batch times per call, alternating the
// ports, until ctx ends. count is the runs of the finished calls (a call
// the Go runtime's signals interrupt is restarted by cilium/ebpf, so the
// kernel's sample_pool, not count, is the number of frames sampled).
func testrunFrames(ctx context.Context, progs []*ebpf.Program, data [][]byte, ifindex []int, batch int, count *atomic.Uint64) error {
	mds := make([][6]uint32, len(progs))
	for k := range progs {
		mds[k] = [6]uint32{0, uint32(len(data[k])), 0, uint32(ifindex[k]), 0, 0} // data, data_end, data_meta, ingress_ifindex, rx_queue_index, egress_ifindex
	}
	for i := 0; ctx.Err() == nil; i++ {
		k := i % len(progs)
		ret, err := progs[k].Run(&ebpf.RunOptions{Data: data[k], Context: mds[k][:], Repeat: uint32(batch)})
		if err != nil {
			return fmt.Errorf("BPF_PROG_TEST_RUN on ifindex %d: %w", ifindex[k], err)
		}
		if ret != 2 { // XDP_PASS
			return fmt.Errorf("sampler on ifindex %d returned %d, want XDP_PASS", ifindex[k], ret)
		}
		count.Add(uint64(batch))
	}
	return nil
}

// testrunRound prints a round's accounting of the testrun source: samples
// the kernel produced, ring drops, samples at the collector, and the loss
// fraction of the round (samples in flight at the round's edges make it
// approximate; testrunBalance is exact). It returns the loss fraction.
func testrunRound(runs uint64, produced, ringDrops, delivered, sec float64) float64 {
	loss := 0.0
	if produced > 0 {
		loss = 1 - delivered/produced
	}
	fmt.Printf("#  testrun: %d runs; produced %.0f samples/s, ring drops %.0f/s, delivered %.0f samples/s, loss %.4f\n",
		runs, produced/sec, ringDrops/sec, delivered/sec, loss)
	return loss
}

// testrunTotals are the counters since the start of the run (the
// dataplane, the agent and the sink are fresh).
type testrunTotals struct {
	produced, ringDrops   uint64 // kernel: samples selected, of them not delivered to the ring
	w                     workerCounts
	sinkFlows, sinkDgrams uint64
	sinkMalformed         uint64
	rcvbuf                uint64 // collector namespace Udp RcvbufErrors (datagrams)
}

func readTestrunTotals(dp *dataplane.Dataplane, ag *agent.Agent, s *sink, l *lab, ifidx []int, workers int) (testrunTotals, error) {
	var t testrunTotals
	for _, idx := range ifidx {
		c, err := dp.Stats().Ingress(idx)
		if err != nil {
			return t, err
		}
		t.produced += c.Samples
		t.ringDrops += c.Drops
	}
	for i := 0; i < workers; i++ {
		c := readWorker(ag.Stats(i))
		t.w.kernel += c.kernel
		t.w.subsampled += c.subsampled
		t.w.flows += c.flows
		t.w.dgrams += c.dgrams
		t.w.sendErrs += c.sendErrs
		t.w.unsent += c.unsent
		t.w.tooLarge += c.tooLarge
		t.w.unknown += c.unknown
		t.w.readErrs += c.readErrs
	}
	t.sinkFlows, t.sinkDgrams, t.sinkMalformed = s.flowSamples.Load(), s.datagrams.Load(), s.malformed.Load()
	var err error
	t.rcvbuf, err = udpRcvbufErrors(l.col())
	return t, err
}

// testrunBalance runs after the generator stopped: it waits until the
// workers drained the rings and flushed (the flush tick is 1 s) and the
// sink stopped counting, then checks that every sample the kernel produced
// was delivered to the collector or counted as lost, at each stage:
//
//	kernel:    produced = in the ring + ring drops
//	worker:    from the ring = flow samples encoded + unknown port + too large + sub-sampled
//	sender:    datagrams sent = datagrams at the sink + collector Udp RcvbufErrors
//	collector: encoded - unsent = delivered + lost in the collector's socket,
//	           which is zero exactly when RcvbufErrors is zero
//
// It prints the totals and the delivered rate, and returns an error if
// the accounting does not balance.
func testrunBalance(ctx context.Context, f *liveFlags, dp *dataplane.Dataplane, ag *agent.Agent, s *sink, l *lab, ifidx []int, flowRates, lossFracs []float64) error {
	var t testrunTotals
	var err error
	stableSince := time.Now()
	var last testrunTotals
	deadline := time.Now().Add(15 * time.Second)
	for {
		if t, err = readTestrunTotals(dp, ag, s, l, ifidx, f.workers); err != nil {
			return err
		}
		if t != last {
			last, stableSince = t, time.Now()
		}
		// 2 s without change: longer than one flush tick.
		if t.w.kernel == t.produced-t.ringDrops && time.Since(stableSince) > 2*time.Second {
			break
		}
		if time.Now().After(deadline) {
			break // the checks below say what is missing
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	agentDrops := t.w.unknown + t.w.tooLarge + t.w.unsent
	var collectorLost uint64
	if sent := t.w.flows - t.w.unsent; sent > t.sinkFlows {
		collectorLost = sent - t.sinkFlows
	}
	lo, hi := minMax(flowRates)
	llo, lhi := minMax(lossFracs)
	fmt.Printf("# TESTRUN delivered samples/s median %.0f (min %.0f, max %.0f) over %d rounds; loss fraction median %.4f (min %.4f, max %.4f)\n",
		median(flowRates), lo, hi, len(flowRates), median(lossFracs), llo, lhi)
	fmt.Printf("# TESTRUN totals: produced %d = delivered %d + ring drops %d + agent drops %d (unknown port %d, too large %d, unsent %d) + sub-sampled %d + collector socket %d samples (%d datagrams RcvbufErrors); datagrams sent %d, at sink %d, malformed %d; read errors %d\n",
		t.produced, t.sinkFlows, t.ringDrops, agentDrops, t.w.unknown, t.w.tooLarge, t.w.unsent, t.w.subsampled,
		collectorLost, t.rcvbuf, t.w.dgrams, t.sinkDgrams, t.sinkMalformed, t.w.readErrs)
	var bad []string
	if t.w.kernel != t.produced-t.ringDrops {
		bad = append(bad, fmt.Sprintf("workers read %d samples from the rings, kernel produced %d - %d dropped", t.w.kernel, t.produced, t.ringDrops))
	}
	if t.w.kernel != t.w.flows+t.w.unknown+t.w.tooLarge+t.w.subsampled {
		bad = append(bad, fmt.Sprintf("workers read %d, encoded %d + unknown %d + too large %d + sub-sampled %d", t.w.kernel, t.w.flows, t.w.unknown, t.w.tooLarge, t.w.subsampled))
	}
	if t.w.flows < t.w.unsent || t.w.flows-t.w.unsent < t.sinkFlows {
		bad = append(bad, fmt.Sprintf("sink counted %d samples, more than the %d encoded - %d unsent", t.sinkFlows, t.w.flows, t.w.unsent))
	}
	if t.w.dgrams != t.sinkDgrams+t.rcvbuf {
		bad = append(bad, fmt.Sprintf("datagrams sent %d != at sink %d + RcvbufErrors %d", t.w.dgrams, t.sinkDgrams, t.rcvbuf))
	}
	if (collectorLost == 0) != (t.rcvbuf == 0) || collectorLost < t.rcvbuf {
		bad = append(bad, fmt.Sprintf("%d samples lost at the collector, %d datagrams RcvbufErrors", collectorLost, t.rcvbuf))
	}
	if t.sinkMalformed != 0 || t.w.readErrs != 0 {
		bad = append(bad, fmt.Sprintf("%d malformed datagrams, %d ring read errors", t.sinkMalformed, t.w.readErrs))
	}
	if t.produced == 0 || t.sinkFlows == 0 {
		bad = append(bad, "nothing produced or delivered")
	}
	if len(bad) > 0 {
		return fmt.Errorf("testrun accounting does not balance: %v", bad)
	}
	fmt.Printf("# TESTRUN BALANCED produced=%d delivered=%d counted_drops=%d\n", t.produced, t.sinkFlows, t.produced-t.sinkFlows)
	return nil
}

func minMax(v []float64) (lo, hi float64) {
	for i, x := range v {
		if i == 0 || x < lo {
			lo = x
		}
		if i == 0 || x > hi {
			hi = x
		}
	}
	return lo, hi
}
