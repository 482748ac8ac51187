package collectoraddr

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
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
	// addrs are the usable addresses it last resolved to (unicast, in
	// the resolver's order); none until then.
	addrs    []netip.Addr
	failures uint64 // lookups that failed
	lastErr  error
	next     time.Time // when to look it up again
	wait     time.Duration
	// refused are the ports for which every address is refused
	// (CheckCollectorAddress: this host's SNMP/AgentX ports), as logged.
	refused map[uint16]bool
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

// Get returns the address host resolved to last for a collector on port,
// never blocking: the first IPv4 address, else the first, of those
// agent.CheckCollectorAddress allows with that port. A name that resolves
// only to addresses refused with that port (localhost:161, a name of
// this host at its AgentX port) has none: the check applies to the
// resolved address and the configured port, logged
// once and counted (NameStats.Refused).
func (r *Resolver) Get(host string, port uint16) (netip.Addr, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.names[host]
	if st == nil || len(st.addrs) == 0 {
		return netip.Addr{}, false
	}
	a, err := pickAddr(st.addrs, port)
	if err != nil {
		if !st.refused[port] {
			if st.refused == nil {
				st.refused = map[uint16]bool{}
			}
			st.refused[port] = true
			r.log.Error("collector name resolves to an address that cannot be a collector at its port: nothing is sent there, its samples are counted as lost",
				"collector", net.JoinHostPort(host, strconv.Itoa(int(port))), "addrs", st.addrs, "err", err)
		}
		return netip.Addr{}, false
	}
	if st.refused[port] {
		delete(st.refused, port)
		r.log.Info("collector name resolves to a usable address again", "collector", net.JoinHostPort(host, strconv.Itoa(int(port))), "addr", a)
	}
	return a, true
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
		usable := usableAddrs(addrs)
		if err == nil && len(usable) == 0 {
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
				if len(st.addrs) > 0 {
					r.log.Warn("collector name no longer resolves; still sending to its last address, retrying", "collector", h, "addrs", st.addrs, "err", err)
				} else {
					r.log.Warn("collector name does not resolve; its samples are counted as lost until it does, retrying", "collector", h, "err", err)
				}
			}
			st.lastErr = err
			st.wait = min(max(2*st.wait, RetryMinWait), retryMaxWait)
			st.next = r.Now().Add(st.wait)
		} else {
			if !slices.Equal(st.addrs, usable) {
				r.log.Info("collector name resolved", "collector", h, "addrs", usable)
				changed = true
			} else if st.lastErr != nil {
				r.log.Info("collector name resolves again", "collector", h, "addrs", usable)
			}
			st.addrs, st.lastErr, st.wait = usable, nil, 0
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

// maxAddrs bounds the addresses kept of one name (a DNS answer can hold
// hundreds).
const maxAddrs = 16

// usableAddrs returns the addresses of a lookup that can be a collector
// at some port (unicast; agent.CheckCollectorAddress with the default
// port), at most maxAddrs of them, in the resolver's order.
func usableAddrs(addrs []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if agent.CheckCollectorAddress(netip.AddrPortFrom(a, 6343)) == nil && len(out) < maxAddrs {
			out = append(out, a)
		}
	}
	return out
}

// pickAddr prefers the first IPv4 address (the order the resolver gives
// otherwise) among those that can be a collector at port; it returns the
// first address's refusal when none can.
func pickAddr(addrs []netip.Addr, port uint16) (netip.Addr, error) {
	var first netip.Addr
	var refusal error
	for _, a := range addrs {
		if err := agent.CheckCollectorAddress(netip.AddrPortFrom(a, port)); err != nil {
			if refusal == nil {
				refusal = err
			}
			continue
		}
		if a.Is4() {
			return a, nil
		}
		if !first.IsValid() {
			first = a
		}
	}
	if first.IsValid() {
		return first, nil
	}
	return first, refusal
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
	// Refused is 1 while the name's addresses cannot be a collector at a
	// port it is configured with (this host's SNMP/AgentX ports).
	Refused int
}

// Stats returns the figures of every wanted name, sorted by name.
func (r *Resolver) Stats() []NameStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]NameStats, 0, len(r.names))
	for h, st := range r.names {
		n := NameStats{Host: h, Failures: st.failures}
		if len(st.addrs) > 0 && st.lastErr == nil {
			n.Resolved = 1
		}
		if len(st.refused) > 0 {
			n.Refused = 1
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}
