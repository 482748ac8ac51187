// Package ethernet walks the start of an Ethernet frame: the MAC header and
// any VLAN tags in front of the payload. It is the one header walker of the
// project: the agent (extended_switch VLAN), the forwarding lookup (routed
// frames), the live view and the pcap reader all use it, so they agree on
// which tags exist.
//
// Tag types followed (TPIDs): 0x8100 (IEEE 802.1Q C-tag), 0x88a8 (IEEE
// 802.1ad S-tag) and 0x9100 (the pre-standard Q-in-Q tag still sent by
// older switches), stacked to any depth the bytes allow.
//
// Nothing allocates; every read is bounds-checked, so any input, however
// short or malformed, is safe.
package ethernet

import "encoding/binary"

// EtherTypes and tag protocol identifiers.
const (
	TypeIPv4 uint16 = 0x0800
	TypeIPv6 uint16 = 0x86dd
	// typeVLAN is the IEEE 802.1Q customer VLAN tag (C-tag).
	typeVLAN uint16 = 0x8100
	// typeQinQ is the IEEE 802.1ad service VLAN tag (S-tag).
	typeQinQ uint16 = 0x88a8
	// typeQinQLegacy is the pre-standard Q-in-Q tag.
	typeQinQLegacy uint16 = 0x9100
)

// headerLen is the length of an untagged Ethernet header: destination
// MAC, source MAC, EtherType.
const headerLen = 14

// tagLen is the length of one VLAN tag: TPID and TCI.
const tagLen = 4

// isTag reports whether t is a VLAN tag protocol identifier the walker
// follows.
func isTag(t uint16) bool {
	return t == typeVLAN || t == typeQinQ || t == typeQinQLegacy
}

// Tag is one VLAN tag.
type Tag struct {
	TPID uint16 // tag protocol identifier: typeVLAN, typeQinQ or typeQinQLegacy
	TCI  uint16 // tag control information: PCP (3 bits), DEI (1), VID (12)
}

// VID is the tag's 12-bit VLAN identifier.
func (t Tag) VID() uint16 { return t.TCI & 0x0fff }

// PCP is the tag's 3-bit priority code point (802.1p priority).
func (t Tag) PCP() uint8 { return uint8(t.TCI >> 13) }

// Header is what a walk learned about the start of a frame.
type Header struct {
	// EtherType is the type of the payload after all tags. When the
	// bytes end inside a tag it is that tag's TPID.
	EtherType uint16
	// Tags is the number of complete VLAN tags walked.
	Tags int
	// Outer and Inner are the first and second tags (valid when Tags > 0
	// and Tags > 1). Outer is the tag a switch port classifies the frame
	// by: the S-tag of a Q-in-Q frame, the only tag of an 802.1Q one.
	Outer, Inner Tag
	// Len is the offset of the payload: where the bytes after the last
	// tag start (headerLen + Tags*tagLen for Parse).
	Len int
}

// Parse walks the Ethernet header at the start of frame. It returns false
// when frame is shorter than an Ethernet header, or when it ends inside a
// VLAN tag; in that case h holds what was walked before (its EtherType is
// the truncated tag's TPID), so a caller may still use the outer tags.
func Parse(frame []byte) (h Header, ok bool) {
	if len(frame) < headerLen {
		return Header{}, false
	}
	h, ok = SkipTags(binary.BigEndian.Uint16(frame[12:14]), frame[headerLen:])
	h.Len += headerLen
	return h, ok
}

// SkipTags walks the VLAN tags that follow an EtherType field: et is that
// field's value and b the bytes after it. It serves link headers that end
// with an EtherType other than Ethernet's (Linux cooked captures). Len in
// the result is relative to b. It returns false when b ends inside a tag.
func SkipTags(et uint16, b []byte) (h Header, ok bool) {
	off := 0
	for isTag(et) {
		if len(b)-off < tagLen {
			h.EtherType, h.Len = et, off
			return h, false
		}
		t := Tag{TPID: et, TCI: binary.BigEndian.Uint16(b[off:])}
		switch h.Tags {
		case 0:
			h.Outer = t
		case 1:
			h.Inner = t
		}
		h.Tags++
		et = binary.BigEndian.Uint16(b[off+2:])
		off += tagLen
	}
	h.EtherType, h.Len = et, off
	return h, true
}
