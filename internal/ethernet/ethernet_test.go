package ethernet

import (
	"encoding/binary"
	"testing"
)

// frame builds an Ethernet frame: MACs, then the 16-bit words given (tag
// TPIDs/TCIs and the final EtherType), then payload.
func frame(words []uint16, payload ...byte) []byte {
	b := make([]byte, 12, 12+2*len(words)+len(payload))
	for i := range b {
		b[i] = byte(i + 1)
	}
	for _, w := range words {
		b = binary.BigEndian.AppendUint16(b, w)
	}
	return append(b, payload...)
}

func TestParse(t *testing.T) {
	ip := []byte{0x45, 0, 0, 20}
	tests := []struct {
		name   string
		frame  []byte
		ok     bool
		want   Header
		outVID uint16
		outPCP uint8
	}{
		{name: "empty", frame: nil, ok: false},
		{name: "13 bytes", frame: make([]byte, 13), ok: false},
		{name: "untagged IPv4", frame: frame([]uint16{0x0800}, ip...), ok: true,
			want: Header{EtherType: TypeIPv4, Len: 14}},
		{name: "untagged no payload", frame: frame([]uint16{0x86dd}), ok: true,
			want: Header{EtherType: TypeIPv6, Len: 14}},
		{name: "802.1Q", frame: frame([]uint16{0x8100, 0xa00a, 0x0800}, ip...), ok: true,
			want: Header{EtherType: TypeIPv4, Tags: 1, Outer: Tag{0x8100, 0xa00a}, Len: 18}, outVID: 10, outPCP: 5},
		{name: "802.1ad over 802.1Q", frame: frame([]uint16{0x88a8, 0x0064, 0x8100, 0x2005, 0x86dd}, ip...), ok: true,
			want: Header{EtherType: TypeIPv6, Tags: 2, Outer: Tag{0x88a8, 0x0064}, Inner: Tag{0x8100, 0x2005}, Len: 22}, outVID: 100},
		{name: "0x9100 outer", frame: frame([]uint16{0x9100, 0xefff, 0x8100, 0x0001, 0x0800}), ok: true,
			want: Header{EtherType: TypeIPv4, Tags: 2, Outer: Tag{0x9100, 0xefff}, Inner: Tag{0x8100, 0x0001}, Len: 22}, outVID: 0xfff, outPCP: 7},
		{name: "three tags", frame: frame([]uint16{0x88a8, 1, 0x9100, 2, 0x8100, 3, 0x0806}), ok: true,
			want: Header{EtherType: 0x0806, Tags: 3, Outer: Tag{0x88a8, 1}, Inner: Tag{0x9100, 2}, Len: 26}, outVID: 1},
		{name: "truncated first tag", frame: frame([]uint16{0x8100, 0x0001}), ok: false,
			want: Header{EtherType: typeVLAN, Len: 14}},
		{name: "truncated first tag, one byte", frame: append(frame([]uint16{0x8100}), 0, 1, 8), ok: false,
			want: Header{EtherType: typeVLAN, Len: 14}},
		{name: "truncated second tag", frame: frame([]uint16{0x88a8, 0x0007, 0x8100}), ok: false,
			want: Header{EtherType: typeVLAN, Tags: 1, Outer: Tag{0x88a8, 7}, Len: 18}, outVID: 7},
		{name: "tag then nothing", frame: frame([]uint16{0x8100, 0x0002, 0x0800}), ok: true,
			want: Header{EtherType: TypeIPv4, Tags: 1, Outer: Tag{0x8100, 2}, Len: 18}, outVID: 2},
		{name: "0x88a8 alone is a tag, not a payload", frame: frame([]uint16{0x88a8, 0x0003, 0x0800}), ok: true,
			want: Header{EtherType: TypeIPv4, Tags: 1, Outer: Tag{0x88a8, 3}, Len: 18}, outVID: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := Parse(tc.frame)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if h != tc.want {
				t.Fatalf("Parse = %+v, want %+v", h, tc.want)
			}
			if h.Tags > 0 && (h.Outer.VID() != tc.outVID || h.Outer.PCP() != tc.outPCP) {
				t.Fatalf("outer VID/PCP = %d/%d, want %d/%d", h.Outer.VID(), h.Outer.PCP(), tc.outVID, tc.outPCP)
			}
			if ok && len(tc.frame) > h.Len && tc.frame[h.Len] != 0x45 {
				t.Fatalf("payload at %d starts with %#x, want the IPv4 byte", h.Len, tc.frame[h.Len])
			}
		})
	}
}

func TestSkipTags(t *testing.T) {
	// A Linux cooked capture's payload after its EtherType: one tag, then IPv6.
	b := []byte{0x00, 0x0a, 0x86, 0xdd, 0x60}
	h, ok := SkipTags(typeVLAN, b)
	want := Header{EtherType: TypeIPv6, Tags: 1, Outer: Tag{typeVLAN, 10}, Len: 4}
	if !ok || h != want {
		t.Fatalf("SkipTags = %+v, %v; want %+v, true", h, ok, want)
	}
	if h, ok := SkipTags(TypeIPv4, nil); !ok || h != (Header{EtherType: TypeIPv4}) {
		t.Fatalf("SkipTags(untagged) = %+v, %v", h, ok)
	}
}

func TestParseDoesNotAllocate(t *testing.T) {
	f := frame([]uint16{0x88a8, 1, 0x8100, 2, 0x0800}, 0x45)
	if n := testing.AllocsPerRun(100, func() { _, _ = Parse(f) }); n != 0 {
		t.Fatalf("Parse allocates %v times per call", n)
	}
}

// FuzzParse checks the walker's invariants on any input: no panic, the
// payload offset inside the frame and equal to the header plus the tags
// walked, a successful walk ending on a non-tag EtherType, and the same
// result as a byte-by-byte reference walk.
func FuzzParse(f *testing.F) {
	f.Add(frame([]uint16{0x0800}, 0x45))
	f.Add(frame([]uint16{0x8100, 10, 0x0800}))
	f.Add(frame([]uint16{0x88a8, 10, 0x9100, 20, 0x8100}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, ok := Parse(b)
		if len(b) < headerLen {
			if ok || h != (Header{}) {
				t.Fatalf("short frame: %+v, %v", h, ok)
			}
			return
		}
		if h.Len > len(b) || h.Len != headerLen+h.Tags*tagLen {
			t.Fatalf("Len %d, Tags %d, frame %d bytes", h.Len, h.Tags, len(b))
		}
		if ok == isTag(h.EtherType) {
			t.Fatalf("ok = %v with EtherType %#x", ok, h.EtherType)
		}
		// Reference: a plain walk over 16-bit words.
		et, off, n := uint16(b[12])<<8|uint16(b[13]), 14, 0
		for isTag(et) && off+4 <= len(b) {
			if n == 0 && (h.Outer.TPID != et || h.Outer.TCI != uint16(b[off])<<8|uint16(b[off+1])) {
				t.Fatalf("outer tag %+v at %d", h.Outer, off)
			}
			et, off, n = uint16(b[off+2])<<8|uint16(b[off+3]), off+4, n+1
		}
		if et != h.EtherType || off != h.Len || n != h.Tags {
			t.Fatalf("Parse = %+v; reference EtherType %#x Len %d Tags %d", h, et, off, n)
		}
	})
}
