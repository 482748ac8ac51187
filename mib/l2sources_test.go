package mib

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// smonVlanDataSource.V = 1.3.6.1.2.1.16.22.1.4.1.V (SMON-MIB, RFC 2613,
// smonRegistrationPoints.1): 12 sub-identifiers, written out from the MIB
// text.
func vlanCpOID(col int, vid uint32, inst int) agentx.OID {
	return agentx.MustParseOID(fmt.Sprintf("%s.6.1.%d.12.1.3.6.1.2.1.16.22.1.4.1.%d.%d", agentPrefix, col, vid, inst))
}

func vlanFsOID(col int, vid uint32, inst int) agentx.OID {
	return agentx.MustParseOID(fmt.Sprintf("%s.5.1.%d.12.1.3.6.1.2.1.16.22.1.4.1.%d.%d", agentPrefix, col, vid, inst))
}

// TestCounterOnlySources: a bond (counters only) and VLANs 100 and 200 are
// data sources with sFlowCpTable rows bound to the static receivers and no
// sFlowFsTable rows; the walk lists them in index order (ifIndex rows,
// then VLAN rows, then the host); the agent gets their pollers and no
// sampler for them; a VLAN leaving drops its rows.
func TestCounterOnlySources(t *testing.T) {
	m := newTestMIB(t, 2, 1)
	if err := m.SetPorts([]Port{
		{IfIndex: 1, StaticRate: 1000}, {IfIndex: 2, StaticRate: 1000},
		{IfIndex: 7, CountersOnly: true}, // bond of ports 1 and 2
		{IfIndex: 200, Type: sflow.SourceSmonVlan, CountersOnly: true},
		{IfIndex: 100, Type: sflow.SourceSmonVlan, CountersOnly: true},
	}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []agentx.OID{cpOID(colCpInterval, 7, 1), vlanCpOID(colCpInterval, 100, 1), vlanCpOID(colCpInterval, 200, 1)} {
		if got := m.getInt(o); got != 20 {
			t.Errorf("%s = %d, want the static interval 20", o, got)
		}
	}
	for _, o := range []agentx.OID{fsOID(colFsRate, 7, 1), vlanFsOID(colFsRate, 100, 1)} {
		if v, _ := m.Get(o); v.Type != agentx.NoSuchInstance && v.Type != agentx.NoSuchObject {
			t.Errorf("%s: %v %v, want no sampler row", o, v.Type, v.Value)
		}
	}
	walk := dump(m.walk())
	order := []string{cpOID(colCpReceiver, 2, 1).String(), cpOID(colCpReceiver, 7, 1).String(),
		vlanCpOID(colCpReceiver, 100, 1).String(), vlanCpOID(colCpReceiver, 200, 1).String(), hostCpOID(colCpReceiver, 1).String()}
	last := -1
	for _, o := range order {
		i := strings.Index(walk, o+"=")
		if i < 0 || i < last {
			t.Fatalf("walk: %s missing or out of order\n%s", o, walk)
		}
		last = i
	}
	cfg := m.rec.last(t)
	pollers := map[sflow.DataSource]bool{}
	for _, p := range cfg.Pollers {
		pollers[p.Source] = true
	}
	for _, ds := range []sflow.DataSource{{Type: 0, Index: 7}, {Type: sflow.SourceSmonVlan, Index: 100}, {Type: sflow.SourceSmonVlan, Index: 200}} {
		if !pollers[ds] {
			t.Errorf("no poller for %s in %+v", ds, cfg.Pollers)
		}
	}
	for _, s := range cfg.Samplers {
		if s.IfIndex == 7 || s.IfIndex == 100 || s.IfIndex == 200 {
			t.Errorf("sampler for a counters-only source: %+v", s)
		}
	}
	if err := m.SetPorts([]Port{{IfIndex: 1, StaticRate: 1000}, {IfIndex: 2, StaticRate: 1000}, {IfIndex: 7, CountersOnly: true}}); err != nil {
		t.Fatal(err)
	}
	if v, _ := m.Get(vlanCpOID(colCpInterval, 100, 1)); v.Type == agentx.Integer {
		t.Errorf("VLAN 100 removed but its poller row remains")
	}
}
