package psample

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The PSAMPLE attributes (include/uapi/linux/psample.h, enum psample_attr;
// the numbers are ABI). psample_sample_packet (net/psample/psample.c) puts
// IIFINDEX and OIFINDEX (u16, only when not 0), SAMPLE_RATE, ORIGSIZE,
// SAMPLE_GROUP, GROUP_SEQ (u32), then OUT_TC (u16), OUT_TC_OCC and LATENCY
// (u64) when the driver knows them, TIMESTAMP (u64, Linux 5.13) and PROTO
// (u16, 5.13), and DATA last.
const (
	AttrIIfIndex    = 0  // u16: the input port
	AttrOIfIndex    = 1  // u16: the output port
	AttrOrigSize    = 2  // u32: the packet's length (skb->len)
	AttrSampleGroup = 3  // u32: the psample group
	AttrGroupSeq    = 4  // u32: the group's sequence number, one per sample sent
	AttrSampleRate  = 5  // u32: 1 in N
	AttrData        = 6  // the packet's first bytes
	AttrGroupRefcnt = 7  // u32 (group messages)
	AttrTunnel      = 8  // nested tunnel key
	AttrPad         = 9  //
	AttrOutTC       = 10 // u16: egress traffic class (queue)
	AttrOutTCOcc    = 11 // u64: bytes queued in that class
	AttrLatency     = 12 // u64: ns in the device
	AttrTimestamp   = 13 // u64: ns
	AttrProto       = 14 // u16: the skb's protocol (host order)
	AttrUserCookie  = 15 // binary: the user's cookie (Linux 6.11)
	// AttrSampleProbability (a flag, Linux 6.11) says SAMPLE_RATE is a
	// probability scaled to 0..U32_MAX, not 1 in N (Open vSwitch's
	// psample action, tc sample's TCA_SAMPLE_PROBABILITY).
	AttrSampleProbability = 16
)

// The commands of psample's messages (enum psample_command): a sample,
// and the announcements of a group made or freed (on the "config" group).
const (
	CmdSample   = 0
	CmdGetGroup = 1
	CmdNewGroup = 2
	CmdDelGroup = 3
)

// Has bits: which optional attributes a Sample carries.
const (
	HasIIf = 1 << iota
	HasOIf
	HasOrigSize
	HasGroup
	HasSeq
	HasRate
	HasData
	HasOutTC
	HasOutTCOcc
	HasLatency
	HasTimestamp
	HasProto
	HasProbability // the kernel's rate was a probability (Probability)
)

// Sample is one PSAMPLE_CMD_SAMPLE message. Data aliases the buffer the
// message was read into: valid only during the callback that receives it.
type Sample struct {
	Has      uint32 // Has* bits
	IIfIndex uint32 // 0 when absent
	OIfIndex uint32 // 0 when absent
	OrigSize uint32
	Group    uint32
	Seq      uint32
	// Rate is 1 in N: the kernel's SAMPLE_RATE, or, for a probability
	// (HasProbability), the N nearest to it (ProbabilityRate).
	Rate uint32
	// Probability is the kernel's SAMPLE_RATE as it came, with
	// HasProbability: a probability scaled to 0..U32_MAX.
	Probability uint32
	OutTC       uint32
	OutTCOcc    uint64
	Latency     uint64
	Timestamp   uint64
	Proto       uint16
	Data        []byte
	// Truncated: the socket's buffer held only part of the message
	// (MSG_TRUNC); Data holds the bytes that fitted.
	Truncated bool
	// Batch numbers the recvmmsg call that read the message (Conn): the
	// messages of one batch were all queued before any is handed on.
	Batch uint64
}

// Netlink and generic-netlink header sizes.
const (
	nlmsgHdrLen = 16
	genlHdrLen  = 4
	nlaHdrLen   = 4
)

// errShort is a message too short for what its headers say.
var errShort = errors.New("psample: message too short")

// ParseMessage parses one netlink message b (nlmsghdr, genlmsghdr,
// attributes) of the psample family into s, without allocating. b may be
// cut short (truncated): the attributes that fit are kept and DATA, the
// last one, keeps the bytes there are. A message that is not a sample
// returns ok=false.
func ParseMessage(b []byte, family uint16, s *Sample) (ok bool, err error) {
	*s = Sample{Data: s.Data[:0], Batch: s.Batch}
	if len(b) < nlmsgHdrLen+genlHdrLen {
		return false, errShort
	}
	if binary.NativeEndian.Uint16(b[4:6]) != family || b[nlmsgHdrLen] != CmdSample {
		return false, nil
	}
	n := int(binary.NativeEndian.Uint32(b[0:4]))
	if n < nlmsgHdrLen+genlHdrLen {
		return false, errShort
	}
	if n < len(b) {
		b = b[:n]
	} else if n > len(b) {
		s.Truncated = true
	}
	err = s.parseAttrs(b[nlmsgHdrLen+genlHdrLen:])
	if s.Has&HasProbability != 0 {
		s.Probability, s.Rate = s.Rate, ProbabilityRate(s.Rate)
	}
	return true, err
}

// ParseGroupMessage parses b as a PSAMPLE_CMD_NEW_GROUP or DEL_GROUP
// announcement of family (psample_group_notify: SAMPLE_GROUP, then
// GROUP_REFCOUNT) and returns the group and whether it was made; isGroup
// is false for any other message or one without its group.
func ParseGroupMessage(b []byte, family uint16) (group uint32, created, isGroup bool) {
	if len(b) < nlmsgHdrLen+genlHdrLen || binary.NativeEndian.Uint16(b[4:6]) != family {
		return 0, false, false
	}
	cmd := b[nlmsgHdrLen]
	if cmd != CmdNewGroup && cmd != CmdDelGroup {
		return 0, false, false
	}
	if n := int(binary.NativeEndian.Uint32(b[0:4])); n >= nlmsgHdrLen+genlHdrLen && n < len(b) {
		b = b[:n]
	}
	for a := b[nlmsgHdrLen+genlHdrLen:]; len(a) >= nlaHdrLen; {
		l := int(binary.NativeEndian.Uint16(a[0:2]))
		typ := binary.NativeEndian.Uint16(a[2:4]) & 0x3fff
		if l < nlaHdrLen || l > len(a) {
			return 0, false, false
		}
		if typ == AttrSampleGroup && l >= nlaHdrLen+4 {
			return binary.NativeEndian.Uint32(a[nlaHdrLen:]), cmd == CmdNewGroup, true
		}
		a = a[min((l+3)&^3, len(a)):]
	}
	return 0, false, false
}

// AppendGroupMessage appends the kernel's announcement of group made
// (created) or freed, from family (for tests).
func AppendGroupMessage(b []byte, family uint16, group uint32, created bool) []byte {
	start := len(b)
	cmd := byte(CmdDelGroup)
	if created {
		cmd = CmdNewGroup
	}
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = binary.NativeEndian.AppendUint16(b, family)
	b = binary.NativeEndian.AppendUint16(b, 0)
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = append(b, cmd, 1, 0, 0)
	for _, a := range [][2]uint32{{AttrSampleGroup, group}, {AttrGroupRefcnt, 1}} {
		b = binary.NativeEndian.AppendUint16(b, nlaHdrLen+4)
		b = binary.NativeEndian.AppendUint16(b, uint16(a[0]))
		b = binary.NativeEndian.AppendUint32(b, a[1])
	}
	binary.NativeEndian.PutUint32(b[start:], uint32(len(b)-start))
	return b
}

// ProbabilityRate is the 1-in-N rate of a sampling probability p scaled
// to 0..U32_MAX (PSAMPLE_ATTR_SAMPLE_PROBABILITY): U32_MAX / p rounded to
// the nearest integer (sFlow's sampling_rate is 1 in N). hsflowd's
// mod_psample makes the same division but rounds up only when the
// remainder exceeds U32_MAX/2, which it never does for p > 1, so it
// rounds down: 99 for a probability of 1% (42949673); this gives 100. 0
// for a probability of 0 (nothing is sampled).
func ProbabilityRate(p uint32) uint32 {
	if p == 0 {
		return 0
	}
	const max32 = 1<<32 - 1
	n, rem := max32/uint64(p), max32%uint64(p)
	if 2*rem >= uint64(p) {
		n++
	}
	return uint32(n)
}

// parseAttrs reads the attributes in a.
func (s *Sample) parseAttrs(a []byte) error {
	for len(a) >= nlaHdrLen {
		l := int(binary.NativeEndian.Uint16(a[0:2]))
		typ := binary.NativeEndian.Uint16(a[2:4]) & 0x3fff // without NLA_F_NESTED, NLA_F_NET_BYTEORDER
		if l < nlaHdrLen {
			return fmt.Errorf("psample: attribute %d: length %d", typ, l)
		}
		v := a[nlaHdrLen:min(l, len(a))]
		if l > len(a) {
			if typ != AttrData || !s.Truncated {
				return fmt.Errorf("psample: attribute %d: %w", typ, errShort)
			}
			s.Data, s.Has = v, s.Has|HasData
			return nil
		}
		if err := s.attr(typ, v); err != nil {
			return err
		}
		al := (l + 3) &^ 3
		if al > len(a) {
			break
		}
		a = a[al:]
	}
	return nil
}

// attr stores one attribute's value v.
func (s *Sample) attr(typ uint16, v []byte) error {
	var want int
	switch typ {
	case AttrIIfIndex, AttrOIfIndex, AttrOutTC, AttrProto:
		want = 2
	case AttrOrigSize, AttrSampleGroup, AttrGroupSeq, AttrSampleRate:
		want = 4
	case AttrOutTCOcc, AttrLatency, AttrTimestamp:
		want = 8
	case AttrData:
		s.Data, s.Has = v, s.Has|HasData
		return nil
	case AttrSampleProbability:
		s.Has |= HasProbability
		return nil
	default:
		return nil // others (tunnel, cookies of newer kernels) are not used
	}
	if len(v) < want {
		return &attrError{typ: typ, got: len(v), want: want}
	}
	switch typ {
	case AttrIIfIndex:
		s.IIfIndex, s.Has = uint32(binary.NativeEndian.Uint16(v)), s.Has|HasIIf
	case AttrOIfIndex:
		s.OIfIndex, s.Has = uint32(binary.NativeEndian.Uint16(v)), s.Has|HasOIf
	case AttrOutTC:
		s.OutTC, s.Has = uint32(binary.NativeEndian.Uint16(v)), s.Has|HasOutTC
	case AttrProto:
		s.Proto, s.Has = binary.NativeEndian.Uint16(v), s.Has|HasProto
	case AttrOrigSize:
		s.OrigSize, s.Has = binary.NativeEndian.Uint32(v), s.Has|HasOrigSize
	case AttrSampleGroup:
		s.Group, s.Has = binary.NativeEndian.Uint32(v), s.Has|HasGroup
	case AttrGroupSeq:
		s.Seq, s.Has = binary.NativeEndian.Uint32(v), s.Has|HasSeq
	case AttrSampleRate:
		s.Rate, s.Has = binary.NativeEndian.Uint32(v), s.Has|HasRate
	case AttrOutTCOcc:
		s.OutTCOcc, s.Has = binary.NativeEndian.Uint64(v), s.Has|HasOutTCOcc
	case AttrLatency:
		s.Latency, s.Has = binary.NativeEndian.Uint64(v), s.Has|HasLatency
	case AttrTimestamp:
		s.Timestamp, s.Has = binary.NativeEndian.Uint64(v), s.Has|HasTimestamp
	}
	return nil
}

// attrError is an attribute shorter than its type.
type attrError struct {
	typ       uint16
	got, want int
}

func (e *attrError) Error() string {
	return fmt.Sprintf("psample: attribute %d: %d bytes, want %d", e.typ, e.got, e.want)
}

// AppendMessage appends s as the kernel would send it from a family with
// id family (psample_sample_packet's attribute order): for tests and for
// the synthesized ASIC attributes no software path produces.
func AppendMessage(b []byte, family uint16, s *Sample) []byte {
	start := len(b)
	b = binary.NativeEndian.AppendUint32(b, 0) // length, set below
	b = binary.NativeEndian.AppendUint16(b, family)
	b = binary.NativeEndian.AppendUint16(b, 0)
	b = binary.NativeEndian.AppendUint32(b, 0) // seq
	b = binary.NativeEndian.AppendUint32(b, 0) // pid
	b = append(b, CmdSample, 1, 0, 0)
	put := func(typ uint16, v []byte) {
		b = binary.NativeEndian.AppendUint16(b, uint16(nlaHdrLen+len(v)))
		b = binary.NativeEndian.AppendUint16(b, typ)
		b = append(b, v...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	var w [8]byte
	p16 := func(typ uint16, v uint32) { binary.NativeEndian.PutUint16(w[:], uint16(v)); put(typ, w[:2]) }
	p32 := func(typ uint16, v uint32) { binary.NativeEndian.PutUint32(w[:], v); put(typ, w[:4]) }
	p64 := func(typ uint16, v uint64) { binary.NativeEndian.PutUint64(w[:], v); put(typ, w[:8]) }
	if s.Has&HasIIf != 0 {
		p16(AttrIIfIndex, s.IIfIndex)
	}
	if s.Has&HasOIf != 0 {
		p16(AttrOIfIndex, s.OIfIndex)
	}
	if s.Has&HasProbability != 0 {
		p32(AttrSampleRate, s.Probability)
	} else {
		p32(AttrSampleRate, s.Rate)
	}
	p32(AttrOrigSize, s.OrigSize)
	p32(AttrSampleGroup, s.Group)
	p32(AttrGroupSeq, s.Seq)
	if s.Has&HasOutTC != 0 {
		p16(AttrOutTC, s.OutTC)
	}
	if s.Has&HasOutTCOcc != 0 {
		p64(AttrOutTCOcc, s.OutTCOcc)
	}
	if s.Has&HasLatency != 0 {
		p64(AttrLatency, s.Latency)
	}
	if s.Has&HasTimestamp != 0 {
		p64(AttrTimestamp, s.Timestamp)
	}
	if s.Has&HasProto != 0 {
		p16(AttrProto, uint32(s.Proto))
	}
	if len(s.Data) > 0 {
		put(AttrData, s.Data)
	}
	if s.Has&HasProbability != 0 {
		put(AttrSampleProbability, nil)
	}
	binary.NativeEndian.PutUint32(b[start:], uint32(len(b)-start))
	return b
}
