package daemon

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/dataplane/drops"
	"github.com/sflowswitchd/sflowswitchd/mib"
)

// TestSettingsAgreeWithComponents: package config imports none of the
// components, so its defaults that are also a component's own default
// are written twice; this test keeps the two equal.
func TestSettingsAgreeWithComponents(t *testing.T) {
	for _, c := range []struct {
		name           string
		config, compon int
	}{
		{"snmp_receivers / mib.DefaultReceivers", config.DefaultSNMPReceivers, mib.DefaultReceivers},
		{"snmp_instances / mib.DefaultInstances", config.DefaultSNMPInstances, mib.DefaultInstances},
		{"ring_bytes / dataplane.DefaultRingBytes", config.DefaultRingBytes, dataplane.DefaultRingBytes},
		{"drops_limit / drops.DefaultLimit", config.DefaultDropsLimit, drops.DefaultLimit},
		{"drops_header_bytes / drops.DefaultHeaderBytes", config.DefaultDropsHeaderBytes, drops.DefaultHeaderBytes},
	} {
		if c.config != c.compon {
			t.Errorf("%s: config has %d, the component %d", c.name, c.config, c.compon)
		}
	}
	if err := Validate(config.Defaults()); err != nil {
		t.Errorf("the defaults fail the components' checks: %v", err)
	}
}

// TestMemoryBudgetLimits: settings whose product
// exhausts memory are refused at load, with what to lower: 65535 SNMP
// instances (86 MB per port), 20,001 collectors (5 GB from an
// hsflowd.conf), receivers × sub-agents beyond the datagram streams'
// budget. The defaults pass on any number of CPUs, with and without the
// application API, and so does the largest MIB the budget allows.
func TestMemoryBudgetLimits(t *testing.T) {
	load := func(mod func(*config.Settings)) error {
		s := config.Defaults()
		s.Workers = 2
		s.Collectors = []config.Collector{{Address: "198.18.0.1:6343"}}
		mod(&s)
		err := s.Validate()
		if err == nil {
			err = Validate(s)
		}
		return err
	}
	for _, workers := range []int{1, 2, 64, 256} {
		for _, api := range []string{"", "127.0.0.1:36343"} {
			if err := load(func(s *config.Settings) { s.Workers, s.AppAPI = workers, api }); err != nil {
				t.Errorf("defaults with %d workers, app_api %q refused: %v", workers, api, err)
			}
		}
	}
	many := func(n int) []config.Collector {
		cs := make([]config.Collector, n)
		for i := range cs {
			cs[i] = config.Collector{Address: fmt.Sprintf("198.18.%d.%d:6343", i/250, i%250+1)}
		}
		return cs
	}
	for _, c := range []struct {
		name string
		mod  func(*config.Settings)
		want string // in the refusal; "" = accepted
	}{
		{"snmp_instances 65535", func(s *config.Settings) { s.SNMPInstances = 65535 }, "snmp_instances 65535 outside 1..1024"},
		{"snmp_instances 1024 at max_ports 4096", func(s *config.Settings) { s.SNMPInstances = 1024 }, "lower max_ports to 64 or the instances to 16"},
		{"snmp_instances 16 at max_ports 4096", func(s *config.Settings) { s.SNMPInstances = 16 }, ""},
		{"snmp_instances 1024 at max_ports 64", func(s *config.Settings) { s.SNMPInstances, s.MaxPorts = 1024, 64 }, ""},
		{"20001 collectors", func(s *config.Settings) { s.Collectors = many(20001) }, "collectors: 20001, at most 16"},
		{"16 collectors", func(s *config.Settings) { s.Collectors = many(16) }, ""},
		{"16 collectors, app_api, 256 workers", func(s *config.Settings) {
			s.Collectors, s.AppAPI, s.Workers = many(16), "127.0.0.1:36343", 256
		}, "datagram streams, at most 8192"},
		{"snmp_receivers 1024, 8 workers", func(s *config.Settings) { s.SNMPReceivers, s.Workers = 1024, 8 }, "lower snmp_receivers or workers"},
		{"snmp_receivers 1024, 2 workers", func(s *config.Settings) { s.SNMPReceivers = 1024 }, ""},
		{"snmp_receivers 65535", func(s *config.Settings) { s.SNMPReceivers = 65535 }, "snmp_receivers 65535 outside 1..1024"},
		{"65535 port patterns", func(s *config.Settings) { s.Ports = make([]string, 65535) }, "port patterns (ports and monitor_ports): 65535, at most 1024"},
	} {
		err := load(c.mod)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want a refusal saying %q", c.name, err, c.want)
		}
	}
}

// TestMIBRowCost: the SFLOW-MIB's memory per port and instance is what
// the budget assumes (maxMIBRows: about 1.2 KB a row).
func TestMIBRowCost(t *testing.T) {
	const ports, inst, budget = 1000, 16, 1300
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m, err := mib.New(mib.Config{Instances: inst, Apply: func(agent.Config) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]mib.Port, ports)
	for i := range ps {
		ps[i] = mib.Port{IfIndex: uint32(i + 1), StaticRate: 100}
	}
	if err := m.SetPorts(ps); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(m)
	per := float64(after.HeapAlloc-before.HeapAlloc) / (ports * inst)
	t.Logf("%.0f bytes per port and instance", per)
	if per > budget {
		t.Errorf("%.0f bytes per port and instance, the budget assumes at most %d", per, budget)
	}
}
