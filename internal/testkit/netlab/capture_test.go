package netlab

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

// TestCaptureAndRxPackets: host 1 sends K frames to host 2's MAC. A
// capture on host 2's eth0 sees each of them once, intact and received;
// one on host 1's eth0 sees each once, intact and outgoing. Host 2's
// rx_packets grow by at least everything its capture saw received (the
// kernel counts a frame before it reaches packet sockets; the lab's
// bridge may add a few frames of its own).
func TestCaptureAndRxPackets(t *testing.T) {
	l := New(t, 2)
	const k = 50
	const magic = 0x4e4c4142 // "NLAB"
	frames := make([][]byte, k)
	for i := range frames {
		p := make([]byte, 8+i*13)
		binary.BigEndian.PutUint32(p[0:], magic)
		binary.BigEndian.PutUint32(p[4:], uint32(i))
		// An address no host owns: host 2 drops it at layer 3 silently.
		dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 0, 251}), 9)
		frames[i] = UDPFrame(l.HostMACs[0], l.HostMACs[1], netip.AddrPortFrom(l.HostAddrs[0], 40000), dst, p)
	}
	// seqOf returns the number of a test frame, or -1 for other traffic.
	seqOf := func(f []byte) int {
		const off = 14 + 20 + 8
		if len(f) < off+8 || binary.BigEndian.Uint32(f[off:]) != magic {
			return -1
		}
		return int(binary.BigEndian.Uint32(f[off+4:]))
	}
	// check records a test frame in seen and reports whether f is one;
	// it fails the test if f is altered or has the wrong direction.
	check := func(where string, seen []int, f Frame, outgoing bool) bool {
		seq := seqOf(f.Data)
		if seq < 0 {
			return false
		}
		if seq >= k || !bytes.Equal(f.Data, frames[seq]) || f.Outgoing != outgoing {
			t.Errorf("%s: frame %d: %d bytes (equal %v), outgoing %v; want the %d bytes sent, outgoing %v",
				where, seq, len(f.Data), seq < k && bytes.Equal(f.Data, frames[seq]), f.Outgoing, len(frames[min(seq, k-1)]), outgoing)
			return true
		}
		seen[seq]++
		return true
	}

	in := l.Capture(t, l.Hosts[1], "eth0")
	out := l.Capture(t, l.Hosts[0], "eth0")
	rx0 := l.RxPackets(t, l.Hosts[1], "eth0")
	l.SendFrames(t, 0, frames)

	seenIn := make([]int, k)
	got, otherRx := 0, uint64(0)
	err := in.Collect(2*time.Second, func(f Frame) bool {
		if check("host 2", seenIn, f, false) {
			got++
		} else if !f.Outgoing {
			otherRx++
		}
		return got < k
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range in.Queued(t) {
		if !check("host 2", seenIn, f, false) && !f.Outgoing {
			otherRx++
		}
	}
	grew := l.RxPackets(t, l.Hosts[1], "eth0") - rx0

	seenOut := make([]int, k)
	for _, f := range out.Queued(t) {
		check("host 1", seenOut, f, true)
	}
	for i := range k {
		if seenIn[i] != 1 || seenOut[i] != 1 {
			t.Errorf("frame %d: captured %d times on host 2, %d times on host 1; want once each", i, seenIn[i], seenOut[i])
		}
	}
	t.Logf("host 2: rx_packets +%d, captured %d test frames and %d others received", grew, got, otherRx)
	if grew < k+otherRx {
		t.Errorf("host 2 rx_packets grew by %d, want at least the %d test frames + %d other frames captured", grew, k, otherRx)
	}
}
