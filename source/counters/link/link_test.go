package link

import (
	"testing"

	"github.com/sflowswitchd/sflowswitchd/dataplane/linkstats"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

func TestIfCountersMapping(t *testing.T) {
	lc := linkstats.Counters{
		Index: 4, RxBytes: 1000, RxPackets: 10, RxMulticast: linkstats.UnknownCounter,
		TxBytes: 2000, TxPackets: 20, RxDropped: 1, TxErrors: 2,
		SpeedMbps: 10000, Duplex: linkstats.DuplexFull, AdminUp: true, OperUp: true, Promiscuous: true,
	}
	c := ifCounters(lc)
	if c.IfInUcastPkts != 10 || c.IfInMulticastPkts != sflow.CounterUnavailable32 {
		t.Errorf("multicast unknown (veth): ucast %d multicast %#x", c.IfInUcastPkts, c.IfInMulticastPkts)
	}
	if c.IfSpeed != 10_000_000_000 || c.IfDirection != sflow.IfDirectionFullDuplex || c.IfStatus != 3 || c.IfPromiscuousMode != 1 {
		t.Errorf("state fields: %+v", c)
	}
	if c.IfInOctets != 1000 || c.IfOutOctets != 2000 || c.IfOutUcastPkts != 20 || c.IfInDiscards != 1 || c.IfOutErrors != 2 {
		t.Errorf("counters: %+v", c)
	}
	lc.RxMulticast = 3
	if c := ifCounters(lc); c.IfInUcastPkts != 7 || c.IfInMulticastPkts != 3 {
		t.Errorf("multicast known: ucast %d multicast %d", c.IfInUcastPkts, c.IfInMulticastPkts)
	}
	lc.SpeedMbps, lc.Duplex, lc.Promiscuous, lc.OperUp = 0, linkstats.DuplexUnknown, false, false
	if c := ifCounters(lc); c.IfSpeed != 0 || c.IfDirection != sflow.IfDirectionUnknown || c.IfPromiscuousMode != 2 || c.IfStatus != 1 {
		t.Errorf("unknowns: %+v", c)
	}
}

// TestPortName reads the loopback interface of the test's namespace
// through the real netlink reader: the port_name record carries the
// interface's name.
func TestPortName(t *testing.T) {
	r, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	recs, err := r.AppendRecords(nil, 1) // lo is ifindex 1 in every namespace
	if err != nil {
		t.Fatal(err)
	}
	var name string
	for _, rec := range recs {
		if pn, ok := rec.(*sflow.PortName); ok {
			name = pn.PortName
		}
	}
	if name != "lo" {
		t.Fatalf("port_name %q in %d records, want \"lo\"", name, len(recs))
	}
}

// TestLAGPortStatsMapping: the kernel's view of a member, mapped field by
// field (lagPortStats' rules), in 802.3ad and active-backup mode.
func TestLAGPortStatsMapping(t *testing.T) {
	m := linkstats.LAGMember{Bond: 9, LACP: true, ActorSystem: [6]byte{2, 0, 0, 0, 0, 1}, PartnerSystem: [6]byte{2, 0, 0, 0, 0, 2},
		Aggregator: 1, ActiveAggregator: true, ActorOper: 0x3f, PartnerOper: 0x3d, Active: true, MIIUp: true, StatsOK: true,
		Stats: linkstats.LACPStats{LACPDURx: 10, LACPDUTx: 11, LACPDUUnknownRx: 1, LACPDUIllegalRx: 2, MarkerRx: 3, MarkerTx: 4,
			MarkerRespRx: 5, MarkerRespTx: 6, MarkerUnknownRx: 7}}
	want := sflow.LAGPortStats{ActorSystemID: m.ActorSystem, PartnerOperSystemID: m.PartnerSystem, AttachedAggID: 9,
		ActorAdminState: sflow.LACPStateAggregation | sflow.LACPStateActivity, ActorOperState: 0x3f, PartnerOperState: 0x3d,
		LACPDUsRx: 10, MarkerPDUsRx: 3, MarkerResponsePDUsRx: 5, UnknownRx: 1, IllegalRx: 9, LACPDUsTx: 11, MarkerPDUsTx: 4, MarkerResponsePDUsTx: 6}
	if got := lagPortStats(m); got != want {
		t.Errorf("802.3ad:\n got %+v\nwant %+v", got, want)
	}
	m.MIIUp = false
	if got := lagPortStats(m); got.ActorOperState != 0x07 || got.PartnerOperState != 0x3d {
		t.Errorf("802.3ad member with its link down: actor %#x partner %#x, want 0x07 (kernel's 0x3f less sync, collecting, distributing), 0x3d", got.ActorOperState, got.PartnerOperState)
	}
	m.MIIUp = true
	m.ActiveAggregator, m.PartnerSystem, m.StatsOK = false, [6]byte{}, false
	got := lagPortStats(m)
	if got.AttachedAggID != 0 || got.LACPDUsRx != sflow.CounterUnavailable32 || got.PartnerOperSystemID != ([6]byte{}) {
		t.Errorf("802.3ad member of another aggregator, no PDU counters: %+v", got)
	}
	ab := linkstats.LAGMember{Bond: 9, Active: true, MIIUp: true}
	if got := lagPortStats(ab); got.AttachedAggID != 9 || got.ActorOperState != 0x3c || got.ActorAdminState != sflow.LACPStateAggregation ||
		got.ActorSystemID != ([6]byte{}) || got.IllegalRx != sflow.CounterUnavailable32 {
		t.Errorf("active-backup, active member: %+v", got)
	}
	ab.Active = false
	if got := lagPortStats(ab); got.ActorOperState != sflow.LACPStateAggregation {
		t.Errorf("active-backup, backup member: %+v", got)
	}
}
