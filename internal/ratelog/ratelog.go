// Package ratelog writes a repeated log line at most once per interval,
// with the number of occurrences it did not write (docs/guides/troubleshoot.md:
// "never one per packet: repeated conditions are logged ... at most once a
// second with a count of what was not logged"). A client that aborts
// 2,000 scrapes, or a flood of refused connections, costs one line a
// second (42,000 lines in 3.4 s).
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter logs one message at a level, at most once per interval. The
// zero value is not usable; New makes one. It is safe for concurrent use.
type Limiter struct {
	log   *slog.Logger
	level slog.Level
	msg   string
	every time.Duration

	mu         sync.Mutex
	last       time.Time // monotonic; zero: never logged
	suppressed uint64
	// Total counts every occurrence, logged or not (for metrics).
	Total atomic.Uint64
}

// New returns a limiter of msg at level on log, at most one line per
// every.
func New(log *slog.Logger, level slog.Level, msg string, every time.Duration) *Limiter {
	return &Limiter{log: log, level: level, msg: msg, every: every}
}

// Log counts one occurrence and writes it with args (slog key-value
// pairs) unless a line was written less than the interval ago; the line
// carries suppressed_since_last, the occurrences not written since the
// previous line. It reports whether it wrote.
func (l *Limiter) Log(args ...any) bool {
	l.Total.Add(1)
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed++
		l.mu.Unlock()
		return false
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	l.log.Log(context.Background(), l.level, l.msg, append(args, "suppressed_since_last", n)...)
	return true
}
