package daemon

import (
	"context"
	"errors"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/dropnotify"
	"github.com/sflowswitchd/sflowswitchd/dataplane/ports"
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
func (d *Daemon) noteSelection(s config.Settings, present []ports.Info) {
	now := map[string]bool{}
	for _, p := range unmatched(append(slices.Clone(s.Ports), s.MonitorPorts...), present) {
		now[p] = true
		if !d.unmatchedPats[p] {
			d.log.Warn("port pattern matches no port; nothing is sampled through it until a matching port appears", "pattern", p)
		}
	}
	if len(s.Ports) > 0 && len(unmatched(s.Ports, present)) == len(s.Ports) && len(s.MonitorPorts) == 0 && !d.selectionEmpty {
		d.log.Error("no port matches the port selection: NOTHING IS SAMPLED until a matching port appears", "ports", strings.Join(s.Ports, ","), "ports_present", len(present))
		d.selectionEmpty = true
	} else if d.selectionEmpty && len(unmatched(s.Ports, present)) < len(s.Ports) {
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
	present := make([]ports.Info, 0, len(d.ports))
	for _, p := range d.ports {
		present = append(present, p)
	}
	old := d.settings
	d.mu.Unlock()
	return checkReload(s, old, present, d.mibRows)
}

// ReloadOn reloads the settings load returns (the config file and flags
// read again), with where each came from, at each signal on hup (SIGHUP),
// until ctx ends. Settings that cannot be read, or could only be applied
// in part, are refused, logged and counted
// (sflowswitchd_config_reload_failures_total,
// sflowswitchd_config_last_reload_success); the running ones stay in
// force. A signal that arrives while Run starts waits in hup and is
// applied once start-up completed.
func (d *Daemon) ReloadOn(ctx context.Context, hup <-chan os.Signal, load func() (config.Settings, config.Sources, error)) {
	select {
	case <-ctx.Done():
		return
	case <-d.ready:
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			s, src, err := load()
			if err == nil {
				err = d.reloadFrom(s, src)
			}
			if err != nil {
				n := d.reloadFailures.Add(1)
				d.reloadFailing.Store(true)
				d.log.Error("config reload refused; previous settings stay in force", "err", err, "refused_total", n)
				continue
			}
			d.reloadFailing.Store(false)
		}
	}
}

// reload installs new settings (SIGHUP) and where they came from (nil:
// as before), and logs what changed.
func (d *Daemon) reload(s config.Settings, src config.Sources) error {
	setLevel(d.level, s.LogLevel)
	if err := d.checkReload(s); err != nil {
		return err
	}
	d.mu.Lock()
	old := d.settings
	if s.Workers != old.Workers {
		d.log.Warn("a change of workers takes effect at restart", "running", old.Workers, "configured", s.Workers)
		s.Workers = old.Workers
	}
	if s.Metrics != old.Metrics || s.MetricsAllowRemote != old.MetricsAllowRemote {
		d.log.Warn("a change of the metrics address takes effect at restart")
		s.Metrics, s.MetricsAllowRemote = old.Metrics, old.MetricsAllowRemote
	}
	if s.AppAPIAllowRemote != old.AppAPIAllowRemote {
		s.AppAPIAllowRemote = old.AppAPIAllowRemote
		d.log.Warn("a change of app_api_allow_remote takes effect at restart")
	}
	if s.AppAPI != old.AppAPI || s.APMInterval != old.APMInterval || s.APMReports != old.APMReports || s.StateDir != old.StateDir {
		d.log.Warn("a change of app_api, apm_interval, apm_reports or state_dir takes effect at restart")
		s.AppAPI, s.APMInterval, s.APMReports, s.StateDir = old.AppAPI, old.APMInterval, old.APMReports, old.StateDir
	}
	if s.MaxPorts != old.MaxPorts {
		d.log.Warn("a change of max_ports takes effect at restart", "running", old.MaxPorts, "configured", s.MaxPorts)
		s.MaxPorts = old.MaxPorts
	}
	if s.RingBytes != old.RingBytes {
		d.log.Warn("a change of ring_bytes takes effect at restart", "running", old.RingBytes, "configured", s.RingBytes)
		s.RingBytes = old.RingBytes
	}
	if s.Transit != old.Transit {
		d.log.Warn("a change of transit takes effect at restart", "running", old.Transit, "configured", s.Transit)
		s.Transit = old.Transit
	}
	if s.Hook != old.Hook {
		d.log.Warn("a change of hook takes effect at restart", "running", old.Hook, "configured", s.Hook)
		s.Hook = old.Hook
	}
	if !maps.Equal(s.PortHook, old.PortHook) {
		d.log.Warn("a change of port_hook takes effect at restart", "running", old.PortHook, "configured", s.PortHook)
		s.PortHook = old.PortHook
	}
	if s.PsampleIngressGroup != old.PsampleIngressGroup || s.PsampleEgressGroup != old.PsampleEgressGroup ||
		s.Dent != old.Dent || s.DentSW != old.DentSW || s.DentSwitchPort != old.DentSwitchPort {
		d.log.Warn("a change of psample { } or dent { } (psample_ingress_group, psample_egress_group, dent*) takes effect at restart")
		s.PsampleIngressGroup, s.PsampleEgressGroup = old.PsampleIngressGroup, old.PsampleEgressGroup
		s.Dent, s.DentSW, s.DentSwitchPort = old.Dent, old.DentSW, old.DentSwitchPort
	}
	if s.PsampleIntake != old.PsampleIntake {
		d.log.Warn("a change of psample_intake takes effect at restart", "running", old.PsampleIntake, "configured", s.PsampleIntake)
		s.PsampleIntake = old.PsampleIntake
	}
	if s.PsampleGroup != old.PsampleGroup {
		d.log.Warn("a change of psample_group takes effect at restart", "running", old.PsampleGroup, "configured", s.PsampleGroup)
		s.PsampleGroup = old.PsampleGroup
	}
	if s.AgentX != old.AgentX || s.SNMPReceivers != old.SNMPReceivers || s.SNMPInstances != old.SNMPInstances {
		d.log.Warn("a change of agentx, snmp_receivers or snmp_instances takes effect at restart")
		s.AgentX, s.SNMPReceivers, s.SNMPInstances = old.AgentX, old.SNMPReceivers, old.SNMPInstances
	}
	d.settings = s
	if src != nil {
		d.sources = src
	}
	d.mu.Unlock()
	if err := d.drops.Apply(dropsConfig(s)); err != nil {
		d.dropsOff(err)
	}
	changes := config.Changes(old, s)
	what := make([]string, len(changes))
	for i, c := range changes {
		what[i] = c.String()
	}
	if len(what) == 0 {
		what = []string{"nothing"}
	}
	d.log.Info("configuration reloaded", "changed", strings.Join(what, "; "))
	d.poke()
	return nil
}

// reconfigure feeds the settings and the ports present now to the MIB,
// which applies the resulting configuration. Samplers and pollers set over
// SNMP on ports that stay are kept.
func (d *Daemon) reconfigure() {
	d.mu.Lock()
	s := d.settings
	present := make([]ports.Info, 0, len(d.ports))
	for _, p := range d.ports {
		present = append(present, p)
	}
	d.mu.Unlock()
	sort.Slice(present, func(i, j int) bool { return present[i].Index < present[j].Index })

	var linux map[int]string
	if d.sonic != nil {
		// SONiC's ports, not the kernel's (sonic.go).
		linux = make(map[int]string, len(present))
		for _, p := range present {
			linux[p.Index] = p.Name
		}
		present = nil
	}
	m, err := buildModel(s, present, d.resolver, d.log)
	if err != nil {
		d.reconfigureFailed(err)
		return
	}
	if d.sonic != nil {
		m = d.sonic.model(s, m, linux)
	}
	d.noteSelection(s, present)
	if mg := strings.Join(m.Management, ","); mg != d.mgmtLeftOut {
		if mg != "" {
			d.log.Info("management interface left out of the default port selection (the agent address's or the default route's); list it in ports to sample it", "ports", mg)
		}
		d.mgmtLeftOut = mg
	}
	choice := agentChoice{addr: m.AgentAddr, iface: m.AgentIf, why: m.AgentWhy}
	if !m.AgentAddr.IsValid() && d.agentAddr.IsValid() {
		d.log.Warn("no agent address available now; keeping the last one", "agent_address", d.agentAddr)
		m.AgentAddr = d.agentAddr
		d.mu.Lock()
		choice = d.agentChoice
		d.mu.Unlock()
		choice.why = "kept: no address available now, the last one chosen stays"
	}
	if m.AgentAddr != d.agentAddr {
		d.log.Info("agent address", "agent_address", m.AgentAddr, "interface", choice.iface, "why", choice.why)
	}
	d.agentAddr = m.AgentAddr
	if d.sonic != nil {
		d.sonic.writeAuto(s, m.AgentAddr)
	}
	d.mu.Lock()
	d.agentChoice = choice
	d.mu.Unlock()
	// A change the agent refuses as a whole leaves the configuration it
	// runs stale (configuration_stale): retried with backoff like a
	// failure from outside. A port the kernel cannot sample is not such a
	// failure (the MIB keeps it, portfail retries it).
	var errs []error
	if err := d.mib.SetStatic(m.Static); err != nil {
		d.log.Error("static receivers refused (more collectors than receiver rows or instances need a restart)", "err", err)
		errs = append(errs, err)
	}
	if err := d.mib.SetAgentAddress(m.AgentAddr); err != nil {
		errs = append(errs, err)
	}
	if err := d.mib.SetPorts(m.Ports); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		d.reconfigureFailed(err)
		return
	}
	d.reconfigured()
}

// Backoff of a reconfiguration that failed for a reason from outside (no
// descriptor left to list the links, netlink busy): it is tried again,
// as failed ports are (while descriptors were exhausted a new
// port was refused with "listing links: too many open files", and 80 s
// after they were freed it was still not sampled, with no metric and no
// log line naming it; only a SIGHUP attached it).
const (
	reconfigureRetryMin = time.Second
	reconfigureRetryMax = time.Minute
)

// reconfigureFailed logs the first failure of a streak, counts every one
// and tries again after the backoff (reconfigure's goroutine only).
func (d *Daemon) reconfigureFailed(err error) {
	d.reconfFailures.Add(1)
	d.reconfWait = min(max(2*d.reconfWait, reconfigureRetryMin), reconfigureRetryMax)
	if !d.reconfFailing.Load() {
		d.log.Error("configuration not applied: port changes wait, retrying with backoff", "err", err, "retry_in", d.reconfWait)
	}
	d.reconfFailing.Store(true)
	time.AfterFunc(d.reconfWait, d.poke)
}

// reconfigured ends a failure streak (reconfigure's goroutine only).
func (d *Daemon) reconfigured() {
	if d.reconfFailing.Load() {
		d.log.Info("configuration applied again")
	}
	d.reconfFailing.Store(false)
	d.reconfWait = 0
}

// dropsOff reports drop notifications that could not be turned on: a
// warning when the kernel lacks the feature (the probe's warning names it
// and why), an error otherwise.
func (d *Daemon) dropsOff(err error) {
	if errors.Is(err, dropnotify.ErrRetrying) {
		d.log.Error("drop notifications off for now", "err", err)
		return
	}
	if errors.Is(err, dropnotify.ErrKernelFeature) {
		d.log.Warn("drop notifications off", "err", err)
		return
	}
	d.log.Error("drop notifications off", "err", err)
}
