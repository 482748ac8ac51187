package agent

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent/persist"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// DropNotification is one dropped packet reported by the kernel
// (drops.Event in the agent's terms). Header is valid only during
// the callback that receives it.
type DropNotification struct {
	// ReasonName is the kernel's reason name, e.g. "NETFILTER_DROP".
	ReasonName string
	// Symbol is the kernel function that dropped the packet ("" unknown).
	Symbol string
	// In is the ifIndex the packet came in on (0 unknown or local); Out the
	// port of an egress drop (0 otherwise).
	In, Out uint32
	// Queue is the egress queue, meaningful when QueueKnown.
	Queue      uint32
	QueueKnown bool
	// FrameLen is the packet's length from the start of Header;
	// HeaderProto the sflow header_protocol of Header (0: no header).
	FrameLen    uint32
	HeaderProto sflow.HeaderProtocol
	Header      []byte
}

// DropSource is the kernel side of drop notifications.
type DropSource interface {
	// ReadDrops waits for notifications and calls fn for each one ready;
	// it returns early with a nil error after Wake, and an error wrapping
	// os.ErrClosed once the source is closed.
	ReadDrops(fn func(*DropNotification)) (int, error)
	// Wake makes a blocked ReadDrops return.
	Wake() error
	// Lost returns the notifications lost so far in the kernel (over the
	// rate limit or to a full ring), the discarded_packet drops field.
	Lost() (uint64, error)
}

// DropProgram is implemented by a DropSource whose kernel program may
// outlive the process (pinned, taken over by the next one: an upgrade,
// a crash restart), so that its counters go on.
type DropProgram interface {
	// DropProgram describes the source's kernel program.
	DropProgram() DropProgramInfo
}

// DropProgramInfo is a drop source's kernel program (DropProgram).
type DropProgramInfo struct {
	// ID is the program's kernel ID (0: unknown).
	ID uint32
	// Adopted: the source took the program over from an earlier
	// process; Notified is then how many notifications it had written
	// before this process's buffers took them (those the earlier process
	// did not read were lost with its buffers).
	Adopted  bool
	Notified uint64
	// Replaced are programs of another build the source detached for
	// its own, with their final counts.
	Replaced []ReplacedDropProgram
}

// ReplacedDropProgram is a kernel program detached for another: its ID,
// the notifications it wrote, and its losses (over the limit, or not
// written: no buffer), final.
type ReplacedDropProgram struct {
	ID             uint32
	Notified, Lost uint64
}

// DropStats counts what the drop reporter did.
type DropStats struct {
	// Notifications are discarded_packet samples encoded (once per
	// notification, whatever the number of receivers).
	Notifications atomic.Uint64
	// Unsent are notifications that arrived while no receiver was
	// configured; they are counted in the drops field.
	Unsent atomic.Uint64
	// Sender counts the datagrams, bytes and send errors of the drop
	// sub-agent (only those fields are used).
	Sender WorkerStats
	// Collectors counts the same per collector (register it with
	// Agent.AddCollectorSet).
	Collectors CollectorSet
}

// DropReporter turns drop notifications into discarded_packet samples
// (docs/spec/sflow_drops.md), all under data source 0:0 as the host
// agent does, and sends them to every receiver. It is a sub-agent of its
// own (sub-agent ID given at creation, after the workers'), so its
// datagram sequence numbers are independent of the workers'. Samples
// ready together share datagrams.
type DropReporter struct {
	log      *slog.Logger
	subAgent uint32
	start    time.Time
	stats    DropStats

	mu        sync.Mutex
	agentAddr netip.Addr
	receivers []ReceiverConfig
	changed   bool
	src       DropSource

	// Owned by Run.
	outs    map[int]*receiverOut
	outCfg  map[int]ReceiverConfig
	outAddr netip.Addr
	seqs    map[int]uint32 // last datagram sequence sent, kept across receiver changes
	// unsent are notifications that arrived while there was no receiver
	// (before the configuration, or without an agent address): counted in
	// the drops field with the kernel's losses.
	unsent uint64
	// lostBase are the losses of earlier sources (Run calls).
	lostBase uint64
	// src2 and lostRead: the source being read, and whether its losses
	// were read for the current batch.
	src2     DropSource
	lostRead bool
	seq      *uint64 // discarded_packet sequence number of 0:0 (persistent)
	// kept is the drops field as last reported, in the agent's state
	// beside seq: a process that takes over (an upgrade, a crash
	// restart) with a kernel program of its own starts its losses from it
	// (lostBase), so the field continues as the sequence numbers do.
	kept *uint64
	// Beside them, for a kernel program that outlives the process
	// (DropProgram): prog is its ID; base the losses its counters do not
	// hold (earlier programs', notifications that arrived without a
	// receiver, notifications lost with a dead process's buffers); and
	// handled the notifications read from it. A process that adopts
	// that program continues the drops field from base plus the
	// program's own losses (its counters went on), plus the
	// notifications it wrote that nobody read (DropProgram's count less
	// handled).
	prog, base, handled *uint64
	state               *persist.Store
	lost                uint64
	sample              sflow.DiscardedPacket
	recs                [4]sflow.Record
	hdr                 sflow.SampledHeader
	fn                  sflow.ExtendedFunction
	reason              sflow.ExtendedLinuxDropReason
	queue               sflow.ExtendedEgressQueue
	handle              func(*DropNotification)
}

// NewDropReporter returns a reporter that sends as sub-agent subAgent.
func NewDropReporter(subAgent uint32, log *slog.Logger) *DropReporter {
	if log == nil {
		log = slogDiscard()
	}
	r := &DropReporter{log: log, subAgent: subAgent, start: time.Now(), outs: map[int]*receiverOut{}, outCfg: map[int]ReceiverConfig{}, seqs: map[int]uint32{}}
	r.handle = r.add
	r.SetState(persist.New(16))
	return r
}

// SetState keeps the reporter's sequence numbers in the agent's state
// (Agent.State) and takes the agent's start as its own, so that an
// upgrade or a restart continues them, and its uptime, as the workers'.
// Call it before Run.
func (r *DropReporter) SetState(s *persist.Store) {
	r.state, r.start = s, s.Start()
	line, err := s.ClaimLine(persist.DropsKey())
	if err != nil {
		r.log.Warn("agent state full: a sequence number is not kept across upgrades and restarts", "err", err)
		line = make([]uint64, persist.LineWords)
	}
	r.seq, r.kept = &line[0], &line[1]
	r.base, r.prog, r.handled = &line[2], &line[3], &line[4]
	// The earlier program's losses (0 for a state of its own).
	r.lostBase = atomic.LoadUint64(r.kept)
}

// claim is worker.claim for the reporter.
func (r *DropReporter) claim(k persist.Key) *uint64 {
	v, err := r.state.Claim(k)
	if err != nil {
		r.log.Warn("agent state full: a sequence number is not kept across upgrades and restarts", "err", err)
		return new(uint64)
	}
	return v
}

// Stats returns the reporter's counters.
func (r *DropReporter) Stats() *DropStats { return &r.stats }

// SetReceivers sets the agent address and the receivers notifications go
// to; it takes effect at the next notification.
func (r *DropReporter) SetReceivers(agent netip.Addr, rcv []ReceiverConfig) {
	r.mu.Lock()
	r.agentAddr = agent
	r.receivers = append([]ReceiverConfig(nil), rcv...)
	r.changed = true
	src := r.src
	r.mu.Unlock()
	if src != nil {
		if err := src.Wake(); err != nil {
			r.log.Warn("waking the drop reader", "err", err)
		}
	}
}

func (r *DropReporter) uptime() uint32 { return uint32(time.Since(r.start) / time.Millisecond) }

// applyReceivers opens and closes receiver streams after SetReceivers.
func (r *DropReporter) applyReceivers() {
	r.mu.Lock()
	if !r.changed {
		r.mu.Unlock()
		return
	}
	agent, rcv := r.agentAddr, r.receivers
	r.changed = false
	r.mu.Unlock()
	if !agent.IsValid() {
		rcv = nil // no datagram without an agent address
	}
	want := make(map[int]ReceiverConfig, len(rcv))
	keep := make(map[CollectorKey]bool, len(rcv))
	for _, c := range rcv {
		want[c.Index] = c
		keep[CollectorKey{c.Index, c.Address, c.Unresolved}] = true
	}
	r.stats.Collectors.Keep(keep)
	// Streams whose receiver and agent address stay are kept as they are.
	for idx, o := range r.outs {
		if c, ok := want[idx]; ok && c == r.outCfg[idx] && agent == r.outAddr {
			delete(want, idx)
			continue
		}
		last, err := o.Close()
		if err != nil {
			r.log.Warn("closing drop receiver", "receiver", idx, "err", err)
		}
		r.seqs[idx] = last
		delete(r.outs, idx)
		delete(r.outCfg, idx)
	}
	r.outAddr = agent
	for _, c := range want {
		slot := r.claim(persist.StreamKey(r.subAgent, c.Index))
		last, ok := r.seqs[c.Index]
		if !ok {
			last = uint32(*slot) // an earlier process's
		}
		o, err := newReceiverOut(c, agent, r.subAgent, last, slot, r.uptime, sendTuning{}, nil, r.stats.Sender.senderCounters(),
			r.stats.Collectors.Counters(CollectorKey{c.Index, c.Address, c.Unresolved}))
		if err != nil {
			r.log.Warn("drop notifications: receiver unavailable", "receiver", c.Index, "err", err)
			continue
		}
		r.outs[c.Index] = o
		r.outCfg[c.Index] = c
	}
}

// Run reads src until ctx ends or src is closed; notifications are
// encoded as they arrive and sent when no more are ready.
func (r *DropReporter) Run(ctx context.Context, src DropSource) {
	stop := context.AfterFunc(ctx, func() {
		if err := src.Wake(); err != nil {
			r.log.Warn("waking the drop reader", "err", err)
		}
	})
	defer stop()
	r.mu.Lock()
	r.src = src
	r.changed = true // (re)open the receivers' streams: a previous Run closed them
	r.mu.Unlock()
	r.takeProgram(src)
	defer func() {
		// Stopped (not closed): what the buffers hold is read and sent
		// (an upgrade paused the program's writes first, so this is
		// every notification it wrote).
		if ctx.Err() != nil {
			r.applyReceivers()
			r.src2, r.lostRead = src, false
			if err := src.Wake(); err == nil {
				if _, err := src.ReadDrops(r.handle); err != nil && !errors.Is(err, os.ErrClosed) {
					r.log.Warn("reading drop notifications", "err", err)
				}
			}
		}
		// The kernel's losses so far stay in the drops field when the
		// source is replaced (notifications turned off and on).
		if lost, err := src.Lost(); err == nil {
			// base (what the program's counters do not hold) stays as
			// it is, for a process that adopts the program.
			r.lostBase += lost
			atomic.StoreUint64(r.kept, r.lostBase+r.unsent)
		} else {
			r.log.Warn("reading lost drop notifications", "err", err)
		}
		r.mu.Lock()
		r.src = nil
		r.mu.Unlock()
		for idx, o := range r.outs {
			last, err := o.Close()
			if err != nil {
				r.log.Warn("closing drop receiver", "receiver", idx, "err", err)
			}
			r.seqs[idx] = last
			delete(r.outs, idx)
			delete(r.outCfg, idx)
		}
	}()
	for ctx.Err() == nil {
		r.applyReceivers()
		r.src2, r.lostRead = src, false
		_, err := src.ReadDrops(r.handle)
		for _, o := range r.outs {
			o.Flush()
		}
		if errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil {
			r.log.Warn("reading drop notifications", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// takeProgram sets the losses the drops field starts from for src's
// kernel program: one taken over from an earlier process continues from
// what that process kept (base) and the program's own counts; another
// starts from the field as last reported (kept).
func (r *DropReporter) takeProgram(src DropSource) {
	var info DropProgramInfo
	if p, ok := src.(DropProgram); ok {
		info = p.DropProgram()
	}
	id, notified := info.ID, info.Notified
	prog := atomic.LoadUint64(r.prog)
	// unread are the notifications a program wrote that the state does
	// not record as read: lost with a dead process's buffers.
	unread := func(notified uint64) uint64 {
		if h := atomic.LoadUint64(r.handled); notified > h {
			return notified - h
		}
		return 0
	}
	replaced := -1
	for i, rp := range info.Replaced {
		if rp.ID != 0 && uint64(rp.ID) == prog {
			replaced = i
		}
	}
	switch {
	case info.Adopted && id != 0 && prog == uint64(id):
		u := unread(notified)
		r.lostBase, r.unsent = atomic.LoadUint64(r.base)+u, 0
		atomic.StoreUint64(r.handled, notified)
		if u > 0 {
			r.log.Info("drop notifications the previous process did not read, lost with it: counted in the drops field", "notifications", u)
		}
	case replaced >= 0:
		// The earlier process's program, detached for this one: its
		// losses (the gap's included) and what it wrote unread go into
		// the field; the new program's counts start at 0.
		rp := info.Replaced[replaced]
		r.lostBase, r.unsent = atomic.LoadUint64(r.base)+rp.Lost+unread(rp.Notified), 0
		atomic.StoreUint64(r.prog, uint64(id))
		atomic.StoreUint64(r.handled, 0)
	default:
		// A program of its own, or one whose reading the state does
		// not record (its notifications so far are taken as read).
		atomic.StoreUint64(r.prog, uint64(id))
		atomic.StoreUint64(r.handled, notified)
	}
	atomic.StoreUint64(r.base, r.lostBase+r.unsent)
}

// add encodes one notification into each receiver's datagram.
func (r *DropReporter) add(n *DropNotification) {
	atomic.StoreUint64(r.handled, atomic.LoadUint64(r.handled)+1)
	if !r.lostRead {
		// Once per batch, when it arrives (not before waiting for it):
		// the kernel's losses up to now.
		r.lostRead = true
		if lost, err := r.src2.Lost(); err == nil {
			r.lost = r.lostBase + lost + r.unsent
			atomic.StoreUint64(r.kept, r.lost)
		} else {
			r.log.Warn("reading lost drop notifications", "err", err)
		}
	}
	if len(r.outs) == 0 {
		r.unsent++
		r.lost++
		atomic.StoreUint64(r.kept, r.lost)
		atomic.StoreUint64(r.base, r.lostBase+r.unsent)
		r.stats.Unsent.Add(1)
		return
	}
	*r.seq++
	s := &r.sample
	recs := r.recs[:0]
	if n.HeaderProto != 0 && len(n.Header) > 0 {
		r.hdr = sflow.SampledHeader{Protocol: n.HeaderProto, FrameLength: n.FrameLen, Header: n.Header}
		if n.HeaderProto == sflow.HeaderProtocolEthernet {
			// The frame without its FCS, as the flow samples report it.
			r.hdr.FrameLength += 4
			r.hdr.Stripped = 4
		}
		recs = append(recs, &r.hdr)
	}
	if n.QueueKnown {
		r.queue.Queue = n.Queue
		recs = append(recs, &r.queue)
	}
	if n.Symbol != "" {
		r.fn.Symbol = n.Symbol
		recs = append(recs, &r.fn)
	}
	r.reason.Reason = n.ReasonName
	recs = append(recs, &r.reason)
	*s = sflow.DiscardedPacket{
		SequenceNumber: uint32(*r.seq),
		Drops:          uint32(r.lost),
		Input:          n.In,
		Output:         n.Out,
		Reason:         DropReasonCode(n.ReasonName),
		Records:        recs,
	}
	r.stats.Notifications.Add(1)
	for _, o := range r.outs {
		_ = o.Add(s) // a too-large sample is counted by the sender
	}
}

// EgressQueueKnown reports whether a drop of this kernel reason happened
// in an egress queue, so that the skb's queue is the queue it was dropped
// from (extended_egress_queue): the qdisc reasons.
func EgressQueueKnown(reasonName string, out uint32) bool {
	return out != 0 && strings.HasPrefix(reasonName, "QDISC_")
}
