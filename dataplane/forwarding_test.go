package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/netlab"
)

// htons converts a 16-bit value to network byte order for AF_PACKET.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// openCapture opens an AF_PACKET socket on eth0 inside namespace ns that
// receives every incoming frame, with a large buffer and a read timeout.
func openCapture(t *testing.T, lab *netlab.Lab, ns string) int {
	t.Helper()
	fd := -1
	err := lab.Do(ns, func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return fmt.Errorf("eth0: %w", err)
		}
		s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		if err := unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20); err != nil {
			unix.Close(s)
			return fmt.Errorf("SO_RCVBUFFORCE: %w", err)
		}
		tv := unix.NsecToTimeval(int64(500 * time.Millisecond))
		if err := unix.SetsockoptTimeval(s, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			unix.Close(s)
			return fmt.Errorf("SO_RCVTIMEO: %w", err)
		}
		if err := unix.Bind(s, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: l.Attrs().Index}); err != nil {
			unix.Close(s)
			return fmt.Errorf("bind: %w", err)
		}
		fd = s
		return nil
	})
	if err != nil {
		t.Fatalf("capture in %s: %v", ns, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestForwardingUntouched: with rate 1 inline sampling on p1, every frame
// from host 1 to host 2 arrives byte for byte (XDP never alters or takes
// a frame in inline mode), and every frame is sampled into the ring.
func TestForwardingUntouched(t *testing.T) {
	lab := netlab.New(t, 2)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, RingBytes: 16 << 20})
	p1 := portIndex(t, lab, 0)
	if err := d.AttachPort(p1, PortConfig{Rate: 1, Mode: ModeInline, HeaderBytes: 256}); err != nil {
		t.Fatal(err)
	}
	if m := d.AttachMode(p1); m != AttachNative {
		t.Errorf("attach mode %q, want native", m)
	}
	c := startCollector(t, d, 0)
	defer c.stop(t)
	capFD := openCapture(t, lab, lab.Hosts[1])

	const k = 5000
	frames := make([][]byte, 0, k)
	for i := 0; i < k; i++ {
		size := 16 + (i*37)%1400 // distinct sizes and contents
		frames = append(frames, seqFrames(lab, 0, lab.HostMACs[1], uint32(i), 1, size)[0])
	}
	received := make(chan map[uint32][]byte, 1)
	go func() {
		got := map[uint32][]byte{}
		buf := make([]byte, 65536)
		idle := 0
		for len(got) < k && idle < 6 { // stop after ~3 s without frames
			n, from, err := unix.Recvfrom(capFD, buf, 0)
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				idle++
				continue
			}
			if err != nil {
				break
			}
			idle = 0
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			if seq, ok := frameSeq(buf[:n]); ok {
				got[seq] = bytes.Clone(buf[:n])
			}
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

	pc, err := d.PortCounters(p1)
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
