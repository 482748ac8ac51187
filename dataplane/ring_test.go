package dataplane

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/sflowswitchd/sflowswitchd/dataplane/portstats"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// TestRingBatchesInOrderUnderLoad: a reader draining a small ring in
// batches while the kernel fills it at full speed (rate 1) sees every
// sampled test frame at most once and in sending order, and every sample
// is accounted for: delivered or counted as a ring-full drop. The ring is
// small, so the positions wrap around it many times.
func TestRingBatchesInOrderUnderLoad(t *testing.T) {
	lab := netlab.New(t, 1)
	const ringBytes = 64 << 10
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 2, RingBytes: ringBytes})
	p1 := lab.PortIndex(t, 0)
	if err := d.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	r, err := d.Source(0)
	if err != nil {
		t.Fatal(err)
	}

	// Reader goroutine state; the totals are read by the test goroutine
	// while the reader runs.
	var delivered, batches, multi atomic.Uint64
	var headerBytes uint64
	var seqs, others, disorder int
	var firstBad string
	last := int64(-1)
	done := make(chan error, 1)
	fn := func(s *reader.RawSample) {
		headerBytes += uint64(len(s.Header))
		seq, ok := frameSeq(s.Header)
		if !ok {
			others++
			return
		}
		seqs++
		if int64(seq) <= last {
			disorder++
			if firstBad == "" {
				firstBad = fmt.Sprintf("seq %d after %d", seq, last)
			}
		}
		last = int64(seq)
	}
	go func() {
		for {
			n, err := r.Read(time.Now().Add(20*time.Millisecond), fn)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			if err != nil {
				done <- err
				return
			}
			delivered.Add(uint64(n))
			batches.Add(1)
			if n > 1 {
				multi.Add(1)
			}
		}
	}()

	const k, chunk = 100000, 10000
	for start := 0; start < k; start += chunk {
		lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, uint32(start), chunk, 32))
	}
	// Wait until every sample is delivered or dropped.
	var pc portstats.Counters
	for deadline := time.Now().Add(10 * time.Second); ; {
		if pc, err = d.Stats().Ingress(p1); err != nil {
			t.Fatal(err)
		}
		if delivered.Load()+pc.Drops >= pc.Samples || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("read loop ended with %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Read")
	}
	// The reader goroutine has ended: its state is ours now.
	t.Logf("samples %d, drops %d, delivered %d (%d test frames, %d other) in %d batches (%d of more than one), %d header bytes",
		pc.Samples, pc.Drops, delivered.Load(), seqs, others, batches.Load(), multi.Load(), headerBytes)
	if pc.Samples < k {
		t.Errorf("samples %d, want >= %d at rate 1", pc.Samples, k)
	}
	if delivered.Load()+pc.Drops != pc.Samples {
		t.Errorf("delivered %d + drops %d != samples %d", delivered.Load(), pc.Drops, pc.Samples)
	}
	if uint64(seqs+others) != delivered.Load() {
		t.Errorf("fn saw %d samples, Read reported %d", seqs+others, delivered.Load())
	}
	if disorder > 0 {
		t.Errorf("%d test frames out of order or repeated, first: %s", disorder, firstBad)
	}
	if last >= k {
		t.Errorf("last sequence %d, sent 0..%d", last, k-1)
	}
	// Ring records are 8 (ring header) + metaSize (sample_meta, 40 bytes) +
	// a header size class.
	if consumed := uint64(seqs) * uint64(8+metaSize+64); consumed < 4*ringBytes {
		t.Errorf("only %d bytes went through the %d-byte ring: no wrap-around tested", consumed, ringBytes)
	}
	if multi.Load() == 0 {
		t.Errorf("no Read returned more than one sample: batching not exercised")
	}
	if r.Malformed() != 0 {
		t.Errorf("%d malformed records", r.Malformed())
	}
}

// TestSourceWakeAndClose: on the real ring, Wake makes a Read waiting on
// an empty ring (no deadline) return promptly with no samples; a Wake
// before the Read makes its wait return at once; Close unblocks a waiting
// Read with os.ErrClosed, and Read and Wake after Close fail.
func TestSourceWakeAndClose(t *testing.T) {
	lab := netlab.New(t, 1)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 2})
	r, err := d.Source(0)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	read := func() chan result {
		ch := make(chan result, 1)
		go func() {
			n, err := r.Read(time.Time{}, func(*reader.RawSample) {})
			ch <- result{n, err}
		}()
		return ch
	}
	expect := func(what string, ch chan result, wantErr error) {
		t.Helper()
		select {
		case res := <-ch:
			if res.n != 0 || !errors.Is(res.err, wantErr) && !(wantErr == nil && res.err == nil) {
				t.Errorf("%s: Read = %d, %v; want 0, %v", what, res.n, res.err, wantErr)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: Read did not return", what)
		}
	}

	ch := read()
	time.Sleep(100 * time.Millisecond)
	select {
	case res := <-ch:
		t.Fatalf("Read on an empty ring returned %d, %v without Wake", res.n, res.err)
	default:
	}
	if err := r.Wake(); err != nil {
		t.Fatal(err)
	}
	expect("after Wake", ch, nil)

	if err := r.Wake(); err != nil {
		t.Fatal(err)
	}
	expect("Wake before Read", read(), nil)

	ch = read()
	time.Sleep(50 * time.Millisecond)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	expect("after Close", ch, os.ErrClosed)
	if _, err := r.Read(time.Time{}, func(*reader.RawSample) {}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Read after Close: %v, want os.ErrClosed", err)
	}
	if err := r.Wake(); err == nil {
		t.Errorf("Wake after Close succeeded")
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestRingCommit: Commit, called from a Read callback, releases to the
// kernel exactly the records handed before the current one (so that a
// program taking the pinned ring over after a SIGKILL does not read them
// again); the rest are released when the batch ends, and a Commit outside
// a callback changes nothing.
func TestRingCommit(t *testing.T) {
	lab := netlab.New(t, 1)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 2})
	p1 := lab.PortIndex(t, 0)
	if err := d.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	r, err := d.Source(0)
	if err != nil {
		t.Fatal(err)
	}
	// consumer_pos, the first word of the ring's first page
	// (kernel/bpf/ringbuf.c), mapped here a second time, read-only.
	consPage, err := unix.Mmap(d.rings[0].FD(), 0, os.Getpagesize(), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(consPage) })
	cons := func() uintptr { return atomic.LoadUintptr((*uintptr)(unsafe.Pointer(&consPage[0]))) }
	lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, 0, 10, 32))
	start := cons()
	var at []uintptr // consumer_pos seen by each callback, after its Commit on the 6th
	i := 0
	n, err := r.Read(time.Now().Add(time.Second), func(s *reader.RawSample) {
		if _, ok := frameSeq(s.Header); !ok {
			return
		}
		if i == 5 {
			r.Commit()
		}
		at = append(at, cons())
		i++
	})
	if err != nil || n < 10 {
		t.Fatalf("Read: %d samples, %v", n, err)
	}
	size := (uintptr(ringHdrSize+metaSize+64) + 7) &^ 7
	for j, c := range at {
		want := start
		if j >= 5 {
			want = start + 5*size
		}
		if c != want {
			t.Errorf("callback %d: consumer_pos %d records on, want %d", j, (c-start)/size, (want-start)/size)
		}
	}
	end := cons()
	r.Commit()
	if end != start+uintptr(n)*size || cons() != end {
		t.Errorf("after the batch consumer_pos is %d records on (%d after a Commit), want %d", (end-start)/size, (cons()-start)/size, n)
	}
}

// The ring record's layout (package reader): the kernel's 8-byte header
// (struct bpf_ringbuf_hdr), then struct sample_meta up to its header bytes.
const (
	ringHdrSize = 8
	metaSize    = int(unsafe.Offsetof(bpf.SamplerSampleMeta{}.Data))
)

// TestSourceReadIdleWakes: a lone sample below the ring's wake-up mark
// waits in the ring for Read's deadline (the worker's tick), but wakes a
// reader in ReadIdle at once, on the XDP and the TC sampler alike; the
// sample is the frame sent, and the ring's idle flag (ring_idle) is clear
// again when ReadIdle returns. Without the programs' ring_wake_idle the
// idle wait would last its whole deadline and the test fails.
func TestSourceReadIdleWakes(t *testing.T) {
	for _, hook := range []Hook{HookXDP, HookTC} {
		t.Run(hook.String(), func(t *testing.T) {
			lab := netlab.New(t, 1)
			d := openIn(t, lab, Config{Workers: 1, MaxPorts: 2, Hook: hook})
			p1 := lab.PortIndex(t, 0)
			if err := d.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 64}); err != nil {
				t.Fatal(err)
			}
			r, err := d.Source(0)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []uint32
			fn := func(s *reader.RawSample) {
				if seq, ok := frameSeq(s.Header); ok {
					seqs = append(seqs, seq)
				}
			}
			type result struct {
				n       int
				err     error
				elapsed time.Duration
			}
			readIn := func(read func(time.Time, func(*reader.RawSample)) (int, error), wait time.Duration) chan result {
				ch := make(chan result, 1)
				go func() {
					start := time.Now()
					n, err := read(start.Add(wait), fn)
					ch <- result{n, err, time.Since(start)}
				}()
				return ch
			}
			// Drain what attaching left (nothing expected).
			if _, err := r.Read(time.Now(), func(*reader.RawSample) {}); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal(err)
			}

			// Read: the lone sample waits for the deadline.
			const tick = 2 * time.Second
			ch := readIn(r.Read, tick)
			time.Sleep(100 * time.Millisecond)
			lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, 1, 1, 32))
			res := <-ch
			t.Logf("Read: %d sample(s) after %v", res.n, res.elapsed.Round(time.Millisecond))
			if res.err != nil || res.n != 1 {
				t.Fatalf("Read = %d, %v; want the one sample", res.n, res.err)
			}
			if res.elapsed < tick-100*time.Millisecond {
				t.Fatalf("Read returned after %v: the lone sample woke it before its %v deadline (wake-up mark not in force, the test proves nothing)", res.elapsed, tick)
			}

			// ReadIdle: the lone sample wakes the reader at once, twice
			// in a row (the flag is set again by each ReadIdle).
			for i := uint32(2); i <= 3; i++ {
				const idle = 20 * time.Second
				ch := readIn(r.ReadIdle, idle)
				time.Sleep(200 * time.Millisecond)
				lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, i, 1, 32))
				var res result
				select {
				case res = <-ch:
				case <-time.After(idle / 2):
					t.Fatalf("ReadIdle still waiting %v after the sample: the sample did not wake it", idle/2)
				}
				t.Logf("ReadIdle: %d sample(s) after %v", res.n, res.elapsed.Round(time.Millisecond))
				if res.err != nil || res.n != 1 {
					t.Fatalf("ReadIdle = %d, %v; want the one sample", res.n, res.err)
				}
				var flag uint32
				if err := d.objs.RingIdle.Lookup(uint32(0), &flag); err != nil {
					t.Fatal(err)
				}
				if flag != 0 {
					t.Errorf("ring_idle[0] = %d after ReadIdle returned, want 0", flag)
				}
			}
			if fmt.Sprint(seqs) != "[1 2 3]" {
				t.Errorf("frames sampled %v, want [1 2 3]", seqs)
			}
		})
	}
}
