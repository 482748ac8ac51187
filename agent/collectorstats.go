package agent

import (
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/sflowswitchd/sflowswitchd/agent/sender"
)

// CollectorStats counts what one worker sent to one collector (a receiver
// row and its address). Each worker owns its own CollectorStats, so the
// hot path's atomic adds never contend across CPUs; Agent.CollectorStats
// sums them for readers.
type CollectorStats struct {
	// Datagrams and Bytes are datagrams sent successfully.
	Datagrams atomic.Uint64
	Bytes     atomic.Uint64
	// SendErrors are datagrams the socket refused; SamplesUnsent the
	// samples they held.
	SendErrors    atomic.Uint64
	SamplesUnsent atomic.Uint64
	// TooLarge are samples larger than the receiver's maximum datagram
	// size, never sent.
	TooLarge atomic.Uint64
}

// CollectorKey names a collector: the receiver row and its address.
type CollectorKey struct {
	Receiver int
	Address  netip.AddrPort
	// Name is the collector as configured (ReceiverConfig.Unresolved)
	// while its host name gives no address it can be sent to; "" else.
	Name string
}

// Collector names the collector in metrics and logs: its address, or
// the name as configured while that gives none.
func (k CollectorKey) Collector() string {
	if !k.Address.IsValid() && k.Name != "" {
		return k.Name
	}
	return k.Address.String()
}

// CollectorTotals are a collector's counters summed over every worker.
type CollectorTotals struct {
	CollectorKey
	Datagrams, Bytes, SendErrors, SamplesUnsent, TooLarge uint64
}

// SamplesLost is every sample meant for the collector that did not reach
// its socket: in refused datagrams (a collector with no route or no
// resolved address included), or too large.
func (t CollectorTotals) SamplesLost() uint64 { return t.SamplesUnsent + t.TooLarge }

// collectorSet is one sender's (a worker's, the drop reporter's, the
// application engine's) CollectorStats by collector. The owner adds and
// prunes entries when it applies a configuration; readers take the lock
// only to copy the pointers.
type collectorSet struct {
	mu sync.Mutex
	m  map[CollectorKey]*CollectorStats
}

// get returns the stats of k, creating them.
func (s *collectorSet) get(k CollectorKey) *CollectorStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[CollectorKey]*CollectorStats{}
	}
	st := s.m[k]
	if st == nil {
		st = &CollectorStats{}
		s.m[k] = st
	}
	return st
}

// keep forgets every collector not in keep, so that a stream of SNMP SETs
// changing receiver addresses cannot grow the set without bound (the
// removed collector's series disappear from the metrics).
func (s *collectorSet) keep(keep map[CollectorKey]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.m {
		if !keep[k] {
			delete(s.m, k)
		}
	}
}

// addTo adds this worker's counters to totals.
func (s *collectorSet) addTo(totals map[CollectorKey]*CollectorTotals) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, st := range s.m {
		t := totals[k]
		if t == nil {
			t = &CollectorTotals{CollectorKey: k}
			totals[k] = t
		}
		t.Datagrams += st.Datagrams.Load()
		t.Bytes += st.Bytes.Load()
		t.SendErrors += st.SendErrors.Load()
		t.SamplesUnsent += st.SamplesUnsent.Load()
		t.TooLarge += st.TooLarge.Load()
	}
}

// CollectorStats returns the counters of every configured collector,
// summed over the workers, sorted by receiver index and address.
func (a *Agent) CollectorStats() []CollectorTotals {
	totals := map[CollectorKey]*CollectorTotals{}
	for _, w := range a.workers {
		w.collectors.addTo(totals)
	}
	a.mu.Lock()
	extra := a.collectorSets
	a.mu.Unlock()
	for _, s := range extra {
		s.set.addTo(totals)
	}
	out := make([]CollectorTotals, 0, len(totals))
	for _, t := range totals {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Receiver != out[j].Receiver {
			return out[i].Receiver < out[j].Receiver
		}
		return out[i].Collector() < out[j].Collector()
	})
	return out
}

// CollectorSet counts, per collector, what one sub-agent outside the
// workers sends (the drop reporter, the application engine), so that
// Agent.CollectorStats covers every datagram sent to a collector. Its
// owner takes Counters when it opens a stream and calls Keep when its
// receivers change; register it with Agent.AddCollectorSet.
type CollectorSet struct{ set collectorSet }

// Counters returns the sender counters of collector k.
func (s *CollectorSet) Counters(k CollectorKey) sender.Counters {
	st := s.set.get(k)
	return st.senderCounters()
}

// Keep forgets every collector not in keep.
func (s *CollectorSet) Keep(keep map[CollectorKey]bool) { s.set.keep(keep) }

// senderCounters points a sender's counts at st.
func (st *CollectorStats) senderCounters() sender.Counters {
	return sender.Counters{
		Datagrams: &st.Datagrams, Bytes: &st.Bytes,
		SendErrors: &st.SendErrors, SamplesUnsent: &st.SamplesUnsent,
		TooLarge: &st.TooLarge,
	}
}

// AddCollectorSet includes s in CollectorStats.
func (a *Agent) AddCollectorSet(s *CollectorSet) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.collectorSets = append(a.collectorSets[:len(a.collectorSets):len(a.collectorSets)], s)
}
