package testutil

import (
	"encoding/binary"
	"net"
	"net/netip"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// PcapFrame is one Ethernet frame of a capture, with its capture time.
type PcapFrame struct {
	At    time.Time
	Frame []byte
}

// Pcap returns a classic pcap file (little-endian, microsecond
// timestamps, LINKTYPE_ETHERNET) holding frames, for tshark and for our
// own pcap reader.
func Pcap(frames []PcapFrame) []byte {
	var p []byte
	p = binary.LittleEndian.AppendUint32(p, 0xa1b2c3d4)
	p = binary.LittleEndian.AppendUint16(p, 2)
	p = binary.LittleEndian.AppendUint16(p, 4)
	p = binary.LittleEndian.AppendUint32(p, 0)
	p = binary.LittleEndian.AppendUint32(p, 0)
	p = binary.LittleEndian.AppendUint32(p, 262144)
	p = binary.LittleEndian.AppendUint32(p, 1) // LINKTYPE_ETHERNET
	for _, f := range frames {
		us := f.At.UnixMicro()
		p = binary.LittleEndian.AppendUint32(p, uint32(us/1e6))
		p = binary.LittleEndian.AppendUint32(p, uint32(us%1e6))
		p = binary.LittleEndian.AppendUint32(p, uint32(len(f.Frame)))
		p = binary.LittleEndian.AppendUint32(p, uint32(len(f.Frame)))
		p = append(p, f.Frame...)
	}
	return p
}

// UDPPcapFrame returns an Ethernet/IPv4/UDP frame from 198.19.255.1:50000
// to 198.19.255.2:port carrying payload (an sFlow datagram sent by the
// agent to a collector), or nil if payload does not fit one frame.
func UDPPcapFrame(at time.Time, payload []byte, port uint16) PcapFrame {
	f := netlab.UDPFrame(net.HardwareAddr{2, 0, 0, 0xfe, 0, 1}, net.HardwareAddr{2, 0, 0, 0xfe, 0, 2},
		netip.MustParseAddrPort("198.19.255.1:50000"), netip.AddrPortFrom(netip.MustParseAddr("198.19.255.2"), port), payload)
	return PcapFrame{At: at, Frame: f}
}
