package main

import (
	"strings"
	"testing"
)

// TestCollectorAddressesChecked: a collector
// must be a unicast address and not this host's SNMP/AgentX port; a host
// name is checked for syntax only and resolved later, in the background
// (a name that does not resolve never blocks the daemon),
// except the names of this host (localhost:161 and
// localhost:705 sent sFlow into snmpd and AgentX).
func TestCollectorAddressesChecked(t *testing.T) {
	for _, bad := range []string{
		"0.0.0.0", "0.0.0.0:6343", "[::]:6343",
		"255.255.255.255", "224.0.0.1:6343", "[ff02::1]:6343",
		"127.0.0.1:161", "127.0.0.1:705", "[::1]:162",
		"bad_host!:6343", "-x.example:6343", "198.18.0.1:0",
		"localhost:161", "localhost:705", "LOCALHOST.:162", "snmp.localhost:705",
	} {
		_, err := loadArgs(t, "-collector", bad)
		if err == nil {
			t.Errorf("collector %q accepted", bad)
			continue
		}
		if !strings.Contains(err.Error(), "collector") {
			t.Errorf("collector %q: error %q does not name the collector", bad, err)
		}
	}
	for _, good := range []string{
		"198.18.0.1", "127.0.0.1:6343", "[2001:db8::1]:6343", "collector.invalid:6343", "collector-1.example.org", "localhost:6343", "localhost",
	} {
		if _, err := loadArgs(t, "-collector", good); err != nil {
			t.Errorf("collector %q refused: %v", good, err)
		}
	}
}
