package app

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
)

// Stats counts what the engine did. All fields are atomic: producers
// (API readers, library callers), the engine goroutine and metrics readers
// use them concurrently.
type Stats struct {
	// Queued are samples that passed validation and entered the queue.
	Queued atomic.Uint64
	// Accepted are queued samples the engine took on: they got a data
	// source and were handed to its receivers. A queued sample refused
	// later (too many sources) is counted in Rejected, never here.
	Accepted atomic.Uint64
	// FlowSamples and CounterSamples are samples encoded into datagrams.
	FlowSamples    atomic.Uint64
	CounterSamples atomic.Uint64
	// Datagrams and Bytes are datagrams sent successfully.
	Datagrams atomic.Uint64
	Bytes     atomic.Uint64
	// SendErrors are datagrams the socket refused; SamplesUnsent the
	// samples they held.
	SendErrors    atomic.Uint64
	SamplesUnsent atomic.Uint64
	// TooLarge are samples larger than a receiver's maximum datagram size.
	TooLarge atomic.Uint64
	// Collectors counts what was sent, per collector (register it with
	// agent.Agent.AddCollectorSet).
	Collectors agent.CollectorSet
	// APMAdded are transactions aggregated into the APM reports;
	// APMSkipped those the APM engine could not measure (no socket, so no
	// client or server address, or too many applications).
	APMAdded   atomic.Uint64
	APMSkipped atomic.Uint64
	// Sources is the number of application data sources (gauge).
	Sources atomic.Int64
	// SourcesReclaimed are idle data sources closed to make room for a
	// new application when every slot was taken.
	SourcesReclaimed atomic.Uint64

	rejected [numReasons]atomic.Uint64
}

// Rejected returns the number of samples refused for reason r.
func (s *Stats) Rejected(r Reason) uint64 {
	if r < 0 || r >= numReasons {
		return 0
	}
	return s.rejected[r].Load()
}

// rejectLog writes at most one log line per second per reason, with the
// number of rejections it did not log, so a flood of bad messages cannot
// flood the log.
type rejectLog struct {
	log        *slog.Logger
	last       [numReasons]atomic.Int64 // unix nanoseconds of the last line
	suppressed [numReasons]atomic.Uint64
}

// monoBase is the origin of rejectLog's clock: durations since it are read
// from the monotonic clock, so a wall-clock step (NTP, an operator's date
// command) can neither silence the log nor flood it. The extra second makes
// the first rejection of each reason log at once.
var monoBase = time.Now().Add(-time.Second)

func (l *rejectLog) note(r Reason, err error) {
	now := int64(time.Since(monoBase))
	last := l.last[r].Load()
	if now-last < int64(time.Second) || !l.last[r].CompareAndSwap(last, now) {
		l.suppressed[r].Add(1)
		return
	}
	l.log.Warn("application sample rejected", "reason", r.String(), "err", err,
		"suppressed_since_last", l.suppressed[r].Swap(0))
}
