// Package collectoraddr reads collector addresses ("host:port", port 6343
// by default) and resolves collector host names in the background with
// backoff, so that no port change or reload waits on DNS and a name that
// stops resolving keeps its last address (issue 10, defect 3).
package collectoraddr

import (
	"net/netip"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/config"
)

// Parse checks the syntax of host:port (config.ParseCollector, port
// default 6343) without resolving anything, and checks a literal address
// with agent.CheckCollectorAddress (unicast, not this host's SNMP ports).
func Parse(addr string) (config.CollectorAddr, error) {
	c, err := config.ParseCollector(addr)
	if err != nil || !c.IP.IsValid() {
		return c, err
	}
	return c, agent.CheckCollectorAddress(netip.AddrPortFrom(c.IP, c.Port))
}
