package sflow

import (
	"encoding/binary"
	"net/netip"
	"unicode/utf8"
)

// appendUint32 appends v as an XDR unsigned int (big endian).
func appendUint32(b []byte, v uint32) []byte {
	return binary.BigEndian.AppendUint32(b, v)
}

// appendUint64 appends v as an XDR unsigned hyper.
func appendUint64(b []byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(b, v)
}

// appendInt32 appends v as an XDR int.
func appendInt32(b []byte, v int32) []byte {
	return binary.BigEndian.AppendUint32(b, uint32(v))
}

// appendFloat32 appends v as an XDR float (IEEE 754 single, big endian).
func appendFloat32(b []byte, bits uint32) []byte {
	return binary.BigEndian.AppendUint32(b, bits)
}

// pad returns the number of zero bytes that pad n bytes to a multiple of 4
// (RFC 4506 section 4.10).
func pad(n int) int { return (4 - n&3) & 3 }

// appendOpaque appends variable-length opaque data: a length, the bytes and
// zero padding to a 4-byte boundary. Data longer than max (when max > 0) is
// truncated to max bytes.
func appendOpaque(b []byte, data []byte, max int) []byte {
	if max > 0 && len(data) > max {
		data = data[:max]
	}
	b = appendUint32(b, uint32(len(data)))
	b = append(b, data...)
	return append(b, zeros[:pad(len(data))]...)
}

// appendFixedOpaque appends fixed-length opaque data (no length word),
// padded to 4 bytes.
func appendFixedOpaque(b []byte, data []byte) []byte {
	b = append(b, data...)
	return append(b, zeros[:pad(len(data))]...)
}

// appendString appends an XDR string<max>. A longer string is truncated to
// max bytes, backing off to a UTF-8 boundary so the result stays valid text.
func appendString(b []byte, s string, max int) []byte {
	s = truncateString(s, max)
	b = appendUint32(b, uint32(len(s)))
	b = append(b, s...)
	return append(b, zeros[:pad(len(s))]...)
}

// truncateString cuts s to at most max bytes without splitting a UTF-8
// sequence. max <= 0 means no limit.
func truncateString(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	n := max
	for n > 0 && n > max-utf8.UTFMax && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

var (
	zeros   [8]byte
	zeros16 [16]byte
)

// Address types of the sFlow "address" union (spec "Address types").
const (
	addressUnknown uint32 = 0
	addressIPv4    uint32 = 1
	addressIPv6    uint32 = 2
)

// appendAddress appends an sFlow address union: IPv4, IPv6 or unknown
// (an invalid netip.Addr).
func appendAddress(b []byte, a netip.Addr) []byte {
	switch {
	case a.Is4():
		b = appendUint32(b, addressIPv4)
		v := a.As4()
		return append(b, v[:]...)
	case a.Is6():
		b = appendUint32(b, addressIPv6)
		v := a.As16()
		return append(b, v[:]...)
	default:
		return appendUint32(b, addressUnknown)
	}
}

// appendIPv4 appends a fixed 4-byte ip_v4 field. An invalid or non-IPv4
// address is encoded as 0.0.0.0.
func appendIPv4(b []byte, a netip.Addr) []byte {
	if !a.Is4() {
		return append(b, 0, 0, 0, 0)
	}
	v := a.As4()
	return append(b, v[:]...)
}

// appendIPv6 appends a fixed 16-byte ip_v6 field. An invalid address is
// encoded as ::, an IPv4 address in its IPv4-mapped form.
func appendIPv6(b []byte, a netip.Addr) []byte {
	if !a.IsValid() {
		return append(b, zeros16[:]...)
	}
	v := a.As16()
	return append(b, v[:]...)
}

// appendMAC appends a 6-byte MAC as the spec's "mac" type: opaque[6],
// padded to 8 bytes.
func appendMAC(b []byte, mac [6]byte) []byte {
	b = append(b, mac[:]...)
	return append(b, 0, 0)
}

// beginLength appends a placeholder length word and returns its offset, to
// be patched by endLength once the structure body is written.
func beginLength(b []byte) ([]byte, int) {
	return appendUint32(b, 0), len(b)
}

// endLength writes the length of everything appended after the placeholder
// at off into the placeholder.
func endLength(b []byte, off int) []byte {
	binary.BigEndian.PutUint32(b[off:], uint32(len(b)-off-4))
	return b
}
