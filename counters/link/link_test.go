package link

import (
	"testing"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

func TestIfCountersMapping(t *testing.T) {
	lc := dataplane.LinkCounters{
		Index: 4, RxBytes: 1000, RxPackets: 10, RxMulticast: dataplane.UnknownCounter,
		TxBytes: 2000, TxPackets: 20, RxDropped: 1, TxErrors: 2,
		SpeedMbps: 10000, Duplex: dataplane.DuplexFull, AdminUp: true, OperUp: true, Promiscuous: true,
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
	lc.SpeedMbps, lc.Duplex, lc.Promiscuous, lc.OperUp = 0, dataplane.DuplexUnknown, false, false
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
