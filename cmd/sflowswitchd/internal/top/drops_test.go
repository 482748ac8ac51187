package top

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestTopDrops: discarded_packet samples are listed by reason (with the
// kernel's name) and by port, most frequent first, with the agent's latest
// drops field.
func TestTopDrops(t *testing.T) {
	agent := netip.MustParseAddr("198.19.255.1")
	dp := func(seq, drops, in, out uint32, r sflow.DropReason, linux string) sflow.Sample {
		return &sflow.DiscardedPacket{SequenceNumber: seq, Drops: drops, Input: in, Output: out, Reason: r,
			Records: []sflow.Record{&sflow.ExtendedLinuxDropReason{Reason: linux}}}
	}
	d := &sflow.Datagram{AgentAddress: agent, SubAgentID: 2, SequenceNumber: 1, Samples: []sflow.Sample{
		dp(1, 0, 4, 0, sflow.DropACL, "NETFILTER_DROP"),
		dp(2, 0, 4, 0, sflow.DropACL, "NETFILTER_DROP"),
		dp(3, 0, 5, 0, sflow.DropPortUnreachable, "NO_SOCKET"),
		dp(4, 0, 4, 6, sflow.DropTrafficShaping, "QDISC_DROP"),
		dp(5, 17, 4, 6, sflow.DropTrafficShaping, "QDISC_DROP"),
		dp(6, 17, 4, 6, sflow.DropTrafficShaping, "QDISC_DROP"),
	}}
	now := time.Now()
	st := newState("test", now)
	st.add(d.AppendXDR(nil), &net.UDPAddr{}, now)
	var b strings.Builder
	st.render(&b, now, 10, false)
	screen := b.String()
	t.Log("\n" + screen)
	if !strings.Contains(screen, "drops 6,") || !strings.Contains(screen, "notifications 6; not sent by the agents: 17,") {
		t.Errorf("totals missing")
	}
	got := topSection(t, screen, "DROPS (")
	want := [][]string{
		{"198.19.255.1", "traffic_shaping", "261", "QDISC_DROP", "3"},
		{"198.19.255.1", "acl", "258", "NETFILTER_DROP", "2"},
		{"198.19.255.1", "port_unreachable", "3", "NO_SOCKET", "1"},
	}
	if !equalRows(got, want) {
		t.Errorf("by reason %q, want %q", got, want)
	}
	got = topSection(t, screen, "DROPS by port")
	want = [][]string{{"198.19.255.1", "4", "6", "3"}, {"198.19.255.1", "4", "0", "2"}, {"198.19.255.1", "5", "0", "1"}}
	if !equalRows(got, want) {
		t.Errorf("by port %q, want %q", got, want)
	}
}

func equalRows(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], "|") != strings.Join(b[i], "|") {
			return false
		}
	}
	return true
}
