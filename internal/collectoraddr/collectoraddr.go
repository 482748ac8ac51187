// Package collectoraddr reads collector addresses ("host:port", port 6343
// by default) and resolves collector host names in the background with
// backoff, so that no port change or reload waits on DNS and a name that
// stops resolving keeps its last address (issue 10, defect 3).
package collectoraddr

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/sflowswitchd/sflowswitchd/agent"
)

// Addr is a collector setting taken apart: a literal address, or a host
// name to resolve, and a port.
type Addr struct {
	IP   netip.Addr // valid for a literal address
	Host string     // the host name otherwise
	Port uint16
}

// Parse checks the syntax of host:port (port default 6343)
// without resolving anything, and checks a literal address with
// agent.CheckCollectorAddress (unicast, not this host's SNMP ports).
func Parse(addr string) (Addr, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, "6343"
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return Addr{}, fmt.Errorf("bad port in %q", addr)
	}
	c := Addr{Port: uint16(p)}
	if ip, err := netip.ParseAddr(host); err == nil {
		c.IP = ip.Unmap()
		return c, agent.CheckCollectorAddress(netip.AddrPortFrom(c.IP, c.Port))
	}
	if !validHostName(host) {
		return Addr{}, fmt.Errorf("%q is neither an IP address nor a host name", host)
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
