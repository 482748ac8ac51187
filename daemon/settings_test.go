package daemon

import (
	"testing"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
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
		{"drops_limit / dataplane.DefaultDropLimit", config.DefaultDropsLimit, dataplane.DefaultDropLimit},
		{"drops_header_bytes / dataplane.DefaultDropHeaderBytes", config.DefaultDropsHeaderBytes, dataplane.DefaultDropHeaderBytes},
	} {
		if c.config != c.compon {
			t.Errorf("%s: config has %d, the component %d", c.name, c.config, c.compon)
		}
	}
	if err := Validate(config.Defaults()); err != nil {
		t.Errorf("the defaults fail the components' checks: %v", err)
	}
}
