package netlab

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
)

// LinkStats returns the kernel's 64-bit statistics of link ifname in
// namespace ns, read over netlink. The test fails if the namespace or link
// does not exist or the kernel reports no statistics.
func (l *Lab) LinkStats(t testing.TB, ns, ifname string) netlink.LinkStatistics {
	t.Helper()
	st, err := linkStats(ns, ifname)
	if err != nil {
		t.Fatalf("netlab: statistics of %s in %s: %v", ifname, ns, err)
	}
	return st
}

// RxPackets returns rx_packets of link ifname in namespace ns (see
// LinkStats).
func (l *Lab) RxPackets(t testing.TB, ns, ifname string) uint64 {
	t.Helper()
	return l.LinkStats(t, ns, ifname).RxPackets
}

func linkStats(ns, ifname string) (netlink.LinkStatistics, error) {
	link, err := netnsutil.Link(ns, ifname)
	if err != nil {
		return netlink.LinkStatistics{}, err
	}
	if link.Attrs().Statistics == nil {
		return netlink.LinkStatistics{}, errors.New("link has no statistics")
	}
	return *link.Attrs().Statistics, nil
}

// Capture is an AF_PACKET socket (ETH_P_ALL) bound to one link inside a
// lab namespace: it sees every frame the link receives and, marked
// Outgoing, every frame it sends, from the moment Lab.Capture returns.
// Read it from one goroutine at a time.
type Capture struct {
	fd   int
	name string // "ifname in ns", for error messages
	buf  []byte
}

// Frame is one frame a Capture saw.
type Frame struct {
	Data     []byte // the Ethernet frame without FCS
	Outgoing bool   // sent by the link (PACKET_OUTGOING), not received
}

// captureRcvBuf is the socket receive buffer (SO_RCVBUFFORCE): large
// enough for thousands of frames queued while a test sends, so the
// capture loses none before it is read.
const captureRcvBuf = 64 << 20

// Capture opens a Capture on link ifname in namespace ns; it is closed in
// t.Cleanup.
func (l *Lab) Capture(t testing.TB, ns, ifname string) *Capture {
	t.Helper()
	c := &Capture{fd: -1, name: ifname + " in " + ns, buf: make([]byte, 65536)}
	err := l.Do(ns, func() error {
		link, err := netlink.LinkByName(ifname)
		if err != nil {
			return fmt.Errorf("find link: %w", err)
		}
		proto := htons(unix.ETH_P_ALL)
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto))
		if err != nil {
			return fmt.Errorf("open AF_PACKET socket: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, captureRcvBuf); err != nil {
			unix.Close(fd)
			return fmt.Errorf("SO_RCVBUFFORCE: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: link.Attrs().Index}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind AF_PACKET socket to ifindex %d: %w", link.Attrs().Index, err)
		}
		c.fd = fd
		return nil
	})
	if err != nil {
		t.Fatalf("netlab: capture on %s: %v", c.name, err)
	}
	t.Cleanup(func() {
		if err := unix.Close(c.fd); err != nil {
			t.Errorf("netlab: close capture on %s: %v", c.name, err)
		}
	})
	return c
}

// htons converts a 16-bit value to network byte order, as AF_PACKET wants
// the protocol.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Collect passes each frame the capture sees to fn, in order, until fn
// returns false or no frame has arrived for idle; with idle 0 it takes
// only the frames already queued. fn may keep the Frame. Collect does not
// call t.Fatal, so it may run on a goroutine other than the test's.
func (c *Capture) Collect(idle time.Duration, fn func(Frame) bool) error {
	pfd := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}}
	for {
		n, from, err := unix.Recvfrom(c.fd, c.buf, unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			if idle <= 0 {
				return nil
			}
			ready, err := unix.Poll(pfd, int(idle.Milliseconds()))
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return fmt.Errorf("netlab: poll capture on %s: %w", c.name, err)
			}
			if ready == 0 {
				return nil
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("netlab: read capture on %s: %w", c.name, err)
		}
		ll, _ := from.(*unix.SockaddrLinklayer)
		f := Frame{Data: bytes.Clone(c.buf[:n]), Outgoing: ll != nil && ll.Pkttype == unix.PACKET_OUTGOING}
		if !fn(f) {
			return nil
		}
	}
}

// Queued returns the frames the capture has seen and nobody collected
// yet, without waiting for more.
func (c *Capture) Queued(t testing.TB) []Frame {
	t.Helper()
	var frames []Frame
	err := c.Collect(0, func(f Frame) bool {
		frames = append(frames, f)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return frames
}
