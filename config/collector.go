package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// CollectorAddr is a collector setting taken apart: a literal address, or
// a host name to resolve, and a port.
type CollectorAddr struct {
	IP   netip.Addr // valid for a literal address
	Host string     // the host name otherwise
	Port uint16
}

// ParseCollector checks the syntax of a collector address, host:port
// (port default 6343), without resolving anything. Which literal
// addresses may be collectors is the agent's rule
// (agent.CheckCollectorAddress, applied by daemon.Validate).
func ParseCollector(addr string) (CollectorAddr, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, "6343"
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return CollectorAddr{}, fmt.Errorf("bad port in %q", addr)
	}
	c := CollectorAddr{Port: uint16(p)}
	if ip, err := netip.ParseAddr(host); err == nil {
		c.IP = ip.Unmap()
		return c, nil
	}
	if !validHostName(host) {
		return CollectorAddr{}, fmt.Errorf("%q is neither an IP address nor a host name", host)
	}
	c.Host = host
	return c, nil
}

// validHostName checks RFC 1123 host name syntax.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	label := 0
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case c == '.':
			if label == 0 || h[i-1] == '-' {
				return false
			}
			label = 0
			continue
		case c == '-':
			if label == 0 {
				return false
			}
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		default:
			return false
		}
		if label++; label > 63 {
			return false
		}
	}
	return h[len(h)-1] != '-'
}
