package decode

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/ethernet"
)

// Link-layer header types (https://www.tcpdump.org/linktypes.html) the
// capture reader understands.
const (
	linkTypeEthernet = 1   // LINKTYPE_ETHERNET
	linkTypeRaw      = 101 // LINKTYPE_RAW: IPv4 or IPv6, by version nibble
	linkTypeLinuxSLL = 113 // LINKTYPE_LINUX_SLL: Linux cooked capture v1
	linkTypeIPv4     = 228 // LINKTYPE_IPV4
	linkTypeIPv6     = 229 // LINKTYPE_IPV6
	linkTypeLinuxSL2 = 276 // LINKTYPE_LINUX_SLL2: Linux cooked capture v2
)

// maxCapturedPacket bounds the captured length a (possibly corrupt) capture
// file may announce, so a bad length cannot make the reader allocate
// without bound. 256 KiB is libpcap's largest snapshot length.
const maxCapturedPacket = 256 << 10

// maxBlock bounds a pcapng block's total length for the same reason.
const maxBlock = 16 << 20

// errCaptureFormat reports a capture file the reader cannot parse.
var errCaptureFormat = errors.New("sflow: bad capture file")

// capturedDatagram is the payload of one UDP datagram found in a capture.
type capturedDatagram struct {
	// Frame is the 1-based number of the packet in the capture, counting
	// every packet (as Wireshark numbers frames).
	Frame       int
	Time        time.Time
	Source      netip.AddrPort
	Destination netip.AddrPort
	// Payload is the UDP payload, cut to the UDP length (Ethernet padding
	// removed). It is valid until the next call of Next.
	Payload []byte
	// Truncated is set when the capture holds fewer bytes than the UDP
	// header announces (a short snapshot length); Payload is then the
	// part that was captured.
	Truncated bool
}

// pcapReader reads the UDP datagrams sent to one port from a classic pcap
// (microsecond or nanosecond, either byte order) or pcapng capture, with
// Ethernet (with 802.1Q/802.1ad tags), Linux cooked (SLL and SLL2) or raw
// IPv4/IPv6 link layers. IP fragments are skipped: the reader does not
// reassemble, and sFlow agents keep datagrams under the path MTU.
type pcapReader struct {
	r     *bufio.Reader
	port  uint16
	frame int
	buf   []byte

	// Classic pcap.
	classic  bool
	order    binary.ByteOrder
	linkType uint32
	tsUnit   time.Duration

	// pcapng: interfaces of the current section.
	ifaces []pcapngInterface
}

type pcapngInterface struct {
	linkType uint32
	snapLen  uint32
	// tsUnitsPerSecond is the timestamp resolution (if_tsresol).
	tsUnitsPerSecond uint64
}

// newPcapReader reads the capture's file header and returns a reader of
// the UDP datagrams to port (either the destination or, when port is 0,
// every UDP datagram).
func newPcapReader(r io.Reader, port uint16) (*pcapReader, error) {
	p := &pcapReader{r: bufio.NewReaderSize(r, 64<<10), port: port}
	magic, err := p.r.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the file header: %w", errCaptureFormat, err)
	}
	switch {
	case binary.BigEndian.Uint32(magic) == 0x0A0D0D0A:
		// pcapng: the first block must be a Section Header Block.
		return p, nil
	case binary.LittleEndian.Uint32(magic) == 0xa1b2c3d4 || binary.BigEndian.Uint32(magic) == 0xa1b2c3d4,
		binary.LittleEndian.Uint32(magic) == 0xa1b23c4d || binary.BigEndian.Uint32(magic) == 0xa1b23c4d:
		return p, p.readClassicHeader()
	}
	return nil, fmt.Errorf("%w: unknown magic %x (not pcap or pcapng)", errCaptureFormat, magic)
}

func (p *pcapReader) readClassicHeader() error {
	var h [24]byte
	if _, err := io.ReadFull(p.r, h[:]); err != nil {
		return fmt.Errorf("%w: pcap file header: %w", errCaptureFormat, err)
	}
	p.classic = true
	p.order = binary.LittleEndian
	if binary.BigEndian.Uint32(h[:]) == 0xa1b2c3d4 || binary.BigEndian.Uint32(h[:]) == 0xa1b23c4d {
		p.order = binary.BigEndian
	}
	p.tsUnit = time.Microsecond
	if p.order.Uint32(h[:]) == 0xa1b23c4d {
		p.tsUnit = time.Nanosecond
	}
	// The upper bits of the link type field may carry FCS information
	// (pcap file format draft, "LinkType and additional information").
	p.linkType = p.order.Uint32(h[20:]) & 0xffff
	if !linkTypeKnown(p.linkType) {
		return fmt.Errorf("%w: unsupported link type %d", errCaptureFormat, p.linkType)
	}
	return nil
}

func linkTypeKnown(lt uint32) bool {
	switch lt {
	case linkTypeEthernet, linkTypeRaw, linkTypeLinuxSLL, linkTypeIPv4, linkTypeIPv6, linkTypeLinuxSL2:
		return true
	}
	return false
}

// Next returns the next UDP datagram to the reader's port. It returns
// io.EOF at the end of the capture, and an error wrapping errCaptureFormat
// (or io.ErrUnexpectedEOF) when the file is corrupt or cut.
func (p *pcapReader) Next() (*capturedDatagram, error) {
	for {
		var (
			data     []byte
			linkType uint32
			ts       time.Time
			err      error
		)
		isPacket := true
		if p.classic {
			data, ts, err = p.nextClassic()
			linkType = p.linkType
		} else {
			data, linkType, ts, err = p.nextPcapng()
			isPacket = data != nil // nil: a block that is not a packet
		}
		if err != nil {
			return nil, err
		}
		if !isPacket {
			continue
		}
		p.frame++
		d, ok := udpFromFrame(data, linkType, p.port)
		if !ok {
			continue
		}
		d.Frame = p.frame
		d.Time = ts
		return d, nil
	}
}

// readFull reads n bytes into the reader's reused buffer.
func (p *pcapReader) readFull(n int) ([]byte, error) {
	if cap(p.buf) < n {
		p.buf = make([]byte, n)
	}
	b := p.buf[:n]
	if _, err := io.ReadFull(p.r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

func (p *pcapReader) nextClassic() ([]byte, time.Time, error) {
	var h [16]byte
	if _, err := io.ReadFull(p.r, h[:]); err != nil {
		if err == io.EOF {
			return nil, time.Time{}, io.EOF
		}
		return nil, time.Time{}, fmt.Errorf("%w: packet header after frame %d: %w", errCaptureFormat, p.frame, err)
	}
	sec, frac := p.order.Uint32(h[0:]), p.order.Uint32(h[4:])
	incl := p.order.Uint32(h[8:])
	if incl > maxCapturedPacket {
		return nil, time.Time{}, fmt.Errorf("%w: frame %d: captured length %d", errCaptureFormat, p.frame+1, incl)
	}
	b, err := p.readFull(int(incl))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: frame %d: %w", errCaptureFormat, p.frame+1, err)
	}
	return b, time.Unix(int64(sec), int64(frac)*int64(p.tsUnit)).UTC(), nil
}

// pcapng block types (draft-ietf-opsawg-pcapng).
const (
	blockSectionHeader  = 0x0A0D0D0A
	blockInterface      = 1
	blockPacketObsolete = 2
	blockSimplePacket   = 3
	blockEnhancedPacket = 6
)

// nextPcapng reads one block. For a packet block it returns the packet
// bytes, its interface's link type and its time; for other blocks nil data.
func (p *pcapReader) nextPcapng() ([]byte, uint32, time.Time, error) {
	var h [8]byte
	if _, err := io.ReadFull(p.r, h[:]); err != nil {
		if err == io.EOF {
			return nil, 0, time.Time{}, io.EOF
		}
		return nil, 0, time.Time{}, fmt.Errorf("%w: block header: %w", errCaptureFormat, err)
	}
	if binary.BigEndian.Uint32(h[:]) == blockSectionHeader {
		// The byte-order magic after the length tells the section's order.
		bom, err := p.r.Peek(4)
		if err != nil {
			return nil, 0, time.Time{}, fmt.Errorf("%w: section header: %w", errCaptureFormat, err)
		}
		switch {
		case binary.LittleEndian.Uint32(bom) == 0x1A2B3C4D:
			p.order = binary.LittleEndian
		case binary.BigEndian.Uint32(bom) == 0x1A2B3C4D:
			p.order = binary.BigEndian
		default:
			return nil, 0, time.Time{}, fmt.Errorf("%w: section header byte-order magic %x", errCaptureFormat, bom)
		}
		p.ifaces = p.ifaces[:0]
	} else if p.order == nil {
		return nil, 0, time.Time{}, fmt.Errorf("%w: pcapng file does not start with a section header", errCaptureFormat)
	}
	typ, total := p.order.Uint32(h[0:]), p.order.Uint32(h[4:])
	if total < 12 || total%4 != 0 || total > maxBlock {
		return nil, 0, time.Time{}, fmt.Errorf("%w: block type %#x length %d", errCaptureFormat, typ, total)
	}
	body, err := p.readFull(int(total) - 8)
	if err != nil {
		return nil, 0, time.Time{}, fmt.Errorf("%w: block type %#x: %w", errCaptureFormat, typ, err)
	}
	body = body[:len(body)-4] // trailing copy of the total length
	bad := func(what string) ([]byte, uint32, time.Time, error) {
		return nil, 0, time.Time{}, fmt.Errorf("%w: %s block too short (%d bytes)", errCaptureFormat, what, len(body))
	}
	switch typ {
	case blockInterface:
		if len(body) < 8 {
			return bad("interface description")
		}
		ifc := pcapngInterface{
			linkType:         uint32(p.order.Uint16(body[0:])),
			snapLen:          p.order.Uint32(body[4:]),
			tsUnitsPerSecond: 1e6,
		}
		if res, ok := p.option(body[8:], 9); ok && len(res) >= 1 { // if_tsresol
			ifc.tsUnitsPerSecond = tsResolution(res[0])
		}
		p.ifaces = append(p.ifaces, ifc)
	case blockEnhancedPacket, blockPacketObsolete:
		// Both blocks share the layout after the interface ID, which is 32
		// bits in the Enhanced Packet Block and 16 (then a drops count) in
		// the obsolete Packet Block.
		if len(body) < 20 {
			if typ == blockEnhancedPacket {
				return bad("enhanced packet")
			}
			return bad("packet")
		}
		id := p.order.Uint32(body[0:])
		if typ == blockPacketObsolete {
			id = uint32(p.order.Uint16(body[0:]))
		}
		ts := uint64(p.order.Uint32(body[4:]))<<32 | uint64(p.order.Uint32(body[8:]))
		capLen := p.order.Uint32(body[12:])
		if uint64(capLen) > uint64(len(body)-20) {
			return nil, 0, time.Time{}, fmt.Errorf("%w: packet block captured length %d exceeds block", errCaptureFormat, capLen)
		}
		return p.packet(id, ts, body[20:20+capLen])
	case blockSimplePacket:
		if len(body) < 4 {
			return bad("simple packet")
		}
		if len(p.ifaces) == 0 {
			return nil, 0, time.Time{}, fmt.Errorf("%w: simple packet block before any interface", errCaptureFormat)
		}
		// Captured length: the original length cut to the snapshot length
		// and to the block (pcapng "Simple Packet Block").
		n := uint64(p.order.Uint32(body[0:]))
		if s := uint64(p.ifaces[0].snapLen); s != 0 && s < n {
			n = s
		}
		if n > uint64(len(body)-4) {
			n = uint64(len(body) - 4)
		}
		data, lt, _, err := p.packet(0, 0, body[4:4+n])
		return data, lt, time.Time{}, err
	}
	return nil, 0, time.Time{}, nil
}

// packet resolves a packet block's interface.
func (p *pcapReader) packet(id uint32, ts uint64, data []byte) ([]byte, uint32, time.Time, error) {
	if int64(id) >= int64(len(p.ifaces)) {
		return nil, 0, time.Time{}, fmt.Errorf("%w: packet on undeclared interface %d", errCaptureFormat, id)
	}
	ifc := p.ifaces[id]
	if data == nil {
		data = []byte{} // a packet, even if empty
	}
	sec := ts / ifc.tsUnitsPerSecond
	frac := ts % ifc.tsUnitsPerSecond
	nsec := frac * 1e9 / ifc.tsUnitsPerSecond
	if ifc.tsUnitsPerSecond > 1e9 {
		nsec = frac / (ifc.tsUnitsPerSecond / 1e9)
	}
	return data, ifc.linkType, time.Unix(int64(sec), int64(nsec)).UTC(), nil
}

// option returns the value of option code in a pcapng options list.
func (p *pcapReader) option(opts []byte, code uint16) ([]byte, bool) {
	for len(opts) >= 4 {
		c, n := p.order.Uint16(opts[0:]), int(p.order.Uint16(opts[2:]))
		if c == 0 { // opt_endofopt
			return nil, false
		}
		if 4+n > len(opts) {
			return nil, false
		}
		if c == code {
			return opts[4 : 4+n], true
		}
		opts = opts[4+n+(4-n&3)&3:] // options are padded to 32 bits
	}
	return nil, false
}

// tsResolution decodes if_tsresol: 10^-v seconds, or 2^-(v&0x7f) when the
// high bit is set. Resolutions finer than 10^-18 are clamped to keep the
// arithmetic in 64 bits.
func tsResolution(v byte) uint64 {
	if v&0x80 != 0 {
		e := v & 0x7f
		if e > 62 {
			e = 62
		}
		return 1 << e
	}
	if v > 18 {
		v = 18
	}
	r := uint64(1)
	for i := byte(0); i < v; i++ {
		r *= 10
	}
	return r
}

// protoUDP is the IP protocol number of UDP.
const protoUDP = 17

// udpFromFrame finds a UDP datagram to port in a captured frame.
func udpFromFrame(b []byte, linkType uint32, port uint16) (*capturedDatagram, bool) {
	var etherType uint16
	switch linkType {
	case linkTypeEthernet:
		if len(b) < 14 {
			return nil, false
		}
		etherType, b = binary.BigEndian.Uint16(b[12:]), b[14:]
	case linkTypeLinuxSLL:
		if len(b) < 16 {
			return nil, false
		}
		etherType, b = binary.BigEndian.Uint16(b[14:]), b[16:]
	case linkTypeLinuxSL2:
		if len(b) < 20 {
			return nil, false
		}
		etherType, b = binary.BigEndian.Uint16(b[0:]), b[20:]
	case linkTypeIPv4:
		etherType = ethernet.TypeIPv4
	case linkTypeIPv6:
		etherType = ethernet.TypeIPv6
	case linkTypeRaw:
		if len(b) < 1 {
			return nil, false
		}
		switch b[0] >> 4 {
		case 4:
			etherType = ethernet.TypeIPv4
		case 6:
			etherType = ethernet.TypeIPv6
		default:
			return nil, false
		}
	default:
		return nil, false
	}
	eh, complete := ethernet.SkipTags(etherType, b)
	if !complete {
		return nil, false
	}
	etherType, b = eh.EtherType, b[eh.Len:]
	var (
		src, dst  netip.Addr
		udp       []byte
		truncated bool
		ok        bool
	)
	switch etherType {
	case ethernet.TypeIPv4:
		src, dst, udp, truncated, ok = ipv4Payload(b)
	case ethernet.TypeIPv6:
		src, dst, udp, truncated, ok = ipv6Payload(b)
	}
	if !ok || len(udp) < 8 {
		return nil, false
	}
	sport, dport := binary.BigEndian.Uint16(udp[0:]), binary.BigEndian.Uint16(udp[2:])
	if port != 0 && dport != port {
		return nil, false
	}
	ulen := int(binary.BigEndian.Uint16(udp[4:]))
	if ulen < 8 {
		return nil, false
	}
	payload := udp[8:]
	if ulen-8 < len(payload) {
		payload = payload[:ulen-8]
	} else if ulen-8 > len(payload) {
		truncated = true
	}
	return &capturedDatagram{
		Source:      netip.AddrPortFrom(src, sport),
		Destination: netip.AddrPortFrom(dst, dport),
		Payload:     payload,
		Truncated:   truncated,
	}, true
}

// ipv4Payload returns the UDP segment of an unfragmented IPv4 packet,
// cut to the IP total length.
func ipv4Payload(b []byte) (src, dst netip.Addr, udp []byte, truncated, ok bool) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return
	}
	ihl := int(b[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(b[2:]))
	flagsFrag := binary.BigEndian.Uint16(b[6:])
	if ihl < 20 || total < ihl || len(b) < ihl || b[9] != protoUDP {
		return
	}
	if flagsFrag&0x3fff != 0 { // more-fragments flag or a fragment offset
		return
	}
	src = netip.AddrFrom4([4]byte(b[12:16]))
	dst = netip.AddrFrom4([4]byte(b[16:20]))
	if total < len(b) {
		b = b[:total] // drop link-layer padding
	} else if total > len(b) {
		truncated = true
	}
	return src, dst, b[ihl:], truncated, true
}

// ipv6Payload returns the UDP segment of an IPv6 packet, following the
// extension headers and skipping fragments.
func ipv6Payload(b []byte) (src, dst netip.Addr, udp []byte, truncated, ok bool) {
	if len(b) < 40 || b[0]>>4 != 6 {
		return
	}
	plen := int(binary.BigEndian.Uint16(b[4:]))
	next := b[6]
	src = netip.AddrFrom16([16]byte(b[8:24]))
	dst = netip.AddrFrom16([16]byte(b[24:40]))
	b = b[40:]
	if plen == 0 {
		return // a jumbogram (RFC 2675): not sFlow
	}
	if plen < len(b) {
		b = b[:plen]
	} else if plen > len(b) {
		truncated = true
	}
	for {
		switch next {
		case protoUDP:
			return src, dst, b, truncated, true
		case 0, 43, 60: // hop-by-hop, routing, destination options
			if len(b) < 8 {
				return
			}
			n := (int(b[1]) + 1) * 8
			if len(b) < n {
				return
			}
			next, b = b[0], b[n:]
		case 51: // authentication header
			if len(b) < 8 {
				return
			}
			n := (int(b[1]) + 2) * 4
			if len(b) < n {
				return
			}
			next, b = b[0], b[n:]
		case 44: // fragment: only an atomic fragment (offset 0, M=0) is whole
			if len(b) < 8 || binary.BigEndian.Uint16(b[2:])&0xfff9 != 0 {
				return
			}
			next, b = b[0], b[8:]
		default:
			return
		}
	}
}
