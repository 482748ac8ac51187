package daemon

import (
	"net/netip"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/agentaddr"
)

// TestPreferCIDRs: agent.cidr as hsflowd applies it.
func TestPreferCIDRs(t *testing.T) {
	ha := func(idx int, a string) agentaddr.HostAddr {
		return agentaddr.HostAddr{IfIndex: idx, IfName: "e", Up: true, Addr: netip.MustParseAddr(a)}
	}
	addrs := []agentaddr.HostAddr{ha(5, "10.0.0.1"), ha(4, "198.18.99.1"), ha(3, "198.18.1.1"), ha(2, "192.0.2.1")}
	choose := func(cidrs ...string) string {
		s := config.Settings{AgentCIDR: cidrs}
		a, _, err := agentaddr.Choose("", "", preferCIDRs(addrs, s.AgentCIDRs()))
		if err != nil {
			return err.Error()
		}
		return a.String()
	}
	for _, tc := range []struct {
		cidrs []string
		want  string
	}{
		{nil, "192.0.2.1"}, // the usual ranking: global before private
		{[]string{"198.18.0.0/15"}, "198.18.1.1"},
		{[]string{"10.0.0.0/8", "198.18.0.0/15"}, "10.0.0.1"},        // earlier line wins
		{[]string{"198.18.0.0/15", "!198.18.1.0/24"}, "198.18.99.1"}, // excluded
		{[]string{"!192.0.2.0/24"}, "198.18.1.1"},                    // only exclusions: the rest ranked
		{[]string{"203.0.113.0/24"}, "192.0.2.1"},                    // nothing matches: the usual ranking
	} {
		if got := choose(tc.cidrs...); got != tc.want {
			t.Errorf("agent.cidr %q: %s, want %s", tc.cidrs, got, tc.want)
		}
	}
}
