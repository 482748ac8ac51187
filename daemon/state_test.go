package daemon

import (
	"net/netip"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestStateOf: the account of the settings in force names each
// receiver's source (the configured collectors' and, beyond them, snmp),
// each port's rates (configured, kernel), direction and the setting its
// rate comes from, and the agent address with why.
func TestStateOf(t *testing.T) {
	s := config.Defaults()
	s.Collectors = []config.Collector{{Address: "198.18.0.9:6343"}}
	s.Sampling = 1000
	s.PortSampling = map[string]uint32{"swp2": 300}
	s.Polling = 5
	src := config.Sources{"collector": config.SourceFile, "sampling": config.SourceFlag, "port_sampling": config.SourceHsflowd}
	cfg := agent.Config{
		AgentAddress: netip.MustParseAddr("198.18.0.1"),
		Receivers: []agent.ReceiverConfig{{Index: 1, Address: netip.MustParseAddrPort("198.18.0.9:6343")},
			{Index: 3, Address: netip.MustParseAddrPort("198.18.0.10:6343")}},
		Samplers: []agent.SamplerConfig{{IfIndex: 3, Instance: 1, Receiver: 1, Rate: 1000}, {IfIndex: 4, Instance: 1, Receiver: 1, Rate: 300},
			{IfIndex: 5, Instance: 2, Receiver: 3, Rate: 50}},
		Pollers:    []agent.PollerConfig{{Instance: 1, Receiver: 1, Interval: 5 * time.Second}},
		Directions: map[uint32]sflow.Direction{4: sflow.DirectionBoth},
	}
	st := stateOf(s, src, agentChoice{addr: cfg.AgentAddress, iface: "eth0", why: "ranked"}, cfg,
		map[uint32]string{3: "swp1", 4: "swp2", 5: "swp3"}, map[uint32]uint64{3: 1000, 4: 1000, 5: 1000})
	if a := st.Agent; a.Address != "198.18.0.1" || a.Interface != "eth0" || a.Why != "ranked" || a.Source != "default" {
		t.Errorf("agent %+v", a)
	}
	if c := st.Collectors; len(c) != 2 || c[0].Source != "file" || c[1].Source != "snmp" || c[1].Address != "198.18.0.10:6343" {
		t.Errorf("collectors %+v", c)
	}
	want := []struct {
		name            string
		rate, kernel    uint32
		dir, rateSource string
	}{{"swp1", 1000, 512, "ingress", "sampling: flag"}, {"swp2", 300, 256, "both", "port_sampling: hsflowd.conf"}, {"swp3", 50, 32, "ingress", "snmp"}}
	if len(st.Ports) != len(want) {
		t.Fatalf("ports %+v", st.Ports)
	}
	for i, w := range want {
		p := st.Ports[i]
		if p.Name != w.name || p.Rate != w.rate || p.KernelRate != w.kernel || p.Direction != w.dir || p.RateSource != w.rateSource {
			t.Errorf("port %d: %+v, want %+v", i, p, w)
		}
	}
	if st.Polling != 5 || st.PollingSource != "default" || len(st.Settings) != len(config.Keys()) {
		t.Errorf("polling %d %s, %d settings", st.Polling, st.PollingSource, len(st.Settings))
	}
}
