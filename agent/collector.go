package agent

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// ReservedCollectorPorts are UDP ports a collector on this host (a
// loopback address) may not use: the agent's own SNMP (161, traps 162) and
// AgentX (705) ports. Sending sFlow there feeds snmpd garbage.
var ReservedCollectorPorts = []uint16{161, 162, 705}

// CheckCollectorAddress reports why ap cannot be a collector: it must be a
// unicast address (not unspecified, multicast or the limited broadcast
// 255.255.255.255) with a non-zero port, and not a reserved port of this
// host on a loopback address. Subnet-directed broadcasts depend on the
// host's addresses: they are refused by the kernel, since collector
// sockets never have SO_BROADCAST (dialCollector).
func CheckCollectorAddress(ap netip.AddrPort) error {
	a := ap.Addr().Unmap()
	switch {
	case !ap.IsValid() || ap.Port() == 0:
		return fmt.Errorf("collector %s: no address or port", ap)
	case a.IsUnspecified():
		return fmt.Errorf("collector %s: unspecified address, not a collector", ap)
	case a.IsMulticast():
		return fmt.Errorf("collector %s: multicast address, want unicast", ap)
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("collector %s: broadcast address, want unicast", ap)
	case a.IsLoopback():
		for _, p := range ReservedCollectorPorts {
			if ap.Port() == p {
				return fmt.Errorf("collector %s: port %d is this host's SNMP/AgentX port", ap, p)
			}
		}
	}
	return nil
}

// errUnresolved is the send error of a receiver whose host name has not
// been resolved yet.
var errUnresolved = errors.New("collector host name not resolved yet")

// dialCollector opens a connected UDP socket to ap with SO_BROADCAST off
// (Go turns it on for every IPv4 UDP socket): connecting to a broadcast
// address, limited or subnet-directed, then fails with EACCES instead of
// flooding a subnet.
func dialCollector(ap netip.AddrPort) (*net.UDPConn, syscall.RawConn, error) {
	if !ap.IsValid() {
		return nil, nil, errUnresolved
	}
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 0)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("udp", ap.String())
	if err != nil {
		return nil, nil, fmt.Errorf("socket to %s: %w", ap, err)
	}
	conn := c.(*net.UDPConn)
	raw, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, raw, nil
}

// Backoff of the reconnection of a collector socket that could not be
// connected (no route yet, name not resolved).
const (
	redialMin = time.Second
	redialMax = time.Minute
)

// connect makes sure r has a socket, trying again at most every
// redialMin..redialMax (doubling) while connecting fails. It reports
// whether r can send now; while it cannot, the datagrams are counted as
// send errors and their samples as unsent.
func (r *receiverOut) connect() bool {
	if r.conn != nil {
		return true
	}
	now := time.Now()
	if now.Before(r.nextDial) {
		return false
	}
	conn, raw, err := dialCollector(r.cfg.Address)
	if err != nil {
		r.dialWait = min(max(2*r.dialWait, redialMin), redialMax)
		r.nextDial = now.Add(r.dialWait)
		r.dialErr = err
		return false
	}
	r.conn, r.raw, r.dialWait, r.dialErr = conn, raw, 0, nil
	return true
}
