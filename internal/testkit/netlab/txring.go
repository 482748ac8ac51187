package netlab

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// SendFramesTxRing is SendFrames through a packet socket's transmit ring
// (PACKET_TX_RING, TPACKET_V2), as trafgen sends: the kernel builds each
// skb with only the link-layer header (14 bytes on Ethernet) in its linear
// area and the rest of the frame in page fragments that point into the
// ring (net/packet/af_packet.c tpacket_fill_skb). Frames reach the switch
// as nonlinear skbs, which is what a test of paged packet data needs.
// Frames must fit the MTU (1514 bytes with the header on the lab's veths).
// It returns when every frame was transmitted; the test fails if one was
// refused or the veth dropped any.
func (l *Lab) SendFramesTxRing(t testing.TB, hostIdx int, frames [][]byte) {
	t.Helper()
	if hostIdx < 0 || hostIdx >= len(l.Hosts) {
		t.Fatalf("netlab: SendFramesTxRing: host index %d out of range [0,%d)", hostIdx, len(l.Hosts))
	}
	ns := l.Hosts[hostIdx]
	err := l.Do(ns, func() error {
		link, err := netlink.LinkByName("eth0")
		if err != nil {
			return fmt.Errorf("find eth0: %w", err)
		}
		before := txDropped(link)
		// A fresh ring per chunk, never a reused slot: the kernel marks a
		// slot free when its skb is orphaned (at the veth), while the
		// skb's fragments may still point into the slot's page.
		for len(frames) > 0 {
			n := min(len(frames), txRingMaxFrames)
			if err := sendTxRing(link.Attrs().Index, frames[:n]); err != nil {
				return err
			}
			frames = frames[n:]
		}
		link, err = netlink.LinkByName("eth0")
		if err != nil {
			return fmt.Errorf("find eth0: %w", err)
		}
		if after := txDropped(link); after != before {
			return fmt.Errorf("eth0 dropped %d frames (tx_dropped %d -> %d)", after-before, before, after)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("netlab: SendFramesTxRing from %s: %v", ns, err)
	}
}

// Transmit ring geometry (Documentation/networking/packet_mmap.rst).
const (
	// txRingSlot is one frame's slot: the tpacket2_hdr, padded to
	// TPACKET_ALIGNMENT (32 bytes), then the frame. 2048 holds a
	// 1514-byte frame.
	txRingSlot = 2048
	// txRingData is where the frame starts in its slot without
	// PACKET_TX_HAS_OFF: TPACKET2_HDRLEN - sizeof(struct sockaddr_ll).
	txRingData = 32
	// txRingMaxFrames bounds one ring (2 MiB).
	txRingMaxFrames = 1024
	// TP_STATUS_* of a slot (linux/if_packet.h).
	tpStatusAvailable   = 0
	tpStatusSendRequest = 1
	tpStatusWrongFormat = 4
)

// sendTxRing sends frames from one TPACKET_V2 transmit ring on ifindex.
func sendTxRing(ifindex int, frames [][]byte) error {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open AF_PACKET socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return fmt.Errorf("PACKET_VERSION TPACKET_V2: %w", err)
	}
	page := os.Getpagesize()
	perBlock := page / txRingSlot
	blocks := (len(frames) + perBlock - 1) / perBlock
	req := unix.TpacketReq{Block_size: uint32(page), Block_nr: uint32(blocks), Frame_size: txRingSlot, Frame_nr: uint32(blocks * perBlock)}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &req); err != nil {
		return fmt.Errorf("PACKET_TX_RING %+v: %w", req, err)
	}
	ring, err := unix.Mmap(fd, 0, blocks*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap the transmit ring: %w", err)
	}
	defer unix.Munmap(ring)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifindex}); err != nil {
		return fmt.Errorf("bind AF_PACKET socket to ifindex %d: %w", ifindex, err)
	}
	slot := func(i int) *unix.Tpacket2Hdr {
		return (*unix.Tpacket2Hdr)(unsafe.Pointer(&ring[i*txRingSlot]))
	}
	for i, f := range frames {
		if txRingData+len(f) > txRingSlot {
			return fmt.Errorf("frame %d: %d bytes do not fit a %d-byte slot", i, len(f), txRingSlot)
		}
		h := slot(i)
		copy(ring[i*txRingSlot+txRingData:], f)
		h.Len = uint32(len(f))
		// The status word hands the slot to the kernel: written last.
		atomic.StoreUint32(&h.Status, tpStatusSendRequest)
	}
	// Blocking send: the kernel transmits every requested slot and waits
	// until their skbs have left the socket (tpacket_snd).
	for {
		_, err := unix.SendmsgN(fd, nil, nil, nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("send the transmit ring: %w", err)
		}
		break
	}
	for i := range frames {
		switch st := atomic.LoadUint32(&slot(i).Status); st {
		case tpStatusAvailable:
		case tpStatusWrongFormat:
			return fmt.Errorf("frame %d (%d bytes): the kernel refused it (TP_STATUS_WRONG_FORMAT)", i, len(frames[i]))
		default:
			return fmt.Errorf("frame %d: slot status %#x after send, want available", i, st)
		}
	}
	return nil
}
