package agentx

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// OID is an SNMP object identifier as a list of sub-identifiers.
type OID []uint32

// maxSubIDs is the largest number of sub-identifiers an SNMP OID may have
// (RFC 2578 section 3.5; RFC 2741 section 5.1 limits n_subid likewise).
const maxSubIDs = 128

// internetPrefix is 1.3.6.1, the part that RFC 2741 section 5.1 lets the
// "prefix" byte stand for.
var internetPrefix = OID{1, 3, 6, 1}

// ParseOID parses dotted decimal notation ("1.3.6.1.4.1.14706", an optional
// leading dot is accepted).
func ParseOID(s string) (OID, error) {
	s = strings.TrimPrefix(s, ".")
	if s == "" {
		return OID{}, nil
	}
	parts := strings.Split(s, ".")
	if len(parts) > maxSubIDs {
		return nil, fmt.Errorf("parse OID %q: %d sub-identifiers, at most %d", s, len(parts), maxSubIDs)
	}
	oid := make(OID, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("parse OID %q: sub-identifier %d: %w", s, i+1, err)
		}
		oid[i] = uint32(v)
	}
	return oid, nil
}

// MustParseOID is ParseOID for constants in code; it panics on a malformed
// literal, so never use it on input.
func MustParseOID(s string) OID {
	oid, err := ParseOID(s)
	if err != nil {
		panic(err)
	}
	return oid
}

// String returns the dotted decimal form, e.g. "1.3.6.1.2.1".
func (o OID) String() string {
	var b strings.Builder
	for i, v := range o {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.FormatUint(uint64(v), 10))
	}
	return b.String()
}

// Compare orders OIDs lexicographically, as SNMP does: it returns -1, 0 or
// +1 when o sorts before, equal to or after p.
func (o OID) Compare(p OID) int {
	n := min(len(o), len(p))
	for i := range n {
		switch {
		case o[i] < p[i]:
			return -1
		case o[i] > p[i]:
			return 1
		}
	}
	switch {
	case len(o) < len(p):
		return -1
	case len(o) > len(p):
		return 1
	}
	return 0
}

// Equal reports whether o and p are the same OID.
func (o OID) Equal(p OID) bool { return o.Compare(p) == 0 }

// HasPrefix reports whether p is a prefix of o (o is in the subtree p).
func (o OID) HasPrefix(p OID) bool {
	return len(o) >= len(p) && o[:len(p)].Equal(p)
}

// Append returns a new OID made of o followed by subs; o is not modified.
func (o OID) Append(subs ...uint32) OID {
	r := make(OID, 0, len(o)+len(subs))
	r = append(r, o...)
	return append(r, subs...)
}

// errShort is returned when a buffer ends inside a field.
var errShort = errors.New("truncated")

// encodedOIDLen is the wire size of oid (RFC 2741 section 5.1), after
// prefix compression.
func encodedOIDLen(oid OID) int {
	_, subs := compressOID(oid)
	return 4 + 4*len(subs)
}

// compressOID splits oid into the RFC 2741 section 5.1 prefix byte and the
// remaining sub-identifiers: 1.3.6.1.x.rest with 0 < x < 256 becomes
// prefix x and rest.
func compressOID(oid OID) (prefix uint8, subs OID) {
	if len(oid) >= 5 && oid[:4].Equal(internetPrefix) && oid[4] > 0 && oid[4] <= 255 {
		return uint8(oid[4]), oid[5:]
	}
	return 0, oid
}

// appendOID appends the RFC 2741 section 5.1 encoding of oid in network
// byte order. include sets the "include" byte (only meaningful for the
// start of a SearchRange).
func appendOID(b []byte, oid OID, include bool) ([]byte, error) {
	prefix, subs := compressOID(oid)
	if len(subs) > maxSubIDs {
		return b, fmt.Errorf("encode OID %s: %d sub-identifiers, at most %d", oid, len(subs), maxSubIDs)
	}
	var inc byte
	if include {
		inc = 1
	}
	b = append(b, byte(len(subs)), prefix, inc, 0)
	for _, v := range subs {
		b = be.AppendUint32(b, v)
	}
	return b, nil
}

// decodeOID reads one RFC 2741 section 5.1 OID from the front of r.
func (r *reader) oid() (oid OID, include bool, err error) {
	hdr, err := r.bytes(4)
	if err != nil {
		return nil, false, fmt.Errorf("OID header: %w", err)
	}
	n, prefix, inc := int(hdr[0]), hdr[1], hdr[2]
	if n > maxSubIDs {
		return nil, false, fmt.Errorf("OID n_subid %d exceeds %d", n, maxSubIDs)
	}
	if inc > 1 {
		return nil, false, fmt.Errorf("OID include byte %d, want 0 or 1", inc)
	}
	if prefix != 0 {
		oid = make(OID, 0, 5+n)
		oid = append(oid, internetPrefix...)
		oid = append(oid, uint32(prefix))
	} else {
		oid = make(OID, 0, n)
	}
	for i := range n {
		v, err := r.uint32()
		if err != nil {
			return nil, false, fmt.Errorf("OID sub-identifier %d of %d: %w", i+1, n, err)
		}
		oid = append(oid, v)
	}
	if len(oid) == 0 {
		oid = nil // the null OID decodes as nil, like an unset OID field
	}
	return oid, inc == 1, nil
}
