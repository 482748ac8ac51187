package agent

import (
	"fmt"
	"net/netip"

	"github.com/sflowswitchd/sflowswitchd/agent/sender"
)

// receiverOut is one sub-agent's stream of datagrams to one receiver: its
// own sender (datagram batch, sequence numbers, UDP socket), so workers
// never share a lock or a buffer when sending. cfg is the configuration it
// was opened with.
type receiverOut struct {
	cfg ReceiverConfig
	*sender.Sender
}

// sendTuning are the sender's batch settings (zero: its defaults).
type sendTuning struct {
	batch int
	noGSO bool
}

// newReceiverOut opens sub-agent subAgent's stream to receiver cfg,
// continuing the datagram sequence after lastSeq. What it sends is counted
// in every set of counts.
func newReceiverOut(cfg ReceiverConfig, agent netip.Addr, subAgent, lastSeq uint32, lastSent *uint64, uptime func() uint32, tune sendTuning, beforeSend func(), counts ...sender.Counters) (*receiverOut, error) {
	s, err := sender.New(sender.Config{
		Collector:       cfg.Address,
		MaxDatagramSize: cfg.MaxDatagramSize,
		Agent:           agent,
		SubAgent:        subAgent,
		LastSeq:         lastSeq,
		LastSent:        lastSent,
		Batch:           tune.batch,
		NoGSO:           tune.noGSO,
		Uptime:          uptime,
		Counters:        counts,
		BeforeSend:      beforeSend,
	})
	if err != nil {
		return nil, fmt.Errorf("receiver %d: %w", cfg.Index, err)
	}
	return &receiverOut{cfg: cfg, Sender: s}, nil
}

// newReceiverOut opens the worker's stream to receiver cfg, counted in the
// worker's totals and in its counters of the collector; lastSent keeps its
// last sequence number (agent/persist).
func (w *worker) newReceiverOut(cfg ReceiverConfig, agent netip.Addr, lastSeq uint32, lastSent *uint64) (*receiverOut, error) {
	coll := w.collectors.get(CollectorKey{cfg.Index, cfg.Address, cfg.Unresolved})
	return newReceiverOut(cfg, agent, w.subAgentID(), lastSeq, lastSent, w.uptime, w.send, w.commitFn, w.stats.senderCounters(), coll.senderCounters())
}

// senderCounters points a sender's counts at s.
func (s *WorkerStats) senderCounters() sender.Counters {
	return sender.Counters{
		Datagrams: &s.Datagrams, Bytes: &s.Bytes,
		SendErrors: &s.SendErrors, SamplesUnsent: &s.SamplesUnsent,
		TooLarge: &s.TooLarge,
	}
}
