package dataplane

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/afxdp"
	"github.com/sflowswitchd/sflowswitchd/testkit/netlab"
)

// TestRingFullDropsCounted: with a one-page ring that nobody reads during a
// flood, most samples cannot be delivered. Every one of them must be
// counted (sflow_version_5.txt flow_sample.drops): delivered + drops ==
// samples taken, exactly.
func TestRingFullDropsCounted(t *testing.T) {
	lab := netlab.New(t, 2)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, RingBytes: os.Getpagesize()})
	p1 := portIndex(t, lab, 0)
	if err := d.AttachPort(p1, PortConfig{Rate: 1, Mode: ModeInline, HeaderBytes: 128}); err != nil {
		t.Fatal(err)
	}
	const k = 20000
	lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, 0, k, 32))

	pc, err := d.PortCounters(p1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.Source(0)
	if err != nil {
		t.Fatal(err)
	}
	delivered := 0
	deadline := time.Now().Add(300 * time.Millisecond)
	for {
		n, err := r.Read(deadline, func(*RawSample) {})
		delivered += n
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	after, err := d.PortCounters(p1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pool %d, samples %d, drops %d, delivered %d", pc.Pool, pc.Samples, pc.Drops, delivered)
	if after != pc {
		t.Errorf("counters moved after the flood: %+v -> %+v", pc, after)
	}
	if pc.Pool < k || pc.Samples != pc.Pool {
		t.Errorf("pool %d, samples %d; want samples == pool >= %d at rate 1", pc.Pool, pc.Samples, k)
	}
	if uint64(delivered)+pc.Drops != pc.Samples {
		t.Errorf("delivered %d + drops %d = %d, want samples %d", delivered, pc.Drops, uint64(delivered)+pc.Drops, pc.Samples)
	}
	if pc.Drops == 0 || delivered == 0 {
		t.Errorf("want both drops (%d) and deliveries (%d) with a one-page ring", pc.Drops, delivered)
	}
}

// TestMonitorAFXDP: a monitor-mode port redirects its sampled frames into
// the AF_XDP sockets of its RX queues (one per queue, keys from XSKKey),
// drops all other frames, and accounts for every sampled frame: received
// by a socket, or counted as a drop by the sampler or the socket.
func TestMonitorAFXDP(t *testing.T) {
	lab := netlab.New(t, 2)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, MaxQueues: 8})
	p1 := portIndex(t, lab, 0)
	if err := d.AttachPort(p1, PortConfig{Rate: 4, Mode: ModeMonitor, HeaderBytes: 128}); err != nil {
		t.Fatal(err)
	}
	// One socket per real RX queue: bind fails (EINVAL) past the last one.
	// (netlink's IFLA_NUM_RX_QUEUES is the allocated count, which may be
	// larger, and /sys of the namespace is not mounted here.)
	var socks []*afxdp.Socket
	for q := 0; q < 8; q++ {
		var s *afxdp.Socket
		err := lab.Do(lab.Switch, func() error {
			var err error
			s, err = afxdp.Open(p1, q, afxdp.Options{})
			return err
		})
		if q > 0 && errors.Is(err, unix.EINVAL) {
			break
		}
		if err != nil {
			t.Fatalf("AF_XDP socket on p1 queue %d: %v", q, err)
		}
		t.Cleanup(func() { s.Close() })
		key, err := d.XSKKey(p1, q)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.SetXSK(key, s.FD()); err != nil {
			t.Fatal(err)
		}
		socks = append(socks, s)
	}
	t.Logf("%d AF_XDP sockets on p1", len(socks))
	capt := lab.Capture(t, lab.Hosts[1], "eth0")

	const k = 4000
	frames := make([][]byte, 0, k)
	for i := 0; i < k; i++ {
		frames = append(frames, seqFrames(lab, 0, lab.HostMACs[1], uint32(i), 1, 16+(i*53)%1400)[0])
	}
	// Receive concurrently: the sockets' rings (2048) are smaller than the
	// expected ~1000 samples only by a margin, and frames must be checked.
	got := map[uint32]bool{}
	altered := 0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		recv := func(f []byte) {
			seq, ok := frameSeq(f)
			if !ok || seq >= k {
				return
			}
			if !bytes.Equal(f, frames[seq]) {
				altered++
			}
			got[seq] = true
		}
		for {
			idle := true
			for _, s := range socks {
				n, err := s.Receive(recv)
				if err != nil {
					t.Errorf("Receive: %v", err)
					return
				}
				if n > 0 {
					idle = false
				}
			}
			if idle {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}
	}()
	lab.SendFrames(t, 0, frames)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-done

	pc, err := d.PortCounters(p1)
	if err != nil {
		t.Fatal(err)
	}
	var sockDrops uint64
	for _, s := range socks {
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		sockDrops += st.RxDropped + st.RxRingFull
	}
	t.Logf("counters %+v, received %d, socket drops %d, altered %d", pc, len(got), sockDrops, altered)
	if pc.Pool < k {
		t.Errorf("pool %d < %d", pc.Pool, k)
	}
	if uint64(len(got))+pc.Drops+sockDrops != pc.Samples {
		t.Errorf("received %d + sampler drops %d + socket drops %d != samples %d", len(got), pc.Drops, sockDrops, pc.Samples)
	}
	if len(got) == 0 || altered != 0 {
		t.Errorf("received %d sampled frames, %d altered", len(got), altered)
	}
	// Monitor ports carry a copy of traffic: nothing is forwarded.
	for _, f := range capt.Queued(t) {
		if _, ok := frameSeq(f.Data); ok {
			t.Errorf("host 2 received a test frame from a monitor port")
			break
		}
	}
}

// TestConsumedReason: the program skips SKB_CONSUMED by the value the
// running kernel gives it; a kernel without it (before 6.3, where 1 is
// NOT_SPECIFIED, a real drop) gets a value no reason has.
func TestConsumedReason(t *testing.T) {
	if got := consumedReason(map[uint32]string{0: "NOT_DROPPED_YET", 1: "CONSUMED", 2: "NOT_SPECIFIED"}); got != 1 {
		t.Errorf("6.3+ enum: consumed reason %d, want 1", got)
	}
	if got := consumedReason(map[uint32]string{0: "NOT_DROPPED_YET", 1: "NOT_SPECIFIED", 2: "NO_SOCKET"}); got != noConsumedReason {
		t.Errorf("6.1 enum: consumed reason %d, want %#x (none)", got, uint32(noConsumedReason))
	}
	names, err := kernelDropReasons()
	if err != nil {
		t.Fatal(err)
	}
	v := consumedReason(names)
	if v != noConsumedReason && names[v] != "CONSUMED" {
		t.Errorf("running kernel: consumed reason %d is %q", v, names[v])
	}
	t.Logf("running kernel: SKB_CONSUMED = %#x", v)
}

// TestDropBufferFull: with one page per CPU and nobody reading during a
// burst of drops under a high limit, most notifications cannot be written.
// Each is counted by the program (RingFull), so that notifications read +
// suppressed + ring full == drops exactly; the lost records the perf
// buffers report to the reader (BufferLost) are never more than RingFull,
// and Lost (the discarded_packet drops field) includes them.
func TestDropBufferFull(t *testing.T) {
	lab := netlab.New(t, 3)
	dl := lab.SetupDrops(t)
	ino, err := NetnsInode("/run/netns/" + lab.Switch)
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenDrops(DropsConfig{Netns: ino, Limit: 1_000_000, HeaderBytes: DefaultDropHeaderBytes, RingBytes: os.Getpagesize()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	const k = 3000
	read := 0
	want := dl.ACLFrames(1)[0]
	bad := 0
	readAll := func() {
		for _, r := range collectRecords(t, d, 300*time.Millisecond) {
			read++
			if !bytes.Equal(r.header, want) {
				bad++
			}
		}
	}
	lab.SendFrames(t, 0, dl.ACLFrames(k))
	readAll()
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("burst of %d: %+v, read %d", k, st, read)
	if uint64(read) != st.Notified || st.Notified+st.Suppressed+st.RingFull != st.Drops || st.Drops < k {
		t.Errorf("read %d, stats %+v: want read == notified and notified + suppressed + ring_full == drops >= %d", read, st, k)
	}
	if st.RingFull == 0 || read == 0 || bad != 0 {
		t.Errorf("want both lost (%d) and read (%d) notifications with one page per CPU; %d headers wrong", st.RingFull, read, bad)
	}
	// The kernel reports a CPU's lost records when its buffer next takes
	// one: more drops, a few at a time, read as they come.
	for i := 0; i < 10; i++ {
		lab.SendFrames(t, 0, dl.ACLFrames(10))
		readAll()
	}
	st, err = d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after 100 more: %+v, read %d; lost records reported to the reader: %d of %d", st, read, st.BufferLost, st.RingFull)
	if uint64(read) != st.Notified || st.Notified+st.Suppressed+st.RingFull != st.Drops || st.BufferLost > st.RingFull || bad != 0 {
		t.Errorf("read %d, stats %+v: want read == notified, notified + suppressed + ring_full == drops, buffer_lost <= ring_full", read, st)
	}
	if st.Lost() != st.Suppressed+st.RingFull {
		t.Errorf("Lost() = %d, want suppressed + ring_full = %d", st.Lost(), st.Suppressed+st.RingFull)
	}
}

// TestDropStatsLost: the drops field takes the larger of the program's
// count and the perf buffers' lost records (which can only be the
// program's, but a loss reported anywhere is never dropped silently).
func TestDropStatsLost(t *testing.T) {
	for _, c := range []struct {
		st   DropStats
		want uint64
	}{
		{DropStats{Suppressed: 5, RingFull: 3, BufferLost: 2}, 8},
		{DropStats{Suppressed: 5, RingFull: 3, BufferLost: 3}, 8},
		{DropStats{Suppressed: 5, RingFull: 3, BufferLost: 4}, 9},
		{DropStats{}, 0},
	} {
		if got := c.st.Lost(); got != c.want {
			t.Errorf("%+v.Lost() = %d, want %d", c.st, got, c.want)
		}
	}
}

// TestDropReadWakes: a Read waiting for notifications (no deadline) is
// woken by the next one (the doorbell ring: the perf buffers themselves
// wake nobody), and by Wake.
func TestDropReadWakes(t *testing.T) {
	lab := netlab.New(t, 3)
	dl := lab.SetupDrops(t)
	d := openDropsFor(t, lab, 1_000_000)
	type result struct {
		n    int
		hdr  []byte
		err  error
		took time.Duration
	}
	read := func() chan result {
		ch := make(chan result, 1)
		go func() {
			var ev DropEvent
			var r result
			start := time.Now()
			r.n, r.err = d.Read(&ev, func(e *DropEvent) { r.hdr = bytes.Clone(e.Header) })
			r.took = time.Since(start)
			ch <- r
		}()
		return ch
	}
	// Bounds are generous (a loaded machine); without a wake-up Read
	// would wait forever.
	wait := func(ch chan result) result {
		select {
		case r := <-ch:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("Read still waiting 10 s later")
			return result{}
		}
	}
	ch := read()
	time.Sleep(200 * time.Millisecond) // Read is waiting
	lab.SendFrames(t, 0, dl.ACLFrames(1))
	if r := wait(ch); r.err != nil || r.n != 1 || !bytes.Equal(r.hdr, dl.ACLFrames(1)[0]) {
		t.Errorf("after one drop: Read = %d, %v (header %x) after %v; want 1 notification of the frame", r.n, r.err, r.hdr, r.took)
	} else {
		t.Logf("one drop woke Read after %v", r.took)
	}
	ch = read()
	time.Sleep(200 * time.Millisecond)
	if err := d.Wake(); err != nil {
		t.Fatal(err)
	}
	if r := wait(ch); r.err != nil || r.n != 0 {
		t.Errorf("after Wake: Read = %d, %v; want 0, nil", r.n, r.err)
	}
}
