// Package collectoraddr reads collector addresses ("host:port", port 6343
// by default) and resolves collector host names in the background with
// backoff, so that no port change or reload waits on DNS and a name that
// stops resolving keeps its last address.
package collectoraddr

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/config"
)

// Parse checks the syntax of host:port (config.ParseCollector, port
// default 6343) without resolving anything, and checks a literal address
// with agent.CheckCollectorAddress (unicast, not this host's SNMP ports).
// A name of this host (localhost, *.localhost: RFC 6761 has them always
// resolve to loopback) is checked as the loopback address it is, so
// "localhost:161" is refused with the settings; any other name's
// addresses are checked once resolved (Resolver.Get).
func Parse(addr string) (config.CollectorAddr, error) {
	c, err := config.ParseCollector(addr)
	if err != nil {
		return c, err
	}
	if c.IP.IsValid() {
		return c, agent.CheckCollectorAddress(netip.AddrPortFrom(c.IP, c.Port))
	}
	if isLocalhost(c.Host) {
		if err := agent.CheckCollectorAddress(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), c.Port)); err != nil {
			return c, fmt.Errorf("%s is this host: %w", c.Host, err)
		}
	}
	return c, nil
}

// isLocalhost reports whether host is a localhost name (RFC 6761 section
// 6.3), with or without the root's dot.
func isLocalhost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}
