package sflow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
)

// DecodeError reports why a datagram could not be decoded: the structure
// being read (a dotted path such as "datagram.sample[0].flow_sample.
// record[1].sampled_ipv4"), the byte offset in the datagram where the
// problem was found, and what was wrong.
type DecodeError struct {
	Structure string
	Offset    int
	Err       error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("sflow: %s at offset %d: %v", e.Structure, e.Offset, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Decoding failures, wrapped in a *DecodeError.
var (
	ErrShort      = errors.New("structure truncated")
	ErrLength     = errors.New("declared length does not match contents")
	ErrTrailing   = errors.New("trailing bytes after structure")
	ErrVersion    = errors.New("unsupported datagram version")
	ErrTooLong    = errors.New("length exceeds the spec's maximum")
	ErrBadValue   = errors.New("value out of range")
	ErrBadPadding = errors.New("non-zero padding")
)

// reader reads XDR from a window of a datagram. It is sticky: after the
// first error every read returns zero values, and err reports the first
// failure with its offset. The window [off, end) lies inside buf; offsets
// in errors are relative to the start of buf (the datagram).
type reader struct {
	buf  []byte
	off  int
	end  int
	path string
	// When kind is set, the structure's name in errors is
	// path.kind[index].name, composed only when an error is reported so
	// that decoding does not format a path per record.
	kind  string
	index int
	name  string
	err   error
}

// structure returns the dotted name of the structure r reads.
func (r *reader) structure() string {
	if r.kind == "" {
		return r.path
	}
	return fmt.Sprintf("%s.%s[%d].%s", r.path, r.kind, r.index, r.name)
}

// newReader returns a reader over the whole datagram b.
func newReader(b []byte, path string) *reader {
	return &reader{buf: b, end: len(b), path: path}
}

// fail records err at the current offset unless an error is already set.
func (r *reader) fail(err error) {
	r.failAt(r.off, err)
}

func (r *reader) failAt(off int, err error) {
	if r.err == nil {
		r.err = &DecodeError{Structure: r.structure(), Offset: off, Err: err}
	}
}

// remaining returns the number of unread bytes in the window.
func (r *reader) remaining() int { return r.end - r.off }

// need checks that n more bytes are present.
func (r *reader) need(n int) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || n > r.remaining() {
		r.fail(fmt.Errorf("%w: need %d bytes, %d remain", ErrShort, n, r.remaining()))
		return false
	}
	return true
}

func (r *reader) uint32() uint32 {
	if !r.need(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(r.buf[r.off:])
	r.off += 4
	return v
}

func (r *reader) int32() int32 { return int32(r.uint32()) }

func (r *reader) uint64() uint64 {
	if !r.need(8) {
		return 0
	}
	v := binary.BigEndian.Uint64(r.buf[r.off:])
	r.off += 8
	return v
}

func (r *reader) float32() float32 { return math.Float32frombits(r.uint32()) }

// bytes returns the next n bytes, unpadded, without copying.
func (r *reader) bytes(n int) []byte {
	if !r.need(n) {
		return nil
	}
	v := r.buf[r.off : r.off+n : r.off+n]
	r.off += n
	return v
}

// skipPad consumes the zero padding after n bytes of opaque data.
func (r *reader) skipPad(n int) {
	p := pad(n)
	if !r.need(p) {
		return
	}
	for i := 0; i < p; i++ {
		if r.buf[r.off+i] != 0 {
			r.fail(ErrBadPadding)
			return
		}
	}
	r.off += p
}

// opaque reads variable-length opaque data of at most max bytes
// (max <= 0: no limit besides the window). The result aliases the datagram.
func (r *reader) opaque(max int) []byte {
	start := r.off
	n := r.uint32()
	if r.err != nil {
		return nil
	}
	if max > 0 && int64(n) > int64(max) {
		r.failAt(start, fmt.Errorf("%w: opaque length %d > %d", ErrTooLong, n, max))
		return nil
	}
	if int64(n) > int64(r.remaining()) {
		r.failAt(start, fmt.Errorf("%w: opaque length %d, %d bytes remain", ErrShort, n, r.remaining()))
		return nil
	}
	v := r.bytes(int(n))
	r.skipPad(int(n))
	return v
}

// fixedOpaque reads n bytes of fixed-length opaque data plus padding.
func (r *reader) fixedOpaque(n int) []byte {
	v := r.bytes(n)
	r.skipPad(n)
	return v
}

// string reads an XDR string<max>.
func (r *reader) string(max int) string {
	return string(r.opaque(max))
}

// mac reads the spec's "mac" type (6 bytes, padded to 8).
func (r *reader) mac() (m [6]byte) {
	copy(m[:], r.fixedOpaque(6))
	return m
}

// ipv4 reads a fixed ip_v4.
func (r *reader) ipv4() netip.Addr {
	b := r.bytes(4)
	if b == nil {
		return netip.Addr{}
	}
	return netip.AddrFrom4([4]byte(b))
}

// ipv6 reads a fixed ip_v6.
func (r *reader) ipv6() netip.Addr {
	b := r.bytes(16)
	if b == nil {
		return netip.Addr{}
	}
	return netip.AddrFrom16([16]byte(b))
}

// address reads the sFlow address union.
func (r *reader) address() netip.Addr {
	start := r.off
	switch t := r.uint32(); t {
	case addressUnknown:
		return netip.Addr{}
	case addressIPv4:
		return r.ipv4()
	case addressIPv6:
		return r.ipv6()
	default:
		if r.err == nil {
			r.failAt(start, fmt.Errorf("%w: address type %d", ErrBadValue, t))
		}
		return netip.Addr{}
	}
}

// sub returns a reader for the next n bytes, element index of kind
// ("sample", "record") named name inside r's structure, and advances past
// them. The caller reads the sub-window and then calls finish on it.
func (r *reader) sub(n int, kind string, index int, name string) *reader {
	s := &reader{buf: r.buf, off: r.off, path: r.structure(), kind: kind, index: index, name: name}
	if !r.need(n) {
		s.err = r.err
		s.end = r.off
		return s
	}
	s.end = r.off + n
	r.off += n
	return s
}

// element reads the length word of element index of a kind ("sample",
// "record") array, named name, and returns a reader over the element's
// body (see sub), advancing r past it. The length must fit in what remains
// of r's window (container names that window in the error) and be a
// multiple of 4 (XDR). On failure it sets r.err and returns nil.
func (r *reader) element(kind string, index int, name, container string) *reader {
	start := r.off
	length := r.uint32()
	if r.err != nil {
		return nil
	}
	var err error
	switch {
	case int64(length) > int64(r.remaining()):
		err = fmt.Errorf("%w: %s length %d, %d bytes remain in %s", ErrShort, kind, length, r.remaining(), container)
	case length%4 != 0:
		err = fmt.Errorf("%w: %s length %d is not a multiple of 4 (XDR)", ErrLength, kind, length)
	default:
		return r.sub(int(length), kind, index, name)
	}
	r.err = &DecodeError{Structure: fmt.Sprintf("%s.%s[%d].%s", r.structure(), kind, index, name), Offset: start, Err: err}
	return nil
}

// finish reports leftover bytes in a sub-window as a length mismatch: a
// structure whose declared length is longer than its contents.
func (r *reader) finish() error {
	if r.err == nil && r.off != r.end {
		r.fail(fmt.Errorf("%w: %d bytes left unread", ErrLength, r.end-r.off))
	}
	return r.err
}

// count reads an array length and checks it against the bytes left,
// assuming each element takes at least minSize bytes, so that a forged
// count cannot make the decoder allocate without bound.
func (r *reader) count(minSize int) int {
	start := r.off
	n := r.uint32()
	if r.err != nil {
		return 0
	}
	if minSize < 1 {
		minSize = 1
	}
	if int64(n)*int64(minSize) > int64(r.remaining()) {
		r.failAt(start, fmt.Errorf("%w: %d elements announced, only %d bytes remain", ErrShort, n, r.remaining()))
		return 0
	}
	return int(n)
}
