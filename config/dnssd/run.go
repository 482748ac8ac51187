package dnssd

import (
	"context"
	"math/rand/v2"
	"time"
)

// Refresh timing (hsflowd mod_dnssd.c: HSP_DEFAULT_DNSSD_STARTDELAY,
// _MINDELAY, _RETRYDELAY).
const (
	// DefaultStartDelay bounds the random delay of the first query, so
	// that a fleet restarted at once does not ask at once.
	DefaultStartDelay = 30 * time.Second
	// MinInterval is the shortest time between two queries, whatever the
	// TTL.
	MinInterval = 10 * time.Second
	// NoTTLInterval is the time to the next query when the answer had no
	// TTL (no records, or TTLs of 0).
	NoTTLInterval = 300 * time.Second
)

// Timing is when the queries are made.
type Timing struct {
	// StartDelay bounds the random delay of the first query (0: at
	// once).
	StartDelay time.Duration
	// Min and NoTTL are MinInterval and NoTTLInterval; 0 means those.
	// Only tests set them lower (the daemon's test-only environment
	// variable): a fleet's DNS load depends on them.
	Min, NoTTL time.Duration
}

// Next is the time to the next query after a: its TTL, at least Min;
// NoTTL when it had none. After a failed query (Error), with no TTL
// learnt, the retry backs off from Min, doubling up to NoTTL (retry is
// the previous wait after an error, 0 after a success).
func (t Timing) Next(a Answer, retry time.Duration) time.Duration {
	minI, noTTL := t.Min, t.NoTTL
	if minI <= 0 {
		minI = MinInterval
	}
	if noTTL <= 0 {
		noTTL = NoTTLInterval
	}
	if a.Outcome == Error && a.TTL == 0 {
		if retry <= 0 {
			return minI
		}
		return min(max(2*retry, minI), noTTL)
	}
	if a.TTL == 0 {
		return noTTL
	}
	return max(a.TTL, minI)
}

// Querier makes one query (a Resolver, or one made anew at each query).
type Querier interface {
	Query(ctx context.Context) Answer
}

// Run queries with r until ctx ends: first at a random time within
// t.StartDelay, then at t.Next of each answer. Each answer goes to
// answer (on Run's goroutine), with the time to the next query.
func Run(ctx context.Context, r Querier, t Timing, answer func(Answer, time.Duration)) {
	wait := time.Duration(0)
	if t.StartDelay > 0 {
		wait = rand.N(t.StartDelay)
	}
	var retry time.Duration
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		a := r.Query(ctx)
		if ctx.Err() != nil {
			return
		}
		next := t.Next(a, retry)
		retry = 0
		if a.Outcome == Error {
			retry = next
		}
		answer(a, next)
		timer.Reset(next)
	}
}
