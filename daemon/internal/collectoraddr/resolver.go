package collectoraddr

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
)

// Timing of the collector name resolution.
const (
	// lookupTimeout bounds one lookup.
	lookupTimeout = 5 * time.Second
	// refresh is how often a resolved name is looked up again.
	refresh = time.Minute
	// RetryMinWait is the wait before the first retry after a failure.
	RetryMinWait = time.Second
	// retryMaxWait is the longest wait between retries.
	retryMaxWait = 30 * time.Second
)

// Resolver resolves collector host names in the background, so that port
// changes and reloads never wait on DNS and a name that stops resolving
// stops nothing: the last address it resolved to stays in use, failures
// are retried with backoff and counted per collector, and a change of
// address reconfigures the daemon (onChange).
type Resolver struct {
	// Lookup resolves a host name (net.DefaultResolver; tests replace it
	// before the first use).
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Now is the clock (time.Now; tests replace it before the first use).
	Now func() time.Time

	log      *slog.Logger
	onChange func()
	kick     chan struct{}

	mu    sync.Mutex
	names map[string]*nameState
}

// nameState is one host name's resolution.
type nameState struct {
	addr     netip.Addr // last address it resolved to; invalid until then
	failures uint64     // lookups that failed
	lastErr  error
	next     time.Time // when to look it up again
	wait     time.Duration
}

// NewResolver returns a resolver that logs to log and calls onChange
// (may be nil) when a name resolves to a new address.
func NewResolver(log *slog.Logger, onChange func()) *Resolver {
	return &Resolver{log: log, onChange: onChange, kick: make(chan struct{}, 1), names: map[string]*nameState{},
		Now: time.Now,
		Lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}}
}

// Want makes hosts the set of names to resolve; new names are looked up
// at once in the background, names no longer wanted are forgotten.
func (r *Resolver) Want(hosts []string) {
	r.mu.Lock()
	keep := map[string]bool{}
	added := false
	for _, h := range hosts {
		keep[h] = true
		if r.names[h] == nil {
			r.names[h] = &nameState{}
			added = true
		}
	}
	for h := range r.names {
		if !keep[h] {
			delete(r.names, h)
		}
	}
	r.mu.Unlock()
	if added {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// Get returns the address host resolved to last, never blocking.
func (r *Resolver) Get(host string) (netip.Addr, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.names[host]; st != nil && st.addr.IsValid() {
		return st.addr, true
	}
	return netip.Addr{}, false
}

// ResolveDue looks up every name whose time has come and returns when
// the next one is due (zero: none wanted).
func (r *Resolver) ResolveDue(ctx context.Context) time.Time {
	r.mu.Lock()
	var due []string
	now := r.Now()
	for h, st := range r.names {
		if !st.next.After(now) {
			due = append(due, h)
		}
	}
	r.mu.Unlock()
	sort.Strings(due)
	changed := false
	for _, h := range due {
		lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		addrs, err := r.Lookup(lctx, h)
		cancel()
		a, ok := pickAddr(addrs)
		if err == nil && !ok {
			err = fmt.Errorf("no usable address for %q", h)
		}
		r.mu.Lock()
		st := r.names[h]
		if st == nil { // no longer wanted
			r.mu.Unlock()
			continue
		}
		if err != nil {
			st.failures++
			if st.lastErr == nil {
				if st.addr.IsValid() {
					r.log.Warn("collector name no longer resolves; still sending to its last address, retrying", "collector", h, "addr", st.addr, "err", err)
				} else {
					r.log.Warn("collector name does not resolve; its samples are counted as lost until it does, retrying", "collector", h, "err", err)
				}
			}
			st.lastErr = err
			st.wait = min(max(2*st.wait, RetryMinWait), retryMaxWait)
			st.next = r.Now().Add(st.wait)
		} else {
			if st.addr != a {
				r.log.Info("collector name resolved", "collector", h, "addr", a)
				changed = true
			} else if st.lastErr != nil {
				r.log.Info("collector name resolves again", "collector", h, "addr", a)
			}
			st.addr, st.lastErr, st.wait = a, nil, 0
			st.next = r.Now().Add(refresh)
		}
		r.mu.Unlock()
	}
	if changed && r.onChange != nil {
		r.onChange()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var next time.Time
	for _, st := range r.names {
		if next.IsZero() || st.next.Before(next) {
			next = st.next
		}
	}
	return next
}

// pickAddr prefers the first IPv4 address (the order the resolver gives
// otherwise), skipping addresses that cannot be collectors.
func pickAddr(addrs []netip.Addr) (netip.Addr, bool) {
	var first netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if agent.CheckCollectorAddress(netip.AddrPortFrom(a, 6343)) != nil {
			continue
		}
		if a.Is4() {
			return a, true
		}
		if !first.IsValid() {
			first = a
		}
	}
	return first, first.IsValid()
}

// Run resolves the wanted names until ctx ends.
func (r *Resolver) Run(ctx context.Context) {
	for {
		next := r.ResolveDue(ctx)
		var timer *time.Timer
		var fire <-chan time.Time
		if !next.IsZero() {
			timer = time.NewTimer(next.Sub(r.Now()))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
		case <-r.kick:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// NameStats is one collector name's resolution figures.
type NameStats struct {
	Host     string
	Failures uint64
	Resolved int // 1 if the last lookup succeeded
}

// Stats returns the figures of every wanted name, sorted by name.
func (r *Resolver) Stats() []NameStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]NameStats, 0, len(r.names))
	for h, st := range r.names {
		n := NameStats{Host: h, Failures: st.failures}
		if st.addr.IsValid() && st.lastErr == nil {
			n.Resolved = 1
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}
