package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
)

// collectorAddr is a collector setting taken apart: a literal address, or
// a host name to resolve, and a port.
type collectorAddr struct {
	ip   netip.Addr // valid for a literal address
	host string     // the host name otherwise
	port uint16
}

// parseCollector checks the syntax of host:port (port default 6343)
// without resolving anything, and checks a literal address with
// agent.CheckCollectorAddress (unicast, not this host's SNMP ports).
func parseCollector(addr string) (collectorAddr, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, "6343"
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return collectorAddr{}, fmt.Errorf("bad port in %q", addr)
	}
	c := collectorAddr{port: uint16(p)}
	if ip, err := netip.ParseAddr(host); err == nil {
		c.ip = ip.Unmap()
		return c, agent.CheckCollectorAddress(netip.AddrPortFrom(c.ip, c.port))
	}
	if !validHostName(host) {
		return collectorAddr{}, fmt.Errorf("%q is neither an IP address nor a host name", host)
	}
	c.host = host
	return c, nil
}

// validHostName checks RFC 1123 host name syntax.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	label := 0
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case c == '.':
			if label == 0 || h[i-1] == '-' {
				return false
			}
			label = 0
			continue
		case c == '-':
			if label == 0 {
				return false
			}
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		default:
			return false
		}
		if label++; label > 63 {
			return false
		}
	}
	return h[len(h)-1] != '-'
}

// Timing of the collector name resolution.
const (
	resolveTimeout = 5 * time.Second
	resolveRefresh = time.Minute      // a resolved name is looked up again this often
	resolveMinWait = time.Second      // first retry after a failure
	resolveMaxWait = 30 * time.Second // longest wait between retries
)

// resolver resolves collector host names in the background, so that port
// changes and reloads never wait on DNS and a name that stops resolving
// stops nothing: the last address it resolved to stays in use, failures
// are retried with backoff and counted per collector, and a change of
// address reconfigures the daemon (onChange).
type resolver struct {
	log      *slog.Logger
	lookup   func(ctx context.Context, host string) ([]netip.Addr, error)
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

func newResolver(log *slog.Logger, onChange func()) *resolver {
	return &resolver{log: log, onChange: onChange, kick: make(chan struct{}, 1), names: map[string]*nameState{},
		lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}}
}

// want makes hosts the set of names to resolve; new names are looked up
// at once in the background, names no longer wanted are forgotten.
func (r *resolver) want(hosts []string) {
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

// get returns the address host resolved to last, never blocking.
func (r *resolver) get(host string) (netip.Addr, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.names[host]; st != nil && st.addr.IsValid() {
		return st.addr, true
	}
	return netip.Addr{}, false
}

// resolveDue looks up every name whose time has come and returns when
// the next one is due (zero: none wanted).
func (r *resolver) resolveDue(ctx context.Context) time.Time {
	r.mu.Lock()
	var due []string
	now := time.Now()
	for h, st := range r.names {
		if !st.next.After(now) {
			due = append(due, h)
		}
	}
	r.mu.Unlock()
	sort.Strings(due)
	changed := false
	for _, h := range due {
		lctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		addrs, err := r.lookup(lctx, h)
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
			st.wait = min(max(2*st.wait, resolveMinWait), resolveMaxWait)
			st.next = time.Now().Add(st.wait)
		} else {
			if st.addr != a {
				r.log.Info("collector name resolved", "collector", h, "addr", a)
				changed = true
			} else if st.lastErr != nil {
				r.log.Info("collector name resolves again", "collector", h, "addr", a)
			}
			st.addr, st.lastErr, st.wait = a, nil, 0
			st.next = time.Now().Add(resolveRefresh)
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

// run resolves the wanted names until ctx ends.
func (r *resolver) run(ctx context.Context) {
	for {
		next := r.resolveDue(ctx)
		var timer *time.Timer
		var fire <-chan time.Time
		if !next.IsZero() {
			timer = time.NewTimer(time.Until(next))
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

// nameStats is one collector name's resolution figures.
type nameStats struct {
	host     string
	failures uint64
	resolved int // 1 if the last lookup succeeded
}

// stats returns the figures of every wanted name, sorted by name.
func (r *resolver) stats() []nameStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]nameStats, 0, len(r.names))
	for h, st := range r.names {
		n := nameStats{host: h, failures: st.failures}
		if st.addr.IsValid() && st.lastErr == nil {
			n.resolved = 1
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].host < out[j].host })
	return out
}
