package netlab

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// UDPFrame builds an Ethernet II frame (no FCS) carrying an IPv4/UDP
// datagram (RFC 791, RFC 768) with correct IPv4 header and UDP checksums,
// TTL 64 and the don't-fragment bit clear. If both addresses are IPv6 it
// builds an IPv6/UDP frame instead (RFC 8200, hop limit 64, checksum
// mandatory). It returns nil if src and dst are of different families or
// invalid, or if the datagram would not fit the 16-bit length fields.
func UDPFrame(srcMAC, dstMAC net.HardwareAddr, src, dst netip.AddrPort, payload []byte) []byte {
	s, d := src.Addr().Unmap(), dst.Addr().Unmap()
	udpLen := 8 + len(payload)
	switch {
	case s.Is4() && d.Is4():
		if 20+udpLen > 0xffff {
			return nil
		}
		f := make([]byte, 14+20+udpLen)
		ethernet(f, srcMAC, dstMAC, 0x0800)
		ip := f[14:34]
		ip[0] = 0x45 // version 4, IHL 5 words
		binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
		ip[8] = 64 // TTL
		ip[9] = 17 // UDP
		sa, da := s.As4(), d.As4()
		copy(ip[12:16], sa[:])
		copy(ip[16:20], da[:])
		binary.BigEndian.PutUint16(ip[10:], ^fold(sum(0, ip)))
		udp(f[34:], src.Port(), dst.Port(), payload, sum(sum(0, sa[:]), da[:]))
		return f
	case s.Is6() && d.Is6():
		if udpLen > 0xffff {
			return nil
		}
		f := make([]byte, 14+40+udpLen)
		ethernet(f, srcMAC, dstMAC, 0x86dd)
		ip := f[14:54]
		ip[0] = 0x60 // version 6
		binary.BigEndian.PutUint16(ip[4:], uint16(udpLen))
		ip[6] = 17 // next header UDP
		ip[7] = 64 // hop limit
		sa, da := s.As16(), d.As16()
		copy(ip[8:24], sa[:])
		copy(ip[24:40], da[:])
		udp(f[54:], src.Port(), dst.Port(), payload, sum(sum(0, sa[:]), da[:]))
		return f
	}
	return nil
}

func ethernet(f []byte, srcMAC, dstMAC net.HardwareAddr, etherType uint16) {
	copy(f[0:6], dstMAC)
	copy(f[6:12], srcMAC)
	binary.BigEndian.PutUint16(f[12:], etherType)
}

// udp writes the UDP header and payload into b and sets the checksum from
// the pseudo-header sum of the addresses (protocol and length added here).
func udp(b []byte, sport, dport uint16, payload []byte, addrSum uint32) {
	n := uint16(8 + len(payload))
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], n)
	copy(b[8:], payload)
	c := ^fold(sum(addrSum+17+uint32(n), b))
	if c == 0 {
		c = 0xffff // RFC 768: a computed zero is sent as all ones
	}
	binary.BigEndian.PutUint16(b[6:], c)
}

// sum adds b as big-endian 16-bit words (odd length padded with zero) to s.
func sum(s uint32, b []byte) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
		if s >= 1<<31 {
			s = s&0xffff + s>>16
		}
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

// fold reduces a 32-bit one's-complement sum to 16 bits.
func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// Ping sends one ICMP echo request from host Hosts[hostIdx] to dst and
// waits up to timeout for the matching reply (the lab has no ping binary).
// The raw ICMP socket is opened inside the host namespace.
func (l *Lab) Ping(hostIdx int, dst netip.Addr, timeout time.Duration) error {
	if hostIdx < 0 || hostIdx >= len(l.Hosts) {
		return fmt.Errorf("netlab: ping: host index %d out of range [0,%d)", hostIdx, len(l.Hosts))
	}
	if !dst.Is4() {
		return fmt.Errorf("netlab: ping %s: only IPv4 (IPv6 is off in the lab)", dst)
	}
	var conn net.PacketConn
	err := l.Do(l.Hosts[hostIdx], func() error {
		var err error
		conn, err = net.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	})
	if err != nil {
		return fmt.Errorf("netlab: ping from %s: %w", l.Hosts[hostIdx], err)
	}
	defer conn.Close()

	const id, seq = 0x5346, 1 // "SF"
	req := []byte{8, 0, 0, 0, id >> 8, id & 0xff, 0, seq, 's', 'f', 'l', 'o', 'w'}
	binary.BigEndian.PutUint16(req[2:], ^fold(sum(0, req)))
	if _, err := conn.WriteTo(req, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
		return fmt.Errorf("netlab: ping %s: send: %w", dst, err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return fmt.Errorf("netlab: ping %s: %w", dst, err)
	}
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("netlab: ping %s: no reply: %w", dst, err)
		}
		r := buf[:n]
		// ip4:icmp sockets deliver the ICMP message without the IP header.
		if len(r) >= 8 && r[0] == 0 && binary.BigEndian.Uint16(r[4:]) == id &&
			binary.BigEndian.Uint16(r[6:]) == seq && from.String() == dst.String() {
			return nil
		}
	}
}
