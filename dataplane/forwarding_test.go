package dataplane

import (
	"bytes"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// TestForwardingUntouched: with rate 1 inline sampling on p1, every frame
// from host 1 to host 2 arrives byte for byte (XDP never alters or takes
// a frame in inline mode), and every frame is sampled into the ring.
func TestForwardingUntouched(t *testing.T) {
	t.Run("xdp", func(t *testing.T) { testForwardingUntouched(t, HookXDP, nil) })
	t.Run("tc", func(t *testing.T) {
		forTCModes(t, func(t *testing.T, c tcCase) { testForwardingUntouched(t, HookTC, &c) })
	})
}

func testForwardingUntouched(t *testing.T, hook Hook, tc *tcCase) {
	lab := netlab.New(t, 2)
	cfg := Config{Workers: 1, MaxPorts: 4, RingBytes: 16 << 20, Hook: hook}
	want := AttachNative
	if tc != nil {
		cfg.TCMode, want = tc.mode, tc.want
	}
	d := openIn(t, lab, cfg)
	p1 := lab.PortIndex(t, 0)
	if err := d.AttachPort(p1, PortConfig{Rate: 1, Mode: ModeInline, HeaderBytes: 256}); err != nil {
		t.Fatal(err)
	}
	if m := d.AttachMode(p1); m != want {
		t.Errorf("attach mode %q, want %s", m, want)
	}
	c := startCollector(t, d, 0)
	defer c.stop(t)
	capt := lab.Capture(t, lab.Hosts[1], "eth0")

	const k = 5000
	frames := make([][]byte, 0, k)
	for i := 0; i < k; i++ {
		size := 16 + (i*37)%1400 // distinct sizes and contents
		frames = append(frames, seqFrames(lab, 0, lab.HostMACs[1], uint32(i), 1, size)[0])
	}
	received := make(chan map[uint32][]byte, 1)
	go func() {
		got := map[uint32][]byte{}
		// Stop after 3 s without frames.
		err := capt.Collect(3*time.Second, func(f netlab.Frame) bool {
			if seq, ok := frameSeq(f.Data); ok && !f.Outgoing {
				got[seq] = f.Data
			}
			return len(got) < k
		})
		if err != nil {
			t.Errorf("capture on host 2: %v", err)
		}
		received <- got
	}()
	lab.SendFrames(t, 0, frames)
	got := <-received

	bad := 0
	for i, f := range frames {
		g, ok := got[uint32(i)]
		if !ok || !bytes.Equal(g, f) {
			bad++
			if bad <= 5 {
				t.Errorf("frame %d: received %v (%d bytes), want the %d bytes sent", i, ok, len(g), len(f))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d frames missing or altered", bad, k)
	}

	pc, err := d.Stats().Ingress(p1)
	if err != nil {
		t.Fatal(err)
	}
	samples := c.waitFor(int(pc.Samples), 5*time.Second)
	sampled := map[uint32]bool{}
	for _, s := range samples {
		seq, ok := frameSeq(s.Header)
		if !ok || seq >= k {
			continue
		}
		f := frames[seq]
		if !bytes.Equal(s.Header, f[:min(len(f), 256)]) || s.FrameLen != uint32(len(f)) {
			t.Errorf("sample of frame %d: header/length differ from the frame", seq)
		}
		sampled[seq] = true
	}
	t.Logf("received %d/%d frames intact; %d distinct test frames sampled; counters %+v", k-bad, k, len(sampled), pc)
	if len(sampled) != k {
		t.Errorf("%d of %d frames sampled at rate 1", len(sampled), k)
	}
	if pc.Drops != 0 {
		t.Errorf("%d drops", pc.Drops)
	}
}
