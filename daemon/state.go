package daemon

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/internal/autofile"
	"github.com/sflowswitchd/sflowswitchd/internal/inforce"
	"github.com/sflowswitchd/sflowswitchd/mib"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// AutoFileName is the state directory's file of the settings in force in
// hsflowd's /etc/hsflowd.auto format (internal/autofile).
const AutoFileName = "hsflowd.auto"

// agentChoice is the agent address in force and why it was chosen
// (reconfigure).
type agentChoice struct {
	addr  netip.Addr
	iface string
	why   string
}

// writeState records the configuration applied (cfg) in the state
// directory: inforce.json for `sflowswitchd show` and hsflowd.auto. A
// failure is logged when it changes, never stops the agent.
func (d *Daemon) writeState(cfg agent.Config) {
	d.mu.Lock()
	s, src := d.settings, d.sources
	choice := d.agentChoice
	names := make(map[uint32]string, len(d.ports))
	speeds := make(map[uint32]uint64, len(d.ports))
	for i, p := range d.ports {
		names[uint32(i)], speeds[uint32(i)] = p.Name, p.SpeedMbps
	}
	d.mu.Unlock()
	st := stateOf(s, src, choice, cfg, names, speeds)
	if d.sonic != nil {
		d.sonic.statePorts(st.Ports)
	}
	d.stateMu.Lock()
	defer d.stateMu.Unlock()
	if d.auto == nil {
		d.auto = autofile.New(filepath.Join(s.StateDir, AutoFileName))
	}
	// Rewritten when what is in force changed (a port retried with
	// backoff reapplies the same configuration), or after a failure.
	same := reflect.DeepEqual(st, d.lastState) && d.stateErr == nil
	d.lastState = st
	st.Version, st.Commit, st.PID, st.Written = d.build.Version, d.build.Commit, os.Getpid(), time.Now().UTC()
	st.ConfigFile = d.configFile
	if same {
		return
	}
	err := inforce.Write(filepath.Join(s.StateDir, inforce.FileName), st)
	if err == nil {
		_, err = d.auto.Write(autoSettings(s, cfg, choice))
	}
	switch {
	case err != nil && (d.stateErr == nil || d.stateErr.Error() != err.Error()):
		d.log.Warn("the settings in force are not recorded in the state directory (sflowswitchd show cannot read them)", "err", err)
	case err == nil && d.stateErr != nil:
		d.log.Info("the settings in force are recorded again", "dir", s.StateDir)
	}
	d.stateErr = err
}

// stateOf is the account of the settings in force.
func stateOf(s config.Settings, src config.Sources, choice agentChoice, cfg agent.Config, names map[uint32]string, speeds map[uint32]uint64) inforce.State {
	st := inforce.State{HsflowdConf: s.HsflowdConf, Polling: int(s.Polling), PollingSource: string(src.Of("polling")), HeaderBytes: s.HeaderBytes}
	agentSrc := config.SourceDefault
	switch {
	case s.AgentAddress != "":
		agentSrc = src.Of("agent_address")
	case s.AgentInterface != "":
		agentSrc = src.Of("agent_interface")
	case len(s.AgentCIDR) > 0:
		agentSrc = src.Of("agent_cidr")
	}
	st.Agent = inforce.Agent{Interface: choice.iface, Why: choice.why, Source: string(agentSrc)}
	if cfg.AgentAddress.IsValid() {
		st.Agent.Address = cfg.AgentAddress.String()
	}
	static := len(s.StaticCollectors())
	snmpRcv := map[int]bool{}
	for _, r := range cfg.Receivers {
		c := inforce.Collector{Receiver: r.Index, MaxDatagramSize: r.MaxDatagramSize, Name: r.Unresolved, Source: string(src.Of("collector"))}
		if r.Address.IsValid() {
			c.Address = r.Address.String()
		}
		if r.Index > static {
			c.Source = string(config.SourceSNMP)
			snmpRcv[r.Index] = true
		}
		st.Collectors = append(st.Collectors, c)
	}
	rates := map[uint32][]uint32{}
	bySNMP := map[uint32]bool{}
	var order []uint32
	for _, sc := range cfg.Samplers {
		if _, ok := rates[sc.IfIndex]; !ok {
			order = append(order, sc.IfIndex)
		}
		rates[sc.IfIndex] = append(rates[sc.IfIndex], sc.Rate)
		bySNMP[sc.IfIndex] = bySNMP[sc.IfIndex] || snmpRcv[sc.Receiver]
	}
	for _, idx := range order {
		name := names[idx]
		rateSrc := "link speed"
		if k := s.PortRateKey(name, speeds[idx]); k != "" {
			rateSrc = k + ": " + string(src.Of(k))
		}
		if bySNMP[idx] {
			rateSrc = string(config.SourceSNMP)
		}
		dir := cfg.Directions[idx]
		st.Ports = append(st.Ports, inforce.Port{Name: name, IfIndex: idx, Rate: minRate(rates[idx]), KernelRate: agent.KernelRate(rates[idx]...),
			Direction: dir.String(), Monitor: cfg.MonitorPorts[idx], RateSource: rateSrc})
	}
	for _, k := range config.Keys() {
		v, _ := s.Value(k)
		st.Settings = append(st.Settings, inforce.Value{Key: k, Value: v, Source: string(src.Of(k))})
	}
	return st
}

// autoSettings are the hsflowd.auto lines of the configuration applied:
// nothing but the revisions while there is no agent address (hsflowd's
// suppress_sendPkt_agentAddress); the agent address and interface as
// configured or elected (hsflowd writes the two in different places).
func autoSettings(s config.Settings, cfg agent.Config, choice agentChoice) autofile.Settings {
	host, _ := os.Hostname()
	a := autofile.Settings{Off: !cfg.AgentAddress.IsValid(), Hostname: host, Sampling: s.Sampling, HeaderBytes: s.HeaderBytes,
		DatagramBytes: sflow.DefaultMaxDatagramSize, Polling: int(s.Polling),
		AgentIP: cfg.AgentAddress, AgentIPConfigured: s.AgentAddress != "",
		AgentDevice: choice.iface, AgentDeviceConfigured: s.AgentInterface != "", DSIndex: int(mib.HostSource.Index)}
	if a.Sampling == 0 {
		// Rates from link speed have no one value: hsflowd.auto's
		// sampling is the rate of a port no other rule covers.
		a.Sampling = s.SamplingUnknownSpeed
	}
	size := 0
	for _, r := range cfg.Receivers {
		a.Collectors = append(a.Collectors, autofile.Collector{Addr: r.Address})
		size = max(size, r.MaxDatagramSize)
	}
	if size > 0 {
		a.DatagramBytes = size
	}
	if ap, err := netip.ParseAddrPort(s.AppAPI); err == nil {
		a.JSONPort = int(ap.Port())
	}
	return a
}
