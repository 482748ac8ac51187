package httpsflow

import (
	"net/netip"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/apps/app"
)

// TestSetSocket covers the end-point combinations: IPv4-mapped IPv6
// reported as IPv4, IPv6, mixed families and an unknown end point (no
// record).
func TestSetSocket(t *testing.T) {
	ap := netip.MustParseAddrPort
	for _, c := range []struct {
		local, remote netip.AddrPort
		want4, want6  bool
	}{
		{ap("[::ffff:198.18.0.1]:80"), ap("198.18.0.2:40000"), true, false},
		{ap("[2001:db8::1]:80"), ap("[2001:db8::2]:40000"), false, true},
		{ap("198.18.0.1:80"), ap("[2001:db8::2]:40000"), false, false},
		{netip.AddrPort{}, ap("198.18.0.2:40000"), false, false},
	} {
		var f app.FlowSample
		setSocket(&f, 17, c.local, c.remote)
		if (f.Socket4 != nil) != c.want4 || (f.Socket6 != nil) != c.want6 {
			t.Errorf("setSocket(%v, %v): socket4 %+v socket6 %+v", c.local, c.remote, f.Socket4, f.Socket6)
			continue
		}
		if s := f.Socket4; s != nil && (s.Protocol != 17 || s.LocalIP != c.local.Addr().Unmap() || s.RemoteIP != c.remote.Addr() ||
			s.LocalPort != uint32(c.local.Port()) || s.RemotePort != uint32(c.remote.Port())) {
			t.Errorf("setSocket(%v, %v): socket4 %+v", c.local, c.remote, s)
		}
		if s := f.Socket6; s != nil && (s.Protocol != 17 || s.LocalIP != c.local.Addr() || s.RemoteIP != c.remote.Addr() ||
			s.LocalPort != uint32(c.local.Port()) || s.RemotePort != uint32(c.remote.Port())) {
			t.Errorf("setSocket(%v, %v): socket6 %+v", c.local, c.remote, s)
		}
	}
}
