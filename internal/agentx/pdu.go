package agentx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// be is the byte order we send: network byte order (RFC 2741 section 6.1,
// NETWORK_BYTE_ORDER set on every PDU we emit).
var be = binary.BigEndian

// PDUType is h.type of the AgentX header (RFC 2741 section 6.1).
type PDUType uint8

// AgentX PDU types, RFC 2741 section 6.1.
const (
	PDUOpen            PDUType = 1
	PDUClose           PDUType = 2
	PDURegister        PDUType = 3
	PDUUnregister      PDUType = 4
	PDUGet             PDUType = 5
	PDUGetNext         PDUType = 6
	PDUGetBulk         PDUType = 7
	PDUTestSet         PDUType = 8
	PDUCommitSet       PDUType = 9
	PDUUndoSet         PDUType = 10
	PDUCleanupSet      PDUType = 11
	PDUNotify          PDUType = 12
	PDUPing            PDUType = 13
	PDUIndexAllocate   PDUType = 14
	PDUIndexDeallocate PDUType = 15
	PDUAddAgentCaps    PDUType = 16
	PDURemoveAgentCaps PDUType = 17
	PDUResponse        PDUType = 18
)

var pduTypeNames = map[PDUType]string{
	PDUOpen: "Open", PDUClose: "Close", PDURegister: "Register",
	PDUUnregister: "Unregister", PDUGet: "Get", PDUGetNext: "GetNext",
	PDUGetBulk: "GetBulk", PDUTestSet: "TestSet", PDUCommitSet: "CommitSet",
	PDUUndoSet: "UndoSet", PDUCleanupSet: "CleanupSet", PDUNotify: "Notify",
	PDUPing: "Ping", PDUIndexAllocate: "IndexAllocate",
	PDUIndexDeallocate: "IndexDeallocate", PDUAddAgentCaps: "AddAgentCaps",
	PDURemoveAgentCaps: "RemoveAgentCaps", PDUResponse: "Response",
}

// String returns the PDU type's name.
func (t PDUType) String() string {
	if s, ok := pduTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("PDUType(%d)", uint8(t))
}

// hasContext reports whether a PDU of this type carries the optional
// context octet string when NON_DEFAULT_CONTEXT is set (RFC 2741 section
// 6.1: not on Open, Close, Response, CommitSet, UndoSet, CleanupSet).
func (t PDUType) hasContext() bool {
	switch t {
	case PDUOpen, PDUClose, PDUResponse, PDUCommitSet, PDUUndoSet, PDUCleanupSet:
		return false
	}
	return true
}

// Flags is h.flags of the AgentX header (RFC 2741 section 6.1).
type Flags uint8

// Header flag bits, RFC 2741 section 6.1.
const (
	FlagInstanceRegistration Flags = 1 << 0
	FlagNewIndex             Flags = 1 << 1
	FlagAnyIndex             Flags = 1 << 2
	FlagNonDefaultContext    Flags = 1 << 3
	FlagNetworkByteOrder     Flags = 1 << 4
)

// CloseReason is r.reason of a Close PDU (RFC 2741 section 6.2.2).
type CloseReason uint8

// Close reasons, RFC 2741 section 6.2.2.
const (
	ReasonOther         CloseReason = 1
	ReasonParseError    CloseReason = 2
	ReasonProtocolError CloseReason = 3
	ReasonTimeouts      CloseReason = 4
	ReasonShutdown      CloseReason = 5
	ReasonByManager     CloseReason = 6
)

// HeaderLen is the fixed size of the AgentX PDU header.
const HeaderLen = 20

// MaxPayload bounds h.payload_length we accept. RFC 2741 sets no limit;
// this stops a corrupt length from making us allocate gigabytes. SNMP
// messages are bounded by the master's max message size (net-snmp: 64 KiB
// at most on UDP), so 1 MiB is ample.
const MaxPayload = 1 << 20

// Header is the 20-octet AgentX PDU header (RFC 2741 section 6.1).
type Header struct {
	Version       uint8
	Type          PDUType
	Flags         Flags
	SessionID     uint32
	TransactionID uint32
	PacketID      uint32
	// PayloadLength is filled in by decoding; encoding computes it.
	PayloadLength uint32
}

// SearchRange is an RFC 2741 section 5.2 SearchRange: Start (inclusive if
// Include) up to End (exclusive; empty means unbounded).
type SearchRange struct {
	Start   OID
	Include bool
	End     OID
}

// PDU is one decoded AgentX PDU. Which payload fields are used depends on
// Header.Type; the others are zero.
type PDU struct {
	Header Header
	// Context is the non-default context (FlagNonDefaultContext set).
	Context string

	// Open: Timeout (seconds), ID and Descr. Register: Timeout too.
	Timeout uint8
	ID      OID
	Descr   string

	// Close.
	Reason CloseReason

	// Register and Unregister (RFC 2741 sections 6.2.3, 6.2.4).
	Priority   uint8
	RangeSubID uint8
	Subtree    OID
	UpperBound uint32

	// GetBulk (RFC 2741 section 6.2.7).
	NonRepeaters   uint16
	MaxRepetitions uint16

	// Get, GetNext, GetBulk.
	Ranges []SearchRange

	// TestSet, Notify, Response.
	VarBinds []Variable

	// Response (RFC 2741 section 6.2.16).
	SysUpTime uint32
	Error     ErrorStatus
	Index     uint16
}

// reader decodes fields from a byte slice in the byte order chosen by the
// PDU's NETWORK_BYTE_ORDER flag. It never panics: every read checks bounds.
type reader struct {
	buf   []byte
	order binary.ByteOrder
}

func (r *reader) bytes(n int) ([]byte, error) {
	if n < 0 || len(r.buf) < n {
		return nil, errShort
	}
	b := r.buf[:n]
	r.buf = r.buf[n:]
	return b, nil
}

func (r *reader) uint8() (uint8, error) {
	b, err := r.bytes(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (r *reader) uint16() (uint16, error) {
	b, err := r.bytes(2)
	if err != nil {
		return 0, err
	}
	return r.order.Uint16(b), nil
}

func (r *reader) uint32() (uint32, error) {
	b, err := r.bytes(4)
	if err != nil {
		return 0, err
	}
	return r.order.Uint32(b), nil
}

func (r *reader) uint64() (uint64, error) {
	b, err := r.bytes(8)
	if err != nil {
		return 0, err
	}
	return r.order.Uint64(b), nil
}

// octets reads an RFC 2741 section 5.3 Octet String: a 4-byte length, the
// octets, and zero padding to a multiple of 4. The result is a copy.
func (r *reader) octets() ([]byte, error) {
	n, err := r.uint32()
	if err != nil {
		return nil, fmt.Errorf("octet string length: %w", err)
	}
	if uint64(n) > uint64(len(r.buf)) {
		return nil, fmt.Errorf("octet string length %d exceeds the %d bytes left", n, len(r.buf))
	}
	padded := (uint64(n) + 3) &^ 3
	if padded > uint64(len(r.buf)) {
		return nil, fmt.Errorf("octet string padding: %w", errShort)
	}
	b, _ := r.bytes(int(padded))
	out := make([]byte, n)
	copy(out, b)
	return out, nil
}

// appendOctets appends an RFC 2741 section 5.3 Octet String with padding.
func appendOctets(b, s []byte) []byte {
	b = be.AppendUint32(b, uint32(len(s)))
	b = append(b, s...)
	for range (4 - len(s)%4) % 4 {
		b = append(b, 0)
	}
	return b
}

// DecodeHeader decodes the 20-byte AgentX header at the front of b,
// honouring its NETWORK_BYTE_ORDER flag.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, fmt.Errorf("agentx header: %d bytes, want %d", len(b), HeaderLen)
	}
	h := Header{Version: b[0], Type: PDUType(b[1]), Flags: Flags(b[2])}
	if h.Version != 1 {
		return h, fmt.Errorf("agentx header: version %d, want 1", h.Version)
	}
	if _, ok := pduTypeNames[h.Type]; !ok {
		return h, fmt.Errorf("agentx header: unknown PDU type %d", b[1])
	}
	order := byteOrder(h.Flags)
	h.SessionID = order.Uint32(b[4:])
	h.TransactionID = order.Uint32(b[8:])
	h.PacketID = order.Uint32(b[12:])
	h.PayloadLength = order.Uint32(b[16:])
	if h.PayloadLength > MaxPayload {
		return h, fmt.Errorf("agentx header: payload length %d exceeds %d", h.PayloadLength, MaxPayload)
	}
	if h.PayloadLength%4 != 0 {
		// Every AgentX payload field is a multiple of 4 octets (RFC 2741
		// section 5: all encodings are 4-byte aligned).
		return h, fmt.Errorf("agentx header: payload length %d is not a multiple of 4", h.PayloadLength)
	}
	return h, nil
}

func byteOrder(f Flags) binary.ByteOrder {
	if f&FlagNetworkByteOrder != 0 {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// DecodePDU decodes one complete AgentX PDU (header and payload, nothing
// more). It checks every length and returns an error, never panics, on
// malformed input.
func DecodePDU(b []byte) (*PDU, error) {
	h, err := DecodeHeader(b)
	if err != nil {
		return nil, err
	}
	if uint64(len(b)-HeaderLen) != uint64(h.PayloadLength) {
		return nil, fmt.Errorf("agentx %s: payload is %d bytes, header says %d", h.Type, len(b)-HeaderLen, h.PayloadLength)
	}
	p := &PDU{Header: h}
	r := &reader{buf: b[HeaderLen:], order: byteOrder(h.Flags)}
	if err := p.decodePayload(r); err != nil {
		return nil, fmt.Errorf("agentx %s: %w", h.Type, err)
	}
	if len(r.buf) != 0 {
		return nil, fmt.Errorf("agentx %s: %d trailing bytes", h.Type, len(r.buf))
	}
	return p, nil
}

// ErrPayload marks a PDU whose header was valid but whose payload was not;
// the session answers such a request with parseError instead of closing.
var ErrPayload = errors.New("malformed payload")

func (p *PDU) decodePayload(r *reader) error {
	t := p.Header.Type
	if t.hasContext() && p.Header.Flags&FlagNonDefaultContext != 0 {
		c, err := r.octets()
		if err != nil {
			return fmt.Errorf("context: %w", err)
		}
		p.Context = string(c)
	}
	switch t {
	case PDUOpen:
		var err error
		if p.Timeout, err = r.uint8(); err != nil {
			return fmt.Errorf("timeout: %w", err)
		}
		if _, err := r.bytes(3); err != nil {
			return fmt.Errorf("reserved: %w", err)
		}
		if p.ID, _, err = r.oid(); err != nil {
			return fmt.Errorf("id: %w", err)
		}
		d, err := r.octets()
		if err != nil {
			return fmt.Errorf("descr: %w", err)
		}
		p.Descr = string(d)
	case PDUClose:
		b, err := r.bytes(4)
		if err != nil {
			return fmt.Errorf("reason: %w", err)
		}
		p.Reason = CloseReason(b[0])
	case PDURegister, PDUUnregister:
		b, err := r.bytes(4)
		if err != nil {
			return fmt.Errorf("registration fields: %w", err)
		}
		if t == PDURegister {
			p.Timeout = b[0]
		}
		p.Priority, p.RangeSubID = b[1], b[2]
		if p.Subtree, _, err = r.oid(); err != nil {
			return fmt.Errorf("subtree: %w", err)
		}
		if p.RangeSubID != 0 {
			if int(p.RangeSubID) > len(p.Subtree) {
				return fmt.Errorf("range_subid %d beyond subtree length %d", p.RangeSubID, len(p.Subtree))
			}
			if p.UpperBound, err = r.uint32(); err != nil {
				return fmt.Errorf("upper_bound: %w", err)
			}
		}
	case PDUGet, PDUGetNext, PDUGetBulk:
		if t == PDUGetBulk {
			var err error
			if p.NonRepeaters, err = r.uint16(); err != nil {
				return fmt.Errorf("non_repeaters: %w", err)
			}
			if p.MaxRepetitions, err = r.uint16(); err != nil {
				return fmt.Errorf("max_repetitions: %w", err)
			}
		}
		for len(r.buf) > 0 {
			start, inc, err := r.oid()
			if err != nil {
				return fmt.Errorf("search range %d start: %w", len(p.Ranges)+1, err)
			}
			end, _, err := r.oid()
			if err != nil {
				return fmt.Errorf("search range %d end: %w", len(p.Ranges)+1, err)
			}
			p.Ranges = append(p.Ranges, SearchRange{Start: start, Include: inc, End: end})
		}
	case PDUTestSet, PDUNotify:
		return p.decodeVarBinds(r)
	case PDUResponse:
		var err error
		if p.SysUpTime, err = r.uint32(); err != nil {
			return fmt.Errorf("sysUpTime: %w", err)
		}
		e, err := r.uint16()
		if err != nil {
			return fmt.Errorf("error: %w", err)
		}
		p.Error = ErrorStatus(e)
		if p.Index, err = r.uint16(); err != nil {
			return fmt.Errorf("index: %w", err)
		}
		return p.decodeVarBinds(r)
	case PDUCommitSet, PDUUndoSet, PDUCleanupSet, PDUPing:
		// Header (and context for Ping) only.
	default:
		// IndexAllocate, IndexDeallocate, AddAgentCaps, RemoveAgentCaps
		// are never sent to a subagent and never sent by this package.
		return fmt.Errorf("PDU type not supported by this subagent")
	}
	return nil
}

func (p *PDU) decodeVarBinds(r *reader) error {
	for len(r.buf) > 0 {
		v, err := r.varBind()
		if err != nil {
			return fmt.Errorf("varbind %d: %w", len(p.VarBinds)+1, err)
		}
		p.VarBinds = append(p.VarBinds, v)
	}
	return nil
}

// Encode returns the wire form of p in network byte order
// (FlagNetworkByteOrder is set; Header.PayloadLength is computed).
func (p *PDU) Encode() ([]byte, error) {
	return p.AppendEncode(make([]byte, 0, 64))
}

// AppendEncode appends the wire form of p to b (see Encode).
func (p *PDU) AppendEncode(b []byte) ([]byte, error) {
	h := p.Header
	if _, ok := pduTypeNames[h.Type]; !ok {
		return b, fmt.Errorf("encode agentx: unknown PDU type %d", h.Type)
	}
	flags := h.Flags | FlagNetworkByteOrder
	if p.Context != "" && h.Type.hasContext() {
		flags |= FlagNonDefaultContext
	}
	start := len(b)
	b = append(b, 1, byte(h.Type), byte(flags), 0)
	b = be.AppendUint32(b, h.SessionID)
	b = be.AppendUint32(b, h.TransactionID)
	b = be.AppendUint32(b, h.PacketID)
	b = be.AppendUint32(b, 0) // payload length, patched below
	b, err := p.appendPayload(b, flags)
	if err != nil {
		return b[:start], fmt.Errorf("encode agentx %s: %w", h.Type, err)
	}
	n := len(b) - start - HeaderLen
	if n > MaxPayload {
		return b[:start], fmt.Errorf("encode agentx %s: payload %d bytes exceeds %d", h.Type, n, MaxPayload)
	}
	be.PutUint32(b[start+16:], uint32(n))
	return b, nil
}

func (p *PDU) appendPayload(b []byte, flags Flags) ([]byte, error) {
	t := p.Header.Type
	if t.hasContext() && flags&FlagNonDefaultContext != 0 {
		b = appendOctets(b, []byte(p.Context))
	}
	var err error
	switch t {
	case PDUOpen:
		b = append(b, p.Timeout, 0, 0, 0)
		if b, err = appendOID(b, p.ID, false); err != nil {
			return b, err
		}
		b = appendOctets(b, []byte(p.Descr))
	case PDUClose:
		b = append(b, byte(p.Reason), 0, 0, 0)
	case PDURegister, PDUUnregister:
		timeout := p.Timeout
		if t == PDUUnregister {
			timeout = 0
		}
		b = append(b, timeout, p.Priority, p.RangeSubID, 0)
		if b, err = appendOID(b, p.Subtree, false); err != nil {
			return b, err
		}
		if p.RangeSubID != 0 {
			b = be.AppendUint32(b, p.UpperBound)
		}
	case PDUGet, PDUGetNext, PDUGetBulk:
		if t == PDUGetBulk {
			b = be.AppendUint16(b, p.NonRepeaters)
			b = be.AppendUint16(b, p.MaxRepetitions)
		}
		for _, sr := range p.Ranges {
			if b, err = appendOID(b, sr.Start, sr.Include); err != nil {
				return b, err
			}
			if b, err = appendOID(b, sr.End, false); err != nil {
				return b, err
			}
		}
	case PDUTestSet, PDUNotify:
		return appendVarBinds(b, p.VarBinds)
	case PDUResponse:
		b = be.AppendUint32(b, p.SysUpTime)
		b = be.AppendUint16(b, uint16(p.Error))
		b = be.AppendUint16(b, p.Index)
		return appendVarBinds(b, p.VarBinds)
	case PDUCommitSet, PDUUndoSet, PDUCleanupSet, PDUPing:
	default:
		return b, fmt.Errorf("PDU type not supported by this subagent")
	}
	return b, nil
}

func appendVarBinds(b []byte, vbs []Variable) ([]byte, error) {
	var err error
	for i, v := range vbs {
		if b, err = appendVarBind(b, v); err != nil {
			return b, fmt.Errorf("varbind %d: %w", i+1, err)
		}
	}
	return b, nil
}

// ReadPDU reads one PDU from r. A header error or an I/O error is returned
// as is (the stream is then out of sync and must be closed); a payload
// decoding error is returned together with the header, wrapped in
// ErrPayload, so the caller can answer it with parseError (RFC 2741
// section 7.1.1) and carry on.
func ReadPDU(r io.Reader) (*PDU, error) {
	buf := make([]byte, HeaderLen, HeaderLen+64)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("read agentx header: %w", err)
	}
	h, err := DecodeHeader(buf)
	if err != nil {
		return nil, err
	}
	buf = append(buf, make([]byte, h.PayloadLength)...)
	if _, err := io.ReadFull(r, buf[HeaderLen:]); err != nil {
		return nil, fmt.Errorf("read agentx %s payload (%d bytes): %w", h.Type, h.PayloadLength, err)
	}
	p, err := DecodePDU(buf)
	if err != nil {
		return &PDU{Header: h}, fmt.Errorf("%w: %w", ErrPayload, err)
	}
	return p, nil
}
