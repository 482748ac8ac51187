package testutil

import (
	"bytes"
	"net"
	"net/netip"
	"sync"
	"testing"
)

// Collector is a UDP listener on loopback that keeps every datagram it
// receives, read in the background until the test ends.
type Collector struct {
	conn *net.UDPConn
	mu   sync.Mutex
	got  [][]byte
}

// NewCollector starts a Collector on an ephemeral port of 127.0.0.1 with
// an 8 MiB receive buffer; it is closed in t.Cleanup.
func NewCollector(t testing.TB) *Collector {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadBuffer(8 << 20); err != nil {
		t.Fatal(err)
	}
	c := &Collector{conn: conn}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			c.mu.Lock()
			c.got = append(c.got, bytes.Clone(buf[:n]))
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return c
}

// Addr is the collector's address.
func (c *Collector) Addr() netip.AddrPort { return c.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// Datagrams returns a copy of the list of datagrams received so far.
func (c *Collector) Datagrams() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.got...)
}
