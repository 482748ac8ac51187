package collectoraddr

import (
	"net/netip"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/config"
)

// TestParse: literal addresses, host names and the default port; the
// addresses agent.CheckCollectorAddress refuses (not unicast, this host's
// SNMP ports) and bad syntax are refused.
func TestParse(t *testing.T) {
	for in, want := range map[string]config.CollectorAddr{
		"198.18.0.1":              {IP: netip.MustParseAddr("198.18.0.1"), Port: 6343},
		"[::ffff:198.18.0.1]:7":   {IP: netip.MustParseAddr("198.18.0.1"), Port: 7},
		"[2001:db8::1]:6343":      {IP: netip.MustParseAddr("2001:db8::1"), Port: 6343},
		"collector-1.example.org": {Host: "collector-1.example.org", Port: 6343},
		"collector.invalid:9999":  {Host: "collector.invalid", Port: 9999},
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"0.0.0.0", "[::]:6343", "224.0.0.1:6343", "127.0.0.1:161", "127.0.0.1:705",
		"bad_host!:6343", "-x.example:6343", "x-.example", "198.18.0.1:0", "198.18.0.1:99999", ""} {
		if a, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %+v, accepted", bad, a)
		}
	}
}
