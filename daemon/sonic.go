package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/agentaddr"
	"github.com/sflowswitchd/sflowswitchd/dataplane/forwarding"
	"github.com/sflowswitchd/sflowswitchd/dataplane/psample"
	"github.com/sflowswitchd/sflowswitchd/internal/autofile"
	"github.com/sflowswitchd/sflowswitchd/internal/inforce"
	"github.com/sflowswitchd/sflowswitchd/internal/prom"
	"github.com/sflowswitchd/sflowswitchd/mib"
	"github.com/sflowswitchd/sflowswitchd/platform/sonic"
	"github.com/sflowswitchd/sflowswitchd/sflow"
	"github.com/sflowswitchd/sflowswitchd/source"
	"github.com/sflowswitchd/sflowswitchd/source/counters/host"
)

// SONiC mode (docs/guides/sonic.md): the agent runs in SONiC's sflow
// container in hsflowd's place. What the settings would say of collectors,
// polling, the agent address, the direction, the header size and the drop
// limit comes from CONFIG_DB, overlaid on the settings of the file and
// flags and applied through reload, so that a change in Redis is applied
// live: sequence numbers and uptime continue. The ports are SONiC's, by
// SONiC's ifIndex, reported once SYSTEM_READY; their counters are the
// ASIC's (COUNTERS_DB); their samples come from psample groups 1
// (ingress) and 2 (egress), which SONiC's orchagent fills (the agent
// installs no rule), with the pools from the ASIC's packet counters.

// SONiC's psample groups (sonic-swss orchagent's SAI samplepacket
// sessions, mapped to tc sample groups on the virtual switch; hsflowd.conf
// psample { group = 1 egress = on }).
const (
	sonicIngressGroup = 1
	sonicEgressGroup  = 2
)

// sonicMode is SONiC mode's part of the daemon.
type sonicMode struct {
	d      *Daemon
	log    *slog.Logger
	client *sonic.Client
	auto   *autofile.Writer // nil: not written
	host   string

	// portMap is the kernel's ifindex → SONiC ifIndex of the ports,
	// rebuilt at every reconfiguration (psample's PortMap); dropMap the
	// same with the LAGs' netdevs (drop notifications' ports).
	portMap atomic.Pointer[map[uint32]uint32]
	dropMap atomic.Pointer[map[uint32]uint32]

	mu sync.Mutex
	// base is the settings of the file and flags, under Redis's;
	// baseSrc where each of them came from.
	base    config.Settings
	baseSrc config.Sources
	// last is the configuration last applied.
	last    *sonic.Config
	lastWhy string // the agent address's reason last logged
	// reloadErrors counts Redis configurations refused whole.
	reloadErrors atomic.Uint64
}

// newSonicMode prepares SONiC mode for settings s (the file's and flags').
func newSonicMode(s config.Settings, log *slog.Logger) *sonicMode {
	m := &sonicMode{log: log, base: s}
	if s.SonicAutoFile != "" {
		m.auto = autofile.New(s.SonicAutoFile)
	}
	m.host, _ = os.Hostname() // "" when unknown: hsflowd.auto shows hostname=
	empty := map[uint32]uint32{}
	m.portMap.Store(&empty)
	m.dropMap.Store(&empty)
	m.client = sonic.New(sonic.Options{
		DBConfig:  s.SonicDBConfig,
		TCP:       s.SonicTCP,
		WaitReady: time.Duration(s.SonicWaitReady) * time.Second,
		Logger:    log,
		OnChange:  m.changed,
	})
	return m
}

// sonicFirstPollWithin bounds the first poll of SONiC's ports: every
// port's counters reach the collectors within seconds of SYSTEM_READY
// (hsflowd needs minutes on large switches), still spread over those
// seconds.
const sonicFirstPollWithin = 3 * time.Second

// sonicFirstPoll is the agent's FirstPollWithin: sonicFirstPollWithin in
// SONiC mode, 0 otherwise.
func sonicFirstPoll(m *sonicMode) time.Duration {
	if m == nil {
		return 0
	}
	return sonicFirstPollWithin
}

// sonicStartSettings are the settings a daemon in SONiC mode starts with,
// before Redis is read: nothing sent, no port (Redis's configuration
// follows within a second of its first read).
func sonicStartSettings(s config.Settings) config.Settings {
	return overlaySonic(s, sonic.Config{Polling: sonic.DefaultPolling})
}

// overlaySonic lays CONFIG_DB's sFlow configuration over the settings of
// the file and flags (mod_sonic.c syncConfig: collectors only while
// admin_state is up; agent_id names the agent interface; sflowmgr's
// sample_direction rx, tx, both).
func overlaySonic(base config.Settings, c sonic.Config) config.Settings {
	s := base
	s.Collectors = []config.Collector{{Address: config.NoCollector}}
	if c.AdminUp && len(c.Collectors) > 0 {
		size := 0
		if len(base.Collectors) > 0 {
			size = base.Collectors[0].MaxDatagramSize
		}
		s.Collectors = nil
		for _, col := range c.Collectors {
			s.Collectors = append(s.Collectors, config.Collector{Address: col.Addr.String(), Device: col.Device, MaxDatagramSize: size})
		}
	}
	s.Polling = config.Seconds(c.Polling)
	if c.AgentID != "" {
		s.AgentInterface, s.AgentAddress = c.AgentID, ""
	}
	switch c.Direction {
	case "tx":
		s.Direction = "egress"
	case "both":
		s.Direction = "both"
	default:
		s.Direction = "ingress"
	}
	s.PortDirection = nil
	if c.MaxHeaderSize > 0 {
		s.HeaderBytes = c.MaxHeaderSize
	}
	if c.DropMonitorLimit > 0 {
		s.DropsLimit = c.DropMonitorLimit
	}
	return s
}

// setBaseSources records where the file's and flags' settings came from
// (at start) and returns the sources of the settings the daemon starts
// with (sonicStartSettings: Redis not read yet, so sFlow is off as with
// admin_state down).
func (m *sonicMode) setBaseSources(src config.Sources) config.Sources {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.baseSrc = src
	return sonicSources(src, sonic.Config{Polling: sonic.DefaultPolling})
}

// changed is the client's OnChange: a configuration that changed is
// applied through reload (checked whole first; refused, the running one
// stays); ports and readiness through a reconfiguration.
func (m *sonicMode) changed(st *sonic.State) {
	m.mu.Lock()
	cfgChanged := m.last == nil || !sameConfig(*m.last, st.Config)
	base, baseSrc := m.base, m.baseSrc
	if cfgChanged {
		c := st.Config
		m.last = &c
	}
	m.mu.Unlock()
	if cfgChanged {
		s := overlaySonic(base, st.Config)
		err := s.Validate()
		if err == nil {
			err = Validate(s)
		}
		if err == nil {
			err = m.d.reload(s, sonicSources(baseSrc, st.Config))
		}
		if err != nil {
			m.reloadErrors.Add(1)
			m.log.Error("sonic: configuration from Redis refused; the running one stays", "err", err)
		} else {
			m.log.Info("sonic: configuration from Redis applied", "admin_state_up", st.Config.AdminUp,
				"collectors", len(s.StaticCollectors()), "polling", s.Polling, "agent_id", st.Config.AgentID, "direction", s.Direction)
		}
	}
	m.d.poke()
}

func sameConfig(a, b sonic.Config) bool {
	if a.AdminUp != b.AdminUp || a.Polling != b.Polling || a.AgentID != b.AgentID || a.Direction != b.Direction ||
		a.MaxHeaderSize != b.MaxHeaderSize || a.DropMonitorLimit != b.DropMonitorLimit || len(a.Collectors) != len(b.Collectors) {
		return false
	}
	for i := range a.Collectors {
		if a.Collectors[i] != b.Collectors[i] {
			return false
		}
	}
	return true
}

// reloadBase takes new settings of the file and flags (SIGHUP), read from
// src (nil: as before), and returns them with Redis's configuration over
// them, and the sources of the result.
func (m *sonicMode) reloadBase(s config.Settings, src config.Sources) (config.Settings, config.Sources) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.base = s
	if src != nil {
		m.baseSrc = src
	}
	c := sonic.Config{Polling: sonic.DefaultPolling}
	if m.last != nil {
		c = *m.last
	}
	return overlaySonic(s, c), sonicSources(m.baseSrc, c)
}

// sonicSources are the sources of the settings overlaySonic(base, c)
// gives, base's being baseSrc: each setting Redis decides names its
// database, key and field (`sflowswitchd show`), as overlaySonic lays
// them: the collectors (SFLOW_COLLECTOR, or admin_state while it is
// down), polling, the direction, and agent_id, max_header_size and
// drop_monitor_limit where set.
func sonicSources(baseSrc config.Sources, c sonic.Config) config.Sources {
	out := make(config.Sources, len(baseSrc)+8)
	for k, v := range baseSrc {
		out[k] = v
	}
	global := func(field string) config.Source {
		return config.RedisSource("CONFIG_DB", "SFLOW|global", field)
	}
	switch {
	case !c.AdminUp:
		out["collector"] = global("admin_state")
	case len(c.Collectors) == 0:
		out["collector"] = config.RedisSource("CONFIG_DB", "SFLOW_COLLECTOR", "")
	default:
		names := make([]string, len(c.Collectors))
		for i, col := range c.Collectors {
			names[i] = "SFLOW_COLLECTOR|" + col.Name
		}
		out["collector"] = config.RedisSource("CONFIG_DB", strings.Join(names, ", "), "")
	}
	out["polling"] = global("polling_interval")
	out["direction"] = global("sample_direction")
	out["port_direction"] = global("sample_direction")
	if c.AgentID != "" {
		out["agent_interface"] = global("agent_id")
		out["agent_address"] = global("agent_id")
	}
	if c.MaxHeaderSize > 0 {
		out["header_bytes"] = global("max_header_size")
	}
	if c.DropMonitorLimit > 0 {
		out["drops_limit"] = global("drop_monitor_limit")
	}
	return out
}

// model replaces the kernel's ports of m0 (buildModel's agent address and
// receivers) with SONiC's: every port sampled and polled, every LAG polled
// (its members are sampled), by SONiC's ifIndex; none before SYSTEM_READY.
// It also renews the kernel ifindex → SONiC ifIndex map of the samples
// and logs why the agent address is what it is when that changes.
func (m *sonicMode) model(s config.Settings, m0 model, linux map[int]string) model {
	m0.Ports = nil
	st := m.client.State()
	pm, dm := map[uint32]uint32{}, map[uint32]uint32{}
	if st != nil && st.Ready {
		byName := make(map[string]uint32, len(linux))
		for idx, name := range linux {
			byName[name] = uint32(idx)
		}
		dir, err := sflow.ParseDirection(s.Direction)
		if err != nil {
			dir = sflow.DirectionIngress // validated with the settings
		}
		for _, p := range st.Ports {
			if p.IsLAG() {
				m0.Ports = append(m0.Ports, mib.Port{IfIndex: p.Index, CountersOnly: true})
				if os := byName[p.Name]; os != 0 {
					dm[os] = p.Index
				}
				continue
			}
			// Rate 1: the ASIC samples at the rate SONiC set per port
			// (SFLOW_SESSION_TABLE); the agent keeps every sample and
			// reports the rate it carries.
			m0.Ports = append(m0.Ports, mib.Port{IfIndex: p.Index, Direction: dir, StaticRate: 1})
			os := p.OSIndex
			if os == 0 {
				os = byName[p.Name]
			}
			if os != 0 {
				pm[os], dm[os] = p.Index, p.Index
			}
		}
	}
	m.portMap.Store(&pm)
	m.dropMap.Store(&dm)
	m.logAgent(s)
	return m0
}

// logAgent logs the agent address and why it was chosen, when either
// changes (the election: daemon/internal/agentaddr.Choose; agent_id first).
func (m *sonicMode) logAgent(s config.Settings) {
	addrs, err := agentaddr.List()
	if err != nil {
		return // reconfigure reports it
	}
	a, why, err := agentaddr.Choose(s.AgentAddress, s.AgentInterface, preferCIDRs(addrs, s.AgentCIDRs()))
	msg := fmt.Sprintf("%s %s", a, why)
	if err != nil {
		msg = err.Error()
	}
	m.mu.Lock()
	same := msg == m.lastWhy
	m.lastWhy = msg
	m.mu.Unlock()
	if same {
		return
	}
	if err != nil {
		m.log.Warn("sonic: no agent address from agent_id", "agent_id", s.AgentInterface, "err", err)
		return
	}
	m.log.Info("sonic: agent address", "address", a, "reason", why, "agent_id", s.AgentInterface)
}

// mapPort is psample's PortMap: the kernel's ifindex to SONiC's.
func (m *sonicMode) mapPort(k uint32) (uint32, bool) {
	idx, ok := (*m.portMap.Load())[k]
	return idx, ok
}

// mapDropPort is drop notifications' PortMap: the kernel's ifindex of a
// port or LAG netdev to SONiC's ifIndex.
func (m *sonicMode) mapDropPort(k uint32) (uint32, bool) {
	idx, ok := (*m.dropMap.Load())[k]
	return idx, ok
}

// Read is psample's pool source: the packets SONiC port idx's ASIC
// counted in and out (COUNTERS_DB, as last read).
func (m *sonicMode) Read(idx uint32) (psample.PortCounts, error) {
	st := m.client.State()
	if st == nil {
		return psample.PortCounts{}, psample.ErrNoPort
	}
	p, ok := st.Port(idx)
	if !ok {
		return psample.PortCounts{}, psample.ErrNoPort
	}
	c, ok := m.client.Counters(st, p)
	if !ok {
		return psample.PortCounts{}, fmt.Errorf("sonic: no counters of %s", p.Name)
	}
	in, out := c.Packets()
	return psample.PortCounts{RxPackets: in, TxPackets: out}, nil
}

// psampleConfig is SONiC mode's psample: listen-only, groups 1 and 2,
// SONiC's ifIndex, pools from COUNTERS_DB.
func (m *sonicMode) psampleConfig(s config.Settings, log *slog.Logger) source.PsampleConfig {
	return source.PsampleConfig{Workers: s.Workers, IngressGroup: sonicIngressGroup, EgressGroup: sonicEgressGroup,
		Pool: m, PortMap: m.mapPort, Logger: log}
}

// sonicRecords are one SONiC port's counter records, reused per port (a
// port belongs to one worker, which encodes them before its next poll).
type sonicRecords struct {
	ifc  sflow.IfCounters
	eth  sflow.EthernetCounters
	lag  sflow.LAGPortStats
	name sflow.PortName
}

// counterRecords is the counter source of SONiC ports.
type counterRecords struct {
	m    *sonicMode
	mu   sync.Mutex
	recs map[uint32]*sonicRecords
	// ids are where each port's last counters came from
	// (sonic.CounterID); gens count the changes of source.
	ids  map[uint32]string
	gens map[uint32]uint64
}

// generation is SONiC port idx's counter generation as last read: it
// changes when the counters came from a new source (a new SAI object,
// other LAG members), decided from the counters actually read, so that a
// poll racing the change cannot pass the discontinuity with old values.
func (c *counterRecords) generation(idx uint32) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gens[idx]
}

// appendCounters appends SONiC port idx's if_counters (the ASIC's
// counters, SONiC's ifIndex, a LAG's as its members' sum),
// ethernet_counters where the ASIC keeps dot3 statistics, lag_port_stats
// of a LAG member, and port_name.
func (c *counterRecords) appendCounters(recs []sflow.Record, idx uint32) ([]sflow.Record, error) {
	st := c.m.client.State()
	if st == nil {
		return recs, errors.New("sonic: nothing read from Redis yet")
	}
	p, ok := st.Port(idx)
	if !ok {
		return recs, fmt.Errorf("sonic: no port of ifIndex %d", idx)
	}
	ct, ok := c.m.client.Counters(st, p)
	if !ok {
		return recs, fmt.Errorf("sonic: no counters of %s in COUNTERS_DB", p.Name)
	}
	id := sonic.CounterID(st, p)
	c.mu.Lock()
	r := c.recs[idx]
	if r == nil {
		r = &sonicRecords{}
		c.recs[idx] = r
	}
	if old, ok := c.ids[idx]; ok && old != id {
		c.gens[idx]++
	}
	c.ids[idx] = id
	c.mu.Unlock()
	sonic.IfCounters(p, ct, &r.ifc)
	recs = append(recs, &r.ifc)
	if sonic.EthernetCounters(ct, &r.eth) {
		recs = append(recs, &r.eth)
	}
	if sonic.LAGPortStats(st, p, &r.lag) {
		// A LAG member: lag_port_stats with its if_counters (sFlow LAG
		// counters; hsflowd's mod_sonic sends them for every member).
		recs = append(recs, &r.lag)
	}
	r.name.PortName = p.Name
	return append(recs, &r.name), nil
}

// start runs the Redis client until ctx ends.
func (m *sonicMode) start(ctx context.Context, running *sync.WaitGroup) {
	running.Go(func() { m.client.Run(ctx) })
}

// writeAuto writes hsflowd.auto for settings s and agent address a: the
// settings while something is sent, the revision lines alone otherwise
// (hsflowd's syncOutputFile; mod_sonic turns sFlow off with no collector
// or admin_state down). agent_id reaches hsflowd as a configured agent
// device (mod_sonic's "agent=" line).
func (m *sonicMode) writeAuto(s config.Settings, a netip.Addr) {
	if m.auto == nil {
		return
	}
	as := sonicAutoSettings(s, a, m.host)
	if _, err := m.auto.Write(as); err != nil {
		m.log.Warn("sonic: writing hsflowd.auto", "err", err)
	}
}

// sonicAutoSettings are SONiC mode's hsflowd.auto lines for settings s,
// agent address a and host name host.
func sonicAutoSettings(s config.Settings, a netip.Addr, host string) autofile.Settings {
	as := autofile.Settings{Off: len(s.StaticCollectors()) == 0 || !a.IsValid(), Hostname: host,
		Sampling: s.Sampling, HeaderBytes: s.HeaderBytes, DatagramBytes: sflow.DefaultMaxDatagramSize, Polling: int(s.Polling),
		AgentDevice: s.AgentInterface, AgentDeviceConfigured: s.AgentInterface != "", AgentIP: a,
		DSIndex: int(mib.HostSource.Index)}
	if as.Sampling == 0 {
		as.Sampling = s.SamplingUnknownSpeed
	}
	for _, c := range s.StaticCollectors() {
		ap, err := netip.ParseAddrPort(c.Address)
		if err != nil {
			continue // not a literal: SONiC's are
		}
		if c.MaxDatagramSize != 0 {
			as.DatagramBytes = c.MaxDatagramSize
		}
		as.Collectors = append(as.Collectors, autofile.Collector{Addr: ap, Device: c.Device})
	}
	return as
}

// statePorts names SONiC mode's ports of the settings in force by
// SONiC's names (their ifIndex is SONiC's, not the kernel's) and says
// where their rate comes from: the ASIC samples at the rate SONiC set, and
// each sample carries it (the agent's own rate is 1).
func (m *sonicMode) statePorts(ps []inforce.Port) {
	for i := range ps {
		ps[i].Name = m.portName(ps[i].IfIndex)
		ps[i].RateSource = "the ASIC's, per sample (SONiC's SFLOW_SESSION)"
	}
}

// adapters are SONiC mode's host_adapters: every SONiC port (not the
// LAGs) by SONiC's ifIndex, with its netdev's MAC (macs, by the kernel's
// device names), else DEVICE_METADATA's mac, which SONiC gives its front
// panel ports. hsflowd lists the adaptors that are not switch ports
// instead (hsflowd.c host_adaptors skips nio->switchPort, which
// mod_sonic sets on every SONiC port), by Linux ifindex: numbers from
// another namespace than every other ifIndex the agent sends here, which
// may collide with SONiC's (Ethernet4 is 5 in both), so the ports the
// agent reports are listed, as outside SONiC mode.
func (m *sonicMode) adapters(macs map[string]net.HardwareAddr) []host.Adapter {
	st := m.client.State()
	if st == nil {
		return nil
	}
	var sys [6]byte
	hasSys := len(st.Config.MAC) == 6
	if hasSys {
		sys = [6]byte(st.Config.MAC)
	}
	out := make([]host.Adapter, 0, len(st.Ports))
	for _, p := range st.Ports {
		if p.IsLAG() {
			continue
		}
		a := host.Adapter{IfIndex: p.Index}
		switch mac := macs[p.Name]; {
		case len(mac) == 6 && mac.String() != "00:00:00:00:00:00":
			a.MACs = [][6]byte{[6]byte(mac)}
		case hasSys:
			a.MACs = [][6]byte{sys}
		}
		out = append(out, a)
	}
	return out
}

// portName is the name of SONiC port idx ("" unknown).
func (m *sonicMode) portName(idx uint32) string {
	if st := m.client.State(); st != nil {
		if p, ok := st.Port(idx); ok {
			return p.Name
		}
	}
	return ""
}

// SONiC mode's metrics.
var (
	sonicConnected = prom.Desc("sonic_redis_connected",
		"1 while every SONiC Redis database answers, 0 while the agent retries with backoff (the last configuration stays in force).")
	sonicReconnects = prom.Desc("sonic_redis_reconnects_total",
		"Redis sessions that ended with an error and were retried.")
	sonicBad = prom.Desc("sonic_bad_values_total",
		"Bad values read from SONiC's Redis, by table: each was logged and skipped alone.", "table")
	sonicPorts = prom.Desc("sonic_ports",
		"SONiC ports and LAGs reported (0 until SYSTEM_READY or waitReady).")
	sonicReady = prom.Desc("sonic_ready",
		"1 once SYSTEM_READY said UP or waitReady passed: ports are reported.")
	sonicNotifications = prom.Desc("sonic_keyspace_notifications_total",
		"Redis keyspace notifications received for the tables read.")
	sonicRefused = prom.Desc("sonic_config_refused_total",
		"Configurations from Redis refused whole (the running one stayed).")
)

// sonicCollector exports SONiC mode's metrics.
type sonicCollector struct{ m *sonicMode }

func (c sonicCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sonicConnected, sonicReconnects, sonicBad, sonicPorts, sonicReady, sonicNotifications, sonicRefused} {
		ch <- d
	}
}

func (c sonicCollector) Collect(ch chan<- prometheus.Metric) {
	cl := c.m.client
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	ch <- prometheus.MustNewConstMetric(sonicConnected, prometheus.GaugeValue, b(cl.Connected.Load()))
	ch <- prom.Counter(sonicReconnects, cl.Reconnects.Load())
	bad := cl.BadValues()
	tables := make([]string, 0, len(bad))
	for t := range bad {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	for _, t := range tables {
		ch <- prom.Counter(sonicBad, bad[t], t)
	}
	n, ready := 0, false
	if st := cl.State(); st != nil {
		n, ready = len(st.Ports), st.Ready
	}
	ch <- prometheus.MustNewConstMetric(sonicPorts, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(sonicReady, prometheus.GaugeValue, b(ready))
	ch <- prom.Counter(sonicNotifications, cl.Notifications.Load())
	ch <- prom.Counter(sonicRefused, c.m.reloadErrors.Load())
}

// outputLookup is the agent's egress-port lookup: the kernel's FDB and
// FIB, numbered by the kernel's ifindex, know nothing of what SONiC's ASIC
// forwards, and a port of theirs is not SONiC's ifIndex: in SONiC mode
// none (an ingress sample's output is reported unknown; an egress
// sample's output is its port).
func outputLookup(t *forwarding.Table, m *sonicMode) agent.OutputLookup {
	if m != nil {
		return nil
	}
	return t
}

// tunnelLookup is the agent's tunnel lookup, by the kernel's devices:
// none in SONiC mode (SONiC's ports are not the kernel's tunnels).
func tunnelLookup(t *forwarding.Table, m *sonicMode) agent.TunnelLookup {
	if m != nil {
		return nil
	}
	return t
}

// noSampling is SONiC mode's dataplane where the kernel has no psample:
// ports are polled, nothing is sampled.
type noSampling struct{}

func (noSampling) SetPort(uint32, agent.PortSampling) error { return nil }
func (noSampling) RemovePort(uint32) error                  { return nil }
func (noSampling) PortPool(uint32) (uint64, uint64)         { return 0, 0 }
