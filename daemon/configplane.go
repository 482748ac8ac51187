package daemon

import (
	"slices"
	"sort"
	"strings"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
)

// unmatchedPatterns returns the port patterns matching no port present,
// sorted (for metrics).
func (d *Daemon) unmatchedPatterns() []string {
	d.mu.Lock()
	pats := make([]string, 0, len(d.unmatchedPats))
	for p := range d.unmatchedPats {
		pats = append(pats, p)
	}
	d.mu.Unlock()
	sort.Strings(pats)
	return pats
}

// noteSelection reports, when it changes, every pattern of ports and
// monitor_ports that matches no port present (a typo would otherwise stop
// sampling silently), and loudly when the selection matches nothing at
// all. Called by reconfigure only (one goroutine).
func (d *Daemon) noteSelection(s config.Settings, ports []dataplane.PortInfo) {
	now := map[string]bool{}
	for _, p := range unmatched(append(slices.Clone(s.Ports), s.MonitorPorts...), ports) {
		now[p] = true
		if !d.unmatchedPats[p] {
			d.log.Warn("port pattern matches no port; nothing is sampled through it until a matching port appears", "pattern", p)
		}
	}
	if len(s.Ports) > 0 && len(unmatched(s.Ports, ports)) == len(s.Ports) && len(s.MonitorPorts) == 0 && !d.selectionEmpty {
		d.log.Error("no port matches the port selection: NOTHING IS SAMPLED until a matching port appears", "ports", strings.Join(s.Ports, ","), "ports_present", len(ports))
		d.selectionEmpty = true
	} else if d.selectionEmpty && len(unmatched(s.Ports, ports)) < len(s.Ports) {
		d.selectionEmpty = false
	}
	d.mu.Lock()
	d.unmatchedPats = now
	d.mu.Unlock()
}

// checkReload refuses, before anything changes, new settings that could
// only be applied in part (checkReload) over the running ones.
func (d *Daemon) checkReload(s config.Settings) error {
	d.mu.Lock()
	ports := make([]dataplane.PortInfo, 0, len(d.ports))
	for _, p := range d.ports {
		ports = append(ports, p)
	}
	old := d.settings
	d.mu.Unlock()
	return checkReload(s, old, ports, d.mibRows)
}
