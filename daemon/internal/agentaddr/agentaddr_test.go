package agentaddr

import (
	"net/netip"
	"testing"
)

func TestChooseAgentAddress(t *testing.T) {
	a := func(i int, name string, up bool, s string) HostAddr {
		return HostAddr{IfIndex: i, IfName: name, Up: up, Addr: netip.MustParseAddr(s)}
	}
	addrs := []HostAddr{
		{IfIndex: 1, IfName: "lo", Up: true, Loopback: true, Addr: netip.MustParseAddr("127.0.0.1")},
		a(5, "eth1", true, "fe80::1"),
		a(4, "eth0", true, "2001:db8::4"),
		a(7, "mgmt0", true, "198.19.255.1"),
		a(3, "swp1", true, "10.1.1.1"),
		a(9, "down0", false, "203.0.113.9"),
		a(6, "eth2", true, "203.0.113.6"),
		a(2, "eth3", true, "203.0.113.7"),
	}
	for _, tc := range []struct {
		explicit, ifname, want string
	}{
		{"192.0.2.1", "", "192.0.2.1"},
		{"", "mgmt0", "198.19.255.1"},
		{"", "eth0", "2001:db8::4"},
		// Up first, IPv4 first, global before private, then lowest ifindex.
		{"", "", "203.0.113.7"},
	} {
		got, _, err := Choose(tc.explicit, tc.ifname, addrs)
		if err != nil || got != netip.MustParseAddr(tc.want) {
			t.Errorf("Choose(%q, %q) = %v, %v; want %s", tc.explicit, tc.ifname, got, err, tc.want)
		}
		// Stable whatever order the kernel lists addresses in.
		rev := make([]HostAddr, len(addrs))
		for i := range addrs {
			rev[len(addrs)-1-i] = addrs[i]
		}
		if again, _, _ := Choose(tc.explicit, tc.ifname, rev); again != got {
			t.Errorf("order-dependent choice: %v vs %v", again, got)
		}
	}
	if _, _, err := Choose("", "nosuch", addrs); err == nil {
		t.Error("missing interface accepted")
	}
}
