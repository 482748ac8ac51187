package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sort"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent/persist"
	"github.com/sflowswitchd/sflowswitchd/dataplane/forwarding"
	"github.com/sflowswitchd/sflowswitchd/internal/ethernet"
	"github.com/sflowswitchd/sflowswitchd/internal/ratelog"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// PacketSample is one packet sampled by the kernel, as a worker receives it.
type PacketSample struct {
	// IfIndex is the sampled port: the input of an ingress sample, the
	// output of an egress one (Egress).
	IfIndex uint32
	// Egress tells the frame was sampled leaving IfIndex; InIfIndex is
	// then the port it came in on as the kernel recorded it (skb_iif), 0
	// for a frame made on this host.
	Egress    bool
	InIfIndex uint32
	// FrameLen is the frame's length as XDP saw it (without FCS).
	FrameLen uint32
	// KernelRate is the power-of-two rate the kernel took the sample at;
	// 0 means the port's configured kernel rate.
	KernelRate uint32
	// CPU took the sample, and CPUPool is the port's pool on that CPU at
	// the sampled frame (the frame included). CPUPool 0 means unknown (a
	// source that cannot tell): the flow sample then carries the pool read
	// when it is encoded (PoolReader).
	CPU     uint32
	CPUPool uint64
	// PoolSum says CPUPool is the port's pool in the sample's direction
	// summed over every CPU at the sampled frame, not CPU's alone
	// (dataplane/bpf/sampler.h port_pool_sum; pool.go).
	PoolSum bool
	// Transit is what became of the frame after it was sampled, for a
	// sample whose record waited for it (dataplane/bpf/transit.h); zero otherwise.
	Transit Transit
	// Route is what the kernel answered about the packet's routes at
	// sample time (dataplane/bpf/route.h); zero when it asked nothing (not IP, or
	// a source that cannot tell).
	Route forwarding.RouterQuery
	// TunnelPort says IfIndex is a tunnel device (VXLAN, GRE): the sample
	// may carry tunnel records; Tunnel holds what the kernel's tunnel
	// metadata said (Tunnel.Known) and the sample's port, direction and
	// length (dataplane/bpf/tunnel.h).
	TunnelPort bool
	Tunnel     forwarding.TunnelQuery
	// Header holds the first bytes of the frame; it is valid only during
	// the ReadSamples callback that receives it.
	Header []byte
	// Queue is what a switch ASIC told of the packet's way through it
	// (psample's PSAMPLE_ATTR_OUT_TC, OUT_TC_OCC and LATENCY); zero from
	// the kernel's own samplers.
	Queue QueueInfo
	// HeaderProtocol is the format of Header when it is not an Ethernet
	// frame (0: Ethernet): a packet of a device without a MAC header (an
	// IP tunnel, a tun device), which psample hands over from its network
	// header, is IPv4 or IPv6 (sflow_version_5.txt section 5,
	// header_protocol). Such a header has no FCS and no VLAN tag.
	HeaderProtocol sflow.HeaderProtocol
}

// QueueInfo is a sampled packet's egress queue, the bytes queued there
// before it and its time in the device, as far as the hardware tells:
// flow records extended_egress_queue (1036), extended_queue (1040, only
// beside 1036: sflow_transit.txt) and extended_transit (1039).
type QueueInfo struct {
	HasTC    bool
	TC       uint32 // egress queue (traffic class)
	HasDepth bool
	Depth    uint64 // bytes
	HasDelay bool
	Delay    time.Duration
}

// Transit is how a sampled frame went on after it was sampled, known for
// a sample whose record waited for its frame (dataplane/bpf/transit.h). Such a
// sample arrives when its frame has left, after samples taken later.
type Transit struct {
	// Waited says the record waited; Left that the frame then left the
	// switch through OutIfIndex, transmit queue Queue, Delay after it was
	// sampled (when it was handed to the port's driver, after the port's
	// qdisc).
	Waited, Left bool
	OutIfIndex   uint32
	Queue        uint32
	Delay        time.Duration
	// Depth is the bytes the port's qdisc held ahead of the frame when it
	// entered it, with DepthOK (the frame went through a qdisc).
	Depth   uint32
	DepthOK bool
}

// RouterLookup gives a routed sample its extended_router
// (dataplane/forwarding.Table.Router): from the kernel's answers at
// sample time and the routes in force then, or a result saying why not.
// Called per sample: it must not allocate or block.
type RouterLookup interface {
	Router(header []byte, q *forwarding.RouterQuery, r *sflow.ExtendedRouter) forwarding.RouterResult
}

// TunnelLookup gives a sample on a tunnel device its tunnel records
// (dataplane/forwarding.Table.Tunnel): the outer IP header's (ip, nil when
// unknown) and the VNI's (vni, nil unless VXLAN), pointing into sc.
// Called per sample: it must not allocate or block.
type TunnelLookup interface {
	Tunnel(q *forwarding.TunnelQuery, header []byte, sc *forwarding.TunnelRecords) (ip, vni sflow.Record)
}

// Waker is implemented by a SampleReader whose waiting ReadSamples can be
// cut short, so that a configuration change reaches the worker at once
// rather than when its current wait (up to its next one-second tick) ends.
type Waker interface {
	Wake() error
}

// SampleReader delivers one worker's kernel samples (in the daemon, the
// worker's BPF ring buffer) in batches.
type SampleReader interface {
	// ReadSamples waits until deadline for samples, then hands every sample
	// already available to fn (the PacketSample and its Header are valid
	// only during the call) and returns how many. With none before the
	// deadline it returns an error satisfying errors.Is(err,
	// os.ErrDeadlineExceeded); any other error stops the worker reading.
	ReadSamples(deadline time.Time, fn func(*PacketSample)) (int, error)
}

// IdleReader is a SampleReader that can let an idle worker sleep past its
// one-second tick: ReadIdle is ReadSamples, except that the first sample
// to arrive ends the wait, however few (a BPF ring's reader otherwise
// waits for a batch, or the deadline: the worker's next tick). A worker
// that read nothing in its last second and has flushed everything waits
// in ReadIdle until its next counter poll (idle means asleep).
type IdleReader interface {
	ReadIdle(deadline time.Time, fn func(*PacketSample)) (int, error)
}

// StopReader is a SampleReader whose queued samples end with the program
// (a socket's receive queue, which the kernel frees with the socket), where
// a pinned ring's wait for the next program: a stopping worker reads them
// with ReadAtStop, which does not wait, sends them and only then flushes
// and stops.
type StopReader interface {
	ReadAtStop(fn func(*PacketSample)) (int, error)
}

// PoolReader reads a port's sample_pool and kernel drop count. It is called
// for every flow sample emitted and must not make a system call (the
// dataplane reads an mmap-ed counter array).
type PoolReader interface {
	PortPool(ifindex uint32) (pool, drops uint64)
}

// CounterSource reads the counters of a data source for a poller.
type CounterSource interface {
	// AppendCounters appends the counter records of ds to recs.
	AppendCounters(recs []sflow.Record, ds sflow.DataSource) ([]sflow.Record, error)
}

// CounterGenerations is a CounterSource that knows when a data source's
// counters restarted (a switch port made anew under the same ifIndex):
// each poller of the source then restarts its sequence numbers, which is
// how sFlow tells a collector of a counter discontinuity
// (sflow_version_5.txt, "counters_sample": "If the agent resets any of
// the counters then it must also reset the sequence_number").
type CounterGenerations interface {
	// CounterGeneration is the generation of ds's counters as the last
	// AppendCounters of ds read them: it changes when they restarted.
	CounterGeneration(ds sflow.DataSource) uint64
}

// OutputLookup tells the egress port of a sampled frame where the agent can
// know it (bridge FDB, FIB), and the VLANs and priorities of the frame as
// the switch classified and forwarded it (dataplane/forwarding: the
// bridge's VLAN filtering, PVIDs and per-VLAN FDB). It is called per
// sample and must not allocate or block.
type OutputLookup interface {
	// Forward returns the egress of a frame that came in on port in
	// (the zero Interface when unknown) and fills sw when the frame's
	// VLANs are known (swOK).
	Forward(in uint32, header []byte, sw *sflow.ExtendedSwitch) (out sflow.Interface, swOK bool)
	// EgressSwitch fills sw for a frame sampled leaving port out.
	EgressSwitch(out uint32, header []byte, sw *sflow.ExtendedSwitch) (swOK bool)
}

// fcsLen is the Ethernet FCS, which XDP never sees: sampled_header's
// frame_length counts it and stripped reports it removed (spec "struct
// sampled_header").
const fcsLen = 4

// sampler is a flow sampler's state in its worker.
type sampler struct {
	cfg        SamplerConfig
	out        *receiverOut
	kernelRate uint32 // kernel rate threshold was computed for
	threshold  uint64 // sub-sampling threshold (subsampleThreshold)
	// seq is the last sample sequence number in the agent's persistent
	// state (agent/persist): an upgrade or a restart continues it. n is
	// the last one numbered, stored into seq as the pools are
	// (worker.persist): pre is n before sample rec, the latest one that
	// numbered; dirty, s is in the worker's list to persist.
	seq      *uint64
	n, pre   uint64
	rec      uint64
	seqDirty bool
	// poolBase and dropsBase are what earlier attachments of the port
	// counted, so that pools and drops never run backwards.
	poolBase, dropsBase uint64
}

// poller is a counter poller's state in its worker.
type poller struct {
	cfg       PollerConfig
	out       *receiverOut
	countdown int     // seconds to the next poll
	seq       *uint64 // last sequence number, persistent as a sampler's
	// gen is the generation of the counters last sent (genSet: one was;
	// CounterGenerations).
	gen    uint64
	genSet bool
}

// workerConfig is the part of the configuration one worker runs.
type workerConfig struct {
	// applied, when not nil, is closed once the worker runs the config.
	applied   chan struct{}
	agent     netip.Addr
	receivers []ReceiverConfig
	samplers  []samplerSpec
	pollers   []PollerConfig
}

type samplerSpec struct {
	cfg                 SamplerConfig
	kernelRate          uint32
	poolBase, dropsBase uint64
	// endedPool is the count of the port's egress sampler that ended with
	// an earlier program, not yet in poolBase (Agent.Adopt): the floor of
	// the port's egress pool.
	endedPool uint64
}

// worker is one sub-agent. All its fields are touched only by its own
// goroutine, except stats (atomics) and ctrl (the channel).
type worker struct {
	id   int
	log  *slog.Logger
	ctrl chan workerConfig
	// drain asks the worker to read what its reader holds now and to
	// close the channel it sends once it has (Agent.drainWorkers).
	drain chan chan struct{}
	// poolReader reads totals (and drops) from the dataplane.
	poolReader PoolReader
	counters   CounterSource
	// pollFailed logs failed counter polls: the first, then at most one
	// line per pollErrorsEvery with the number left out (with no
	// descriptor left, EMFILE, every poll of every source fails); each
	// failure is counted in stats.PollErrors.
	pollFailed *ratelog.Limiter
	// firstPoll bounds a new poller's first countdown, in ticks (0: its
	// interval; Options.FirstPollWithin).
	firstPoll int
	output    OutputLookup
	router    RouterLookup
	tunnels   TunnelLookup
	start     time.Time
	// state holds the sequence numbers of the worker's samplers, pollers
	// and datagram streams (agent/persist).
	state *persist.Store
	stats WorkerStats
	// hold, when not nil, keeps run from reading samples until it is
	// closed (Agent.Adopt).
	hold <-chan struct{}
	send sendTuning // the senders' batch settings (Options)
	// collectors counts per collector what stats counts per worker.
	collectors collectorSet
	rng        rng

	agent     netip.Addr
	receivers map[int]*receiverOut
	// unreachable is, per receiver, the collector and error last logged
	// as not reachable: a receiver reopened for another reason (the agent
	// address set) with the same failure is not logged again.
	unreachable map[int]string
	samplers    map[uint32][]*sampler
	pools       map[uint32]*portPool // per sampled port: pools at sample time
	pollers     []*poller
	// rec numbers the kernel samples handled (from 1); cur is rec while
	// one is being handled, 0 between them. dirtyPools and dirtySamplers
	// are the pools and sequence numbers that changed since the agent
	// state last got them (persist).
	rec, cur      uint64
	dirtyPools    []*portPool
	dirtySamplers []*sampler

	// Scratch reused for every sample: no allocation per sample.
	fs   sflow.FlowSample
	hdr  sflow.SampledHeader
	sw   sflow.ExtendedSwitch
	rtr  sflow.ExtendedRouter
	eq   sflow.ExtendedEgressQueue
	tdel sflow.ExtendedTransit
	qd   sflow.ExtendedQueue
	tun  forwarding.TunnelRecords
	// frecs: sampled_header, extended_switch, extended_router, the three
	// transit records, and a tunnel's IP and VNI records.
	frecs [8]sflow.Record
	cs    sflow.CounterSample
	crecs []sflow.Record
	// handleFn is w.handle as a func value, made once: passing a method
	// value per read would allocate.
	handleFn func(*PacketSample)
	// commit marks the samples read so far as consumed (Committer; nil
	// when the reader cannot), and commitFn calls it: the receivers'
	// senders call commitFn before each send.
	commit   func()
	commitFn func()
}

// Committer is implemented by a SampleReader whose source outlives the
// process (a pinned ring buffer): CommitRead, called from within the
// ReadSamples callback, marks the samples handed before the current one
// as consumed, so that a program that takes the source over after a
// crash does not read them again. The worker calls it before it sends
// datagrams, so no sample that may have reached a collector is sent
// twice.
type Committer interface {
	CommitRead()
}

func newWorker(id int, log *slog.Logger, pools PoolReader, counters CounterSource, output OutputLookup, state *persist.Store, seed uint64) *worker {
	w := &worker{
		id: id, log: log.With("worker", id), ctrl: make(chan workerConfig, 1), drain: make(chan chan struct{}, 1),
		pollFailed: ratelog.New(log.With("worker", id), slog.LevelWarn, "reading counters", pollErrorsEvery),
		poolReader: pools, counters: counters, output: output, start: state.Start(), state: state,
		rng:       newRNG(seed),
		receivers: map[int]*receiverOut{},
		samplers:  map[uint32][]*sampler{},
	}
	w.hdr.Protocol = sflow.HeaderProtocolEthernet
	w.hdr.Stripped = fcsLen
	w.frecs[0] = &w.hdr
	w.frecs[1] = &w.sw
	w.handleFn = w.handle
	w.commitFn = func() {
		if w.commit != nil {
			w.commit()
		}
		w.persist()
	}
	return w
}

// subAgentID is the worker's sub_agent_id.
func (w *worker) subAgentID() uint32 { return uint32(w.id) }

// uptime is the agent's uptime in ms (sample_datagram_v5 uptime).
func (w *worker) uptime() uint32 { return uint32(time.Since(w.start) / time.Millisecond) }

// run is the worker's loop: samples from src as they come, the one-second
// tick (flush, pollers) and configuration messages, until ctx ends. src may
// be nil for a worker that only polls.
func (w *worker) run(ctx context.Context, src SampleReader) {
	defer w.closeAll()
	if c, ok := src.(Committer); ok {
		w.commit = c.CommitRead
	}
	nextTick := time.Now().Add(time.Second)
	// Adopted samplers (Agent.Adopt): configurations only, no sample read,
	// until the agent lets go.
	for hold := w.hold; hold != nil; {
		select {
		case cfg := <-w.ctrl:
			w.apply(cfg)
		case done := <-w.drain:
			// Asked once the hold ended (Agent.drainWorkers asks no
			// held worker): it ends here too.
			hold = nil
			nextTick = time.Now()
			w.readAll(src)
			close(done)
		case <-hold:
			hold = nil
			// At once: what waited in the ring is read and sent now,
			// not at the next tick.
			nextTick = time.Now()
		case <-ctx.Done():
			return
		}
	}
	idler, _ := src.(IdleReader)
	// quiet: the last second brought no sample, and its tick flushed
	// every datagram, so the worker may sleep until its next poll.
	quiet, read := false, 0
	for {
		// Apply configuration between samples, never during one.
		select {
		case done := <-w.drain:
			w.readAll(src)
			close(done)
		case cfg := <-w.ctrl:
			w.apply(cfg)
		case <-ctx.Done():
			w.readAtStop(src)
			return
		default:
		}
		if src == nil {
			select {
			case done := <-w.drain:
				close(done)
				continue
			case cfg := <-w.ctrl:
				w.apply(cfg)
				continue
			case <-ctx.Done():
				return
			case <-time.After(time.Until(w.idleUntil(nextTick))):
			}
		} else if quiet && idler != nil {
			// Nothing to do before the next poll: sleep until then,
			// unless a sample comes first (IdleReader).
			n, err := idler.ReadIdle(w.idleUntil(nextTick), w.handleFn)
			read += n
			if n > 0 {
				// Awake again: the datagram being filled leaves at the
				// next tick, which the worker no longer sleeps past.
				quiet = false
				w.persist()
				for _, r := range w.receivers {
					r.SendQueued()
				}
			}
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				w.stats.ReadErrors.Add(1)
				if ctx.Err() == nil {
					w.log.Error("reading kernel samples; worker continues with counters only", "err", err)
				}
				src, idler = nil, nil
			}
		} else {
			// One batch: everything the ring holds, or a wait until the
			// next tick. The kernel wakes the reader only once its ring
			// holds a batch of samples (dataplane.Config.WakeupBytes);
			// below that, samples wait for the tick, which flushes the
			// datagrams anyway: a sample still leaves within about a
			// second, and an idle worker wakes once a second (idle costs
			// nearly nothing; docs/ARCHITECTURE.md "Packet
			// sampling"). Configuration (Waker) and ticks are handled
			// between batches.
			n, err := src.ReadSamples(nextTick, w.handleFn)
			read += n
			if n > 0 {
				// The batch's ring position is stored: the state
				// takes the pools and numbers that go with it.
				w.persist()
				// The ring is drained: send the complete datagrams
				// waiting in each receiver's batch (many per system
				// call at high rates); the datagrams being filled wait
				// for more samples or the tick.
				for _, r := range w.receivers {
					r.SendQueued()
				}
			}
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				w.stats.ReadErrors.Add(1)
				if ctx.Err() == nil {
					w.log.Error("reading kernel samples; worker continues with counters only", "err", err)
				}
				src, idler = nil, nil
			}
		}
		if now := time.Now(); !now.Before(nextTick) {
			// The ticks due since the last: one after a second's
			// wait, several after an idle sleep (or a stall), run as
			// one (no burst of polls), the pollers' countdowns
			// advanced by all of them.
			ticks := 1 + int(now.Sub(nextTick)/time.Second)
			w.tick(ticks)
			nextTick = nextTick.Add(time.Duration(ticks) * time.Second)
			quiet, read = read == 0, 0
		}
	}
}

// maxIdle bounds an idle worker's sleep when it has no poller due.
const maxIdle = time.Minute

// idleUntil is when an idle worker must wake: the tick of its next
// counter poll (a poller with countdown c polls at the tick c-1 seconds
// after nextTick), at most maxIdle ahead.
func (w *worker) idleUntil(nextTick time.Time) time.Time {
	until := nextTick.Add(maxIdle)
	for _, p := range w.pollers {
		if p.cfg.Interval <= 0 {
			continue
		}
		if t := nextTick.Add(time.Duration(max(p.countdown, 1)-1) * time.Second); t.Before(until) {
			until = t
		}
	}
	return until
}

// readAll reads what src holds now, without waiting, and sends the
// complete datagrams (Agent.drainWorkers). A configuration waiting is
// applied first: it was sent before the request, and the samples read
// are of the attachments it describes. src may be nil.
func (w *worker) readAll(src SampleReader) {
	select {
	case cfg := <-w.ctrl:
		w.apply(cfg)
	default:
	}
	if src == nil {
		return
	}
	// Bounded: under load the kernel refills the ring as fast as it is
	// read; what was there at the call is read within a few batches.
	for range 64 {
		n, err := src.ReadSamples(time.Now(), w.handleFn)
		if n > 0 {
			w.persist()
			for _, r := range w.receivers {
				r.SendQueued()
			}
		}
		if n == 0 || err != nil {
			return
		}
	}
}

// readAtStop reads and sends, when src is a StopReader, what it holds as
// the worker stops (the datagrams are flushed after, by closeAll).
// Bounded as readAll: under load the kernel may refill the queue as fast
// as it is read.
func (w *worker) readAtStop(src SampleReader) {
	sr, ok := src.(StopReader)
	if !ok {
		return
	}
	select { // a configuration sent before the stop describes the samples
	case cfg := <-w.ctrl:
		w.apply(cfg)
	default:
	}
	for range 64 {
		n, err := sr.ReadAtStop(w.handleFn)
		if n > 0 {
			w.persist()
			for _, r := range w.receivers {
				r.SendQueued()
			}
		}
		if n == 0 || err != nil {
			return
		}
	}
}

// persist writes the pools and sample sequence numbers changed since the
// last time to the agent's persistent state, as far as the ring position
// goes: called right after it is stored (commitFn, before each send; after
// each batch; at a configuration and at the end), when the position
// covers every sample handled but the one being handled (cur), whose
// changes are left out. A process that takes the ring over then reads
// the records after the position again and numbers them, with their
// pools, as this one did, neither a pool raised nor a sequence number
// skipped (portPool.persist). A few words per changed port and sampler,
// per send or batch: nothing per sample.
func (w *worker) persist() {
	for _, p := range w.dirtyPools {
		p.persist(w.cur)
		p.dirty = w.cur != 0 && p.rec == w.cur
	}
	for _, s := range w.dirtySamplers {
		v := s.n
		if w.cur != 0 && s.rec == w.cur {
			v = s.pre
		}
		*s.seq = v
		s.seqDirty = w.cur != 0 && s.rec == w.cur
	}
	w.dirtyPools = keepDirty(w.dirtyPools, func(p *portPool) bool { return p.dirty })
	w.dirtySamplers = keepDirty(w.dirtySamplers, func(s *sampler) bool { return s.seqDirty })
}

// keepDirty keeps the elements of l that are still dirty, in place.
func keepDirty[T any](l []T, dirty func(T) bool) []T {
	k := l[:0]
	for _, e := range l {
		if dirty(e) {
			k = append(k, e)
		}
	}
	clear(l[len(k):])
	return k
}

// handle turns one kernel sample into a flow sample for each sampler of its
// port that keeps it.
func (w *worker) handle(ps *PacketSample) {
	w.rec++
	w.cur = w.rec
	w.handleSample(ps)
	w.cur = 0
}

func (w *worker) handleSample(ps *PacketSample) {
	w.stats.KernelSamples.Add(1)
	ss := w.samplers[ps.IfIndex]
	if len(ss) == 0 {
		w.stats.UnknownPort.Add(1)
		return
	}
	var pool, drops uint64
	var output sflow.Interface
	nrecs := 1
	looked := false
	keep := false
	// Every kernel sample, kept or not, tells its CPU's pool: the port's
	// pool at this frame is that plus the other CPUs' latest (pool.go).
	pp := w.pools[ps.IfIndex]
	atSample := ps.CPUPool != 0 && pp != nil
	if atSample {
		pp.mark(w.rec)
		if !pp.dirty {
			pp.dirty = true
			w.dirtyPools = append(w.dirtyPools, pp)
		}
	}
	switch {
	case atSample && ps.Transit.Waited && ps.PoolSum:
		// Delivered when its frame left, after samples taken later:
		// its own pool, out of the sequence of the others (pool.go).
		pool = pp.late(ps.Egress, ps.CPUPool)
	case atSample:
		pool = pp.at(ps.Egress, ps.PoolSum, ps.CPU, ps.CPUPool)
	}
	for i, s := range ss {
		// The kernel tells the rate each sample was taken at; while a
		// port's rate changes, samples taken at the old rate are still
		// sub-sampled against it, so the effective rate stays exact.
		if ps.KernelRate != 0 && ps.KernelRate != s.kernelRate {
			s.kernelRate = ps.KernelRate
			s.threshold = subsampleThreshold(s.kernelRate, s.cfg.Rate)
		}
		// Samplers of one port are sorted by rate; instances with the
		// same rate share one decision, so receivers configured alike get
		// the same samples (each still at exactly its rate).
		if i == 0 || s.cfg.Rate != ss[i-1].cfg.Rate {
			keep = w.rng.keep(s.threshold)
		}
		if !keep {
			w.stats.SubsampledAway.Add(1)
			continue
		}
		if !looked {
			var now uint64
			now, drops = w.poolReader.PortPool(ps.IfIndex)
			if !atSample {
				pool = now
			}
			// extended_switch: the VLANs the switch assigned and
			// forwarded the frame in (a VLAN-filtering bridge: the tag or
			// the port's PVID), or the frame's own tag where no lookup
			// is configured; omitted when no VLAN is known, rather than
			// invented (spec "extended_switch").
			swOK := false
			eth := ps.HeaderProtocol == 0 || ps.HeaderProtocol == sflow.HeaderProtocolEthernet
			switch {
			case !eth:
				// No MAC header to look up or read VLANs from.
				if ps.Egress {
					output = sflow.IfIndex(ps.IfIndex)
				}
			case ps.Egress:
				// Sampled leaving the port: it is the output
				// (sflow_version_5.txt section 4, flow_sample.output).
				output = sflow.IfIndex(ps.IfIndex)
				if w.output != nil {
					swOK = w.output.EgressSwitch(ps.IfIndex, ps.Header, &w.sw)
				}
			case ps.Transit.Left:
				// Followed to where it left: the port it really took; the
				// VLANs are those the switch classified it into.
				output = sflow.IfIndex(ps.Transit.OutIfIndex)
				if w.output != nil {
					_, swOK = w.output.Forward(ps.IfIndex, ps.Header, &w.sw)
				}
			case w.output != nil:
				output, swOK = w.output.Forward(ps.IfIndex, ps.Header, &w.sw)
			}
			if w.output == nil && eth {
				if vlan, prio, ok := vlanTag(ps.Header); ok {
					w.sw = sflow.ExtendedSwitch{SrcVLAN: vlan, SrcPriority: prio, DstVLAN: vlan, DstPriority: prio}
					swOK = true
				}
			}
			if swOK {
				w.frecs[nrecs] = &w.sw
				nrecs++
			}
			if w.router != nil && ps.Route.Asked {
				res := w.router.Router(ps.Header, &ps.Route, &w.rtr)
				w.stats.Router[res].Add(1)
				if res == forwarding.RouterOK {
					w.frecs[nrecs] = &w.rtr
					nrecs++
				}
			}
			nrecs = w.transitRecords(ps, nrecs)
			nrecs = w.queueRecords(&ps.Queue, nrecs) // psample: what a switch ASIC told
			if w.tunnels != nil && ps.TunnelPort {
				// sflow_tunnels.txt: records tshark 4.0 does not
				// know (it cannot skip them) go last.
				ip, vni := w.tunnels.Tunnel(&ps.Tunnel, ps.Header, &w.tun)
				switch {
				case ip != nil:
					w.stats.Tunnel[TunnelOK].Add(1)
				case vni != nil:
					w.stats.Tunnel[TunnelOuterUnknown].Add(1)
				default:
					w.stats.Tunnel[TunnelNone].Add(1)
				}
				if ip != nil {
					w.frecs[nrecs] = ip
					nrecs++
				}
				if vni != nil {
					w.frecs[nrecs] = vni
					nrecs++
				}
			}
			looked = true
		}
		if s.rec != w.rec {
			s.pre, s.rec = s.n, w.rec
		}
		s.n++
		if !s.seqDirty {
			s.seqDirty = true
			w.dirtySamplers = append(w.dirtySamplers, s)
		}
		h := ps.Header
		if len(h) > s.cfg.HeaderBytes {
			h = h[:s.cfg.HeaderBytes]
		}
		w.hdr.Protocol, w.hdr.FrameLength, w.hdr.Stripped = sflow.HeaderProtocolEthernet, ps.FrameLen+fcsLen, fcsLen
		if ps.HeaderProtocol != 0 && ps.HeaderProtocol != sflow.HeaderProtocolEthernet {
			w.hdr.Protocol, w.hdr.FrameLength, w.hdr.Stripped = ps.HeaderProtocol, ps.FrameLen, 0
		}
		w.hdr.Header = h
		input := sflow.IfIndex(ps.IfIndex)
		if ps.Egress {
			// The port the frame came in on; a frame made on this host
			// comes from the agent itself (spec "interface": 0x3FFFFFFF).
			input = sflow.IfIndex(ps.InIfIndex)
			if ps.InIfIndex == 0 {
				input = sflow.IfIndex(sflow.IfIndexInternal)
			}
		}
		w.fs = sflow.FlowSample{
			SequenceNumber: uint32(s.n),
			Source:         sflow.DataSource{Type: sflow.SourceIfIndex, Index: s.cfg.IfIndex},
			SamplingRate:   max(s.cfg.Rate, ps.KernelRate), // a sample taken at a higher kernel rate, before a rate fell
			SamplePool:     uint32(s.poolBase + pool),      // RFC: wraps mod 2^32
			Drops:          uint32(s.dropsBase + drops),
			Input:          input,
			Output:         output,
			Records:        w.frecs[:nrecs],
		}
		if s.out.Add(&w.fs) == nil { // a too-large sample is counted by the sender
			w.stats.FlowSamples.Add(1)
		}
	}
}

// transitRecords adds the records of a sample followed to where its frame
// left (dataplane/bpf/transit.h) after the first nrecs, and returns the new count:
// extended_egress_queue (1036) with the transmit queue; extended_queue
// (1040) with the bytes queued ahead of it, where it went through a
// qdisc (sflow_transit.txt: only with an extended_egress_queue); and,
// for a frame sampled at ingress, extended_transit (1039), the time from
// the sample to the frame leaving the egress qdisc. An egress sample has
// no 1039: it was taken at the output port, so the time in the switch
// before it is unknown. They come last: tshark 4.0 misreads the records
// after one it does not know.
func (w *worker) transitRecords(ps *PacketSample, nrecs int) int {
	tr := &ps.Transit
	if !tr.Left {
		return nrecs
	}
	w.eq.Queue = tr.Queue
	w.frecs[nrecs] = &w.eq
	nrecs++
	if !ps.Egress {
		w.tdel.SetDelay(tr.Delay)
		w.frecs[nrecs] = &w.tdel
		nrecs++
	}
	if tr.DepthOK {
		w.qd.Depth = tr.Depth
		w.frecs[nrecs] = &w.qd
		nrecs++
	}
	w.stats.TransitRecords.Add(1)
	return nrecs
}

// queueRecords adds, after the first nrecs, the records of what a switch
// ASIC told of the sample's way through it (psample: QueueInfo), in
// transitRecords' order, and returns the new count: extended_egress_queue
// (1036) with the queue, extended_transit (1039) with the latency, and
// extended_queue (1040) with the queue's occupancy, only beside 1036
// (sflow_transit.txt). Each as far as the hardware tells.
func (w *worker) queueRecords(q *QueueInfo, nrecs int) int {
	if q.HasTC {
		w.eq.Queue = q.TC
		w.frecs[nrecs] = &w.eq
		nrecs++
	}
	if q.HasDelay {
		w.tdel.SetDelay(q.Delay)
		w.frecs[nrecs] = &w.tdel
		nrecs++
	}
	if q.HasTC && q.HasDepth {
		w.qd.SetDepth(q.Depth)
		w.frecs[nrecs] = &w.qd
		nrecs++
	}
	return nrecs
}

// pollErrorsEvery is the interval between two lines of failed counter
// polls of a worker.
var pollErrorsEvery = time.Minute

// tick runs once a second, or after an idle worker's sleep with the
// number of seconds it slept (ticks): pollers whose countdown ends send
// counters, and every receiver's datagram is flushed, so that a sample
// waits at most a second in the agent (sflow_agent_design.txt "One-second
// tick" and "Receiver": a tick with no samples in the buffer sends
// nothing, which is why an idle worker may skip ticks).
func (w *worker) tick(ticks int) {
	for _, p := range w.pollers {
		if p.cfg.Interval <= 0 {
			continue
		}
		p.countdown -= ticks
		if p.countdown > 0 {
			continue
		}
		p.countdown = int(p.cfg.Interval / time.Second)
		w.poll(p)
	}
	for _, r := range w.receivers {
		r.Flush()
	}
}

// poll sends one counter sample of poller p.
func (w *worker) poll(p *poller) {
	recs, err := w.counters.AppendCounters(w.crecs[:0], p.cfg.Source)
	w.crecs = recs[:0]
	if err != nil {
		// A source that read part of its counters returns the records it
		// could fill (unknown values where it could not): send those.
		w.stats.PollErrors.Add(1)
		w.pollFailed.Log("source", p.cfg.Source.String(), "err", err)
		if len(recs) == 0 {
			return
		}
	}
	if g, ok := w.counters.(CounterGenerations); ok {
		// Per poller: every instance of the source sees the restart.
		gen := g.CounterGeneration(p.cfg.Source)
		if p.genSet && gen != p.gen {
			*p.seq = 0
		}
		p.gen, p.genSet = gen, true
	}
	*p.seq++
	w.cs = sflow.CounterSample{SequenceNumber: uint32(*p.seq), Source: p.cfg.Source, Records: recs}
	if p.out.Add(&w.cs) == nil {
		w.stats.CounterSamples.Add(1)
	}
}

// apply installs a new configuration, keeping the sequence numbers of
// receivers, samplers and pollers that remain, and the phase of pollers
// whose interval is unchanged.
func (w *worker) apply(cfg workerConfig) {
	if cfg.applied != nil {
		defer close(cfg.applied)
	}
	// Between batches: the ring position covers every sample handled, so
	// the state takes all that changed, before ports and samplers go.
	w.persist()
	// Receivers: keep a stream whose settings are unchanged; a changed one
	// is reopened and continues its datagram sequence.
	old := w.receivers
	w.receivers = make(map[int]*receiverOut, len(cfg.receivers))
	for _, rc := range cfg.receivers {
		if r, ok := old[rc.Index]; ok && r.cfg == rc && cfg.agent == w.agent {
			w.receivers[rc.Index] = r
			delete(old, rc.Index)
			continue
		}
		slot := w.claim(persist.StreamKey(w.subAgentID(), rc.Index))
		lastSeq := uint32(*slot) // the last datagram an earlier process sent
		if r, ok := old[rc.Index]; ok {
			// r still sends what it holds when closed below; the new
			// stream goes on after r's last datagram (no gap, no repeat).
			lastSeq = r.LastSeq()
		}
		r, err := w.newReceiverOut(rc, cfg.agent, lastSeq, slot)
		if err != nil {
			w.log.Error("opening receiver", "receiver", rc.Index, "err", err)
			continue
		}
		if err := r.DialErr(); err != nil && w.id == 0 {
			if w.unreachable == nil {
				w.unreachable = map[int]string{}
			}
			if why := fmt.Sprint(rc.Address, rc.Unresolved, err); w.unreachable[rc.Index] != why {
				w.unreachable[rc.Index] = why
				w.log.Warn("collector not reachable now: its datagrams are counted as send errors and the socket is retried with backoff",
					"receiver", rc.Index, "collector", CollectorKey{rc.Index, rc.Address, rc.Unresolved}.Collector(), "err", err)
			}
		} else {
			delete(w.unreachable, rc.Index)
		}
		w.receivers[rc.Index] = r
	}
	for idx, r := range old {
		w.closeReceiver(r)
		if _, ok := w.receivers[idx]; !ok {
			w.state.Free(persist.StreamKey(w.subAgentID(), idx))
		}
	}
	keep := make(map[CollectorKey]bool, len(cfg.receivers))
	for _, rc := range cfg.receivers {
		keep[CollectorKey{rc.Index, rc.Address, rc.Unresolved}] = true
	}
	w.collectors.keep(keep)
	w.agent = cfg.agent

	type skey struct {
		ifindex uint32
		inst    int
	}
	oldS := make(map[skey]*sampler)
	for _, ss := range w.samplers {
		for _, s := range ss {
			oldS[skey{s.cfg.IfIndex, s.cfg.Instance}] = s
		}
	}
	w.samplers = make(map[uint32][]*sampler)
	oldPools := w.pools
	w.pools = make(map[uint32]*portPool)
	for _, sp := range cfg.samplers {
		// A port keeps its CPU pools while it stays attached; a new
		// attachment (its counters restart from 0 over a new base) starts
		// afresh.
		if _, ok := w.pools[sp.cfg.IfIndex]; !ok {
			pp := oldPools[sp.cfg.IfIndex]
			if pp == nil || pp.base != sp.poolBase {
				np := newPortPool(sp.poolBase, w.state, sp.cfg.IfIndex)
				if pp != nil && pp.base+pp.last > np.base+np.last {
					// The pools of the new attachment go on above
					// the last one of the old (pool.go).
					np.last = pp.base + pp.last - np.base
				}
				pp = np
			}
			pp.outAll = max(pp.outAll, sp.endedPool)
			pp.persist(0)
			w.pools[sp.cfg.IfIndex] = pp
		}
		out := w.receivers[sp.cfg.Receiver]
		if out == nil || sp.cfg.Rate == 0 {
			continue
		}
		k := skey{sp.cfg.IfIndex, sp.cfg.Instance}
		s := oldS[k]
		delete(oldS, k)
		if s == nil {
			s = &sampler{seq: w.claim(persist.SamplerKey(sp.cfg.IfIndex, sp.cfg.Instance))}
			s.n = *s.seq
		}
		s.cfg, s.out, s.poolBase, s.dropsBase = sp.cfg, out, sp.poolBase, sp.dropsBase
		s.kernelRate = sp.kernelRate
		s.threshold = subsampleThreshold(sp.kernelRate, sp.cfg.Rate)
		w.samplers[sp.cfg.IfIndex] = append(w.samplers[sp.cfg.IfIndex], s)
	}
	for _, ss := range w.samplers {
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].cfg.Rate < ss[j].cfg.Rate })
	}
	for idx, pp := range oldPools { // ports no longer sampled here
		if _, ok := w.pools[idx]; !ok {
			pp.free(w.state, idx)
		}
	}
	for k := range oldS { // samplers gone: their numbers start afresh if they come back
		w.state.Free(persist.SamplerKey(k.ifindex, k.inst))
	}

	type pkey struct {
		ds   sflow.DataSource
		inst int
	}
	oldP := make(map[pkey]*poller)
	for _, p := range w.pollers {
		oldP[pkey{p.cfg.Source, p.cfg.Instance}] = p
	}
	w.pollers = w.pollers[:0:0]
	for _, pc := range cfg.pollers {
		out := w.receivers[pc.Receiver]
		if out == nil || pc.Interval <= 0 {
			continue
		}
		pk := pkey{pc.Source, pc.Instance}
		p := oldP[pk]
		delete(oldP, pk)
		if p == nil || p.cfg.Interval != pc.Interval {
			secs := int(pc.Interval / time.Second)
			if p == nil {
				p = &poller{seq: w.claim(persist.PollerKey(uint32(pc.Source.Type), pc.Source.Index, pc.Instance))}
				if w.firstPoll > 0 {
					secs = min(secs, w.firstPoll)
				}
			}
			// Random start phase so that pollers do not fire together
			// (sflow_agent_design.txt, "Counter Samples").
			if secs < 1 {
				secs = 1
			}
			p.countdown = 1 + int(w.rng.uint32()%uint32(secs))
		}
		p.cfg, p.out = pc, out
		w.pollers = append(w.pollers, p)
	}
	for k := range oldP {
		w.state.Free(persist.PollerKey(uint32(k.ds.Type), k.ds.Index, k.inst))
	}
}

// claim returns the persistent value of key k: the agent's state, or,
// when that is full, a value of this process only (logged: its numbers
// restart with the process).
func (w *worker) claim(k persist.Key) *uint64 {
	v, err := w.state.Claim(k)
	if err != nil {
		w.log.Warn("agent state full: a sequence number is not kept across upgrades and restarts", "key", fmt.Sprintf("%#x", uint64(k)), "err", err)
		return new(uint64)
	}
	return v
}

// closeAll flushes and closes every receiver stream.
func (w *worker) closeAll() {
	for _, r := range w.receivers {
		w.closeReceiver(r)
	}
	w.receivers = nil
	w.persist()
}

// closeReceiver flushes and closes one receiver stream.
func (w *worker) closeReceiver(r *receiverOut) {
	if _, err := r.Close(); err != nil {
		w.log.Warn("closing receiver socket", "receiver", r.cfg.Index, "err", err)
	}
}

// vlanTag returns the VLAN ID and priority of the outermost tag of a
// tagged Ethernet frame (802.1Q, 802.1ad or 0x9100; the tag a switch port
// classifies the frame by). Untagged frames report ok=false: the agent then
// omits extended_switch rather than inventing a VLAN.
func vlanTag(h []byte) (vlan, prio uint32, ok bool) {
	eh, _ := ethernet.Parse(h)
	if eh.Tags == 0 {
		return 0, 0, false
	}
	return uint32(eh.Outer.VID()), uint32(eh.Outer.PCP()), true
}
