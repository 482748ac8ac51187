package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netns"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/agent/xdp"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/dataplane/forwarding"
	"github.com/sflowswitchd/sflowswitchd/internal/appsubagent"
	"github.com/sflowswitchd/sflowswitchd/internal/collectoraddr"
	"github.com/sflowswitchd/sflowswitchd/internal/config"
	"github.com/sflowswitchd/sflowswitchd/internal/dropnotify"
	"github.com/sflowswitchd/sflowswitchd/internal/featurereport"
	"github.com/sflowswitchd/sflowswitchd/internal/hostcounters"
	"github.com/sflowswitchd/sflowswitchd/internal/metrics"
	"github.com/sflowswitchd/sflowswitchd/internal/portfail"
	"github.com/sflowswitchd/sflowswitchd/internal/privilege"
	"github.com/sflowswitchd/sflowswitchd/mib"
	"github.com/sflowswitchd/sflowswitchd/mib/apmmib"
	"github.com/sflowswitchd/sflowswitchd/sflow"
	"github.com/sflowswitchd/sflowswitchd/snmpd"
)

// hostSource is the data source of the host counters: entPhysicalEntry.1.
var hostSource = mib.HostSource

// version is the software revision reported in sFlowVersion; release
// builds set it with -ldflags "-X main.version=1.2.3".
var version = ""

// revision returns version, or the module version the binary was built
// from, or "dev".
func revision() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// runDaemon runs the agent until SIGINT or SIGTERM; SIGHUP reloads the
// config file.
func runDaemon(args []string, stdout, stderr io.Writer) int {
	f := newFlags()
	f.fs.SetOutput(stderr)
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if f.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sflowswitchd: unexpected argument %q (subcommands: sflowswitchd help)\n", f.fs.Arg(0))
		return 2
	}
	s, err := f.load()
	if err != nil {
		fmt.Fprintf(stderr, "sflowswitchd: %v\n", err)
		return 2
	}
	level := new(slog.LevelVar)
	setLevel(level, s.LogLevel)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	privilege.LogCapabilities(log)
	if err := config.RequireAgentAddress(s); err != nil {
		log.Error("refusing to start", "err", err)
		return 1
	}
	d, err := newDaemon(s, log)
	if err != nil {
		log.Error("starting", "err", err)
		return 1
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				ns, err := f.load()
				if err != nil {
					log.Error("config reload refused; previous settings stay in force", "err", err)
					continue
				}
				setLevel(level, ns.LogLevel)
				d.reload(ns)
			}
		}
	}()
	if err := d.run(ctx); err != nil {
		log.Error("stopped", "err", err)
		return 1
	}
	return 0
}

func setLevel(l *slog.LevelVar, s string) {
	switch s {
	case "debug":
		l.Set(slog.LevelDebug)
	case "warn":
		l.Set(slog.LevelWarn)
	case "error":
		l.Set(slog.LevelError)
	default:
		l.Set(slog.LevelInfo)
	}
}

// daemon ties the dataplane, the agent and port discovery together.
type daemon struct {
	log      *slog.Logger
	dp       *dataplane.Dataplane
	agent    *agent.Agent
	output   *forwarding.Table
	counters *counterSource
	// apps is the application sub-agent (nil when -app-api is off), and
	// apmSubagent serves its APM-MIB reports over AgentX (nil when either
	// is off).
	apps        *appsubagent.Subagent
	apmSubagent *snmpd.Subagent
	start       time.Time
	// mib is the sampling configuration model (SFLOW-MIB): the settings
	// and the ports feed it, SNMP SETs change it, and it applies the
	// result to the agent (applyConfig).
	mib *mib.MIB
	// subagent serves mib to the AgentX master; nil when agentx is off.
	subagent *snmpd.Subagent
	// drops runs dropped-packet notifications.
	drops *dropnotify.Runner
	// metrics is the Prometheus registry every part registers on.
	metrics *prometheus.Registry

	// metricsHook, when set (tests), wraps the /metrics handler.
	metricsHook func(http.Handler) http.Handler

	mu       sync.Mutex
	settings config.Settings
	ports    map[int]dataplane.PortInfo // every link, by ifindex
	sampled  map[uint32]portState       // what is configured now
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
	// mibRows is how many static collectors the MIB can hold (receiver
	// rows and instances per data source, fixed at start-up).
	mibRows int
}

// portState is a sampled port as configured, for metrics.
type portState struct {
	name       string
	rate       uint32
	kernelRate uint32
}

func newDaemon(s config.Settings, log *slog.Logger) (*daemon, error) {
	hook, err := dataplane.ParseHook(s.Hook)
	if err != nil {
		return nil, err // validated with the settings: not expected
	}
	dp, err := dataplane.Open(dataplane.Config{Workers: s.Workers, MaxPorts: s.MaxPorts, Hook: hook, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("loading the sampler: %w", err)
	}
	featurereport.Log(log, dp.Features())
	d := &daemon{
		log:      log,
		dp:       dp,
		settings: s,
		ports:    map[int]dataplane.PortInfo{},
		sampled:  map[uint32]portState{},
		changed:  make(chan struct{}, 1),
		start:    time.Now(),
	}
	d.portFail = portfail.New(log, d.portName)
	d.resolver = collectoraddr.NewResolver(log, d.poke)
	// fail undoes what was opened when a later step fails.
	fail := func(err error) (*daemon, error) {
		return nil, errors.Join(err, dp.Close())
	}
	d.output = forwarding.New(netns.None(), log)
	d.counters, err = newCounterSource(hostcounters.New(hostcounters.Options{Adapters: d.adapters}))
	if err != nil {
		return fail(err)
	}
	d.agent = agent.New(agent.Options{
		Workers:   s.Workers,
		Dataplane: xdp.Dataplane{DP: dp},
		Counters:  d.counters,
		Output:    d.output,
		Logger:    log,
	})
	// Drop notifications are a sub-agent after the workers (0..Workers-1).
	d.drops = dropnotify.New(uint32(s.Workers), dp.Features(), log)
	// Per-collector metrics cover every sub-agent's datagrams.
	d.agent.AddCollectorSet(&d.drops.Reporter().Stats().Collectors)
	d.metrics = d.newMetrics()
	d.metrics.MustRegister(metrics.NewConfigCollector(metrics.ConfigState{
		FailedPorts:       d.portFail.Failed,
		Collectors:        d.resolver.Stats,
		UnmatchedPatterns: d.unmatchedPatterns,
	}))
	// The MIB is sized once: static receivers need a receiver row and an
	// instance each, so many collectors enlarge it (a configuration
	// without SNMP behaves as before: instance r reports to collector r).
	n := len(s.StaticCollectors())
	d.mibRows = min(max(s.SNMPReceivers, n), max(s.SNMPInstances, n))
	d.mib, err = mib.New(mib.Config{
		Receivers: max(s.SNMPReceivers, n),
		Instances: max(s.SNMPInstances, n),
		Revision:  revision(),
		Apply:     d.applyConfig,
		Logger:    log,
	})
	if err != nil {
		return fail(err)
	}
	network, addr, err := config.ParseAgentX(s.AgentX)
	if err != nil {
		return fail(err)
	}
	if network != "" {
		d.subagent, err = snmpd.New(snmpd.Config{
			Network:     network,
			Address:     addr,
			Subtree:     mib.Subtree,
			Description: "sflowswitchd SFLOW-MIB",
			Handler:     d.mib,
			// The subagent logs every reconnect attempt; those go to
			// debug, watchAgentX reports state changes once.
			Logger: slog.New(debugOnly{log.Handler()}),
		})
		if err != nil {
			return fail(err)
		}
	}
	return d, nil
}

// applyConfig installs an agent configuration derived by the MIB and
// records what each port samples, for metrics.
func (d *daemon) applyConfig(cfg agent.Config) error {
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
		states[idx] = portState{name: d.ports[int(idx)].Name, rate: minRate(rs), kernelRate: agent.KernelRate(rs...)}
	}
	d.sampled = states
	d.mu.Unlock()
	d.counters.Forget(keep)
	return err
}

func minRate(rs []uint32) uint32 {
	m := rs[0]
	for _, r := range rs[1:] {
		m = min(m, r)
	}
	return m
}

// watchAgentX logs the AgentX session's state changes: once when the
// master cannot be reached (the subagent keeps retrying quietly), once per
// registration and once per loss.
func (d *daemon) watchAgentX(ctx context.Context, address string) {
	t := time.NewTicker(time.Second) // no faster: an idle daemon sleeps
	defer t.Stop()
	connected, warned := false, false
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		switch c := d.subagent.Connected(); {
		case c && !connected:
			d.log.Info("SFLOW-MIB registered with the AgentX master", "agentx", address)
			if path, ok := strings.CutPrefix(address, "unix:"); ok {
				privilege.CheckAgentXSocket(d.log, path)
			}
			connected, warned = true, false
		case !c && connected:
			d.log.Warn("AgentX master connection lost; retrying in the background", "agentx", address)
			connected, warned = false, true
		case !c && !warned && time.Since(start) > 2*time.Second:
			d.log.Warn("AgentX master not reachable; SNMP configuration unavailable until it is, retrying in the background", "agentx", address)
			warned = true
		}
	}
}

// debugOnly is a slog handler that logs every record at debug level.
type debugOnly struct{ h slog.Handler }

func (d debugOnly) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.h.Enabled(ctx, slog.LevelDebug)
}

func (d debugOnly) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r)
}

func (d debugOnly) WithAttrs(as []slog.Attr) slog.Handler { return debugOnly{d.h.WithAttrs(as)} }
func (d debugOnly) WithGroup(g string) slog.Handler       { return debugOnly{d.h.WithGroup(g)} }

// run serves until ctx ends, then detaches everything.
func (d *daemon) run(ctx context.Context) error {
	// Everything started here stops with ctx, which run cancels on its way
	// out, whatever the reason; the goroutines that read the dataplane's
	// memory (workers) and the sockets are waited for before the dataplane
	// is closed and unmapped.
	ctx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer func() {
		cancel()
		if err := d.drops.Stop(); err != nil {
			d.log.Error("stopping drop notifications", "err", err)
		}
		running.Wait()
		if err := d.counters.Close(); err != nil {
			d.log.Error("closing counter readers", "err", err)
		}
		if err := d.dp.Close(); err != nil {
			d.log.Error("detaching", "err", err)
		}
	}()
	// The settings read here take effect at restart only (reload keeps
	// them); a copy taken under the lock does not race with a SIGHUP.
	d.mu.Lock()
	s := d.settings
	d.mu.Unlock()
	readers, err := xdp.Readers(d.dp, d.agent.Workers())
	if err != nil {
		return fmt.Errorf("sample readers: %w", err)
	}
	events := make(chan dataplane.PortEvent, 256)
	watchErr := make(chan error, 1)
	go func() { watchErr <- dataplane.WatchPorts(ctx, netns.None(), events) }()
	go func() {
		if err := d.output.Run(ctx); err != nil {
			d.log.Error("forwarding table: output ports will be reported unknown", "err", err)
		}
	}()
	if err := d.startApps(ctx, s, &running); err != nil {
		return err
	}
	if addr := s.Metrics; addr != "" {
		if err := d.serveMetrics(ctx, addr, &running); err != nil {
			return err
		}
	}
	if err := d.drops.Start(ctx, s); err != nil {
		d.log.Error("drop notifications off", "err", err)
	}
	running.Add(1)
	go func() {
		defer running.Done()
		d.agent.Run(ctx, readers)
	}()
	// The MIB applies receiver timeouts, and the port retry its
	// reapplies, through the agent to the dataplane: waited for like the
	// workers.
	running.Add(2)
	go func() {
		defer running.Done()
		d.mib.Run(ctx)
	}()
	go func() {
		defer running.Done()
		d.portFail.Retry(ctx, func() error {
			_, err := d.mib.Reapply()
			return err
		})
	}()
	// Collector names are looked up once before the first configuration,
	// for at most a second, so that a name that resolves at once loses no
	// sample; a slow or failing one is retried in the background.
	config.StaticReceivers(s, d.resolver)
	primeCtx, primeCancel := context.WithTimeout(ctx, time.Second)
	d.resolver.ResolveDue(primeCtx)
	primeCancel()
	go d.resolver.Run(ctx)
	if d.subagent != nil {
		running.Add(1)
		go func() {
			defer running.Done()
			if err := d.subagent.Run(ctx); err != nil {
				d.log.Error("AgentX subagent stopped", "err", err)
			}
		}()
		running.Add(1)
		go func() {
			defer running.Done()
			d.watchAgentX(ctx, s.AgentX)
		}()
	}
	d.log.Info("sflowswitchd running", "workers", d.agent.Workers(), "collectors", len(s.StaticCollectors()), "agentx", s.AgentX)

	// Port events are coalesced: a burst of netlink messages (a port
	// created, renamed, brought up) triggers one reconfiguration.
	var settle <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-watchErr:
			if ctx.Err() == nil {
				return fmt.Errorf("port discovery stopped: %w", err)
			}
		case ev := <-events:
			d.mu.Lock()
			if ev.Kind == dataplane.PortRemoved {
				delete(d.ports, ev.Port.Index)
			} else {
				d.ports[ev.Port.Index] = ev.Port
			}
			d.mu.Unlock()
			if settle == nil {
				settle = time.After(100 * time.Millisecond)
			}
		case <-d.changed:
			if settle == nil {
				settle = time.After(10 * time.Millisecond)
			}
		case <-settle:
			settle = nil
			d.reconfigure()
		}
	}
}

// reload installs new settings (SIGHUP).
func (d *daemon) reload(s config.Settings) {
	if err := d.checkReload(s); err != nil {
		d.log.Error("config reload refused; previous settings stay in force", "err", err)
		return
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
	if s.Hook != old.Hook {
		d.log.Warn("a change of hook takes effect at restart", "running", old.Hook, "configured", s.Hook)
		s.Hook = old.Hook
	}
	if s.AgentX != old.AgentX || s.SNMPReceivers != old.SNMPReceivers || s.SNMPInstances != old.SNMPInstances {
		d.log.Warn("a change of agentx, snmp_receivers or snmp_instances takes effect at restart")
		s.AgentX, s.SNMPReceivers, s.SNMPInstances = old.AgentX, old.SNMPReceivers, old.SNMPInstances
	}
	d.settings = s
	d.mu.Unlock()
	if err := d.drops.Apply(s); err != nil {
		d.log.Error("drop notifications off", "err", err)
	}
	d.log.Info("configuration reloaded")
	d.poke()
}

// poke asks the run loop to reconfigure.
func (d *daemon) poke() {
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

// reconfigure feeds the settings and the ports present now to the MIB,
// which applies the resulting configuration. Samplers and pollers set over
// SNMP on ports that stay are kept.
func (d *daemon) reconfigure() {
	d.mu.Lock()
	s := d.settings
	ports := make([]dataplane.PortInfo, 0, len(d.ports))
	for _, p := range d.ports {
		ports = append(ports, p)
	}
	d.mu.Unlock()
	sort.Slice(ports, func(i, j int) bool { return ports[i].Index < ports[j].Index })

	m, err := config.BuildModel(s, ports, d.resolver, d.log)
	if err != nil {
		d.log.Error("configuration refused", "err", err)
		return
	}
	d.noteSelection(s, ports)
	if !m.AgentAddr.IsValid() && d.agentAddr.IsValid() {
		d.log.Warn("no agent address available now; keeping the last one", "agent_address", d.agentAddr)
		m.AgentAddr = d.agentAddr
	}
	d.agentAddr = m.AgentAddr
	if err := d.mib.SetStatic(m.Static); err != nil {
		d.log.Error("static receivers refused (more collectors than receiver rows or instances need a restart)", "err", err)
	}
	if err := d.mib.SetAgentAddress(m.AgentAddr); err != nil {
		d.log.Warn("configuration applied with errors", "err", err)
	}
	if err := d.mib.SetPorts(m.Ports); err != nil {
		d.log.Warn("configuration applied with errors", "err", err)
	}
}

// adapters lists the sampled ports' MACs for host_adapters.
func (d *daemon) adapters() []hostcounters.Adapter {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]hostcounters.Adapter, 0, len(d.ports))
	for _, idx := range sortedIndexes(d.ports) {
		p := d.ports[idx]
		if p.Loopback || len(p.MAC) != 6 {
			continue
		}
		out = append(out, hostcounters.Adapter{IfIndex: uint32(p.Index), MACs: [][6]byte{[6]byte(p.MAC)}})
	}
	return out
}

func sortedIndexes(m map[int]dataplane.PortInfo) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}

// serveMetrics starts the Prometheus listener. It stops with ctx: the
// listener closes, requests in flight (which read the dataplane's mapped
// counters) complete, and only then is running done, so run closes the
// dataplane after the last handler.
func (d *daemon) serveMetrics(ctx context.Context, addr string, running *sync.WaitGroup) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	config.WarnExposed(d.log, "metrics", ln.Addr().String())
	mux := http.NewServeMux()
	var mh http.Handler = metrics.Handler(d.metrics, d.log)
	if d.metricsHook != nil {
		mh = d.metricsHook(mh)
	}
	mux.Handle("/metrics", mh)
	mux.HandleFunc("/apm", d.apps.ServeAPM)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	running.Add(1)
	go func() {
		defer running.Done()
		<-ctx.Done()
		// Shutdown waits for the handlers in flight; a scrape stuck
		// longer (a client not reading) is cut by Close.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			d.log.Warn("metrics listener: requests cut at shutdown", "err", err)
			srv.Close()
		}
		<-served
	}()
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("metrics listener", "err", err)
		}
	}()
	d.log.Info("metrics listening", "addr", ln.Addr().String())
	return nil
}

// portName returns the name of port ifindex, or "" if unknown.
func (d *daemon) portName(ifindex uint32) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ports[int(ifindex)].Name
}

// startApps starts the application sub-agent when -app-api is set, and its
// APM-MIB over AgentX when the SFLOW-MIB subagent is on: a second AgentX
// session registering the APM-MIB subtree (RFC 3729) next to the SFLOW-MIB.
func (d *daemon) startApps(ctx context.Context, s config.Settings, running *sync.WaitGroup) error {
	var err error
	d.apps, err = appsubagent.Start(ctx, appsubagent.Config{
		API:         s.AppAPI,
		AllowRemote: s.AppAPIAllowRemote,
		APMInterval: time.Duration(s.APMInterval) * time.Second,
		APMReports:  s.APMReports,
		StateFile:   appsubagent.StateFile(s.StateDir),
	}, d.log)
	if err != nil || d.apps == nil {
		return err
	}
	d.metrics.MustRegister(metrics.NewAppCollector(d.apps.Engine().Stats(), d.apps.Conns()...))
	d.agent.AddCollectorSet(&d.apps.Engine().Stats().Collectors)
	cfg := d.agent.Config()
	d.apps.SetAgentAddress(cfg.AgentAddress)
	d.apps.SetReceivers(cfg.Receivers)
	network, addr, err := config.ParseAgentX(s.AgentX)
	if err != nil || network == "" {
		return err
	}
	d.apmSubagent, err = snmpd.New(snmpd.Config{
		Network:     network,
		Address:     addr,
		Subtree:     apmmib.OID,
		Description: "sflowswitchd APM-MIB",
		Handler:     apmmib.New(d.apps.APM(), apmmib.Options{Start: d.start}),
		Logger:      slog.New(debugOnly{d.log.Handler()}),
	})
	if err != nil {
		return fmt.Errorf("APM-MIB subagent: %w", err)
	}
	running.Add(1)
	go func() {
		defer running.Done()
		if err := d.apmSubagent.Run(ctx); err != nil {
			d.log.Error("APM-MIB AgentX subagent stopped", "err", err)
		}
	}()
	return nil
}
