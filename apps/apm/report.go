package apm

import (
	"math"
	"math/bits"
	"net/netip"
	"slices"
	"time"
)

// Row is one apmReportTable row: the aggregate of the transactions of one
// flow, client, server or application during one report interval.
type Row struct {
	// App is apmAppDirAppLocalIndex; AppName its directory name.
	App     uint32             `json:"app"`
	AppName string             `json:"appName,omitempty"`
	Type    ResponsivenessType `json:"responsivenessType"`
	// Server is set for flows and servers aggregation, zero otherwise.
	Server netip.Addr `json:"server,omitzero"`
	// Client is set for flows and clients aggregation, zero otherwise;
	// ClientID is its apmNameClientID (0 when there is no client).
	Client   netip.Addr `json:"client,omitzero"`
	ClientID uint32     `json:"clientID,omitempty"`

	// The apmReportTable columns. Weighted sums saturate at the
	// Unsigned32 maximum. Mean, Min, Max and the buckets cover successful
	// transactions only (apmReportResponsivenessMean..B7); they are 0
	// when there were none.
	TransactionCount       uint32    `json:"transactionCount"`
	SuccessfulTransactions uint32    `json:"successfulTransactions"`
	ResponsivenessMean     uint32    `json:"responsivenessMean"`
	ResponsivenessMin      uint32    `json:"responsivenessMin"`
	ResponsivenessMax      uint32    `json:"responsivenessMax"`
	ResponsivenessB        [7]uint32 `json:"responsivenessB"` // B1..B7

	index []uint32 // MIB index after apmReportControlIndex, apmReportIndex
}

// Report is one report of a report control: the rows of one interval,
// sorted in MIB index order. Reports are immutable; do not modify Rows.
type Report struct {
	Control     uint32        `json:"control"`
	Number      uint32        `json:"number"` // apmReportIndex
	Aggregation Aggregation   `json:"aggregation"`
	Start       time.Time     `json:"start"`
	Interval    time.Duration `json:"interval"`
	Rows        []Row         `json:"rows"`
}

// rowKey identifies a row inside one control's interval. Fields the
// control's aggregation does not use are zero. Addresses are stored as
// plain bytes (with their family) rather than netip.Addr so the map hashes
// and compares flat memory.
type rowKey struct {
	app    uint32
	typ    ResponsivenessType
	server keyAddr
	client keyAddr
}

// keyAddr is an unmapped, zoneless address in comparable form; family 0
// is "no address".
type keyAddr struct {
	family uint8 // 0, 4 or 6
	b      [16]byte
}

func toKeyAddr(a netip.Addr) keyAddr {
	if a.Is4() {
		return keyAddr{family: 4, b: a.As16()}
	}
	return keyAddr{family: 6, b: a.As16()}
}

func (k keyAddr) addr() netip.Addr {
	switch k.family {
	case 4:
		return netip.AddrFrom16(k.b).Unmap()
	case 6:
		return netip.AddrFrom16(k.b)
	}
	return netip.Addr{}
}

// accum accumulates one row. Counts are weighted; the responsiveness sum
// is a 128-bit weighted sum so no realistic weight can overflow it.
type accum struct {
	count, success uint64
	sumHi, sumLo   uint64
	min, max       uint32
	buckets        [7]uint64
}

func (a *accum) add(success bool, resp uint32, bucket int, w uint64) {
	a.count = satAdd(a.count, w)
	if !success {
		return
	}
	if a.success == 0 || resp < a.min {
		a.min = resp
	}
	if resp > a.max {
		a.max = resp
	}
	a.success = satAdd(a.success, w)
	hi, lo := bits.Mul64(uint64(resp), w)
	var c uint64
	a.sumLo, c = bits.Add64(a.sumLo, lo, 0)
	a.sumHi, _ = bits.Add64(a.sumHi, hi, c)
	a.buckets[bucket] = satAdd(a.buckets[bucket], w)
}

// mean is the weighted arithmetic mean of the successful responsiveness
// values, rounded to the nearest integer (halves up).
func (a *accum) mean() uint32 {
	if a.success == 0 {
		return 0
	}
	// The true sum of weights equals a.success unless it saturated, which
	// needs 2^64 weight: not reachable; the mean is <= max < 2^32, so the
	// quotient fits and Div64's precondition hi < divisor holds.
	lo, c := bits.Add64(a.sumLo, a.success/2, 0)
	hi := a.sumHi + c
	if hi >= a.success {
		return a.max
	}
	q, _ := bits.Div64(hi, lo, a.success)
	return sat32(q)
}

func satAdd(a, b uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	if c != 0 {
		return math.MaxUint64
	}
	return s
}

func sat32(v uint64) uint32 {
	if v > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(v)
}

// rowIndex appends the apmReportEntry INDEX components after
// apmReportControlIndex and apmReportIndex:
//
//	apmAppDirAppLocalIndex, apmAppDirResponsivenessType,
//	protocolDirLocalIndex, apmReportServerAddress, apmNameClientID
//
// apmReportServerAddress is a ProtocolDirNetworkAddress (non-IMPLIED
// OCTET STRING): a length sub-identifier followed by one sub-identifier
// per octet (4 for IPv4, 16 for IPv6, in network byte order). Without a
// server (clients and applications aggregation) protocolDirLocalIndex is
// 0 and the address is the empty string (a single 0). Without a client
// (servers and applications aggregation) apmNameClientID is 0.
func rowIndex(dst []uint32, app uint32, typ ResponsivenessType, proto uint32, server netip.Addr, clientID uint32) []uint32 {
	dst = append(dst, app, uint32(typ))
	switch {
	case !server.IsValid():
		dst = append(dst, 0, 0)
	case server.Is4():
		a := server.As4()
		dst = append(dst, proto, 4, uint32(a[0]), uint32(a[1]), uint32(a[2]), uint32(a[3]))
	default:
		a := server.As16()
		dst = append(dst, proto, 16)
		for _, b := range a {
			dst = append(dst, uint32(b))
		}
	}
	return append(dst, clientID)
}

// compareIndex orders OIDs the SNMP way: sub-identifier by
// sub-identifier, a proper prefix first.
func compareIndex(a, b []uint32) int { return slices.Compare(a, b) }
