package agent

import (
	"net/netip"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent/persist"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestFirstPollWithin: new pollers first poll within FirstPollWithin
// (spread over it), then at their interval; a poller whose interval
// changes is spread over its interval again.
func TestFirstPollWithin(t *testing.T) {
	for _, bound := range []int{0, 3} {
		dp := newFakeDataplane()
		w := newWorker(0, slogDiscard(), dp, nil, nil, persist.New(4096), 11)
		w.firstPoll = bound
		cfg := workerConfig{agent: netip.MustParseAddr("198.18.0.1"),
			receivers: []ReceiverConfig{{Index: 1, Address: netip.MustParseAddrPort("127.0.0.1:9")}}}
		for i := range 500 {
			cfg.pollers = append(cfg.pollers, PollerConfig{Source: sflow.DataSource{Type: sflow.SourceIfIndex, Index: uint32(i + 1)},
				Instance: 1, Receiver: 1, Interval: 20 * time.Second})
		}
		w.apply(cfg)
		hi := 0
		for _, p := range w.pollers {
			hi = max(hi, p.countdown)
			if p.countdown < 1 {
				t.Fatalf("bound %d: countdown %d", bound, p.countdown)
			}
		}
		want := 20
		if bound > 0 {
			want = bound
		}
		if hi != want {
			t.Errorf("bound %d: first polls within %d s, want spread up to %d s", bound, hi, want)
		}
		w.closeAll()
	}
}
