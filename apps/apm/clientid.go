package apm

import (
	"encoding/binary"
	"net/netip"
	"sync"
)

// firstIPv4ClientID is the smallest client ID of an IPv4 client.
//
// apmNameClientID (RmonClientID) is assigned "using an
// implementation-specific algorithm". We use the one the APM-MIB example
// index suggests (…4.192.168.1.2.3232235788, client ID = 192.168.1.12 as
// a 32-bit number): an IPv4 client's ID is its address in network byte
// order, which needs no state and never changes. 0.0.0.0/8 cannot be a
// source address (RFC 1122 3.2.1.3), so IDs 1..0x00FFFFFF are free and
// are handed out in order to IPv6 clients, which are remembered for the
// lifetime of the engine (the MIB wants long-lived IDs). ID 0 means "no
// client" in the report index.
const firstIPv4ClientID = 1 << 24

// clientIDs assigns and remembers client IDs. It is used only when a
// report is produced, never on the Add path.
type clientIDs struct {
	mu     sync.Mutex
	max    uint32 // most IPv6 clients to remember
	byAddr map[netip.Addr]uint32
	byID   []netip.Addr // IPv6 client with ID i+1
}

func newClientIDs(max uint32) *clientIDs {
	return &clientIDs{max: max, byAddr: make(map[netip.Addr]uint32)}
}

// id returns the client ID of a (an unmapped, zoneless address); false when
// a is an IPv6 client and the IPv6 ID space configured is exhausted.
func (c *clientIDs) id(a netip.Addr) (uint32, bool) {
	if a.Is4() {
		b := a.As4()
		return binary.BigEndian.Uint32(b[:]), true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.byAddr[a]; ok {
		return id, true
	}
	if uint32(len(c.byID)) >= c.max {
		return 0, false
	}
	c.byID = append(c.byID, a)
	id := uint32(len(c.byID))
	c.byAddr[a] = id
	return id, true
}

// addr returns the client address of an ID (for apmNameTable).
func (c *clientIDs) addr(id uint32) (netip.Addr, bool) {
	if id >= firstIPv4ClientID {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], id)
		return netip.AddrFrom4(b), true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == 0 || int(id) > len(c.byID) {
		return netip.Addr{}, false
	}
	return c.byID[id-1], true
}
