package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent/persist"
	"github.com/sflowswitchd/sflowswitchd/dataplane/ports"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// PortSampling is how the dataplane samples one port: the agent's plan
// for the port, which every sample source applies as it is.
type PortSampling = ports.Sampling

// SampleSource is the one thing the agent knows of a sample source
// (package source: the BPF rings, psample, both mixed): it samples the
// ports the agent configures and reports their pools. Its samples reach
// the workers through the SampleReaders given to Run; it may also be a
// SampleCounter (for the backoff).
type SampleSource interface {
	PoolReader
	// SetPort starts or changes sampling of port ifindex.
	SetPort(ifindex uint32, p PortSampling) error
	// RemovePort stops sampling port ifindex. Its pool may restart from 0
	// when it is sampled again.
	RemovePort(ifindex uint32) error
}

// Options are the fixed parts of an Agent.
type Options struct {
	// Workers is the number of sub-agents (default 1), normally one per CPU.
	Workers  int
	Source   SampleSource
	Counters CounterSource
	// Output finds egress ports; nil reports every output as unknown.
	Output OutputLookup
	// Router gives routed samples their extended_router; nil sends none.
	Router RouterLookup
	// Tunnels gives samples on tunnel devices their tunnel records; nil
	// sends none.
	Tunnels TunnelLookup
	// PinCPUs binds worker i's thread to CPU i (modulo the CPUs the
	// process may use), so that each sub-agent keeps its caches and never
	// competes with another worker for a core.
	PinCPUs bool
	Logger  *slog.Logger
	// SendBatch is the number of datagrams a worker sends per system call
	// (0: the sender's default, 32; 1: one write(2) per datagram).
	SendBatch int
	// SendNoGSO sends every datagram as a message of its own, even where
	// UDP GSO could carry a run of equal-size datagrams as one. SendBatch
	// and SendNoGSO are for comparisons (bench/daemon live -send).
	SendNoGSO bool
	// State keeps the sequence numbers, the agent's start and the ports'
	// pool bases where they outlive the process (agent/persist, in the
	// daemon a pinned BPF map): an upgrade or a restart continues them.
	// nil: memory of this process only.
	State *persist.Store
	// Backoff sets the sampling quotas (off when zero; backoff.go), read
	// every BackoffInterval (DefaultBackoffInterval) from a Source that is a
	// SampleCounter. OnBackoff, when set, is told each step.
	Backoff         Backoff
	BackoffInterval time.Duration
	OnBackoff       func(BackoffStep)
}

// Agent is the sFlow agent: it owns the workers and drives the dataplane
// from the configuration. Its methods are safe for concurrent use; the
// sample path never takes its lock.
type Agent struct {
	opts    Options
	log     *slog.Logger
	start   time.Time
	workers []*worker
	// wakers[i] cuts worker i's wait for samples short (nil: not possible).
	wakers []Waker

	mu sync.Mutex
	// collectorSets are the per-collector counters of the sub-agents
	// outside the workers (AddCollectorSet).
	collectorSets []*CollectorSet
	running       bool
	cfg           Config
	ports         map[uint32]PortSampling
	// bases are the pool and drops counted by earlier attachments of a
	// port (words baseWordPool and baseWordDrops of a line of the
	// persistent state).
	bases map[uint32][]uint64
	// held are adopted ports no Apply has configured yet, and adopting
	// holds the workers' reading, until EndAdoption.
	held     map[uint32]bool
	adopting chan struct{}
	// pending are adopted ports part of whose sampling ended with the
	// earlier program (its egress sampler, which is not pinned): their
	// base takes what that part counted, and the part is attached anew,
	// only once the workers have read the samples that waited in the
	// rings (EndAdoption). Until then Apply leaves them as they are.
	pending map[uint32]AdoptedPort
	// override is the backoff's rate in force per port, where it is above
	// the configured one (backoff.go).
	override map[uint32]uint32
}

// New returns an agent with opts.Workers workers; Run starts them.
func New(opts Options) *Agent {
	if opts.Workers < 1 {
		opts.Workers = 1
	}
	if opts.Logger == nil {
		opts.Logger = slogDiscard()
	}
	if opts.State == nil {
		opts.State = persist.New(DefaultStateSlots)
	}
	a := &Agent{opts: opts, log: opts.Logger, start: opts.State.Start(),
		ports: map[uint32]PortSampling{}, bases: map[uint32][]uint64{}, held: map[uint32]bool{}, override: map[uint32]uint32{},
		pending: map[uint32]AdoptedPort{}}
	for i := 0; i < opts.Workers; i++ {
		w := newWorker(i, a.log, opts.Source, opts.Counters, opts.Output, opts.State, rand.Uint64())
		w.router = opts.Router
		w.tunnels = opts.Tunnels
		w.send = sendTuning{batch: opts.SendBatch, noGSO: opts.SendNoGSO}
		a.workers = append(a.workers, w)
	}
	return a
}

// DefaultStateSlots is the size of an agent's state when Options.State is
// nil: room for the sequence numbers of 1000 samplers and pollers.
const DefaultStateSlots = 2048

// State returns the agent's persistent state.
func (a *Agent) State() *persist.Store { return a.opts.State }

// Start returns the agent's start (its uptime's origin): this process's,
// or an earlier one's when the state was adopted.
func (a *Agent) Start() time.Time { return a.start }

// Words of a port's base line (Agent.bases).
const (
	baseWordPool  = 0
	baseWordDrops = 1
)

// base returns port idx's base line: the pool (baseWordPool) and drops
// (baseWordDrops) its earlier attachments counted, kept in the persistent
// state so that an upgrade or a restart continues them. Called with mu
// held.
func (a *Agent) base(idx uint32) []uint64 {
	if b := a.bases[idx]; b != nil {
		return b
	}
	b, err := a.opts.State.ClaimLine(persist.PoolBaseKey(idx))
	if err != nil {
		a.log.Warn("agent state full: a port's pool base is not kept across upgrades and restarts", "ifindex", idx, "err", err)
		b = make([]uint64, persist.LineWords)
	}
	a.bases[idx] = b
	return b
}

// addBase adds what an attachment of port idx that ended counted to the
// port's base. Called with mu held.
func (a *Agent) addBase(idx uint32, pool, drops uint64) {
	b := a.base(idx)
	atomic.StoreUint64(&b[baseWordPool], b[baseWordPool]+pool)
	atomic.StoreUint64(&b[baseWordDrops], b[baseWordDrops]+drops)
}

// Workers returns the number of workers (sub-agents).
func (a *Agent) Workers() int { return len(a.workers) }

// Stats returns worker i's counters.
func (a *Agent) Stats(i int) *WorkerStats { return &a.workers[i].stats }

// WorkerOf returns the worker that owns data source ds. Ports are spread
// by ifIndex; the host and application data sources belong to worker 0.
// The mapping depends only on ds and the worker count, so it stays
// constant for the whole session, as the spec requires of sub-agents.
func (a *Agent) WorkerOf(ds sflow.DataSource) int {
	if ds.Type != sflow.SourceIfIndex {
		return 0
	}
	return int(ds.Index % uint32(len(a.workers)))
}

// Run runs the workers until ctx ends. readers[i] feeds worker i (nil or
// missing: the worker only polls). It returns when every worker has
// flushed and closed its receivers.
func (a *Agent) Run(ctx context.Context, readers []SampleReader) {
	var wg sync.WaitGroup
	a.mu.Lock()
	a.wakers = make([]Waker, len(a.workers))
	for i := range a.workers {
		if i < len(readers) {
			a.wakers[i], _ = readers[i].(Waker)
		}
	}
	a.running = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.running = false
		a.mu.Unlock()
	}()
	// A worker waits for samples until its next tick: wake it when ctx
	// ends, so it stops (and flushes) at once.
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
			return
		}
		for i, wk := range a.wakers {
			if wk == nil {
				continue
			}
			if err := wk.Wake(); err != nil {
				a.log.Debug("waking worker to stop", "worker", i, "err", err)
			}
		}
	}()
	if sc, ok := a.opts.Source.(SampleCounter); ok && a.opts.Backoff.on() {
		interval := a.opts.BackoffInterval
		if interval <= 0 {
			interval = DefaultBackoffInterval
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.runBackoff(ctx, sc, interval)
		}()
	}
	for i, w := range a.workers {
		var src SampleReader
		if i < len(readers) {
			src = readers[i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if a.opts.PinCPUs {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				if cpu, err := pinThread(w.id); err != nil {
					w.log.Warn("cannot pin worker to a CPU", "err", err)
				} else {
					w.log.Debug("worker pinned", "cpu", cpu)
				}
			}
			w.run(ctx, src)
		}()
	}
	wg.Wait()
}

// AdoptedPort is a port an earlier program sampled, as the dataplane took
// it over (pinned samplers).
type AdoptedPort struct {
	// PortSampling is the port's sampling; its Direction the directions
	// the earlier program sampled it in.
	PortSampling
	// Attached are the directions still attached and counting: ingress,
	// or none for a port the earlier program sampled at egress only (an
	// egress sampler is not pinned).
	Attached sflow.Direction
	// EndedPool and EndedDrops are what the port's samplers that ended
	// with the earlier program (its egress sampler) counted: the pool and
	// drops its samples reported, which the port's next pools continue.
	EndedPool, EndedDrops uint64
}

// Adopt tells the agent the ports the dataplane samples already, as an
// earlier program left them (pinned samplers taken over): an Apply
// changes nothing in the kernel for those it configures the same. Until
// EndAdoption, the adopted ports an Apply does not configure are kept
// (the daemon's first configurations come before it has discovered the
// ports), and the workers read no sample: the samples of the gap wait in
// the rings for the samplers that number them, never discarded as of an
// unknown port. Call it before the first Apply.
//
// A port whose egress sampler ended with the earlier program is pending
// until EndAdoption: the samples that waited in the rings are read over
// the port's base as the earlier program left it, and only then does the
// base take what the ended sampler counted and the sampler is attached
// anew, its ingress side continuing as it is. So every waiting sample
// keeps the pool it was taken with, and the pools after it continue them.
func (a *Agent) Adopt(ports map[uint32]AdoptedPort) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for idx, p := range ports {
		if p.Monitor {
			continue // its sockets are this program's to open: SetPort
		}
		if p.Direction.OrIngress() != p.Attached || p.EndedPool != 0 || p.EndedDrops != 0 {
			a.pending[idx] = p
		}
		if p.Attached != 0 {
			ps := p.PortSampling
			ps.Direction = p.Attached
			a.ports[idx] = ps
		}
		a.held[idx] = true
	}
	if len(a.held) > 0 && a.adopting == nil {
		a.adopting = make(chan struct{})
		for _, w := range a.workers {
			w.hold = a.adopting
		}
	}
}

// EndAdoption ends what Adopt began, once the configuration that takes
// the adopted ports over is applied: the adopted ports it does not
// configure stop (their pool goes into the port's base), and the workers
// start reading. Pending ports (Adopt) are completed once the workers
// have read what waited in the rings. Idempotent; a no-op without Adopt.
func (a *Agent) EndAdoption() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	plans := planPorts(&a.cfg, a.WorkerOf)
	for _, idx := range sortedKeys(a.held) {
		if _, planned := plans[idx]; !planned {
			if p, ok := a.pending[idx]; ok {
				a.addBase(idx, p.EndedPool, p.EndedDrops)
				delete(a.pending, idx)
			}
			if _, ok := a.ports[idx]; ok {
				errs = append(errs, a.removePort(idx))
			}
		}
		delete(a.held, idx)
	}
	if a.adopting != nil {
		close(a.adopting)
		a.adopting = nil
	}
	if len(a.pending) > 0 {
		// The samples that waited are read over the bases as the
		// earlier program left them; then the bases take the ended
		// samplers' counts, the workers the new bases, and the kernel
		// the samplers to attach anew (applyLocked).
		a.drainWorkers()
		for idx, p := range a.pending {
			a.addBase(idx, p.EndedPool, p.EndedDrops)
			delete(a.pending, idx)
		}
		errs = append(errs, a.applyLocked(a.cfg))
	}
	return errors.Join(errs...)
}

// extend reports whether port idx, sampled as a.ports says, becomes p by
// adding directions only: the directions it has continue as they are (no
// frame goes uncounted), the added one starts from zero in the kernel
// and in the workers' pools (pool.go: a direction's counts belong to the
// attachment of the port's base, none yet), so the port's pool goes on
// over the same base. A direction removed re-attaches the port instead.
// Called with mu held.
func (a *Agent) extend(idx uint32, p PortSampling) bool {
	cur, ok := a.ports[idx]
	if !ok || cur.Monitor != p.Monitor {
		return false
	}
	have, want := cur.Direction.OrIngress(), p.Direction.OrIngress()
	return want&have == have
}

// drainWorkers makes every running worker read what its reader holds now
// (the samples of attachments that ended: counted over the bases they
// were taken with), and waits until it has. Called with mu held.
func (a *Agent) drainWorkers() {
	if a.adopting != nil || !a.running {
		// Held, the workers read nothing until EndAdoption, which
		// drains them itself; not running, they have read nothing.
		return
	}
	dones := make([]chan struct{}, len(a.workers))
	for i, w := range a.workers {
		dones[i] = make(chan struct{})
		select {
		case w.drain <- dones[i]:
		default: // one is pending: it reads at least as far
			close(dones[i])
			continue
		}
		if a.wakers[i] != nil {
			if err := a.wakers[i].Wake(); err != nil {
				a.log.Warn("waking worker", "worker", i, "err", err)
			}
		}
	}
	deadline := time.After(2 * time.Second)
	for i, d := range dones {
		select {
		case <-d:
		case <-deadline:
			a.log.Warn("worker slow to read its samples before a port's re-attach", "worker", i)
			return
		}
	}
}

// removePort stops sampling port idx, its pool kept in its base. Called
// with mu held.
func (a *Agent) removePort(idx uint32) error {
	pool, drops := a.opts.Source.PortPool(idx)
	var err error
	if rerr := a.opts.Source.RemovePort(idx); rerr != nil {
		err = &PortError{IfIndex: idx, Err: rerr}
	}
	a.addBase(idx, pool, drops)
	delete(a.ports, idx)
	return err
}

// Config returns the running configuration.
func (a *Agent) Config() Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg
}

// Apply validates cfg and makes it the running configuration: the
// dataplane is updated port by port (kernel rate, header length, owning
// worker, mode) and every worker receives its share. An invalid cfg is
// refused whole and changes nothing. Source failures on single ports
// (a port that vanished, no free port slot) are returned joined, one
// *PortError each (see SplitPortErrors), the rest is applied; a port that
// failed is tried again by the next Apply.
func (a *Agent) Apply(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.applyLocked(cfg)
}

// applyLocked is Apply of a valid cfg, with mu held.
func (a *Agent) applyLocked(cfg Config) error {
	user := cfg
	for idx := range a.override { // ports gone or no longer sampled
		if minSamplerRate(&cfg, idx) == 0 {
			delete(a.override, idx)
		}
	}
	cfg = a.withOverrides(cfg) // the rates in force (backoff.go)

	plans := planPorts(&cfg, a.WorkerOf)
	var errs []error
	// 1. Ports no longer sampled stop first, so no sample of theirs reaches
	//    a worker that has forgotten them.
	//    A port that gains a direction keeps what it has and gets the
	//    new one in step 3 (extend). A port that loses one is detached
	//    and attached anew in step 3, its pool continued over its base:
	//    the workers' pools per CPU and direction (pool.go) must not run
	//    backwards. The samples a detached attachment left unread are
	//    read over its old base first (drainWorkers).
	removed := false
	for _, idx := range sortedKeys(a.ports) {
		p, planned := plans[idx]
		if _, ok := a.pending[idx]; ok && planned {
			continue // completed by EndAdoption (Adopt)
		}
		if planned && p.Direction.OrIngress() == a.ports[idx].Direction.OrIngress() {
			delete(a.held, idx) // configured: adopted for good
			continue
		}
		if planned && a.extend(idx, p) {
			delete(a.held, idx) // the directions it lacks are added in step 3
			continue
		}
		if !planned && a.held[idx] {
			continue // adopted, kept until EndAdoption
		}
		delete(a.held, idx)
		if err := a.removePort(idx); err != nil {
			errs = append(errs, err)
		}
		removed = true
	}
	if removed {
		// The samples the removed attachments took and the workers have
		// not read yet are counted over the bases they were taken with,
		// before the workers learn the new ones.
		a.drainWorkers()
	}

	// 2. Workers learn the new samplers and pollers before the kernel
	//    sends samples of new ports; Apply waits until they run it.
	per := make([]workerConfig, len(a.workers))
	for i := range per {
		per[i].agent = cfg.AgentAddress
		per[i].receivers = cfg.Receivers
		per[i].applied = make(chan struct{})
	}
	for _, s := range cfg.Samplers {
		p, ok := plans[s.IfIndex]
		if !ok {
			continue
		}
		w := a.WorkerOf(sflow.DataSource{Type: sflow.SourceIfIndex, Index: s.IfIndex})
		b := a.base(s.IfIndex)
		sp := samplerSpec{cfg: s, kernelRate: p.KernelRate,
			poolBase: atomic.LoadUint64(&b[baseWordPool]), dropsBase: atomic.LoadUint64(&b[baseWordDrops])}
		if ap, ok := a.pending[s.IfIndex]; ok {
			// Until EndAdoption: the ended sampler's count is part
			// of every waiting sample's pool (it ended after them or
			// at most that many frames after) and drops.
			sp.endedPool = ap.EndedPool
			sp.dropsBase += ap.EndedDrops
		}
		per[w].samplers = append(per[w].samplers, sp)
	}
	for _, p := range cfg.Pollers {
		w := a.WorkerOf(p.Source)
		per[w].pollers = append(per[w].pollers, p)
	}
	for i, w := range a.workers {
		select { // replace a configuration the worker has not picked up yet
		case <-w.ctrl:
		default:
		}
		w.ctrl <- per[i]
		if a.running && a.wakers[i] != nil {
			if err := a.wakers[i].Wake(); err != nil {
				a.log.Warn("waking worker", "worker", i, "err", err)
			}
		}
	}
	if a.running {
		deadline := time.Now().Add(2 * time.Second)
		for i := range per {
			select {
			case <-per[i].applied:
			case <-time.After(time.Until(deadline)):
				a.log.Warn("worker slow to take its configuration", "worker", i)
			}
		}
	}

	// 3. The kernel samples new ports and new rates.
	for _, idx := range sortedKeys(plans) {
		p := plans[idx]
		if _, ok := a.pending[idx]; ok {
			continue // EndAdoption attaches it
		}
		if old, ok := a.ports[idx]; ok && old == p {
			continue
		}
		if old, ok := a.ports[idx]; ok && old.Rate == 0 {
			// Adopted: the pinned sampler does not know the exact rate;
			// the same kernel settings change nothing.
			if old.Rate = p.Rate; old == p {
				a.ports[idx] = p
				continue
			}
		}
		if err := a.opts.Source.SetPort(idx, p); err != nil {
			errs = append(errs, &PortError{IfIndex: idx, Err: err})
			continue
		}
		a.ports[idx] = p
	}
	a.cfg = user
	return errors.Join(errs...)
}
