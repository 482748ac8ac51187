package daemon

import (
	"fmt"
	"log/slog"
	"net/netip"
	"path"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/agentaddr"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/collectoraddr"
	"github.com/sflowswitchd/sflowswitchd/dataplane/ports"
	"github.com/sflowswitchd/sflowswitchd/mib"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// model is what the settings and the current ports contribute to the MIB.
type model struct {
	// AgentAddr is the agent address chosen; invalid when none could be.
	AgentAddr netip.Addr
	// AgentIf is the interface that has it ("" = none of this host's), and
	// AgentWhy says how it was chosen.
	AgentIf, AgentWhy string
	// Management are the ports the default selection (no ports setting)
	// leaves out, sorted: the management interface (managementPorts).
	Management []string
	// Static is the static configuration (mib.MIB.SetStatic).
	Static mib.Static
	// Ports are the selected ports as data sources (mib.MIB.SetPorts).
	Ports []mib.Port
}

// buildModel turns settings and the current ports into the MIB's inputs:
// one static receiver per collector (instance r of every data source
// reports to receiver r, at the port's configured rate and the polling
// interval; the host poller entPhysicalEntry.1 likewise), and every
// selected port as a data source.
func buildModel(s config.Settings, present []ports.Info, res *collectoraddr.Resolver, log *slog.Logger) (model, error) {
	var m model
	// Listing the addresses can fail for a reason from outside (no
	// descriptor left): the agent address is then unknown for now and
	// the caller keeps the last one, and the rest (ports gone, which
	// frees their descriptors) is applied all the same.
	var how string
	addrs, err := agentaddr.List()
	if err == nil {
		m.AgentAddr, how, err = agentaddr.Choose(s.AgentAddress, s.AgentInterface, preferCIDRs(addrs, s.AgentCIDRs()))
	}
	if err != nil {
		log.Warn("agent address unknown", "err", err)
	}
	m.AgentIf, m.AgentWhy = agentWhy(s, how, m.AgentAddr, addrs)
	m.Static = mib.Static{HeaderBytes: s.HeaderBytes, PollInterval: s.PollInterval()}
	m.Static.Receivers = staticReceivers(s, res)
	sel, err := ports.Select(s.Ports)
	if err != nil {
		return m, err
	}
	var monSel ports.Selector
	if len(s.MonitorPorts) > 0 {
		if monSel, err = ports.Select(s.MonitorPorts); err != nil {
			return m, err
		}
	}
	mgmt := map[int]bool{}
	if len(s.Ports) == 0 {
		mgmt = managementPorts(m.AgentAddr, addrs, log)
	}
	switchPort := s.SwitchPorts()
	var selected []ports.Info
	for _, p := range present {
		monitor := monSel != nil && monSel(p)
		if !monitor && (!sel(p) || !switchPort(p.Name)) {
			continue // dent: switch ports only (hsflowd's mod_dent)
		}
		if !monitor && mgmt[p.Index] {
			m.Management = append(m.Management, p.Name)
			continue
		}
		dir := sflow.DirectionIngress
		if !monitor { // a monitor port is sampled at ingress only
			// Validated with the settings: an error is not expected.
			if dir, err = sflow.ParseDirection(s.PortDirectionOf(p.Name)); err != nil {
				return m, err
			}
		}
		var hook string
		if len(s.PortHook) > 0 && !monitor {
			hook = s.PortHookOf(p.Name)
		}
		m.Ports = append(m.Ports, mib.Port{IfIndex: uint32(p.Index), Monitor: monitor, Direction: dir, Hook: hook,
			StaticRate: s.PortSamplingRate(p.Name, p.SpeedMbps)})
		selected = append(selected, p)
	}
	m.Ports = append(m.Ports, l2Sources(present, selected, log)...)
	return m, nil
}

// managementPorts are the ports the default port selection leaves out:
// the interface of the agent address and those of the default routes,
// which on a switch are its management port (eth0), not a switch port.
// A configured ports setting samples what it lists, these included.
func managementPorts(agentAddr netip.Addr, addrs []agentaddr.HostAddr, log *slog.Logger) map[int]bool {
	out, err := agentaddr.DefaultRouteLinks()
	if err != nil {
		log.Warn("default routes unknown: the default port selection may include the management interface", "err", err)
		out = map[int]bool{}
	}
	for _, h := range addrs {
		if agentAddr.IsValid() && h.Addr == agentAddr {
			out[h.IfIndex] = true
		}
	}
	return out
}

// agentWhy names the interface that has the agent address a and says
// why it was chosen, from agentaddr.Choose's how.
func agentWhy(s config.Settings, how string, a netip.Addr, addrs []agentaddr.HostAddr) (string, string) {
	iface := ""
	for _, h := range addrs {
		if h.Addr == a {
			iface = h.IfName
			break
		}
	}
	switch {
	case !a.IsValid():
		return "", "none available"
	case how == "configured":
		return iface, "agent_address set"
	case s.AgentInterface != "":
		return iface, "the address of agent_interface " + s.AgentInterface
	case len(s.AgentCIDR) > 0:
		return iface, "preferred by agent_cidr, then ranked: up, IPv4 before IPv6, global before private before link-local, lowest ifindex"
	}
	return iface, "ranked among the host's addresses: up, IPv4 before IPv6, global before private before link-local, lowest ifindex"
}

// statsVLANs lists the VLAN data sources of the selected ports
// (ports.StatsVLANs; a variable for tests).
var statsVLANs = ports.StatsVLANs

// l2Sources returns the counter-only data sources the selected ports
// bring (docs/ARCHITECTURE.md, "Ports, LAGs and VLANs"):
//   - the bond a selected port is a member of (its members are sampled;
//     the bond is polled for counters, not sampled, so that no frame is
//     sampled twice), unless the bond is itself selected;
//   - one VLAN data source (smonVlanDataSource.<V>) per VLAN of a
//     selected port on a VLAN-filtering bridge that keeps per-VLAN
//     statistics. A failure to read them is logged and leaves the VLAN
//     data sources out: ports and bonds are unaffected.
func l2Sources(all, selected []ports.Info, log *slog.Logger) []mib.Port {
	byIndex := make(map[int]ports.Info, len(all))
	for _, p := range all {
		byIndex[p.Index] = p
	}
	isSel := make(map[int]bool, len(selected))
	for _, p := range selected {
		isSel[p.Index] = true
	}
	var out []mib.Port
	bonds := map[int]bool{}
	for _, p := range selected {
		if b, ok := byIndex[p.MasterIndex]; ok && b.Kind == "bond" && !isSel[b.Index] && !bonds[b.Index] {
			bonds[b.Index] = true
			out = append(out, mib.Port{IfIndex: uint32(b.Index), CountersOnly: true})
		}
	}
	vids, err := statsVLANs(selected)
	if err != nil {
		log.Warn("VLAN data sources not read: no vlan_counters until the next port change", "err", err)
	}
	for _, v := range vids {
		out = append(out, mib.Port{IfIndex: uint32(v), Type: sflow.SourceSmonVlan, CountersOnly: true})
	}
	return out
}

// staticReceivers turns the configured collectors into the MIB's static
// receivers without waiting on DNS: a host name takes the address it last
// resolved to, or none yet (the receiver then counts its samples as lost
// until the name resolves; the resolver retries with backoff). The names
// to resolve are handed to res.
func staticReceivers(s config.Settings, res *collectoraddr.Resolver) []mib.StaticReceiver {
	var out []mib.StaticReceiver
	var hosts []string
	for _, c := range s.StaticCollectors() {
		ca, err := config.ParseCollector(c.Address) // validated with the settings
		if err != nil {
			continue
		}
		r := mib.StaticReceiver{Address: netip.AddrPortFrom(ca.IP, ca.Port), MaxDatagramSize: c.MaxDatagramSize, Device: c.Device}
		if ca.Host != "" {
			hosts = append(hosts, ca.Host)
			r.Name = ca.Host
			if a, ok := res.Get(ca.Host, ca.Port); ok {
				r.Address = netip.AddrPortFrom(a, ca.Port)
			}
		}
		out = append(out, r)
	}
	res.Want(hosts)
	return out
}

// unmatched returns the patterns that match none of ports.
func unmatched(patterns []string, present []ports.Info) []string {
	var out []string
	for _, pat := range patterns {
		hit := false
		for _, p := range present {
			if ok, _ := path.Match(pat, p.Name); ok {
				hit = true
				break
			}
		}
		if !hit {
			out = append(out, pat)
		}
	}
	return out
}

// checkReload refuses, before anything changes, new settings s that could
// only be applied in part over the running ones (old): more collectors
// than the MIB's receiver rows and instances (mibRows, sized at
// start-up), or a port selection that matches none of the ports present
// while the running one matches some (a typo in ports would silence the
// agent). Ports that do not exist yet can still be named next to others.
func checkReload(s, old config.Settings, present []ports.Info, mibRows int) error {
	if n := len(s.StaticCollectors()); n > mibRows {
		return fmt.Errorf("%d collectors, but the SFLOW-MIB was sized at start-up for %d (snmp_receivers, snmp_instances): restart to add collectors", n, mibRows)
	}
	selects := func(pats, mon []string) bool {
		return len(pats) == 0 || len(unmatched(pats, present)) < len(pats) || len(unmatched(mon, present)) < len(mon)
	}
	if !selects(s.Ports, s.MonitorPorts) && selects(old.Ports, old.MonitorPorts) {
		return fmt.Errorf("ports %q match none of the %d ports present: sampling would stop on every port", s.Ports, len(present))
	}
	return nil
}

// requireAgentAddress refuses to start when no agent address can be
// chosen. sFlow v5 allows an agent address of type
// UNKNOWN (sflow_version_5.txt, address_type 0), but common collectors
// drop such datagrams whole (goflow2's decoder: "unknown IP version 0"),
// so sending them would be sampling into nothing at those collectors;
// an address that appears later (DHCP) is picked up by the restart
// systemd makes (Restart=on-failure). Once running, the last address
// chosen is kept if every address disappears (reconfigure).
func requireAgentAddress(s config.Settings) error {
	addrs, err := agentaddr.List()
	if err != nil {
		return err
	}
	if _, _, err := agentaddr.Choose(s.AgentAddress, s.AgentInterface, addrs); err != nil {
		return fmt.Errorf("%w (%v): every sFlow datagram carries an address identifying this switch, "+
			"and one of unknown type is dropped by common collectors; give an interface an address, "+
			"or set -agent-address / agent_address (an address of this switch) or -agent-interface", ErrNoAgentAddress, err)
	}
	return nil
}

// preferCIDRs applies agent_cidr to the agent address candidates as
// hsflowd's agent.cidr does (hsflowconfig.c agentAddressPriority): an
// address in an excluded ('!') prefix is never chosen; among the others,
// those in the earliest-listed matching prefix are preferred over later
// ones and over addresses matching none (an address's prefix is the last
// listed one that contains it). The usual ranking
// (daemon/internal/agentaddr) decides among the preferred.
func preferCIDRs(addrs []agentaddr.HostAddr, list []config.AgentCIDR) []agentaddr.HostAddr {
	if len(list) == 0 {
		return addrs
	}
	best := len(list)
	ranked := make([]int, len(addrs))
	var keep []int
	for i, a := range addrs {
		rank := len(list) // matches none
		excluded := false
		for k := len(list) - 1; k >= 0; k-- {
			if list[k].Prefix.Contains(a.Addr) {
				rank, excluded = k, list[k].Exclude
				break
			}
		}
		if excluded {
			continue
		}
		ranked[i] = rank
		keep = append(keep, i)
		best = min(best, rank)
	}
	var out []agentaddr.HostAddr
	for _, i := range keep {
		if ranked[i] == best {
			out = append(out, addrs[i])
		}
	}
	return out
}
