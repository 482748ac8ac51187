package afxdp

import (
	"bytes"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestOptionsValidation(t *testing.T) {
	bad := []Options{
		{FrameSize: 3000},
		{FrameSize: 1024},
		{RxRingSize: 100},
		{FillRingSize: 3},
		{CompletionRingSize: -2},
		{NumFrames: -1},
		{NeedWakeup: true, DisableNeedWakeup: true},
	}
	for _, o := range bad {
		if _, err := o.withDefaults(); err == nil {
			t.Errorf("withDefaults(%+v): no error", o)
		}
	}
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	want := Options{NumFrames: 4096, FrameSize: 2048, RxRingSize: 2048, FillRingSize: 2048, CompletionRingSize: 2048, NeedWakeup: true}
	if o != want {
		t.Errorf("defaults = %+v, want %+v", o, want)
	}
	if _, err := Open(0, 0, Options{}); err == nil {
		t.Error("Open(ifindex 0): no error")
	}
}

// receiveAll polls and receives until want frames arrived or 10 s passed,
// handing each frame to fn.
func receiveAll(t *testing.T, s *Socket, want int, fn func([]byte)) int {
	t.Helper()
	got := 0
	deadline := time.Now().Add(10 * time.Second)
	for got < want && time.Now().Before(deadline) {
		if _, err := s.Poll(100 * time.Millisecond); err != nil {
			t.Fatalf("Poll: %v", err)
		}
		n, err := s.Receive(fn)
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		got += n
	}
	return got
}

// TestReceive sends K distinct frames from nsA and checks that each one
// arrives intact, exactly once, through Receive on vethB's queue 0, with
// receiving running concurrently so frames cycle through the fill ring
// many times.
func TestReceive(t *testing.T) {
	requireRoot(t)
	cases := []struct {
		name string
		opts Options
	}{
		// veth refuses XDP_ZEROCOPY: exercises the fallback to copy mode.
		{"zerocopy-fallback", Options{ZeroCopy: true}},
		// Small rings, more frames than the fill ring holds, and no
		// need-wakeup flag.
		{"small-rings-no-need-wakeup", Options{NumFrames: 512, RxRingSize: 128, FillRingSize: 256, CompletionRingSize: 64, DisableNeedWakeup: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newVethPair(t, 0)
			x := attachRedirect(t, p)
			s := openSocket(t, p, x, tc.opts)
			t.Logf("socket bound, zero-copy=%v", s.ZeroCopy())
			ps := newPacketSender(t, p)

			const K = 3000 // many times the fill ring: frames are recycled
			frames := make([][]byte, K)
			for i := range frames {
				frames[i] = testFrame(i)
			}

			seen := make([]int, K)
			var stray, corrupt int
			check := func(f []byte) {
				i := frameIndex(f)
				if i < 0 || i >= K {
					stray++
					return
				}
				seen[i]++
				if !bytes.Equal(f, frames[i]) {
					corrupt++
				}
			}

			var received atomic.Int64
			stop := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				for {
					select {
					case <-stop:
						done <- nil
						return
					default:
					}
					if _, err := s.Poll(10 * time.Millisecond); err != nil {
						done <- err
						return
					}
					n, err := s.Receive(check)
					if err != nil {
						done <- err
						return
					}
					received.Add(int64(n))
				}
			}()
			sendPaced(t, ps, x, frames, 64, &received)
			close(stop)
			if err := <-done; err != nil {
				t.Fatalf("receiver: %v", err)
			}

			if got := received.Load(); got != K || stray != 0 || corrupt != 0 {
				t.Errorf("received %d frames (%d stray, %d corrupt), want %d intact", got, stray, corrupt, K)
			}
			for i, c := range seen {
				if c != 1 {
					t.Errorf("frame %d received %d times", i, c)
				}
			}
			st, err := s.Stats()
			if err != nil {
				t.Fatalf("Stats: %v", err)
			}
			t.Logf("stats: %+v", st)
			if !st.Extended {
				t.Error("kernel returned the short xdp_statistics on Linux >= 5.9")
			}
			if st.RxDropped != 0 || st.RxRingFull != 0 || st.RxInvalidDescs != 0 {
				t.Errorf("unexpected drops: %+v", st)
			}
		})
	}
}

// TestDropAccounting floods a socket with tiny rings, or with frames too
// long for its UMEM frames, without reading it, and checks that the kernel
// counters account for every frame XDP redirected (copy mode; see the
// Stats doc comment for which counter counts what):
//
//	received + RxDropped + RxRingFull == frames redirected
//	RxDropped == RxFillRingEmptyDescs + frames longer than FrameSize-256
func TestDropAccounting(t *testing.T) {
	requireRoot(t)
	const K = 1000
	// Largest frame a 2048-byte UMEM frame takes in copy mode:
	// FrameSize - XDP_PACKET_HEADROOM (no extra headroom configured).
	const maxLen = DefaultFrameSize - 256
	cases := []struct {
		name  string
		opts  Options
		mtu   int
		frame func(i int) []byte
		// Which counters the configuration must drive.
		wantRingFull, wantFillEmpty, wantTooLong bool
	}{
		// Fill ring larger than the RX ring: frames get a UMEM buffer
		// but find the RX ring full.
		{"rx-ring-full", Options{NumFrames: 256, RxRingSize: 64, FillRingSize: 128, CompletionRingSize: 64}, 0, testFrame, true, false, false},
		// Fill ring smaller than the RX ring: the kernel runs out of
		// UMEM buffers first.
		{"fill-ring-empty", Options{NumFrames: 64, RxRingSize: 128, FillRingSize: 64, CompletionRingSize: 64}, 0, testFrame, false, true, false},
		// Default rings, frames alternately at and one byte over the
		// copy-mode frame size limit.
		{"frame-too-long", Options{}, 2000, func(i int) []byte { return testFrameLen(i, maxLen+i%2) }, false, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newVethPair(t, tc.mtu)
			x := attachRedirect(t, p)
			s := openSocket(t, p, x, tc.opts)
			ps := newPacketSender(t, p)
			o, err := tc.opts.withDefaults()
			if err != nil {
				t.Fatal(err)
			}

			frames := make([][]byte, K)
			var fits []int // indexes of frames short enough for a UMEM frame
			for i := range frames {
				frames[i] = tc.frame(i)
				if len(frames[i]) <= o.FrameSize-256 {
					fits = append(fits, i)
				}
			}
			tooLong := K - len(fits)
			sendPaced(t, ps, x, frames, 32, nil)

			// Receive the backlog with a callback that does not allocate
			// and check that Receive itself does not either.
			order := make([]int, 0, K)
			var corrupt int
			fn := func(f []byte) {
				i := frameIndex(f)
				order = append(order, i) // capacity K: no allocation
				if i < 0 || i >= K || !bytes.Equal(f, frames[i]) {
					corrupt++
				}
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			n, err := s.Receive(fn)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatalf("Receive: %v", err)
			}
			if allocs := after.Mallocs - before.Mallocs; allocs != 0 {
				t.Errorf("Receive of %d frames allocated %d times", n, allocs)
			}
			// Nothing else is in flight, so a second batch normally is
			// empty; whatever it finds still counts as received.
			n2, err := s.Receive(fn)
			if err != nil {
				t.Fatalf("Receive: %v", err)
			}
			received := n + n2
			if corrupt != 0 {
				t.Errorf("%d received frames are not intact copies of frames sent", corrupt)
			}

			st, err := s.Stats()
			if err != nil {
				t.Fatalf("Stats: %v", err)
			}
			t.Logf("received %d, %d too long, stats %+v", received, tooLong, st)
			if got := uint64(received) + st.RxDropped + st.RxRingFull; got != K {
				t.Errorf("received %d + RxDropped %d + RxRingFull %d = %d, want %d frames redirected",
					received, st.RxDropped, st.RxRingFull, got, K)
			}
			if st.RxDropped != st.RxFillRingEmptyDescs+uint64(tooLong) {
				t.Errorf("RxDropped %d != RxFillRingEmptyDescs %d + %d too-long frames", st.RxDropped, st.RxFillRingEmptyDescs, tooLong)
			}
			if tc.wantRingFull != (st.RxRingFull > 0) || tc.wantFillEmpty != (st.RxFillRingEmptyDescs > 0) || tc.wantTooLong != (tooLong > 0) {
				t.Errorf("counters %+v with %d too-long frames: want ring-full drops %v, fill-empty drops %v, too-long drops %v",
					st, tooLong, tc.wantRingFull, tc.wantFillEmpty, tc.wantTooLong)
			}
			// The ring delivers in order: the survivors are the first
			// frames that fit, as many as the smaller ring holds.
			wantN := min(o.RxRingSize, o.FillRingSize, len(fits))
			if received != wantN {
				t.Errorf("received %d frames, want %d", received, wantN)
			}
			for j := 0; j < min(len(order), wantN); j++ {
				if order[j] != fits[j] {
					t.Errorf("received frame %d is #%d, want #%d", j, order[j], fits[j])
					break
				}
			}
			// After draining, the socket receives again.
			more := [][]byte{testFrameLen(K, 100), testFrameLen(K+1, 100)}
			frames = append(frames, more...)
			sendPaced(t, ps, x, more, 32, nil)
			if got := receiveAll(t, s, 2, fn); got != 2 {
				t.Errorf("after draining: received %d of 2 frames", got)
			}
		})
	}
}
