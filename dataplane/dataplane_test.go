package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/xdptest"
)

// Integration tests: each builds its own lab (internal/testkit/netlab) and loads
// the sampler in the lab's switch namespace. Root only.

// testLogger logs through t.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// openIn opens a Dataplane in the lab's switch namespace; closed at
// cleanup. Hook auto becomes XDP: most tests are of the XDP sampler; the
// TC sampler's tests pass HookTC, and TestHookAuto uses openAuto.
func openIn(t testing.TB, lab *netlab.Lab, cfg Config) *Dataplane {
	t.Helper()
	if cfg.Hook == HookAuto {
		cfg.Hook = HookXDP
	}
	return openAuto(t, lab, cfg)
}

// openAuto is openIn keeping cfg.Hook as given.
func openAuto(t testing.TB, lab *netlab.Lab, cfg Config) *Dataplane {
	t.Helper()
	if _, bench := t.(*testing.B); bench && cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler) // keep benchmark output benchstat-clean
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	var d *Dataplane
	err := lab.Do(lab.Switch, func() error {
		var err error
		d, err = Open(cfg)
		return err
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// switchLink returns the netlink view (stats, XDP state) of a switch port.
func switchLink(t *testing.T, lab *netlab.Lab, name string) netlink.Link {
	t.Helper()
	var l netlink.Link
	err := lab.Do(lab.Switch, func() error {
		var err error
		l, err = netlink.LinkByName(name)
		return err
	})
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	return l
}

// noHostMAC is a unicast MAC no lab host owns: the bridge floods such
// frames and every host drops them at layer 2, so they provoke no replies.
var noHostMAC = net.HardwareAddr{0x02, 0, 0, 0xff, 0xff, 0x01}

// seqMagic marks test frames so stray traffic is never mistaken for them.
const seqMagic = 0x5346_4c57 // "SFLW"

// udpPayloadOff is where the UDP payload starts in a netlab IPv4 frame.
const udpPayloadOff = 14 + 20 + 8

// seqFrames builds k frames from host Hosts[from] to dstMAC carrying
// sequence numbers start..start+k-1 (payload: magic, seq, padding to
// payloadLen). The destination IP is an address no host owns, so a host
// receiving a frame drops it silently.
func seqFrames(lab *netlab.Lab, from int, dstMAC net.HardwareAddr, start uint32, k, payloadLen int) [][]byte {
	src := netip.AddrPortFrom(lab.HostAddrs[from], 40000)
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 0, 250}), 9)
	frames := make([][]byte, k)
	for i := range frames {
		p := make([]byte, payloadLen)
		binary.BigEndian.PutUint32(p[0:], seqMagic)
		binary.BigEndian.PutUint32(p[4:], start+uint32(i))
		for j := 8; j < len(p); j++ {
			p[j] = byte(i*7 + j)
		}
		frames[i] = netlab.UDPFrame(lab.HostMACs[from], dstMAC, src, dst, p)
	}
	return frames
}

// frameSeq extracts the sequence number of a test frame from a sampled
// header; ok is false for other traffic or too short a header.
func frameSeq(h []byte) (uint32, bool) {
	if len(h) < udpPayloadOff+8 || binary.BigEndian.Uint32(h[udpPayloadOff:]) != seqMagic {
		return 0, false
	}
	return binary.BigEndian.Uint32(h[udpPayloadOff+4:]), true
}

// collector reads a ring in the background, keeping copies of the samples
// and, for a meta collector, of their whole records (Meta aliases the
// ring).
type collector struct {
	r        *reader.Source
	mu       sync.Mutex
	got      []reader.RawSample
	keepMeta bool
	meta     []bpf.SamplerSampleMeta
	done     chan error
}

func startCollector(t *testing.T, d *Dataplane, worker int) *collector {
	t.Helper()
	return startCollecting(t, d, worker, false)
}

func startCollecting(t *testing.T, d *Dataplane, worker int, keepMeta bool) *collector {
	t.Helper()
	r, err := d.Source(worker)
	if err != nil {
		t.Fatalf("Source(%d): %v", worker, err)
	}
	c := &collector{r: r, keepMeta: keepMeta, done: make(chan error, 1)}
	go func() {
		for {
			_, err := r.Read(time.Now().Add(20*time.Millisecond), func(s *reader.RawSample) {
				cp := *s
				cp.Header = bytes.Clone(s.Header)
				c.mu.Lock()
				if c.keepMeta {
					cp.Meta = nil
					m := bpf.SamplerSampleMeta{}
					if s.Meta != nil {
						m = *s.Meta
					}
					c.meta = append(c.meta, m)
				}
				c.got = append(c.got, cp)
				c.mu.Unlock()
			})
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				c.done <- err
				return
			}
		}
	}()
	return c
}

// wait waits until the collector holds n samples (or timeout).
func (c *collector) wait(n int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		have := len(c.got)
		c.mu.Unlock()
		if have >= n || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFor waits until the collector holds n samples (or timeout), then
// returns a copy of what it holds.
func (c *collector) waitFor(n int, timeout time.Duration) []reader.RawSample {
	c.wait(n, timeout)
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]reader.RawSample(nil), c.got...)
}

// stop closes the reader and checks the read loop ended with ErrClosed.
func (c *collector) stop(t *testing.T) {
	t.Helper()
	if err := c.r.Close(); err != nil {
		t.Errorf("closing ring reader: %v", err)
	}
	select {
	case err := <-c.done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("read loop ended with %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("Close did not unblock the reader")
	}
}

// bpftoolNet returns `bpftool net show` of the switch namespace.
func bpftoolNet(t *testing.T, lab *netlab.Lab) string {
	t.Helper()
	out, err := lab.Run(lab.Switch, "bpftool", "net", "show")
	if err != nil {
		t.Fatalf("bpftool net show: %v\n%s", err, out)
	}
	return string(out)
}

// TestAttachAndSampleFields attaches the sampler to p1 at rate 1 and checks
// every field of the delivered samples against the frames sent, the attach
// mode reported by AttachMode and by bpftool, and the counters.
func TestAttachAndSampleFields(t *testing.T) {
	lab := netlab.New(t, 2)
	d := openIn(t, lab, Config{Workers: 2, MaxPorts: 8})
	p1 := lab.PortIndex(t, 0)
	if err := d.AttachPort(p1, PortConfig{Rate: 1, Mode: ModeInline, HeaderBytes: 100, Worker: 1}); err != nil {
		t.Fatal(err)
	}
	mode := d.AttachMode(p1)
	net := bpftoolNet(t, lab)
	t.Logf("AttachMode(p1) = %q; bpftool net show:\n%s", mode, net)
	want := "driver"
	if mode == AttachGeneric {
		want = "generic"
	}
	if !strings.Contains(net, "p1("+strconv.Itoa(p1)+") "+want) {
		t.Errorf("bpftool does not show p1 attached in %s mode", want)
	}
	if mode != AttachNative {
		t.Errorf("attach mode %q, want native on veth", mode)
	}

	c := startCollector(t, d, 1)
	const k = 200
	// Mixed sizes: shorter and longer than the 100-byte header copy.
	var frames [][]byte
	for i, f := range seqFrames(lab, 0, noHostMAC, 0, k/2, 16) {
		frames = append(frames, f, seqFrames(lab, 0, noHostMAC, uint32(k/2+i), 1, 400)[0])
	}
	lab.SendFrames(t, 0, frames)
	got := c.waitFor(k, 5*time.Second)
	c.stop(t)

	bySeq := map[uint32][]byte{}
	for _, f := range frames {
		s, _ := frameSeq(f)
		bySeq[s] = f
	}
	matched := 0
	for _, s := range got {
		seq, ok := frameSeq(s.Header)
		if !ok {
			continue // e.g. stray traffic; the test frames are counted below
		}
		f := bySeq[seq]
		matched++
		if s.IfIndex != uint32(p1) || s.FrameLen != uint32(len(f)) || s.RxQueue != 0 || s.Timestamp == 0 || s.Rate != 1 {
			t.Errorf("seq %d: sample %+v, want ifindex %d frame_len %d queue 0 rate 1", seq, s, p1, len(f))
		}
		wantHdr := f[:min(len(f), 100)]
		if !bytes.Equal(s.Header, wantHdr) {
			t.Errorf("seq %d: header %x, want %x", seq, s.Header, wantHdr)
		}
		if s.CPU >= uint32(d.cpuSlots) {
			t.Errorf("seq %d: cpu %d >= %d", seq, s.CPU, d.cpuSlots)
		}
	}
	if matched != k {
		t.Errorf("matched %d samples of test frames, want %d (got %d samples)", matched, k, len(got))
	}
	pc, err := d.Stats().Ingress(p1)
	if err != nil {
		t.Fatal(err)
	}
	if pc.Samples != pc.Pool || pc.Drops != 0 || pc.Pool < k || uint64(len(got)) != pc.Samples {
		t.Errorf("counters %+v after %d frames, %d samples read; want samples == pool >= %d, drops 0", pc, k, len(got), k)
	}
	if r, _ := d.Source(1); r.Malformed() != 0 {
		t.Errorf("%d malformed records", r.Malformed())
	}

	// Run-time change through the map only: samples move to worker 0 and
	// the header copy shrinks, the link stays the same.
	if err := d.updatePort(p1, PortConfig{Rate: 1, Mode: ModeInline, HeaderBytes: 60, Worker: 0}); err != nil {
		t.Fatal(err)
	}
	c0 := startCollector(t, d, 0)
	lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, 1000, 10, 100))
	moved := 0
	for _, s := range c0.waitFor(10, 5*time.Second) {
		if seq, ok := frameSeq(s.Header); ok && seq >= 1000 {
			moved++
			if len(s.Header) != 60 {
				t.Errorf("after UpdatePort: header %d bytes, want 60", len(s.Header))
			}
		}
	}
	c0.stop(t)
	if moved != 10 {
		t.Errorf("after UpdatePort to worker 0: %d of 10 samples on ring 0", moved)
	}
	if m := d.AttachMode(p1); m != mode {
		t.Errorf("attach mode changed by UpdatePort: %q -> %q", mode, m)
	}
}

// TestConfigValidation checks that bad port configs are refused.
func TestConfigValidation(t *testing.T) {
	lab := netlab.New(t, 1)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 1})
	p1 := lab.PortIndex(t, 0)
	bad := []PortConfig{
		{Rate: 0, HeaderBytes: 64},
		{Rate: 3, HeaderBytes: 64},
		{Rate: 4, HeaderBytes: 0},
		{Rate: 4, HeaderBytes: 257},
		{Rate: 4, HeaderBytes: 64, Worker: 1},
		{Rate: 4, HeaderBytes: 64, Mode: 3},
	}
	for _, pc := range bad {
		if err := d.AttachPort(p1, pc); err == nil {
			t.Errorf("AttachPort(%+v) succeeded", pc)
			_ = d.DetachPort(p1)
		}
	}
	if err := d.AttachPort(MaxIfIndex, PortConfig{Rate: 1, HeaderBytes: 64}); err == nil {
		t.Errorf("AttachPort(ifindex %d) succeeded", MaxIfIndex)
	}
	if err := d.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	if err := d.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 64}); err == nil {
		t.Errorf("second AttachPort of the same port succeeded")
	}
	p2 := lab.AddPort(t)
	if err := d.AttachPort(lab.LinkIndex(lab.Switch, "p"+strconv.Itoa(p2)), PortConfig{Rate: 1, HeaderBytes: 64}); err == nil {
		t.Errorf("AttachPort beyond MaxPorts succeeded")
	}
	if err := d.updatePort(p1, PortConfig{Rate: 5, HeaderBytes: 64}); err == nil {
		t.Errorf("UpdatePort with rate 5 succeeded")
	}
	if _, err := d.Stats().Ingress(p1 + 100); !errors.Is(err, ErrNotAttached) {
		t.Errorf("portstats.Counters of an unattached port: %v, want ErrNotAttached", err)
	}
}

// xdpMD is struct xdp_md, the context of an XDP test run.
type xdpMD = xdptest.MD

// benchXDP runs prog b.N times with BPF_PROG_RUN on a 64-byte frame
// "received" on p1 of a lab switch (the run happens inside the switch
// namespace, where the ifindex resolves) and reports ns per packet. Setup
// configures the Dataplane for p1 first.
func benchXDP(b *testing.B, prog func(d *Dataplane) *ebpf.Program, setup func(b *testing.B, d *Dataplane, p1 int)) {
	lab := netlab.New(b, 1)
	d := openIn(b, lab, Config{Workers: 1, MaxPorts: 2, RingBytes: 64 << 20})
	p1 := lab.LinkIndex(lab.Switch, "p1")
	setup(b, d, p1)
	frame := seqFrames(lab, 0, noHostMAC, 0, 1, 22)[0] // 64 bytes
	ctx := xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: uint32(p1)}
	var ns uint32
	b.ResetTimer()
	err := lab.Do(lab.Switch, func() error {
		ret, dur, err := testRun(prog(d), frame, &ctx, uint32(b.N))
		if err == nil && ret != 2 { // XDP_PASS
			err = fmt.Errorf("returned %d, want XDP_PASS", ret)
		}
		ns = dur
		return err
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	// The kernel's own per-run time: its timer stops while the test loop
	// is rescheduled, so it is far less noisy than wall time on a shared
	// machine.
	b.ReportMetric(float64(ns), "kernel-ns/pkt")
}

// testRun is BPF_PROG_TEST_RUN with a context (internal/testkit/xdptest).
var testRun = xdptest.Run

// sampler returns the sampler instance of an attached port (every port
// runs its own, AttachPort), or the generic instance when none is attached.
func sampler(d *Dataplane) *ebpf.Program {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.ports {
		return p.prog
	}
	return d.objs.XdpSampler
}

// portProg returns the sampler instance attached to ifindex.
func portProg(t testing.TB, d *Dataplane, ifindex int) *ebpf.Program {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.ports[ifindex]
	if !ok {
		t.Fatalf("ifindex %d not attached", ifindex)
	}
	return p.prog
}

func attach(pc PortConfig) func(b *testing.B, d *Dataplane, p1 int) {
	return func(b *testing.B, d *Dataplane, p1 int) {
		if err := d.AttachPort(p1, pc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkXDPPass is the baseline: the do-nothing program.
func BenchmarkXDPPass(b *testing.B) {
	benchXDP(b, func(d *Dataplane) *ebpf.Program { return d.objs.XdpPass }, func(*testing.B, *Dataplane, int) {})
}

// BenchmarkXDPFloor: the floor of the unsampled path, pool + skip
// countdown on a counter line found from the CPU number alone (xdp_floor;
// no port attached, so the line it writes is nobody's).
func BenchmarkXDPFloor(b *testing.B) {
	benchXDP(b, func(d *Dataplane) *ebpf.Program { return d.objs.XdpFloor }, func(*testing.B, *Dataplane, int) {})
}

// BenchmarkXDPSamplerUnsampled: the per-packet cost of an unsampled frame
// (the port's counter line, pool + 1, skip - 1) at rate 2^31.
func BenchmarkXDPSamplerUnsampled(b *testing.B) {
	benchXDP(b, sampler, attach(PortConfig{Rate: 1 << 31, HeaderBytes: 128}))
}

// BenchmarkXDPSamplerRate1: every frame sampled with a 128-byte header
// into a ring drained by a concurrent reader.
func BenchmarkXDPSamplerRate1(b *testing.B) {
	benchXDP(b, sampler, func(b *testing.B, d *Dataplane, p1 int) {
		attach(PortConfig{Rate: 1, HeaderBytes: 128})(b, d, p1)
		r, err := d.Source(0)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for {
				if _, err := r.Read(time.Now().Add(20*time.Millisecond), func(*reader.RawSample) {}); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
					return
				}
			}
		}()
	})
}

// BenchmarkPortCounters: summing one port's per-CPU counters via mmap.
func BenchmarkPortCounters(b *testing.B) {
	lab := netlab.New(b, 1)
	d := openIn(b, lab, Config{Workers: 1, MaxPorts: 2})
	p1 := lab.LinkIndex(lab.Switch, "p1")
	attach(PortConfig{Rate: 1, HeaderBytes: 64})(b, d, p1)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := d.Stats().Ingress(p1); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRingReadNoAlloc: draining samples through Read allocates nothing per
// sample.
func TestRingReadNoAlloc(t *testing.T) {
	lab := netlab.New(t, 1)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 2, RingBytes: 4 << 20})
	p1 := lab.PortIndex(t, 0)
	if err := d.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 128}); err != nil {
		t.Fatal(err)
	}
	const k = 2000
	lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, 0, k, 32))
	r, err := d.Source(0)
	if err != nil {
		t.Fatal(err)
	}
	n, bytesSeen := 0, 0
	fn := func(s *reader.RawSample) { n++; bytesSeen += len(s.Header) }
	deadline := time.Now().Add(time.Second)
	_, _ = r.Read(deadline, fn) // warm up: first record, reader buffers grow once
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for n < k {
		if _, err := r.Read(deadline, fn); err != nil {
			t.Fatalf("after %d samples: %v", n, err)
		}
	}
	runtime.ReadMemStats(&after)
	allocs := after.Mallocs - before.Mallocs
	t.Logf("%d samples, %d header bytes, %d allocations while reading", n, bytesSeen, allocs)
	if allocs > 20 { // a few from the runtime/test machinery, never one per sample
		t.Errorf("%d allocations for %d samples", allocs, n)
	}
}
