package agent

import (
	"fmt"
	"net/netip"

	"github.com/sflowswitchd/sflowswitchd/agent/internal/sender"
)

// receiverOut is one worker's stream of datagrams to one receiver: its own
// sender (datagram batch, sequence numbers, UDP socket), so workers never
// share a lock or a buffer when sending. cfg is the configuration it was
// opened with.
type receiverOut struct {
	cfg ReceiverConfig
	*sender.Sender
}

// newReceiverOut opens a worker's stream to receiver cfg, continuing the
// datagram sequence after lastSeq.
func (w *worker) newReceiverOut(cfg ReceiverConfig, agent netip.Addr, lastSeq uint32) (*receiverOut, error) {
	s, err := sender.New(sender.Config{
		Collector:       cfg.Address,
		MaxDatagramSize: cfg.MaxDatagramSize,
		Agent:           agent,
		SubAgent:        w.subAgentID(),
		LastSeq:         lastSeq,
		Uptime:          w.uptime,
		Counters: sender.Counters{
			Datagrams: &w.stats.Datagrams, Bytes: &w.stats.Bytes,
			SendErrors: &w.stats.SendErrors, SamplesUnsent: &w.stats.SamplesUnsent,
			TooLarge: &w.stats.TooLarge,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("receiver %d: %w", cfg.Index, err)
	}
	return &receiverOut{cfg: cfg, Sender: s}, nil
}
