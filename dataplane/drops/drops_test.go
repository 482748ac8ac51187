package drops

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

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
	d, err := Open(Config{Netns: ino, Limit: 1_000_000, HeaderBytes: DefaultHeaderBytes, RingBytes: os.Getpagesize()})
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
		st   Stats
		want uint64
	}{
		{Stats{Suppressed: 5, RingFull: 3, BufferLost: 2}, 8},
		{Stats{Suppressed: 5, RingFull: 3, BufferLost: 3}, 8},
		{Stats{Suppressed: 5, RingFull: 3, BufferLost: 4}, 9},
		{Stats{}, 0},
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
			var ev Event
			var r result
			start := time.Now()
			r.n, r.err = d.Read(&ev, func(e *Event) { r.hdr = bytes.Clone(e.Header) })
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
