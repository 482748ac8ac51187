package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// DefaultAPIAddress is the conventional address of the local JSON API:
// loopback and the port hsflowd's json module listens on (36343).
const DefaultAPIAddress = "127.0.0.1:36343"

// ListenJSON opens the UDP socket of the local JSON API. Only loopback
// addresses are accepted: the API has no authentication, so it must not be
// reachable from the network.
func ListenJSON(addr string) (*net.UDPConn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("app API address %q: want a loopback IP:port (e.g. %s): %w", addr, DefaultAPIAddress, err)
	}
	if !ap.Addr().Unmap().IsLoopback() {
		return nil, fmt.Errorf("app API address %q: refusing a non-loopback address (the API has no authentication)", addr)
	}
	return listenUDP(ap)
}

// ListenJSONExposed opens the API socket on any IP:port, loopback or not.
// The API has no authentication: only for an operator's explicit opt-in
// (the daemon's app_api_allow_remote, which also logs a warning).
func ListenJSONExposed(addr string) (*net.UDPConn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("app API address %q: want IP:port: %w", addr, err)
	}
	return listenUDP(ap)
}

func listenUDP(ap netip.AddrPort) (*net.UDPConn, error) {
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
	if err != nil {
		return nil, fmt.Errorf("app API: %w", err)
	}
	return conn, nil
}

// ServeJSON reads API messages (one JSON object per datagram) from conn
// and submits them until ctx ends, then closes conn. Each datagram is
// parsed on its own: a bad one is counted and dropped without affecting
// the others. A flood is bounded by the socket's receive buffer (the
// kernel drops beyond it) and the engine's queue (counted drops).
func (e *Engine) ServeJSON(ctx context.Context, conn *net.UDPConn) error {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	buf := make([]byte, MaxMessageSize+1)
	for {
		n, _, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("app API: read: %w", err)
		}
		// A datagram that filled the buffer may have been truncated:
		// it is larger than MaxMessageSize.
		e.SubmitJSON(buf[:n])
	}
}

// SubmitJSON parses one API message and submits its sample. Rejections
// are counted and returned; b is not retained.
func (e *Engine) SubmitJSON(b []byte) error {
	m, err := ParseJSON(b)
	if err != nil {
		e.Reject(err)
		return err
	}
	// ParseJSON has validated the sample.
	switch {
	case m.Flow != nil:
		e.resolveFlow(m.Flow)
		return e.queueFlow(m.Flow)
	case m.RTMetric != nil:
		return e.SubmitRT(m.RTMetric)
	case m.RTFlow != nil:
		return e.SubmitRT(m.RTFlow)
	}
	e.resolveCounters(m.Counters)
	return e.queueCounters(m.Counters)
}
