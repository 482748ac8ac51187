package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/agent/sender"
	"github.com/sflowswitchd/sflowswitchd/apps/apm"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Host data source the application data sources belong to: the switch
// itself, entPhysicalEntry.1, the data source of the host counters
// (sflow_host.txt host_parent: a logical entity names its parent).
var hostParent = sflow.HostParent{ContainerType: sflow.SourceEntPhysicalEntry, ContainerIndex: 1}

// Defaults of Config.
const (
	DefaultQueueLen   = 4096
	DefaultMaxSources = 256
	// DefaultIdleTimeout is the host agent's application timeout
	// (hsflowd mod_json.c HSP_JSON_APP_TIMEOUT, 7200 s): an application
	// silent for two hours loses its data source (sockets, sequence
	// numbers) until it sends again.
	DefaultIdleTimeout = 2 * time.Hour
	// DefaultReclaimIdle is how long a data source must have been idle
	// before a new application may take its slot when every slot is in
	// use.
	DefaultReclaimIdle = 10 * time.Second
	// DefaultFlushInterval is the sFlow agent rule: datagrams are sent
	// when full and at least once a second.
	DefaultFlushInterval = time.Second
)

// Config configures an Engine. The zero value is usable.
type Config struct {
	// QueueLen bounds the samples waiting to be encoded; beyond it
	// samples are dropped and counted (ReasonQueueFull), never waited
	// for.
	QueueLen int
	// MaxSources bounds the application data sources (service ports).
	MaxSources int
	// IdleTimeout closes a data source (its sockets and sequence numbers)
	// that sent nothing for this long.
	IdleTimeout time.Duration
	// ReclaimIdle: when MaxSources data sources exist, a new application
	// takes the slot of the least recently active one if that one has
	// been idle this long (default DefaultReclaimIdle), so one process
	// that once used every slot cannot lock other applications out until
	// IdleTimeout; only sources active within ReclaimIdle are protected.
	ReclaimIdle time.Duration
	// FlushInterval is the longest a sample waits in a datagram.
	FlushInterval time.Duration
	// APM, when set, receives every flow sample as a transaction weighted
	// by its sampling rate; the engine also calls its Tick.
	APM *apm.Engine
	// Logger gets the (rate-limited) rejection and socket errors.
	Logger *slog.Logger
	// StateFile keeps the data source indexes assigned to applications
	// without a service port, so that they survive restarts; "" = kept
	// in memory only.
	StateFile string
}

// RTSubAgent is the sub_agent_id (and data source key) of the rtmetric
// and rtflow samples: the host agent sends them in its own datagrams,
// whose sub_agent_id defaults to 100000 (hsflowd.h
// HSP_DEFAULT_SUBAGENTID). It is outside every application data source
// range (ports, 150000+, 200000+).
const RTSubAgent = 100000

// dropSlots are the per data source drop counters: service ports
// (index = port) and the named range (65536 + index - NamedIndexBase).
const dropSlots = 65536 + namedIndexEnd - NamedIndexBase

func dropSlot(index uint32) uint32 {
	if index < 65536 {
		return index
	}
	return 65536 + index - NamedIndexBase
}

// Engine is the application sub-agent: it takes application samples
// from any producer (the JSON API, the Go library, tests), encodes them
// with the rules of sflow_application.txt and sflow_http.txt, and sends
// them to the receivers. Each application data source (service port) is
// its own sub-agent: sub_agent_id = port, with its own datagram sequence
// numbers, datagram buffers and UDP sockets.
//
// Submitting never blocks: samples go through a bounded queue to the one
// goroutine that runs Run. Application samples arrive at transaction rate
// after the application's own 1-in-N sampling, far below packet rates, so
// a single queue shared by producers is not a hot-path contention point.
type Engine struct {
	cfg   Config
	log   *slog.Logger
	queue chan item
	stats Stats
	rlog  rejectLog
	start time.Time

	// drops are per data source ([0] server, [1] client; see dropSlot)
	// samples lost in the queue, reported in the flow samples' drops
	// field.
	drops [2][dropSlots]atomic.Uint32
	reg   *registry

	mu        sync.Mutex
	receivers []agent.ReceiverConfig
	agentAddr netip.Addr
	gen       atomic.Uint64

	// Owned by the Run goroutine.
	appliedGen uint64
	sources    map[uint32]*source
	recs       []sflow.Record
	fs         sflow.FlowSample
	cs         sflow.CounterSample
	apmApps    map[string]uint32
	// queued are the sources with complete datagrams waiting in their
	// senders' batches: sent when the queue is empty.
	queued []*source
}

type item struct {
	flow     *FlowSample
	counters *CounterSample
	rt       sflow.Sample // *sflow.RTMetricSample or *sflow.RTFlowSample
}

// New returns an engine. Call Run to start it.
func New(cfg Config) *Engine {
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = DefaultQueueLen
	}
	if cfg.MaxSources <= 0 {
		cfg.MaxSources = DefaultMaxSources
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.ReclaimIdle <= 0 {
		cfg.ReclaimIdle = DefaultReclaimIdle
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		cfg:     cfg,
		log:     cfg.Logger,
		queue:   make(chan item, cfg.QueueLen),
		start:   time.Now(),
		sources: map[uint32]*source{},
		apmApps: map[string]uint32{},
		reg:     newRegistry(cfg.StateFile, cfg.MaxSources, cfg.Logger),
	}
	e.rlog.log = cfg.Logger
	return e
}

// Stats returns the engine's counters.
func (e *Engine) Stats() *Stats { return &e.stats }

// APM returns the APM engine given in Config (nil if none).
func (e *Engine) APM() *apm.Engine { return e.cfg.APM }

// SetReceivers sets the collectors every application data source sends
// to. Datagram sequence numbers continue per receiver index.
func (e *Engine) SetReceivers(rs []agent.ReceiverConfig) {
	e.mu.Lock()
	e.receivers = slices.Clone(rs)
	e.mu.Unlock()
	e.gen.Add(1)
}

// SetAgentAddress sets sFlowAgentAddress, carried in every datagram.
func (e *Engine) SetAgentAddress(a netip.Addr) {
	e.mu.Lock()
	e.agentAddr = a
	e.mu.Unlock()
	e.gen.Add(1)
}

// ErrQueueFull is returned by SubmitFlow and SubmitCounters when the
// engine's queue is full; the sample was dropped and counted.
var ErrQueueFull = errors.New("app: engine queue full, sample dropped")

// Reject counts a sample refused before it reached the engine (by a
// parser) and logs it, at most once a second per reason.
func (e *Engine) Reject(err error) {
	r := ReasonBadMessage
	var re *RejectError
	if errors.As(err, &re) {
		r = re.Reason
	}
	e.stats.rejected[r].Add(1)
	e.rlog.note(r, err)
}

// The rejections logged for a full queue, preallocated: a flood is exactly
// when they are frequent.
var (
	rejectFlowQueueFull     = &RejectError{Reason: ReasonQueueFull, Detail: "flow sample dropped"}
	rejectCountersQueueFull = &RejectError{Reason: ReasonQueueFull, Detail: "counters sample dropped"}
)

// SubmitFlow validates f and queues it for encoding. f belongs to the
// engine afterwards. It never blocks: it returns a *RejectError or
// ErrQueueFull (both counted) when the sample is not taken.
func (e *Engine) SubmitFlow(f *FlowSample) error {
	if err := f.Validate(); err != nil {
		e.Reject(err)
		return err
	}
	e.resolveFlow(f)
	return e.queueFlow(f)
}

// resolveFlow sets the data source index of a validated flow sample (0:
// a new application without a port, assigned by the Run goroutine).
func (e *Engine) resolveFlow(f *FlowSample) {
	f.index = e.reg.resolve(f.AppName, f.ServicePort)
}

// resolveCounters sets the data source index of a validated counters
// sample: its port, else the data source its application name is on.
func (e *Engine) resolveCounters(c *CounterSample) {
	c.index = e.reg.resolve(c.AppName, c.ServicePort)
}

// namedSource returns the data source of an application without a port
// whose index is not known yet (index 0): a slot is found first (as for
// any new application, reclaiming an idle one), then its index assigned.
func (e *Engine) namedSource(name string, index *uint32, now time.Time) *source {
	if *index == 0 {
		// Assigned meanwhile, by an earlier message of the same
		// application still in the queue when this one was submitted?
		*index = e.reg.resolve(name, 0)
	}
	if *index == 0 {
		if len(e.sources) >= e.cfg.MaxSources && !e.reclaim(now) {
			e.Reject(reject(ReasonTooManySources, "application %q: already %d application data sources, all active within %v", name, len(e.sources), e.cfg.ReclaimIdle))
			return nil
		}
		idx, err := e.reg.assign(name)
		if err != nil {
			e.Reject(err)
			return nil
		}
		*index = idx
	}
	return e.source(*index, now)
}

// queueFlow queues a validated flow sample.
func (e *Engine) queueFlow(f *FlowSample) error {
	select {
	case e.queue <- item{flow: f}:
		e.stats.Queued.Add(1)
		return nil
	default:
		side := 0
		if f.Client && f.ServicePort != 0 {
			side = 1
		}
		if f.index != 0 { // a new application has no data source to report it yet
			e.drops[side][dropSlot(f.index)].Add(1)
		}
		e.Reject(rejectFlowQueueFull)
		return ErrQueueFull
	}
}

// SubmitCounters validates c and queues it for encoding; see SubmitFlow.
func (e *Engine) SubmitCounters(c *CounterSample) error {
	if err := c.Validate(); err != nil {
		e.Reject(err)
		return err
	}
	e.resolveCounters(c)
	return e.queueCounters(c)
}

var rejectRTQueueFull = &RejectError{Reason: ReasonQueueFull, Detail: "rtmetric/rtflow sample dropped"}

// SubmitRT queues an rtmetric or rtflow sample (as ParseJSON returns
// them), sent in the datagrams of sub-agent RTSubAgent. It never blocks.
func (e *Engine) SubmitRT(s sflow.Sample) error {
	switch s.(type) {
	case *sflow.RTMetricSample, *sflow.RTFlowSample:
	default:
		err := reject(ReasonBadMessage, "%T is not an rtmetric or rtflow sample", s)
		e.Reject(err)
		return err
	}
	select {
	case e.queue <- item{rt: s}:
		e.stats.Accepted.Add(1)
		return nil
	default:
		e.Reject(rejectRTQueueFull)
		return ErrQueueFull
	}
}

// queueCounters queues a validated counters sample.
func (e *Engine) queueCounters(c *CounterSample) error {
	select {
	case e.queue <- item{counters: c}:
		e.stats.Queued.Add(1)
		return nil
	default:
		e.Reject(rejectCountersQueueFull)
		return ErrQueueFull
	}
}

// Run encodes and sends samples until ctx ends; then it encodes what is
// queued, sends the last datagrams and closes the sockets.
func (e *Engine) Run(ctx context.Context) {
	tick := time.NewTicker(e.cfg.FlushInterval)
	defer tick.Stop()
	defer e.closeAll()
	for {
		select {
		case <-ctx.Done():
			for {
				select {
				case it := <-e.queue:
					e.handle(it, time.Now())
				default:
					return
				}
			}
		case it := <-e.queue:
			e.handle(it, time.Now())
			if len(e.queue) == 0 {
				// Nothing more to encode for now: send the complete
				// datagrams (the ones being filled wait for the tick).
				for _, s := range e.queued {
					s.sendQueued()
				}
				clear(e.queued)
				e.queued = e.queued[:0]
			}
		case now := <-tick.C:
			e.applyConfig()
			for _, s := range e.sources {
				s.flush()
			}
			clear(e.queued)
			e.queued = e.queued[:0]
			e.expire(now)
			e.reg.flush(false)
			if e.cfg.APM != nil {
				e.cfg.APM.Tick(now)
			}
		}
	}
}

func (e *Engine) handle(it item, now time.Time) {
	e.applyConfig()
	if it.flow != nil {
		e.encodeFlow(it.flow, now)
		e.feedAPM(it.flow, now)
	} else if it.counters != nil {
		e.encodeCounters(it.counters, now)
	} else if it.rt != nil {
		e.encodeRT(it.rt, now)
	}
}

func (e *Engine) uptime() uint32 { return uint32(time.Since(e.start).Milliseconds()) }

// source returns the sub-agent of data source index (a service port, a
// named index from 150000, or RTSubAgent), creating it; nil when there
// are already MaxSources.
func (e *Engine) source(index uint32, now time.Time) *source {
	if s := e.sources[index]; s != nil {
		s.last = now
		return s
	}
	if len(e.sources) >= e.cfg.MaxSources && !e.reclaim(now) {
		e.Reject(reject(ReasonTooManySources, "data source %d: already %d application data sources, all active within %v", index, len(e.sources), e.cfg.ReclaimIdle))
		return nil
	}
	s := &source{e: e, index: index, last: now}
	e.mu.Lock()
	rs, addr := e.receivers, e.agentAddr
	e.mu.Unlock()
	s.open(rs, addr, nil)
	e.sources[index] = s
	e.stats.Sources.Store(int64(len(e.sources)))
	return s
}

// reclaim closes the least recently active data source if it has been
// idle for ReclaimIdle, flushing what it holds, and reports whether a slot
// was freed. Runs only when every slot is taken (a linear scan of at most
// MaxSources sources).
func (e *Engine) reclaim(now time.Time) bool {
	var lru *source
	for _, s := range e.sources {
		if lru == nil || s.last.Before(lru.last) {
			lru = s
		}
	}
	if lru == nil || now.Sub(lru.last) < e.cfg.ReclaimIdle {
		return false
	}
	lru.close()
	delete(e.sources, lru.index)
	e.reg.forget(lru.index)
	e.stats.SourcesReclaimed.Add(1)
	return true
}

// applyConfig rebuilds every source's outputs after SetReceivers or
// SetAgentAddress, continuing each receiver's sequence numbers.
func (e *Engine) applyConfig() {
	g := e.gen.Load()
	if g == e.appliedGen {
		return
	}
	e.appliedGen = g
	e.mu.Lock()
	rs, addr := e.receivers, e.agentAddr
	e.mu.Unlock()
	keep := make(map[agent.CollectorKey]bool, len(rs))
	for _, rc := range rs {
		keep[agent.CollectorKey{Receiver: rc.Index, Address: rc.Address, Name: rc.Unresolved}] = true
	}
	e.stats.Collectors.Keep(keep)
	for _, s := range e.sources {
		s.open(rs, addr, s.close())
	}
}

func (e *Engine) expire(now time.Time) {
	for index, s := range e.sources {
		if now.Sub(s.last) >= e.cfg.IdleTimeout {
			s.close()
			delete(e.sources, index)
			e.reg.forget(index)
		}
	}
	e.stats.Sources.Store(int64(len(e.sources)))
}

func (e *Engine) closeAll() {
	for index, s := range e.sources {
		s.close()
		delete(e.sources, index)
	}
	e.stats.Sources.Store(0)
	e.reg.flush(true)
}

// encodeFlow encodes f as a flow sample of its data source, following
// sflow_application.txt / sflow_http.txt section 3: a server-side
// transaction has input = the interface the request came in on (0 if
// unknown) and output = 0x3FFFFFFF (the local server); a client-side one
// has input = 0x3FFFFFFF and output = the interface it was sent on, on the
// client data source 200000+port. An application without a service port
// has one data source (its named index) for both sides, as in the host
// agent; the input/output convention still tells the side.
func (e *Engine) encodeFlow(f *FlowSample, now time.Time) {
	s := e.namedSource(f.AppName, &f.index, now)
	if s == nil {
		return
	}
	e.stats.Accepted.Add(1)
	side := 0
	index := f.index
	in, out := sflow.IfIndex(f.IfIndex), sflow.IfIndex(sflow.IfIndexInternal)
	if f.Client {
		in, out = out, in
		if f.ServicePort != 0 {
			side = 1
			index += clientIndexBase
		}
	}
	seen := f.Seen
	if seen == 0 {
		seen = f.SamplingRate
	}
	s.flowSeq[side]++
	s.pool[side] += seen
	recs := e.recs[:0]
	if f.HTTP != nil {
		recs = append(recs, f.HTTP)
	}
	if f.Operation != nil {
		if f.Operation.Context.Application == "" {
			f.Operation.Context.Application = f.AppName
		}
		recs = append(recs, f.Operation)
	}
	if f.ParentContext != nil {
		recs = append(recs, f.ParentContext)
	}
	if f.Initiator != nil {
		recs = append(recs, f.Initiator)
	}
	if f.Target != nil {
		recs = append(recs, f.Target)
	}
	if f.ProxyRequest != nil {
		recs = append(recs, f.ProxyRequest)
	}
	if f.Socket4 != nil {
		recs = append(recs, f.Socket4)
	}
	if f.Socket6 != nil {
		recs = append(recs, f.Socket6)
	}
	e.recs = recs
	e.fs = sflow.FlowSample{
		SequenceNumber: s.flowSeq[side],
		Source:         sflow.DataSource{Type: sflow.SourceEntLogicalEntry, Index: index},
		SamplingRate:   f.SamplingRate,
		SamplePool:     s.pool[side],
		Drops:          e.drops[side][dropSlot(f.index)].Load(),
		Input:          in,
		Output:         out,
		Records:        recs,
	}
	s.add(&e.fs)
	e.stats.FlowSamples.Add(1)
	clear(e.recs[:len(recs)]) // do not keep the sample alive
}

// encodeCounters encodes c as a counters sample of its server data source,
// with host_parent naming the switch (sflow_host.txt).
func (e *Engine) encodeCounters(c *CounterSample, now time.Time) {
	s := e.namedSource(c.AppName, &c.index, now)
	if s == nil {
		return
	}
	e.stats.Accepted.Add(1)
	s.cntSeq++
	recs := e.recs[:0]
	if c.Operations != nil {
		if c.Operations.Application == "" {
			c.Operations.Application = c.AppName
		}
		recs = append(recs, c.Operations)
	}
	if c.Resources != nil {
		recs = append(recs, c.Resources)
	}
	if c.Workers != nil {
		recs = append(recs, c.Workers)
	}
	if c.HTTP != nil {
		recs = append(recs, c.HTTP)
	}
	recs = append(recs, &hostParent)
	e.recs = recs
	e.cs = sflow.CounterSample{
		SequenceNumber: s.cntSeq,
		Source:         sflow.DataSource{Type: sflow.SourceEntLogicalEntry, Index: c.index},
		Records:        recs,
	}
	s.add(&e.cs)
	e.stats.CounterSamples.Add(1)
	clear(e.recs[:len(recs)])
}

// encodeRT sends an rtmetric (counted as a counter sample) or rtflow
// (counted as a flow sample) in the datagrams of sub-agent RTSubAgent.
func (e *Engine) encodeRT(smp sflow.Sample, now time.Time) {
	s := e.source(RTSubAgent, now)
	if s == nil {
		return
	}
	s.add(smp)
	if _, ok := smp.(*sflow.RTFlowSample); ok {
		e.stats.FlowSamples.Add(1)
	} else {
		e.stats.CounterSamples.Add(1)
	}
}

// source is one application data source: a sub-agent with
// sub_agent_id = its data source index (the service port, or the index
// assigned to the application's name), or the rtmetric/rtflow sub-agent.
type source struct {
	e       *Engine
	index   uint32
	outs    []*output
	flowSeq [2]uint32 // [server, client] flow_sample sequence numbers
	pool    [2]uint32 // [server, client] sample_pool
	cntSeq  uint32
	last    time.Time
	queued  bool // on Engine.queued
}

// open creates an output per receiver; lastSeqs continues datagram
// sequence numbers by receiver index.
func (s *source) open(rs []agent.ReceiverConfig, addr netip.Addr, lastSeqs map[int]uint32) {
	s.outs = s.outs[:0]
	for _, rc := range rs {
		o, err := newOutput(rc, addr, s.index, lastSeqs[rc.Index], &s.e.stats, s.e.uptime)
		if err != nil {
			s.e.log.Error("application data source: no socket to a receiver", "index", s.index, "receiver", rc.Index, "err", err)
			continue
		}
		s.outs = append(s.outs, o)
	}
}

// add encodes smp for every receiver. A sample that completes a datagram
// puts the source on the engine's list of sources with datagrams to send.
func (s *source) add(smp sflow.Sample) {
	for _, o := range s.outs {
		_ = o.Add(smp) // a too-large sample is counted by the sender
		if o.Queued() > 0 && !s.queued {
			s.queued = true
			s.e.queued = append(s.e.queued, s)
		}
	}
}

// sendQueued sends the outputs' complete datagrams.
func (s *source) sendQueued() {
	for _, o := range s.outs {
		o.SendQueued()
	}
	s.queued = false
}

func (s *source) flush() {
	for _, o := range s.outs {
		o.Flush()
	}
	s.queued = false
}

// close sends what the outputs buffered, closes their sockets and returns
// each receiver's last datagram sequence number, by receiver index.
func (s *source) close() map[int]uint32 {
	last := make(map[int]uint32, len(s.outs))
	for _, o := range s.outs {
		seq, err := o.Close()
		if err != nil {
			s.e.log.Warn("application data source: closing a receiver socket", "index", s.index, "receiver", o.index, "err", err)
		}
		last[o.index] = seq
	}
	s.queued = false
	return last
}

// output is one data source's datagram stream to one receiver: its own
// sender (datagram batch, sequence numbers, connected UDP socket).
type output struct {
	index int // the receiver's index
	*sender.Sender
}

func newOutput(rc agent.ReceiverConfig, addr netip.Addr, subAgent, lastSeq uint32, stats *Stats, uptime func() uint32) (*output, error) {
	s, err := sender.New(sender.Config{
		Collector:       rc.Address,
		MaxDatagramSize: rc.MaxDatagramSize,
		Agent:           addr,
		SubAgent:        subAgent,
		LastSeq:         lastSeq,
		// One datagram buffer: application samples are few, and there is
		// a stream per data source and receiver (up to MaxSources ×
		// receivers), so each costs one datagram, not a batch (the
		// memory budget, docs/reference/bounds.md).
		Batch:  1,
		Uptime: uptime,
		Counters: []sender.Counters{{
			Datagrams: &stats.Datagrams, Bytes: &stats.Bytes,
			SendErrors: &stats.SendErrors, SamplesUnsent: &stats.SamplesUnsent,
			TooLarge: &stats.TooLarge,
		}, stats.Collectors.Counters(agent.CollectorKey{Receiver: rc.Index, Address: rc.Address, Name: rc.Unresolved})},
	})
	if err != nil {
		return nil, fmt.Errorf("receiver %d: %w", rc.Index, err)
	}
	return &output{index: rc.Index, Sender: s}, nil
}
