package netlab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
)

// DropLab makes a lab's switch drop packets for three known reasons, each
// with an independent true count:
//
//   - ACL: an nftables rule in the switch namespace (bridge family,
//     prerouting) drops UDP to port DropACLPort and counts it (kernel
//     reason NETFILTER_DROP, or NOT_SPECIFIED before 6.3: ACLDropReason; on the ingress port);
//   - closed port: port AddrPort (Ports[RoutedIdx]) leaves the bridge and
//     becomes a routed port with the switch's own address
//     198.18.(RoutedIdx+1).1/24; UDP to a closed port there is dropped
//     (NO_SOCKET, on that port);
//   - queue overflow: port Ports[ShapedIdx] gets a tbf root qdisc far
//     slower than a burst of frames (QDISC_DROP, an egress drop on it).
//
// And, for the header bytes of drop notifications, rules that
// drop where a frame's bytes are spread over the skb's linear area and its
// page fragments:
//
//   - bridge forward: UDP to DropForwardPort is dropped in the bridge
//     family's forward chain (the frames go to the shaped port's host,
//     whose MAC the bridge knows statically, so one drop per frame);
//   - routed forward (labs of 4 ports or more): port Ports[ForwardedIdx]
//     becomes a second routed port (198.18.(ForwardedIdx+1).1/24), the
//     switch forwards IPv4, and UDP to DropRoutedPort routed from the
//     routed host to the forwarded host's address is dropped in the inet
//     family's forward chain;
//   - TCP: TCP segments to the switch's address on the routed port, port
//     DropTCPPort, longer than 200 bytes (data, not the handshake) are
//     dropped in the inet family's input chain; segments the switch sends
//     from port DropTCPOutPort, longer than 200 bytes, in its output
//     chain (locally made: no MAC header yet).
//
// Everything is created in the lab's own namespaces and goes with them.
type DropLab struct {
	L          *Lab
	RoutedIdx  int        // host/port index of the routed port
	ShapedIdx  int        // host/port index of the shaped port
	SwitchAddr netip.Addr // the switch's address on the routed port
	HostAddr   netip.Addr // the routed host's address on that subnet
	// ForwardedIdx is the host/port index of the second routed port (-1
	// in a lab of 3 ports); ForwardedAddr its host's address.
	ForwardedIdx  int
	ForwardedAddr netip.Addr
}

// Ports the nftables rules of DropLab drop.
const (
	DropACLPort     = 7777 // UDP, bridge prerouting
	DropForwardPort = 7778 // UDP, bridge forward
	DropRoutedPort  = 7779 // UDP, inet forward
	DropTCPPort     = 7780 // TCP segments > 200 bytes, inet input
	DropTCPOutPort  = 7781 // TCP segments > 200 bytes from it, inet output
)

// nftTable is the name of the nftables tables SetupDrops creates.
const nftTable = "sflowswitchd_drops"

// SetupDrops configures the drops on a lab of at least 3 ports: port
// index 1 routed, index 2 shaped, index 3 (if any) routed too (index 0
// stays a plain bridge port).
func (l *Lab) SetupDrops(t testing.TB) *DropLab {
	t.Helper()
	if len(l.Ports) < 3 {
		t.Fatalf("netlab: SetupDrops needs 3 ports, lab has %d", len(l.Ports))
	}
	d := &DropLab{L: l, RoutedIdx: 1, ShapedIdx: 2, ForwardedIdx: -1}
	d.SwitchAddr = netip.AddrFrom4([4]byte{198, 18, byte(d.RoutedIdx + 1), 1})
	d.HostAddr = netip.AddrFrom4([4]byte{198, 18, byte(d.RoutedIdx + 1), 2})
	rp, rh := l.Ports[d.RoutedIdx], l.Hosts[d.RoutedIdx]
	nft := fmt.Sprintf(`table bridge %[1]s {
	chain pre {
		type filter hook prerouting priority 0; policy accept;
		udp dport %[2]d counter drop
	}
	chain acl_fwd {
		type filter hook forward priority 0; policy accept;
		udp dport %[3]d counter drop
	}
}
table inet %[1]s {
	chain acl_fwd {
		type filter hook forward priority 0; policy accept;
		udp dport %[4]d counter drop
	}
	chain acl_in {
		type filter hook input priority 0; policy accept;
		tcp dport %[5]d meta length > 200 counter drop
	}
	chain acl_out {
		type filter hook output priority 0; policy accept;
		tcp sport %[6]d meta length > 200 counter drop
	}
}
`, nftTable, DropACLPort, DropForwardPort, DropRoutedPort, DropTCPPort, DropTCPOutPort)
	steps := [][]string{
		{l.Switch, "nft", "-f", "-"},
		// The bridge knows the shaped host's MAC from the start: frames to
		// it go to its port only (no flooding, one forward drop per frame).
		{l.Switch, "bridge", "fdb", "replace", l.HostMACs[d.ShapedIdx].String(), "dev", l.Ports[d.ShapedIdx], "master", "static"},
		{l.Switch, "ip", "link", "set", rp, "nomaster"},
		{l.Switch, "ip", "addr", "add", d.SwitchAddr.String() + "/24", "dev", rp},
		{l.Switch, "ip", "neigh", "replace", d.HostAddr.String(), "lladdr", l.HostMACs[d.RoutedIdx].String(), "dev", rp, "nud", "permanent"},
		{rh, "ip", "addr", "add", d.HostAddr.String() + "/24", "dev", "eth0"},
		{rh, "ip", "neigh", "replace", d.SwitchAddr.String(), "lladdr", PortMAC(d.RoutedIdx + 1).String(), "dev", "eth0", "nud", "permanent"},
		// 1 Mbit/s with a one-frame bucket and queue: a burst overflows.
		{l.Switch, "tc", "qdisc", "add", "dev", l.Ports[d.ShapedIdx], "root", "tbf", "rate", "1mbit", "burst", "1600", "limit", "1600"},
	}
	if len(l.Ports) >= 4 {
		d.ForwardedIdx = 3
		fp, fh := l.Ports[d.ForwardedIdx], l.Hosts[d.ForwardedIdx]
		sw := netip.AddrFrom4([4]byte{198, 18, byte(d.ForwardedIdx + 1), 1})
		d.ForwardedAddr = netip.AddrFrom4([4]byte{198, 18, byte(d.ForwardedIdx + 1), 2})
		steps = append(steps,
			[]string{l.Switch, "ip", "link", "set", fp, "nomaster"},
			[]string{l.Switch, "ip", "addr", "add", sw.String() + "/24", "dev", fp},
			[]string{l.Switch, "ip", "neigh", "replace", d.ForwardedAddr.String(), "lladdr", l.HostMACs[d.ForwardedIdx].String(), "dev", fp, "nud", "permanent"},
			[]string{fh, "ip", "addr", "add", d.ForwardedAddr.String() + "/24", "dev", "eth0"},
			// The namespace's own forwarding switch (not the machine's).
			[]string{l.Switch, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
		)
	}
	for _, s := range steps {
		var out []byte
		var err error
		if s[1] == "nft" {
			out, err = l.runStdin(s[0], nft, s[1], s[2:]...)
		} else {
			out, err = l.Run(s[0], s[1], s[2:]...)
		}
		if err != nil {
			t.Fatalf("netlab: SetupDrops: %s: %v\n%s", strings.Join(s[1:], " "), err, out)
		}
	}
	return d
}

// ACLFrames returns n frames from host 0 to host ShapedIdx's MAC and
// address with UDP destination DropACLPort: all dropped by the rule on
// port 0.
func (d *DropLab) ACLFrames(n int) [][]byte {
	l := d.L
	src := netip.AddrPortFrom(l.HostAddrs[0], 40000)
	dst := netip.AddrPortFrom(l.HostAddrs[d.ShapedIdx], DropACLPort)
	f := UDPFrame(l.HostMACs[0], l.HostMACs[d.ShapedIdx], src, dst, make([]byte, 18))
	return repeat(f, n)
}

// ClosedPortFrames returns n frames from the routed host to the switch's
// own address on a UDP port nobody listens on.
func (d *DropLab) ClosedPortFrames(n int) [][]byte {
	l := d.L
	src := netip.AddrPortFrom(d.HostAddr, 40001)
	dst := netip.AddrPortFrom(d.SwitchAddr, 9)
	return repeat(UDPFrame(l.HostMACs[d.RoutedIdx], PortMAC(d.RoutedIdx+1), src, dst, make([]byte, 18)), n)
}

// OverflowFrames returns n 1000-byte frames from host 0 to the shaped
// port's host: sent in a burst, all but a few overflow its queue.
func (d *DropLab) OverflowFrames(n int) [][]byte {
	l := d.L
	src := netip.AddrPortFrom(l.HostAddrs[0], 40002)
	dst := netip.AddrPortFrom(l.HostAddrs[d.ShapedIdx], 5001)
	return repeat(UDPFrame(l.HostMACs[0], l.HostMACs[d.ShapedIdx], src, dst, make([]byte, 958)), n)
}

func repeat(f []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = f
	}
	return out
}

// ForwardFrames returns n frames from host 0 to the shaped host (MAC and
// address), UDP from port srcPort to DropForwardPort, with payload bytes
// of payload: dropped by the rule in the bridge's forward chain.
func (d *DropLab) ForwardFrames(n int, srcPort uint16, payload []byte) [][]byte {
	l := d.L
	src := netip.AddrPortFrom(l.HostAddrs[0], srcPort)
	dst := netip.AddrPortFrom(l.HostAddrs[d.ShapedIdx], DropForwardPort)
	return repeat(UDPFrame(l.HostMACs[0], l.HostMACs[d.ShapedIdx], src, dst, payload), n)
}

// RoutedFrames returns n frames from the routed host to the forwarded
// host's address through the switch (destination MAC: the routed port's),
// UDP from srcPort to DropRoutedPort: dropped in the inet forward chain.
// Only in labs of 4 ports or more (nil otherwise).
func (d *DropLab) RoutedFrames(n int, srcPort uint16, payload []byte) [][]byte {
	if d.ForwardedIdx < 0 {
		return nil
	}
	l := d.L
	src := netip.AddrPortFrom(d.HostAddr, srcPort)
	dst := netip.AddrPortFrom(d.ForwardedAddr, DropRoutedPort)
	return repeat(UDPFrame(l.HostMACs[d.RoutedIdx], PortMAC(d.RoutedIdx+1), src, dst, payload), n)
}

// ACLDropped returns the packet counter of the bridge prerouting rule.
func (d *DropLab) ACLDropped(t testing.TB) uint64 {
	t.Helper()
	return d.RuleDropped(t, "bridge", "pre")
}

// RuleDropped returns the packet counter of the rule in chain of the
// lab's table of family ("bridge": pre, acl_fwd; "inet": acl_fwd, acl_in,
// acl_out).
func (d *DropLab) RuleDropped(t testing.TB, family, chain string) uint64 {
	t.Helper()
	out, err := d.L.Run(d.L.Switch, "nft", "-j", "list", "table", family, nftTable)
	if err != nil {
		t.Fatalf("netlab: nft list: %v\n%s", err, out)
	}
	var v struct {
		Nftables []struct {
			Rule *struct {
				Chain string                       `json:"chain"`
				Expr  []map[string]json.RawMessage `json:"expr"`
			} `json:"rule"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("netlab: nft -j: %v", err)
	}
	for _, o := range v.Nftables {
		if o.Rule == nil || o.Rule.Chain != chain {
			continue
		}
		for _, e := range o.Rule.Expr {
			if c, ok := e["counter"]; ok {
				var cnt struct{ Packets uint64 }
				if err := json.Unmarshal(c, &cnt); err != nil {
					t.Fatalf("netlab: nft counter %s: %v", c, err)
				}
				return cnt.Packets
			}
		}
	}
	t.Fatalf("netlab: no counter in chain %s of nft output %s", chain, out)
	return 0
}

// QdiscDropped returns the shaped port's qdisc drop counter.
func (d *DropLab) QdiscDropped(t testing.TB) uint64 {
	t.Helper()
	out, err := d.L.Run(d.L.Switch, "tc", "-j", "-s", "qdisc", "show", "dev", d.L.Ports[d.ShapedIdx])
	if err != nil {
		t.Fatalf("netlab: tc -s qdisc: %v\n%s", err, out)
	}
	var v []struct {
		Kind  string `json:"kind"`
		Drops uint64 `json:"drops"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("netlab: tc -j: %v: %s", err, out)
	}
	for _, q := range v {
		if q.Kind == "tbf" {
			return q.Drops
		}
	}
	t.Fatalf("netlab: no tbf qdisc in %s", out)
	return 0
}

// runStdin runs name with args in namespace ns with stdin as its input.
func (l *Lab) runStdin(ns, stdin, name string, args ...string) ([]byte, error) {
	cmd := netnsutil.Command(context.Background(), ns, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("netlab: run %s in %s: %w", name, ns, err)
	}
	return out, nil
}

// ACLDropReason is the kernel's drop reason for the lab's nftables drops
// (bridge family): NETFILTER_DROP, except on kernels whose enum
// skb_drop_reason has no SKB_CONSUMED (before 6.3), where the bridge
// family's drops come through plain kfree_skb as NOT_SPECIFIED (seen on
// Debian 12's 6.1 in the lab VM; 6.18 gives NETFILTER_DROP). The agent
// reports what the kernel says; the tests expect the same.
func ACLDropReason(t testing.TB) string {
	t.Helper()
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatalf("netlab: kernel BTF: %v", err)
	}
	var e *btf.Enum
	if err := spec.TypeByName("skb_drop_reason", &e); err != nil {
		t.Fatalf("netlab: enum skb_drop_reason: %v", err)
	}
	for _, v := range e.Values {
		if v.Name == "SKB_CONSUMED" {
			return "NETFILTER_DROP"
		}
	}
	return "NOT_SPECIFIED"
}
