package sender

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// collector is a UDP socket on loopback that the tests read datagrams from.
type collector struct {
	t    *testing.T
	conn *net.UDPConn
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &collector{t: t, conn: c}
}

func (c *collector) addr() netip.AddrPort { return c.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// read returns the next datagram, decoded by goflow2 (an independent
// decoder) and by our codec, which must agree on the header.
func (c *collector) read() *sflow.Datagram {
	c.t.Helper()
	buf := make([]byte, 65536)
	if err := c.conn.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		c.t.Fatal(err)
	}
	n, err := c.conn.Read(buf)
	if err != nil {
		c.t.Fatalf("reading a datagram: %v", err)
	}
	var gp goflow.Packet
	if err := goflow.DecodeMessageVersion(bytes.NewBuffer(buf[:n]), &gp); err != nil {
		c.t.Fatalf("goflow2 rejects the datagram: %v", err)
	}
	d, err := sflow.Decode(buf[:n])
	if err != nil {
		c.t.Fatal(err)
	}
	if gp.SequenceNumber != d.SequenceNumber || gp.Uptime != d.Uptime || int(gp.SamplesCount) != len(d.Samples) {
		c.t.Fatalf("goflow2 reads seq %d uptime %d samples %d; we read %d %d %d",
			gp.SequenceNumber, gp.Uptime, gp.SamplesCount, d.SequenceNumber, d.Uptime, len(d.Samples))
	}
	return d
}

// none checks that no datagram arrives within a short wait.
func (c *collector) none() {
	c.t.Helper()
	if err := c.conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		c.t.Fatal(err)
	}
	if n, err := c.conn.Read(make([]byte, 65536)); err == nil {
		c.t.Fatalf("unexpected datagram of %d bytes", n)
	}
}

// stats are the owner's totals in the tests.
type stats struct {
	datagrams, bytes, sendErrors, unsent, tooLarge atomic.Uint64
}

func (st *stats) counters() Counters {
	return Counters{Datagrams: &st.datagrams, Bytes: &st.bytes, SendErrors: &st.sendErrors, SamplesUnsent: &st.unsent, TooLarge: &st.tooLarge}
}

// clock is the tests' uptime.
type clock struct{ ms atomic.Uint32 }

func (c *clock) uptime() uint32 { return c.ms.Load() }

func counterSample(seq uint32) *sflow.CounterSample {
	return &sflow.CounterSample{
		SequenceNumber: seq,
		Source:         sflow.DataSource{Type: sflow.SourceIfIndex, Index: 7},
		Records:        []sflow.Record{&sflow.HostParent{ContainerType: 2, ContainerIndex: 1}},
	}
}

func newSender(t *testing.T, cfg Config) *Sender {
	t.Helper()
	if cfg.Agent == (netip.Addr{}) {
		cfg.Agent = netip.MustParseAddr("198.18.0.1")
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// samplesPerDatagram fills datagrams of the configured size.
func samplesPerDatagram(t *testing.T, size int) int {
	w, err := sflow.NewDatagramWriter(netip.MustParseAddr("198.18.0.1"), 0, size)
	if err != nil {
		t.Fatal(err)
	}
	w.Begin(1, 0)
	n := 0
	for w.Add(counterSample(1)) == nil {
		n++
	}
	return n
}

// TestUptimeAtSendTime: the uptime in a datagram is the clock when it was
// sent (sflow_version_5.txt: "as close to datagram transmission time as
// possible"), not when it was begun or completed; this holds for the
// datagram Flush completes and for complete datagrams that waited in the
// batch.
func TestUptimeAtSendTime(t *testing.T) {
	col := newCollector(t)
	var clk clock
	clk.ms.Store(1000)
	s := newSender(t, Config{Collector: col.addr(), MaxDatagramSize: 200, Batch: 4, Uptime: clk.uptime})
	defer s.Close()
	per := samplesPerDatagram(t, 200)
	for i := 0; i < per+1; i++ { // one datagram complete, one begun
		if err := s.Add(counterSample(uint32(i))); err != nil {
			t.Fatal(err)
		}
	}
	if s.Queued() != 1 {
		t.Fatalf("%d datagrams queued, want 1", s.Queued())
	}
	col.none() // a complete datagram waits for the batch
	clk.ms.Store(2500)
	s.SendQueued()
	if d := col.read(); d.Uptime != 2500 || d.SequenceNumber != 1 || len(d.Samples) != per {
		t.Fatalf("queued datagram: uptime %d seq %d samples %d, want 2500 1 %d", d.Uptime, d.SequenceNumber, len(d.Samples), per)
	}
	clk.ms.Store(4000)
	s.Flush()
	if d := col.read(); d.Uptime != 4000 || d.SequenceNumber != 2 || len(d.Samples) != 1 {
		t.Fatalf("flushed datagram: uptime %d seq %d samples %d, want 4000 2 1", d.Uptime, d.SequenceNumber, len(d.Samples))
	}
	s.Flush() // nothing to send: no empty datagram
	col.none()
}

// TestSendErrorThenSuccess: a refused datagram is counted with its samples,
// and the next datagram the socket takes is counted as sent, not as another
// error (the result of one send never leaks into the next).
func TestSendErrorThenSuccess(t *testing.T) {
	// A loopback port nobody listens on: the first datagram is sent and
	// answered by ICMP port unreachable, so the socket refuses the second
	// with ECONNREFUSED. Then a collector binds the port: the third goes
	// through.
	probe, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.LocalAddr().(*net.UDPAddr).AddrPort()
	probe.Close()

	var st stats
	var clk clock
	s := newSender(t, Config{Collector: addr, Uptime: clk.uptime, Counters: []Counters{st.counters()}})
	defer s.Close()
	s.Add(counterSample(1))
	s.Flush() // sent, then refused by the host
	if st.datagrams.Load() != 1 || st.sendErrors.Load() != 0 {
		t.Fatalf("first datagram: %d sent, %d errors; want 1, 0", st.datagrams.Load(), st.sendErrors.Load())
	}
	s.Add(counterSample(2))
	s.Add(counterSample(3))
	s.Flush()
	if st.datagrams.Load() != 1 || st.sendErrors.Load() != 1 || st.unsent.Load() != 2 {
		t.Fatalf("refused datagram: %d sent, %d errors, %d samples unsent; want 1, 1, 2", st.datagrams.Load(), st.sendErrors.Load(), st.unsent.Load())
	}

	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		// Another process took the ephemeral port between probe.Close
		// and here; the kernel hands ports out round-robin, so this
		// needs a full cycle of the ephemeral range meanwhile.
		t.Fatalf("re-binding the collector's port: %v", err)
	}
	col := &collector{t: t, conn: c}
	t.Cleanup(func() { c.Close() })
	s.Add(counterSample(4))
	s.Flush()
	if st.datagrams.Load() != 2 || st.sendErrors.Load() != 1 || st.unsent.Load() != 2 {
		t.Fatalf("after recovery: %d sent, %d errors, %d unsent; want 2, 1, 2", st.datagrams.Load(), st.sendErrors.Load(), st.unsent.Load())
	}
	if d := col.read(); d.SequenceNumber != 3 {
		t.Fatalf("datagram after the refused one has sequence %d, want 3 (the refused one used 2)", d.SequenceNumber)
	}
}

// TestSequenceHandover: a sender closed with nothing pending returns the
// number of its last datagram, and one replaced while it still holds
// samples (LastSeq) leaves no gap and no repeat.
func TestSequenceHandover(t *testing.T) {
	col := newCollector(t)
	var clk clock
	a := newSender(t, Config{Collector: col.addr(), Uptime: clk.uptime, LastSeq: 41})
	a.Add(counterSample(1))
	a.Flush()
	if d := col.read(); d.SequenceNumber != 42 {
		t.Fatalf("first datagram after LastSeq 41 has sequence %d", d.SequenceNumber)
	}
	last, err := a.Close()
	if err != nil || last != 42 {
		t.Fatalf("Close = %d, %v; want 42 (the unsent empty datagram's number given back)", last, err)
	}

	b := newSender(t, Config{Collector: col.addr(), Uptime: clk.uptime, LastSeq: last})
	b.Add(counterSample(2)) // pending when b is replaced
	if b.LastSeq() != 43 {
		t.Fatalf("LastSeq with a pending sample = %d, want 43", b.LastSeq())
	}
	c := newSender(t, Config{Collector: col.addr(), Uptime: clk.uptime, LastSeq: b.LastSeq()})
	defer c.Close()
	if _, err := b.Close(); err != nil { // sends the pending datagram, 43
		t.Fatal(err)
	}
	c.Add(counterSample(3))
	c.Flush()
	for _, want := range []uint32{43, 44} {
		if d := col.read(); d.SequenceNumber != want {
			t.Fatalf("sequence %d, want %d", d.SequenceNumber, want)
		}
	}
}

// TestBatching: complete datagrams go out together, one system call per
// full batch, in sequence order, and a batch is sent by itself when it
// fills.
func TestBatching(t *testing.T) {
	col := newCollector(t)
	var st stats
	var clk clock
	const batch = 4
	s := newSender(t, Config{Collector: col.addr(), MaxDatagramSize: 200, Batch: batch, Uptime: clk.uptime, Counters: []Counters{st.counters()}})
	defer s.Close()
	per := samplesPerDatagram(t, 200)
	for i := 0; i < per*batch; i++ { // fills 3 datagrams and the 4th slot
		s.Add(counterSample(uint32(i)))
	}
	if s.calls != 0 || s.Queued() != batch-1 {
		t.Fatalf("before the batch is full: %d calls, %d queued", s.calls, s.Queued())
	}
	s.Add(counterSample(0)) // completes the 4th: the batch is full
	if s.calls != 1 || st.datagrams.Load() != batch {
		t.Fatalf("full batch: %d calls, %d datagrams; want 1, %d", s.calls, st.datagrams.Load(), batch)
	}
	for i := uint32(1); i <= batch; i++ {
		if d := col.read(); d.SequenceNumber != i || len(d.Samples) != per {
			t.Fatalf("datagram %d: sequence %d, %d samples", i, d.SequenceNumber, len(d.Samples))
		}
	}
	s.Flush()
	if d := col.read(); d.SequenceNumber != batch+1 || len(d.Samples) != 1 {
		t.Fatalf("flushed datagram: sequence %d, %d samples", d.SequenceNumber, len(d.Samples))
	}
	if st.bytes.Load() == 0 || st.sendErrors.Load() != 0 {
		t.Fatalf("bytes %d, errors %d", st.bytes.Load(), st.sendErrors.Load())
	}
}

// TestTooLarge: a sample that fits no datagram is refused and counted;
// the stream goes on.
func TestTooLarge(t *testing.T) {
	col := newCollector(t)
	var st stats
	var clk clock
	s := newSender(t, Config{Collector: col.addr(), MaxDatagramSize: 100, Uptime: clk.uptime, Counters: []Counters{st.counters()}})
	defer s.Close()
	big := &sflow.FlowSample{Records: []sflow.Record{&sflow.SampledHeader{Header: make([]byte, 200)}}}
	if err := s.Add(big); !errors.Is(err, sflow.ErrSampleTooLarge) || st.tooLarge.Load() != 1 {
		t.Fatalf("Add(too large) = %v, TooLarge %d", err, st.tooLarge.Load())
	}
	s.Flush()
	col.none()
}

// TestSendDoesNotAllocate: encoding and sending allocate nothing.
func TestSendDoesNotAllocate(t *testing.T) {
	col := newCollector(t)
	var clk clock
	s := newSender(t, Config{Collector: col.addr(), Batch: 8, Uptime: clk.uptime})
	defer s.Close()
	smp := counterSample(1)
	if n := testing.AllocsPerRun(1000, func() {
		s.Add(smp)
		s.SendQueued()
	}); n != 0 {
		t.Fatalf("%v allocations per sample", n)
	}
	if n := testing.AllocsPerRun(100, func() { s.Add(smp); s.Flush() }); n != 0 {
		t.Fatalf("%v allocations per flush", n)
	}
}

// TestGSO: a batch of equal-size datagrams and a shorter last one leaves
// in one UDP GSO message, and the collector receives exactly the
// datagrams built, each on its own, in order; without GSO the same batch
// is one sendmmsg of one message per datagram.
func TestGSO(t *testing.T) {
	for _, noGSO := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoGSO=%v", noGSO), func(t *testing.T) {
			col := newCollector(t)
			var st stats
			var clk clock
			s := newSender(t, Config{Collector: col.addr(), MaxDatagramSize: 300, Batch: 16, NoGSO: noGSO, Uptime: clk.uptime, Counters: []Counters{st.counters()}})
			defer s.Close()
			per := samplesPerDatagram(t, 300)
			for i := 0; i < 5*per+1; i++ { // 5 full datagrams, 1 with one sample
				s.Add(counterSample(uint32(i)))
			}
			s.Flush()
			if s.calls != 1 || st.datagrams.Load() != 6 || s.gso == noGSO {
				t.Fatalf("%d system calls, %d datagrams, GSO %v", s.calls, st.datagrams.Load(), s.gso)
			}
			if s.msgs[0].hdr.Iovlen != map[bool]uint64{false: 6, true: 1}[noGSO] {
				t.Fatalf("first message has %d datagrams", s.msgs[0].hdr.Iovlen)
			}
			var bytes uint64
			for i := 1; i <= 6; i++ {
				d := col.read()
				want := per
				if i == 6 {
					want = 1
				}
				if d.SequenceNumber != uint32(i) || len(d.Samples) != want {
					t.Fatalf("datagram %d: sequence %d, %d samples; want %d", i, d.SequenceNumber, len(d.Samples), want)
				}
			}
			bytes = st.bytes.Load()
			if bytes == 0 || bytes > 6*300 {
				t.Fatalf("%d bytes counted", bytes)
			}
		})
	}
}

// TestBatchBytesBounded (the memory budget): with the default
// batch a sender's datagram buffers stay within MaxBatchBytes whatever the
// maximum datagram size, and hold at least one datagram; the default
// 1400-byte datagrams keep the full batch.
func TestBatchBytesBounded(t *testing.T) {
	col := newCollector(t)
	clk := &clock{}
	for size, want := range map[int]int{0: defaultBatch, 1400: defaultBatch, 9000: 7, 65507: 1} {
		s := newSender(t, Config{Collector: col.addr(), MaxDatagramSize: size, Uptime: clk.uptime})
		got := len(s.slots)
		bytes := got * (s.cfg.MaxDatagramSize + writerOverhead) // sflow.NewDatagramWriter's buffer
		s.Close()
		if got != want {
			t.Errorf("max datagram %d: batch %d, want %d", size, got, want)
		}
		if bytes > MaxBatchBytes+65507+writerOverhead || (got > 1 && bytes > MaxBatchBytes) {
			t.Errorf("max datagram %d: %d bytes of buffers, bound %d", size, bytes, MaxBatchBytes)
		}
	}
}

// TestBeforeSend: BeforeSend runs before every system call that sends, at
// a full batch inside Add (before the sample that did not fit is added)
// and at Flush, and never when nothing is sent.
func TestBeforeSend(t *testing.T) {
	col := newCollector(t)
	var clk clock
	const batch = 2
	var calls []int
	var sysAtCall []uint64
	var s *Sender
	s = newSender(t, Config{Collector: col.addr(), MaxDatagramSize: 200, Batch: batch, Uptime: clk.uptime,
		BeforeSend: func() { calls = append(calls, s.Queued()); sysAtCall = append(sysAtCall, s.calls) }})
	defer s.Close()
	per := samplesPerDatagram(t, 200)
	for i := 0; i < per*batch; i++ {
		s.Add(counterSample(uint32(i)))
	}
	if len(calls) != 0 {
		t.Fatalf("BeforeSend called %d times before anything was sent", len(calls))
	}
	s.Add(counterSample(0)) // the batch is full: sent inside Add
	s.Flush()
	s.Flush() // nothing left: no send
	if len(calls) != 2 || sysAtCall[0] != 0 || sysAtCall[1] != 1 || s.calls != 2 {
		t.Fatalf("BeforeSend at %v (system calls made before each %v; %d in all), want twice, each before its send", calls, sysAtCall, s.calls)
	}
}
