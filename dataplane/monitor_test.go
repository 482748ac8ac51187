package dataplane

import (
	"bytes"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/portstats"

	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/afxdp"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// Integration tests of the monitor (AF_XDP) delivery path: root, netlab.

// waitPool waits until the port's pool reaches want (the XDP program has
// seen every frame), then a little longer so the last redirect batch is
// flushed into the sockets, and returns the counters.
func waitPool(t *testing.T, d *Dataplane, ifindex int, want uint64) portstats.Counters {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pc, err := d.Stats().Ingress(ifindex)
		if err != nil {
			t.Fatal(err)
		}
		if pc.Pool >= want {
			time.Sleep(100 * time.Millisecond)
			if pc, err = d.Stats().Ingress(ifindex); err != nil {
				t.Fatal(err)
			}
			return pc
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool of ifindex %d is %d, want %d", ifindex, pc.Pool, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openMonitor opens the monitor of an attached port; closed at cleanup.
func openMonitor(t *testing.T, d *Dataplane, ifindex, headerBytes int, opts afxdp.Options) *reader.Monitor {
	t.Helper()
	m, err := d.openMonitor(ifindex, headerBytes, opts)
	if err != nil {
		t.Fatalf("openMonitor: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Monitor.Close: %v", err)
		}
	})
	if m.Queues() < 1 {
		t.Fatalf("monitor has %d queues", m.Queues())
	}
	return m
}

// drain calls Receive until it has delivered want frames or nothing more
// arrives for 200 ms, and returns the total.
func drain(t *testing.T, m *reader.Monitor, want int, fn func(*reader.RawSample)) int {
	t.Helper()
	pfds := make([]unix.PollFd, 0, m.Queues())
	for _, fd := range m.FDs() {
		pfds = append(pfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	total := 0
	for total < want {
		n, err := m.Receive(fn)
		if err != nil {
			t.Fatalf("Receive after %d frames: %v", total, err)
		}
		total += n
		if n > 0 {
			continue
		}
		ready, err := unix.Poll(pfds, 200)
		if err != nil && err != unix.EINTR {
			t.Fatalf("poll: %v", err)
		}
		if ready == 0 {
			break
		}
	}
	return total
}

// checkNotForwarded checks that host 2 (lab.Hosts[1]) received no frame
// from host 1 since capt (a capture on its eth0) was opened and rxBefore
// read: its rx_packets grew by exactly the frames of other origin it
// captured. The lab's bridge itself sends a few (IGMP reports from br0
// shortly after the lab comes up), which are not the monitor port's doing.
func checkNotForwarded(t *testing.T, lab *netlab.Lab, capt *netlab.Capture, rxBefore uint64) {
	t.Helper()
	grew := lab.RxPackets(t, lab.Hosts[1], "eth0") - rxBefore
	fromHost1, other := 0, uint64(0)
	for _, f := range capt.Queued(t) {
		if len(f.Data) >= 12 && bytes.Equal(f.Data[6:12], lab.HostMACs[0]) {
			fromHost1++
			continue
		}
		other++
		t.Logf("host 2 received a frame not from host 1 (lab noise): % x", f.Data[:min(len(f.Data), 48)])
	}
	if fromHost1 != 0 || grew != other {
		t.Errorf("host 2: rx_packets grew by %d, captured %d frames from host 1 and %d others; want none from host 1 and rx growth = others",
			grew, fromHost1, other)
	}
}

// TestMonitorDeliversIntact: at rate 1 every frame a host sends into a
// monitor port reaches user space through Receive, byte for byte up to
// headerBytes, with its full length, and none is forwarded to the other
// host (a monitor port carries a copy of traffic and drops everything):
// host 2 captures nothing from host 1 and its rx_packets grow only by the
// lab's own noise, which it captures too.
func TestMonitorDeliversIntact(t *testing.T) {
	lab := netlab.New(t, 2)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, MaxQueues: 8})
	p1 := lab.PortIndex(t, 0)
	if err := d.AttachPort(p1, PortConfig{Rate: 1, Mode: ModeMonitor, HeaderBytes: 128}); err != nil {
		t.Fatal(err)
	}
	const headerBytes = 200
	m := openMonitor(t, d, p1, headerBytes, afxdp.Options{})

	const k = 500
	frames := make([][]byte, k)
	for i := range frames {
		// Lengths from 60 to ~1450 bytes: shorter and longer than the
		// header; addressed to host 2, which would receive them if the
		// port forwarded anything.
		frames[i] = seqFrames(lab, 0, lab.HostMACs[1], uint32(i), 1, 16+(i*53)%1400)[0]
	}
	capt := lab.Capture(t, lab.Hosts[1], "eth0")
	rxBefore := lab.RxPackets(t, lab.Hosts[1], "eth0")
	lab.SendFrames(t, 0, frames)
	pc := waitPool(t, d, p1, k)

	seen := make([]bool, k)
	bad := 0
	got := drain(t, m, k, func(s *reader.RawSample) {
		seq, ok := frameSeq(s.Header)
		if !ok || seq >= k || seen[seq] {
			bad++
			return
		}
		seen[seq] = true
		f := frames[seq]
		want := f[:min(len(f), headerBytes)]
		if s.IfIndex != uint32(p1) || s.FrameLen != uint32(len(f)) || int(s.RxQueue) >= m.Queues() || !bytes.Equal(s.Header, want) {
			t.Errorf("frame %d: ifindex %d frame_len %d queue %d header %d bytes; want ifindex %d frame_len %d header %d bytes equal to the frame's",
				seq, s.IfIndex, s.FrameLen, s.RxQueue, len(s.Header), p1, len(f), len(want))
		}
	})
	drops, err := m.Drops()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("queues %d, counters %+v, received %d, socket drops %d", m.Queues(), pc, got, drops)
	if got != k || bad != 0 {
		t.Errorf("received %d frames (%d unexpected or repeated), want the %d sent", got, bad, k)
	}
	if pc.Pool != k || pc.Samples != k || pc.Drops != 0 || drops != 0 {
		t.Errorf("counters %+v, socket drops %d; want pool = samples = %d, no drops", pc, drops, k)
	}
	checkNotForwarded(t, lab, capt, rxBefore)
}

// TestMonitorNothingLostSilently floods monitor ports without reading and
// checks that every sampled frame is accounted for exactly: delivered +
// sampler drops (redirect found no socket) + socket drops (Monitor.Drops)
// = samples. First frames arrive before the sockets exist (sampler drops),
// then a flood overruns the socket: in "rx ring full" the RX ring (64
// slots) fills; in "fill ring empty" the UMEM (32 frames) runs out first,
// which the kernel counts in RxDropped and RxFillRingEmptyDescs both: the
// exact sum verifies that Drops must not add the latter.
func TestMonitorNothingLostSilently(t *testing.T) {
	lab := netlab.New(t, 2)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, MaxQueues: 8})
	for i, c := range []struct {
		name      string
		opts      afxdp.Options
		delivered int // what a socket holds when nobody reads
	}{
		{"rx ring full", afxdp.Options{RxRingSize: 64}, 64},
		{"fill ring empty", afxdp.Options{NumFrames: 32, RxRingSize: 64, FillRingSize: 64}, 32},
	} {
		t.Run(c.name, func(t *testing.T) {
			port := lab.PortIndex(t, i)
			if err := d.AttachPort(port, PortConfig{Rate: 1, Mode: ModeMonitor, HeaderBytes: 64}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := d.DetachPort(port); err != nil {
					t.Error(err)
				}
			})
			const early, flood = 100, 3000
			lab.SendFrames(t, i, seqFrames(lab, i, noHostMAC, 0, early, 32))
			waitPool(t, d, port, early)
			m := openMonitor(t, d, port, 64, c.opts)
			lab.SendFrames(t, i, seqFrames(lab, i, noHostMAC, early, flood, 32))
			pc := waitPool(t, d, port, early+flood)

			got := drain(t, m, early+flood, func(*reader.RawSample) {})
			drops, err := m.Drops()
			if err != nil {
				t.Fatal(err)
			}
			st, err := m.Stats()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("counters %+v, delivered %d, socket drops %d (%+v)", pc, got, drops, st)
			if sum := uint64(got) + pc.Drops + drops; sum != pc.Samples {
				t.Errorf("delivered %d + sampler drops %d + socket drops %d = %d, want samples %d",
					got, pc.Drops, drops, sum, pc.Samples)
			}
			if pc.Pool != early+flood || pc.Samples != early+flood {
				t.Errorf("pool %d, samples %d, want %d each", pc.Pool, pc.Samples, early+flood)
			}
			if pc.Drops != early {
				t.Errorf("sampler drops %d, want the %d frames sent before the sockets existed", pc.Drops, early)
			}
			// Each socket that received frames holds exactly its capacity.
			if got == 0 || got%c.delivered != 0 || got > c.delivered*m.Queues() {
				t.Errorf("delivered %d, want a multiple of %d (full sockets) up to %d queues", got, c.delivered, m.Queues())
			}
			if c.name == "fill ring empty" && (st.RxFillRingEmptyDescs == 0 || st.RxFillRingEmptyDescs > st.RxDropped) {
				t.Errorf("fill-ring-empty %d, rx_dropped %d: want 0 < fill-ring-empty <= rx_dropped", st.RxFillRingEmptyDescs, st.RxDropped)
			}
		})
	}
}

// TestMonitorRate16: at rate 16 the number of frames sampled (and
// delivered or counted as dropped) is binomial(K, 1/16), within 4 standard
// deviations; unsampled frames are dropped, not forwarded. Draining
// allocates nothing per frame.
func TestMonitorRate16(t *testing.T) {
	lab := netlab.New(t, 2)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, MaxQueues: 8})
	p1 := lab.PortIndex(t, 0)
	if err := d.AttachPort(p1, PortConfig{Rate: 16, Mode: ModeMonitor, HeaderBytes: 128}); err != nil {
		t.Fatal(err)
	}
	m := openMonitor(t, d, p1, 128, afxdp.Options{})

	const k = 16000
	capt := lab.Capture(t, lab.Hosts[1], "eth0")
	rxBefore := lab.RxPackets(t, lab.Hosts[1], "eth0")
	lab.SendFrames(t, 0, seqFrames(lab, 0, lab.HostMACs[1], 0, k, 32))
	pc := waitPool(t, d, p1, k)

	n, hdrBytes := 0, 0
	fn := func(s *reader.RawSample) { n++; hdrBytes += len(s.Header) }
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for {
		got, err := m.Receive(fn)
		if err != nil {
			t.Fatal(err)
		}
		if got == 0 {
			break
		}
	}
	runtime.ReadMemStats(&after)
	allocs := after.Mallocs - before.Mallocs
	drops, err := m.Drops()
	if err != nil {
		t.Fatal(err)
	}
	mean := float64(k) / 16
	sd := math.Sqrt(float64(k) * (1.0 / 16) * (15.0 / 16))
	t.Logf("counters %+v, delivered %d (%d header bytes, %d allocations), socket drops %d; expected %.0f +- %.1f",
		pc, n, hdrBytes, allocs, drops, mean, sd)
	if pc.Pool != k {
		t.Errorf("pool %d, want %d", pc.Pool, k)
	}
	if dev := math.Abs(float64(pc.Samples) - mean); dev > 4*sd {
		t.Errorf("samples %d, %.1f SD from %.0f", pc.Samples, dev/sd, mean)
	}
	if uint64(n)+pc.Drops+drops != pc.Samples {
		t.Errorf("delivered %d + sampler drops %d + socket drops %d != samples %d", n, pc.Drops, drops, pc.Samples)
	}
	if n == 0 || allocs > 20 {
		t.Errorf("delivered %d frames with %d allocations", n, allocs)
	}
	checkNotForwarded(t, lab, capt, rxBefore)
}

// TestOpenMonitorRefusesInline: only a port attached in monitor mode gets
// sockets (an inline port's program never redirects).
func TestOpenMonitorRefusesInline(t *testing.T) {
	lab := netlab.New(t, 1)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 2, MaxQueues: 4})
	p1 := lab.PortIndex(t, 0)
	if _, err := d.openMonitor(p1, 128, afxdp.Options{}); err == nil {
		t.Error("OpenMonitor on a detached port succeeded")
	}
	if err := d.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 128}); err != nil {
		t.Fatal(err)
	}
	if m, err := d.openMonitor(p1, 128, afxdp.Options{}); err == nil {
		m.Close()
		t.Error("OpenMonitor on an inline port succeeded")
	}
}
