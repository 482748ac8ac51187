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
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netns"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/agent/hostcounters"
	"github.com/sflowswitchd/sflowswitchd/agent/sflow"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/dataplane/forwarding"
)

// hostSource is the data source of the host counters: entPhysicalEntry.1.
var hostSource = sflow.DataSource{Type: sflow.SourceEntPhysicalEntry, Index: 1}

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

	mu       sync.Mutex
	settings Settings
	ports    map[int]dataplane.PortInfo // every link, by ifindex
	sampled  map[uint32]portState       // what is configured now
	changed  chan struct{}
}

// portState is a sampled port as configured, for metrics.
type portState struct {
	name       string
	rate       uint32
	kernelRate uint32
}

func newDaemon(s Settings, log *slog.Logger) (*daemon, error) {
	dp, err := dataplane.Open(dataplane.Config{Workers: s.Workers, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("loading the XDP sampler: %w", err)
	}
	d := &daemon{
		log:      log,
		dp:       dp,
		settings: s,
		ports:    map[int]dataplane.PortInfo{},
		sampled:  map[uint32]portState{},
		changed:  make(chan struct{}, 1),
	}
	d.output = forwarding.New(netns.None(), log)
	d.counters, err = newCounterSource(hostcounters.New(hostcounters.Options{Adapters: d.adapters}))
	if err != nil {
		dp.Close()
		return nil, err
	}
	d.agent = agent.New(agent.Options{
		Workers:   s.Workers,
		Dataplane: &dataplaneAdapter{dp: dp},
		Counters:  d.counters,
		Output:    d.output,
		Logger:    log,
	})
	return d, nil
}

// run serves until ctx ends, then detaches everything.
func (d *daemon) run(ctx context.Context) error {
	defer func() {
		if err := d.dp.Close(); err != nil {
			d.log.Error("detaching", "err", err)
		}
	}()
	readers := make([]agent.SampleReader, d.agent.Workers())
	for i := range readers {
		r, err := d.dp.Ring(i)
		if err != nil {
			return err
		}
		readers[i] = newRingSource(r)
	}
	events := make(chan dataplane.PortEvent, 256)
	watchErr := make(chan error, 1)
	go func() { watchErr <- dataplane.WatchPorts(ctx, netns.None(), events) }()
	go func() {
		if err := d.output.Run(ctx); err != nil {
			d.log.Error("forwarding table: output ports will be reported unknown", "err", err)
		}
	}()
	if addr := d.settings.Metrics; addr != "" {
		if err := d.serveMetrics(ctx, addr); err != nil {
			return err
		}
	}
	agentDone := make(chan struct{})
	go func() {
		d.agent.Run(ctx, readers)
		close(agentDone)
	}()
	d.log.Info("sflowswitchd running", "workers", d.agent.Workers(), "collectors", len(d.settings.Collectors))

	// Port events are coalesced: a burst of netlink messages (a port
	// created, renamed, brought up) triggers one reconfiguration.
	var settle <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			<-agentDone
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
func (d *daemon) reload(s Settings) {
	d.mu.Lock()
	old := d.settings
	if s.Workers != old.Workers {
		d.log.Warn("a change of workers takes effect at restart", "running", old.Workers, "configured", s.Workers)
		s.Workers = old.Workers
	}
	if s.Metrics != old.Metrics {
		d.log.Warn("a change of the metrics address takes effect at restart")
		s.Metrics = old.Metrics
	}
	d.settings = s
	d.mu.Unlock()
	d.log.Info("configuration reloaded")
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

// reconfigure derives the agent configuration from the settings and the
// ports present now, and applies it.
func (d *daemon) reconfigure() {
	d.mu.Lock()
	s := d.settings
	ports := make([]dataplane.PortInfo, 0, len(d.ports))
	for _, p := range d.ports {
		ports = append(ports, p)
	}
	d.mu.Unlock()
	sort.Slice(ports, func(i, j int) bool { return ports[i].Index < ports[j].Index })

	cfg, states, err := buildConfig(s, ports, d.log)
	if err != nil {
		d.log.Error("configuration refused", "err", err)
		return
	}
	if err := d.agent.Apply(cfg); err != nil {
		d.log.Warn("configuration applied with errors", "err", err)
	}
	d.mu.Lock()
	d.sampled = states
	d.mu.Unlock()
	keep := make(map[uint32]bool, len(states))
	for idx := range states {
		keep[idx] = true
	}
	d.counters.forget(keep)
}

// buildConfig turns settings and the current ports into the agent's
// configuration: one receiver per collector; for every selected port, one
// sampler and one poller instance per receiver (instance i reports to
// receiver i); the host poller on 2:1 for every receiver.
func buildConfig(s Settings, ports []dataplane.PortInfo, log *slog.Logger) (agent.Config, map[uint32]portState, error) {
	var cfg agent.Config
	addrs, err := listHostAddrs()
	if err != nil {
		return cfg, nil, err
	}
	cfg.AgentAddress, _, err = chooseAgentAddress(s.AgentAddress, s.AgentInterface, addrs)
	if err != nil {
		log.Warn("agent address unknown", "err", err)
	}
	for i, c := range s.Collectors {
		ap, err := resolveCollector(c.Address)
		if err != nil {
			return cfg, nil, fmt.Errorf("collector %d: %w", i+1, err)
		}
		cfg.Receivers = append(cfg.Receivers, agent.ReceiverConfig{Index: i + 1, Address: ap, MaxDatagramSize: c.MaxDatagramSize})
	}
	sel, err := dataplane.SelectPorts(s.Ports)
	if err != nil {
		return cfg, nil, err
	}
	var monSel dataplane.PortSelector
	if len(s.MonitorPorts) > 0 {
		if monSel, err = dataplane.SelectPorts(s.MonitorPorts); err != nil {
			return cfg, nil, err
		}
	}
	cfg.MonitorPorts = map[uint32]bool{}
	states := map[uint32]portState{}
	for _, p := range ports {
		monitor := monSel != nil && monSel(p)
		if !monitor && !sel(p) {
			continue
		}
		idx := uint32(p.Index)
		rate := s.samplingRate(p.SpeedMbps)
		if monitor {
			cfg.MonitorPorts[idx] = true
		}
		for r := range cfg.Receivers {
			cfg.Samplers = append(cfg.Samplers, agent.SamplerConfig{IfIndex: idx, Instance: r + 1, Receiver: r + 1, Rate: rate, HeaderBytes: s.HeaderBytes})
			cfg.Pollers = append(cfg.Pollers, agent.PollerConfig{Source: sflow.DataSource{Type: sflow.SourceIfIndex, Index: idx}, Instance: r + 1, Receiver: r + 1, Interval: s.pollInterval()})
		}
		states[idx] = portState{name: p.Name, rate: rate, kernelRate: agent.KernelRate(rate)}
	}
	for r := range cfg.Receivers {
		cfg.Pollers = append(cfg.Pollers, agent.PollerConfig{Source: hostSource, Instance: r + 1, Receiver: r + 1, Interval: s.pollInterval()})
	}
	return cfg, states, nil
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

// serveMetrics starts the Prometheus listener; it stops with ctx.
func (d *daemon) serveMetrics(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", &metricsHandler{agent: d.agent, ports: d.portMetrics})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("metrics listener", "err", err)
		}
	}()
	d.log.Info("metrics listening", "addr", ln.Addr().String())
	return nil
}

func (d *daemon) portMetrics() []portMetrics {
	d.mu.Lock()
	states := make(map[uint32]portState, len(d.sampled))
	for k, v := range d.sampled {
		states[k] = v
	}
	d.mu.Unlock()
	out := make([]portMetrics, 0, len(states))
	for idx, st := range states {
		c, err := d.dp.PortCounters(int(idx))
		if err != nil {
			continue
		}
		out = append(out, portMetrics{name: st.name, ifindex: idx, pool: c.Pool, samples: c.Samples, drops: c.Drops, rate: st.rate, kernelRate: st.kernelRate})
	}
	return out
}
