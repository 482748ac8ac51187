package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/internal/prom"
)

// Transit is what became of the sampled frames followed to where they
// leave (transit.Stats, package dataplane/transit), and how many wait now.
type Transit struct {
	Parked, Unparked               uint64
	Sent, Dropped, Consumed, Stale uint64
	Deferred, Queued               uint64
	Waiting                        uint64
}

var (
	transitParked   = prom.Desc("transit_parked_total", "Sampled frames whose record waited in the kernel for the frame to leave (transit on).")
	transitUnparked = prom.Desc("transit_unparked_total", "Sampled frames whose record went out at once, without transit records: the wait table full, or the frame's address still waiting.")
	transitEnded    = prom.Desc("transit_ended_total", "Waits ended, by how: sent (left through a port: transit records), dropped, consumed (delivered on this host, or copied), stale (not seen again within 1 s).", "how")
	transitDeferred = prom.Desc("transit_deferred_total", "Waits ended while the worker's ring was full: delivered by the next sweep (within a second).")
	transitQueued   = prom.Desc("transit_queued_total", "Waiting frames that went through a port's qdisc (their queue depth is known).")
	transitWaiting  = prom.Desc("transit_waiting", "Sampled frames whose record waits now.")
)

type transitCollector struct{ read func() (Transit, bool) }

// NewTransitCollector exports the transit counts read reports (nothing
// while read says transit is off).
func NewTransitCollector(read func() (Transit, bool)) prometheus.Collector {
	return transitCollector{read}
}

func (c transitCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{transitParked, transitUnparked, transitEnded, transitDeferred, transitQueued, transitWaiting} {
		ch <- d
	}
}

func (c transitCollector) Collect(ch chan<- prometheus.Metric) {
	t, ok := c.read()
	if !ok {
		return
	}
	ch <- prom.Counter(transitParked, t.Parked)
	ch <- prom.Counter(transitUnparked, t.Unparked)
	ch <- prom.Counter(transitEnded, t.Sent, "sent")
	ch <- prom.Counter(transitEnded, t.Dropped, "dropped")
	ch <- prom.Counter(transitEnded, t.Consumed, "consumed")
	ch <- prom.Counter(transitEnded, t.Stale, "stale")
	ch <- prom.Counter(transitDeferred, t.Deferred)
	ch <- prom.Counter(transitQueued, t.Queued)
	ch <- prom.Gauge(transitWaiting, float64(t.Waiting))
}
