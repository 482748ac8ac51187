// Package daemon is the composition of sflowswitchd: it builds the
// dataplane, the agent, the SFLOW-MIB, the application sub-agent, drop
// notifications, the counter sources and the metrics from the settings
// (config), each from its own part of them (settings.go), and owns their
// start (New, Run), reload (Reload, and the SNMP-driven reconfiguration
// through the MIB) and stop. Its glue lives under daemon/internal/.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netns"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/agent/persist"
	"github.com/sflowswitchd/sflowswitchd/apps/appsubagent"
	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/collectoraddr"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/dropnotify"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/featurereport"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/handover"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/metrics"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/portfail"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/privilege"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/dataplane/forwarding"
	"github.com/sflowswitchd/sflowswitchd/dataplane/pin"
	"github.com/sflowswitchd/sflowswitchd/dataplane/ports"
	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
	"github.com/sflowswitchd/sflowswitchd/internal/autofile"
	"github.com/sflowswitchd/sflowswitchd/internal/buildinfo"
	"github.com/sflowswitchd/sflowswitchd/internal/inforce"
	"github.com/sflowswitchd/sflowswitchd/internal/instancelock"
	"github.com/sflowswitchd/sflowswitchd/mib"
	"github.com/sflowswitchd/sflowswitchd/sflow"
	"github.com/sflowswitchd/sflowswitchd/source"
	"github.com/sflowswitchd/sflowswitchd/source/counters/host"
)

// hostSource is the data source of the host counters: entPhysicalEntry.1.
var hostSource = mib.HostSource

// Config is what New needs: the settings (config.Load, checked with
// Validate), where to log, and the software revision reported in
// sFlowVersion.
type Config struct {
	Settings config.Settings
	Logger   *slog.Logger
	// Level, when set, is the Logger's level: the daemon sets it from
	// log_level at start and at every reload.
	Level *slog.LevelVar
	// Version is the software revision; "" = the module version the
	// binary was built from, or "dev". Commit is the VCS revision it was
	// built from; "" = the Go toolchain's stamp (internal/buildinfo).
	Version, Commit string
	// Sources are where each setting came from (config.Layers.Sources),
	// for the state file and `sflowswitchd show`; nil = unknown.
	Sources config.Sources
	// ConfigFile is the config file read ("" = none), for the state file.
	ConfigFile string
	// Handover is the previous program's, when this one was exec'ed by an
	// upgrade in place (TakeHandover); nil otherwise.
	Handover *Handover
	// InstanceLock is the network namespace's instance lock
	// (TakeInstanceLock), passed on to the program an upgrade in place
	// execs; nil = none (tests).
	InstanceLock *instancelock.Lock
}

// revision returns v, or the module version the binary was built from,
// or "dev".
func revision(v string) string {
	if v != "" {
		return v
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// New loads the sampler and builds the agent, the MIB and their
// sub-agents from c; nothing runs until Run. It logs the process's
// capabilities first, and refuses to start when no agent address can be
// chosen (ErrNoAgentAddress).
func New(c Config) (*Daemon, error) {
	setLevel(c.Level, c.Settings.LogLevel)
	build := buildinfo.Get(c.Version, c.Commit)
	c.Logger.Info("sflowswitchd starting", "version", build.Version, "commit", build.Commit, "go", build.GoVersion, "pid", os.Getpid())
	privilege.LogCapabilities(c.Logger)
	if err := requireAgentAddress(c.Settings); err != nil {
		return nil, err
	}
	d, err := newDaemon(c.Settings, revision(c.Version), c.Logger, c.Handover, build)
	if d != nil {
		d.sources = c.Sources
		if d.dnssd != nil {
			d.dnssd.baseSrc = c.Sources
		}
		d.configFile = c.ConfigFile
		d.level = c.Level
		d.instanceLock = c.InstanceLock
		d.upgraded(c.Handover)
	}
	return d, err
}

// TakeInstanceLock takes the network namespace's instance lock: one
// sflowswitchd per network namespace (internal/instancelock), whatever
// its pin directory, state directory or metrics address. A program
// exec'ed by an upgrade in place takes over its predecessor's (h). The
// refusal names the running daemon's PID.
func TakeInstanceLock(h *Handover) (*instancelock.Lock, error) {
	fd := -1
	if h != nil {
		fd = h.InstanceLockFD
	}
	return instancelock.Take(instancelock.DefaultName, fd)
}

// ErrNoAgentAddress is New's refusal to start when no agent address can
// be chosen (errors.Is).
var ErrNoAgentAddress = errors.New("no agent address")

// Run serves until ctx ends, then detaches everything; it returns once
// every part has stopped (run.go).
func (d *Daemon) Run(ctx context.Context) error { return d.run(ctx) }

// Reload installs new settings (SIGHUP): settings that can change while
// running take effect at once, the others at restart (logged). Settings
// that could only be applied in part are refused whole, before anything
// changes, and the running ones stay in force (reload.go).
func (d *Daemon) Reload(s config.Settings) error { return d.reloadFrom(s, nil) }

// reloadFrom is Reload with where each setting of s came from (nil: as
// before).
func (d *Daemon) reloadFrom(s config.Settings, src config.Sources) error {
	if d.sonic != nil {
		// SONiC mode: Redis's configuration stays over the file's
		// (DNS-SD is refused with it: config.validateSonic).
		s = d.sonic.reloadBase(s)
	} else if d.dnssd != nil {
		return d.dnssd.reloadBase(d, s, src) // under the DNS-SD answer in force (dnssd.go)
	}
	return d.reload(s, src)
}

// Daemon is the composition: it ties the dataplane, the agent, port
// discovery, the MIB, the application sub-agent, drop notifications and
// the metrics together, and owns their start, reload and stop.
type Daemon struct {
	log *slog.Logger
	dp  *dataplane.Dataplane
	// psample samples the ports instead of dp's BPF samplers (hook
	// psample, or listen-only psample_group); nil otherwise.
	psample *source.Psample
	// mixed routes each port to dp or psample (hook auto on a switch
	// whose ports offload tc); nil otherwise.
	mixed    *source.Mixed
	agent    *agent.Agent
	output   *forwarding.Table
	counters *counterSource
	// apps is the application sub-agent (nil when -app-api is off), and
	// apmSubagent serves its APM-MIB reports over AgentX (nil when either
	// is off).
	apps        *appsubagent.Subagent
	apmSubagent *agentx.Subagent
	start       time.Time
	// mib is the sampling configuration model (SFLOW-MIB): the settings
	// and the ports feed it, SNMP SETs change it, and it applies the
	// result to the agent (applyConfig).
	mib *mib.MIB
	// subagent serves mib to the AgentX master; nil when agentx is off.
	subagent *agentx.Subagent
	// drops runs dropped-packet notifications.
	drops *dropnotify.Runner
	// metrics is the Prometheus registry every part registers on.
	metrics *prometheus.Registry

	// level is the logger's level (Config.Level; nil = not ours to set).
	level *slog.LevelVar
	// instanceLock is Config.InstanceLock.
	instanceLock *instancelock.Lock

	// metricsHook, when set (tests), wraps the /metrics handler.
	metricsHook func(http.Handler) http.Handler

	// ready is closed once Run's start-up completed: ReloadOn applies a
	// SIGHUP caught before then only after it.
	ready   chan struct{}
	version string
	// backoffUp and backoffDown count the backoff's steps (metrics).
	backoffUp, backoffDown atomic.Uint64
	// snmp keeps the MIB's SNMP-set part for the next program that takes
	// the samplers over (nil when nothing is pinned).
	snmp *handover.SNMPStore
	// upgrade is an upgrade in place in progress (under mu), and stopRun
	// ends Run for it.
	upgrade *upgrade
	stopRun func()

	mu       sync.Mutex
	settings config.Settings
	ports    map[int]ports.Info   // every link, by ifindex
	sampled  map[uint32]portState // what is configured now
	changed  chan struct{}
	portFail *portfail.Tracker
	// resolver resolves collector host names in the background.
	resolver *collectoraddr.Resolver
	// unmatchedPats are the port patterns matching no port (under mu);
	// selectionEmpty is set while the port selection matches nothing
	// (reconfigure's goroutine only).
	unmatchedPats  map[string]bool
	selectionEmpty bool
	// agentAddr is the last agent address chosen (reconfigure only).
	agentAddr netip.Addr
	// mgmtLeftOut is the ports the default selection left out, as last
	// logged (reconfigure only).
	mgmtLeftOut string
	// reconfFailures counts reconfigurations that failed (reload.go),
	// reconfFailing is set while the last one failed, reconfWait is the
	// backoff (reconfigure only).
	reconfFailures atomic.Uint64
	reconfFailing  atomic.Bool
	reconfWait     time.Duration
	// reloadFailures counts the reloads refused, reloadFailing is set
	// while the last one was (ReloadOn).
	reloadFailures atomic.Uint64
	reloadFailing  atomic.Bool
	// sources are where each setting in force came from (under mu).
	sources config.Sources
	// build is the running build, for the state file.
	build buildinfo.Info
	// configFile is the config file read, for the state file.
	configFile string
	// agentChoice is the agent address in force and why (under mu).
	agentChoice agentChoice
	// stateMu orders the state file's writes; auto writes hsflowd.auto
	// and stateErr is the last write's failure (under stateMu).
	stateMu  sync.Mutex
	auto     *autofile.Writer
	stateErr error
	// lastState is the state last written, but its time and build
	// (under stateMu).
	lastState inforce.State
	// dnssd is configuration by DNS-SD (dnssd.go); nil when off.
	dnssd *dnssdState
	// snmpRefused counts what restoreSNMP refused.
	snmpRefused snmpRefused
	// mibRows is how many static collectors the MIB can hold (receiver
	// rows and instances per data source, fixed at start-up).
	mibRows int
	// sonic is SONiC mode (sonic.go); nil otherwise.
	sonic *sonicMode
}

// portState is a sampled port as configured, for metrics.
type portState struct {
	name       string
	rate       uint32
	kernelRate uint32
}

func newDaemon(s config.Settings, version string, log *slog.Logger, h *Handover, build buildinfo.Info) (*Daemon, error) {
	var sm *sonicMode
	if s.Sonic {
		// Nothing sent and no port until Redis is read.
		sm = newSonicMode(s, log)
		s = sonicStartSettings(s)
	}
	var dh *pin.Handover
	if h != nil {
		dh = &pin.Handover{LockFD: h.LockFD, OwnerFD: h.OwnerFD}
	}
	dpc, err := dataplaneConfig(s, log, dh)
	if err != nil {
		return nil, err
	}
	dp, err := dataplane.Open(dpc)
	if err != nil {
		return nil, fmt.Errorf("loading the sampler: %w", err)
	}
	featurereport.Log(log, dp.Features())
	d := &Daemon{
		log:      log,
		dp:       dp,
		settings: s,
		ports:    map[int]ports.Info{},
		sampled:  map[uint32]portState{},
		changed:  make(chan struct{}, 1),
		ready:    make(chan struct{}),
		start:    time.Now(),
		version:  version,
		build:    build,
		sonic:    sm,
	}
	if sm != nil {
		sm.d = d
	}
	d.portFail = portfail.New(log, d.portName)
	d.resolver = collectoraddr.NewResolver(log, d.poke)
	// fail undoes what was opened when a later step fails. Pinned
	// samplers stay attached and counting: the next start (or the
	// previous program, rolled back) takes them over.
	fail := func(err error) (*Daemon, error) {
		if d.psample != nil {
			err = errors.Join(err, d.psample.Close())
		}
		if dp.Pinned().Dir() != "" {
			_, rerr := dp.Release()
			return nil, errors.Join(err, rerr)
		}
		return nil, errors.Join(err, dp.Close())
	}
	store, err := agentState(dp, s, log)
	if err != nil {
		return fail(err)
	}
	d.output = forwarding.New(netns.None(), log)
	// extended_router: the table's copies of the routes carry the FIB
	// generation they were read at (dataplane/fibgen.go).
	d.output.SetGen(dp.FIBGen)
	d.counters, err = newCounterSource(host.New(host.Options{Adapters: d.adapters}))
	if err != nil {
		return fail(err)
	}
	bpfSource := source.BPF{DP: dp}
	var sampling agent.SampleSource = bpfSource
	switch {
	case sm != nil:
		d.counters.sonic = &counterRecords{m: sm, recs: map[uint32]*sonicRecords{}, ids: map[uint32]string{}, gens: map[uint32]uint64{}}
		pc := sm.psampleConfig(s, log)
		pc.State = store
		if d.psample, err = source.NewPsample(pc); err != nil {
			// Counters still come from Redis; say loudly that no flow
			// sample will.
			log.Error("sonic: psample unavailable: NO FLOW SAMPLES, counters only", "err", err)
			d.psample, sampling = nil, noSampling{}
		} else {
			sampling = d.psample
		}
	case s.PsampleGroup != 0 || (usePsample(s) && !bpfPortHooks(s)):
		if d.psample, err = source.NewPsample(psampleConfig(s, log, store)); err != nil {
			return fail(fmt.Errorf("psample sampling: %w", err))
		}
		sampling = d.psample
	case s.PortHooks("psample") || (s.PortHooks("auto") && autoPsample(dp.Features(), log)):
		// Ports whose hook is psample, and under auto the switch ports
		// that offload tc: psample there, BPF elsewhere.
		if d.psample, err = source.NewPsample(psampleConfig(s, log, store)); err != nil {
			return fail(fmt.Errorf("psample sampling of the ports that offload tc or are set to psample: %w", err))
		}
		// Each port by its hook (agent.PortSampling.Hook, from
		// port_hook): psample, or under auto if it offloads tc.
		d.mixed = source.NewMixed(bpfSource, d.psample, offloads)
		sampling = d.mixed
	}
	d.agent = agent.New(agent.Options{
		Workers:         s.Workers,
		Source:          sampling,
		Counters:        d.counters,
		Output:          outputLookup(d.output, sm),
		Router:          d.output,
		Tunnels:         tunnelLookup(d.output, sm),
		Logger:          log,
		State:           store,
		Backoff:         agent.Backoff{AgentQuota: uint64(s.MaxSamplesPerSecond), PortQuota: uint64(s.MaxPortSamplesPerSecond)},
		FirstPollWithin: sonicFirstPoll(sm),
		OnBackoff: func(st agent.BackoffStep) {
			if st.To > st.From {
				d.backoffUp.Add(1)
			} else {
				d.backoffDown.Add(1)
			}
		},
	})
	d.start = d.agent.Start()
	if d.psample == nil && sm == nil {
		d.agent.Adopt(source.Adopted(dp))
	}
	// Drop notifications are a sub-agent after the workers (0..Workers-1).
	d.drops = dropnotify.New(uint32(s.Workers), dp.Features(), log)
	d.drops.Reporter().SetState(store)
	if dir := dp.Pinned().Dir(); dir != "" {
		d.drops.SetPinDir(filepath.Join(dir, pin.DropsDir))
	}
	// Per-collector metrics cover every sub-agent's datagrams.
	d.agent.AddCollectorSet(&d.drops.Reporter().Stats().Collectors)
	d.dnssd = newDNSSD(s)
	d.metrics = d.newMetrics()
	if sm != nil {
		d.metrics.MustRegister(sonicCollector{sm})
	}
	d.metrics.MustRegister(d.configCollector())
	if err := d.newMIB(s, version); err != nil {
		return fail(err)
	}
	if err := d.restoreSNMP(s); err != nil {
		log.Warn("the SNMP-set configuration of the previous program was not restored", "err", err)
	}
	if d.subagent, err = d.agentxSubagent(s.AgentX, mib.Subtree, "sflowswitchd SFLOW-MIB", d.mib); err != nil {
		return fail(err)
	}
	return d, nil
}

// configCollector exports the configuration plane's state: ports not
// sampled, collector names, unmatched patterns, reconfigurations and
// reloads that failed, the build.
func (d *Daemon) configCollector() prometheus.Collector {
	return metrics.NewConfigCollector(metrics.ConfigState{
		FailedPorts:       d.portFail.Failed,
		Collectors:        d.resolver.Stats,
		UnmatchedPatterns: d.unmatchedPatterns,
		Reconfigure: func() (uint64, bool) {
			return d.reconfFailures.Load(), d.reconfFailing.Load()
		},
		Reload: func() (uint64, bool) {
			return d.reloadFailures.Load(), !d.reloadFailing.Load()
		},
		Build: metrics.BuildInfo{Version: d.build.Version, Commit: d.build.Commit, GoVersion: d.build.GoVersion},
		Agent: func() (string, string, string) {
			d.mu.Lock()
			defer d.mu.Unlock()
			if !d.agentChoice.addr.IsValid() {
				return "", "", ""
			}
			return d.agentChoice.addr.String(), d.agentChoice.iface, d.agentChoice.why
		},
	})
}

// newMIB builds the SFLOW-MIB, the daemon's configuration model. It is
// sized once: static receivers need a receiver row and an instance each,
// so many collectors enlarge it (a configuration without SNMP behaves as
// before: instance r reports to collector r).
func (d *Daemon) newMIB(s config.Settings, version string) error {
	n := len(s.StaticCollectors())
	d.mibRows = min(max(s.SNMPReceivers, n), max(s.SNMPInstances, n))
	var err error
	d.mib, err = mib.New(mib.Config{
		Receivers: max(s.SNMPReceivers, n),
		Instances: max(s.SNMPInstances, n),
		Revision:  version,
		Apply:     d.applyConfig,
		Logger:    d.log,
		Persist:   d.persistSNMP,
	})
	return err
}

// agentState is the agent's persistent state (sequence numbers, uptime,
// pool bases): pinned with the samplers when they are, logged when it is
// an earlier program's.
func agentState(dp *dataplane.Dataplane, s config.Settings, log *slog.Logger) (*persist.Store, error) {
	mem := dp.Pinned().StateMemory()
	if mem == nil {
		return persist.New(stateSlots(s)), nil
	}
	store, err := persist.Open(mem)
	if err != nil {
		return nil, fmt.Errorf("agent state: %w", err)
	}
	if dp.Pinned().Adopted() {
		log.Info("samplers taken over from the previous program", "ports", len(dp.Pinned().Ports()),
			"agent_state", store.Adopted(), "sequence_numbers", store.Used(), "uptime", time.Since(store.Start()).Round(time.Millisecond))
	}
	return store, nil
}

// restoreSNMP gives the MIB the SNMP-set configuration the previous
// program kept, when this one took its samplers over (an upgrade, a
// restart after a crash); a start that adopts nothing begins afresh. The
// file is another process's to write as well (the state directory is the
// administrator's): a damaged file is set aside and each row the MIB
// refuses (as it would refuse its SET) is dropped, each logged and
// counted (snmp_restore_refused_total); what is valid is restored and the
// daemon starts either way.
func (d *Daemon) restoreSNMP(s config.Settings) error {
	if d.dp.Pinned().Dir() == "" {
		return nil
	}
	for _, dir := range []string{s.StateDir, d.dp.Pinned().Dir()} {
		if err := handover.CheckDir(dir); err != nil {
			d.log.Error("directory open to other users: what the daemon keeps in it for an upgrade or a restart may be replaced; make it the daemon's alone (owned by its user, mode 0700 or 0755)", "err", err)
		}
	}
	store := handover.NewSNMPStore(s.StateDir, handover.SNMPLimit(max(s.SNMPReceivers, len(s.StaticCollectors())),
		max(s.SNMPInstances, len(s.StaticCollectors())), s.MaxPorts+maxVLANSources))
	d.mu.Lock()
	d.snmp = store
	d.mu.Unlock()
	if !d.dp.Pinned().Adopted() {
		return store.Remove()
	}
	snap, err := store.Load()
	if err != nil {
		d.snmpRefused.file.Add(1)
		return err
	}
	if len(snap.Receivers) > 0 {
		d.log.Info("SNMP-set configuration restored", "receivers", len(snap.Receivers), "samplers", len(snap.Samplers), "pollers", len(snap.Pollers))
	}
	refused, err := d.mib.Import(snap)
	for _, r := range refused {
		d.snmpRefused.count(r.Table)
		d.log.Warn("SNMP-set configuration: a restored row refused as its SET would be; dropped", "table", r.Table, "row", r.Row, "err", r.Err)
	}
	if err != nil {
		d.snmpRefused.file.Add(1)
		return err
	}
	return nil
}

// maxVLANSources bounds the VLAN data sources (smonVlanDataSource): one
// per VLAN ID.
const maxVLANSources = 4094

// snmpRefused counts what a start refused of the SNMP-set configuration
// kept by the previous program: rows by table, and whole files (damaged,
// or refused by the agent as a whole).
type snmpRefused struct {
	receiver, sampler, poller, file atomic.Uint64
}

func (r *snmpRefused) count(table string) {
	switch table {
	case "receiver":
		r.receiver.Add(1)
	case "sampler":
		r.sampler.Add(1)
	default:
		r.poller.Add(1)
	}
}

// persistSNMP keeps the MIB's SNMP-set part (mib.Config.Persist).
func (d *Daemon) persistSNMP(snap mib.Snapshot) {
	d.mu.Lock()
	store := d.snmp
	d.mu.Unlock()
	if store == nil {
		return
	}
	if err := store.Save(snap); err != nil {
		d.log.Warn("keeping the SNMP-set configuration for an upgrade or a restart", "err", err)
	}
}

// applyConfig installs an agent configuration derived by the MIB and
// records what each port samples, for metrics.
func (d *Daemon) applyConfig(cfg agent.Config) error {
	err := d.agent.Apply(cfg)
	d.portFail.Note(err)
	// Application data sources report to the same receivers.
	d.apps.SetAgentAddress(cfg.AgentAddress)
	d.apps.SetReceivers(cfg.Receivers)
	// Drop notifications go to every receiver.
	d.drops.Reporter().SetReceivers(cfg.AgentAddress, cfg.Receivers)
	rates := map[uint32][]uint32{}
	keep := map[uint32]bool{}
	for _, sc := range cfg.Samplers {
		rates[sc.IfIndex] = append(rates[sc.IfIndex], sc.Rate)
		keep[sc.IfIndex] = true
	}
	for _, pc := range cfg.Pollers {
		if pc.Source.Type == sflow.SourceIfIndex {
			keep[pc.Source.Index] = true
		}
	}
	d.mu.Lock()
	states := make(map[uint32]portState, len(rates))
	for idx, rs := range rates {
		name := d.ports[int(idx)].Name
		if d.sonic != nil {
			name = d.sonic.portName(idx)
		}
		states[idx] = portState{name: name, rate: minRate(rs), kernelRate: agent.KernelRate(rs...)}
	}
	d.sampled = states
	d.mu.Unlock()
	d.counters.Forget(keep)
	d.writeState(cfg)
	return err
}

func minRate(rs []uint32) uint32 {
	m := rs[0]
	for _, r := range rs[1:] {
		m = min(m, r)
	}
	return m
}

// portName returns the name of port ifindex, or "" if unknown.
func (d *Daemon) portName(ifindex uint32) string {
	if d.sonic != nil {
		return d.sonic.portName(ifindex)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ports[int(ifindex)].Name
}

// poke asks the run loop to reconfigure.
func (d *Daemon) poke() {
	select {
	case d.changed <- struct{}{}:
	default:
	}
}
