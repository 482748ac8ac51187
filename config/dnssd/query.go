package dnssd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Service is the DNS-SD service name of sFlow collectors (RFC 6763 §7;
// hsflowd's SFLOW_DNS_SD): the SRV and TXT records are those of
// Service + domain.
const Service = "_sflow._udp"

// Outcome is the effect of one query (hsflowd's evt_config_end: a
// query that failed, no servers, servers).
type Outcome int

const (
	// Error: the query failed (no answer in time, SERVFAIL, REFUSED, a
	// malformed answer): the configuration in force stays.
	Error Outcome = iota
	// Empty: the name does not exist (NXDOMAIN) or has no SRV record:
	// sFlow stops until records return.
	Empty
	// Records: SRV records (and maybe TXT records): their configuration
	// is installed whole.
	Records
)

// String names the outcome as the log and the metric's label do.
func (o Outcome) String() string {
	switch o {
	case Error:
		return "error"
	case Empty:
		return "empty"
	case Records:
		return "records"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Target is one SRV answer: a collector's host name and port.
type Target struct {
	Host string
	Port uint16
}

// Answer is what one query found.
type Answer struct {
	Outcome Outcome
	// Err is why the query failed (Outcome Error), or nil.
	Err error
	// Name is the name answered (with Records or Empty), or the last
	// name asked.
	Name string
	// Targets are the SRV answers; Collectors their addresses (IP:port)
	// for those that resolved, in the same order.
	Targets    []Target
	Collectors []string
	// TXT are the TXT strings of Name, in answer order.
	TXT []string
	// TTL is the smallest TTL of the SRV and TXT answers that are not
	// zero (for Empty: the negative answer's TTL from its SOA, RFC 2308
	// §5); 0 when there is none.
	TTL time.Duration
	// Problems are the targets that did not resolve.
	Problems []Problem
}

// Resolver asks the DNS servers of a resolv.conf (or given ones).
type Resolver struct {
	// Servers are host:port of the servers asked in order; the next is
	// asked when one fails.
	Servers []string
	// Names are the names asked for the SRV records, in order: the
	// first that has any (NXDOMAIN or NODATA moves to the next) is used.
	Names []string
	// Timeout bounds each exchange with one server.
	Timeout time.Duration
}

// DefaultTimeout bounds one exchange with one server.
const DefaultTimeout = 3 * time.Second

// NewResolver returns the resolver of domain (hsflowd's DNS-SD
// domain=, ".example.net": the name asked is Service+domain) with the
// servers of the resolv.conf at path. Without a domain the resolv.conf's
// search list applies (Service + "." + each search domain, in order), as
// res_search does for hsflowd.
func NewResolver(domain, path string) (*Resolver, error) {
	cc, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("DNS-SD: reading %s: %w", path, err)
	}
	r := &Resolver{Timeout: DefaultTimeout}
	if cc.Timeout > 0 {
		r.Timeout = time.Duration(cc.Timeout) * time.Second
	}
	for _, s := range cc.Servers {
		r.Servers = append(r.Servers, net.JoinHostPort(s, cc.Port))
	}
	if len(r.Servers) == 0 {
		return nil, fmt.Errorf("DNS-SD: %s names no nameserver", path)
	}
	if r.Names, err = Names(domain, cc.Search); err != nil {
		return nil, fmt.Errorf("DNS-SD: %w (in %s)", err, path)
	}
	return r, nil
}

// Names are the fully qualified names asked for domain (as hsflowd
// writes it, with its leading dot: ".example.net"; one without the dot
// gets it) or, without a domain, for each domain of the search list.
func Names(domain string, search []string) ([]string, error) {
	if domain != "" {
		if !strings.HasPrefix(domain, ".") {
			domain = "." + domain
		}
		n := dns.Fqdn(Service + domain)
		if _, ok := dns.IsDomainName(n); !ok {
			return nil, fmt.Errorf("domain %q is not a domain name", domain)
		}
		return []string{n}, nil
	}
	var names []string
	for _, s := range search {
		s = strings.Trim(s, ".")
		if s == "" {
			continue
		}
		names = append(names, dns.Fqdn(Service+"."+s))
	}
	if len(names) == 0 {
		return nil, errors.New("no DNS-SD domain and no search list (resolv.conf search or domain)")
	}
	return names, nil
}

// Query asks for the SRV records of the names in turn, then for the TXT
// records of the name that had SRV records, and resolves each target to
// an address (from the answer's additional section, else A and AAAA
// queries to the same servers).
//
// As hsflowd (mod_dnssd.c dnsSD_Request): NXDOMAIN, or NOERROR without
// an SRV record, is Empty; any other failure is Error. Where it differs:
// a TXT query that fails makes the whole answer an Error (hsflowd would
// install the collectors with its default settings); a target that
// resolves to no address is left out and reported (a Problem), and an
// answer none of whose targets resolve is an Error.
func (r *Resolver) Query(ctx context.Context) Answer {
	var a Answer
	var firstErr error
	var negTTL uint32
	for _, name := range r.Names {
		a.Name = name
		m, err := r.exchange(ctx, name, dns.TypeSRV)
		if err != nil {
			firstErr = errors.Join(firstErr, err)
			continue
		}
		if m.Rcode == dns.RcodeNameError || len(rrsOf[*dns.SRV](m)) == 0 {
			negTTL = minTTL(negTTL, negativeTTL(m))
			continue
		}
		return r.records(ctx, name, m)
	}
	if firstErr != nil {
		// A name that could not be asked may have had records: the
		// configuration in force stays.
		a.Outcome, a.Err = Error, firstErr
		return a
	}
	a.Outcome = Empty
	a.TTL = time.Duration(negTTL) * time.Second
	return a
}

// records completes the answer of name, whose SRV response is m.
func (r *Resolver) records(ctx context.Context, name string, m *dns.Msg) Answer {
	a := Answer{Outcome: Records, Name: name}
	var ttl uint32
	for _, srv := range rrsOf[*dns.SRV](m) {
		ttl = minTTL(ttl, srv.Hdr.Ttl)
		if srv.Target == "." || len(srv.Target) < 4 { // RFC 2782: "." is no service; hsflowd HSP_MIN_DNAME
			continue
		}
		a.Targets = append(a.Targets, Target{Host: srv.Target, Port: srv.Port})
	}
	t, err := r.exchange(ctx, name, dns.TypeTXT)
	switch {
	case err != nil:
		return Answer{Outcome: Error, Name: name, Err: fmt.Errorf("TXT records: %w", err)}
	case t.Rcode == dns.RcodeSuccess:
		for _, txt := range rrsOf[*dns.TXT](t) {
			ttl = minTTL(ttl, txt.Hdr.Ttl)
			a.TXT = append(a.TXT, txt.Txt...)
		}
	}
	a.TTL = time.Duration(ttl) * time.Second
	for _, tg := range a.Targets {
		addr, err := r.address(ctx, tg.Host, m)
		if err != nil {
			a.Problems = append(a.Problems, Problem{Kind: UnresolvedTarget, Item: fmt.Sprintf("%s:%d", tg.Host, tg.Port),
				Why: err.Error() + "; this collector is left out until it resolves"})
			continue
		}
		a.Collectors = append(a.Collectors, netip.AddrPortFrom(addr, tg.Port).String())
	}
	if len(a.Collectors) == 0 {
		err := errors.New("no SRV target resolved to an address")
		if len(a.Targets) == 0 {
			err = errors.New(`every SRV target is "." (no service)`)
		}
		return Answer{Outcome: Error, Name: name, Targets: a.Targets, Problems: a.Problems, Err: err, TTL: a.TTL}
	}
	return a
}

// address resolves host: an address record of the SRV response's
// additional section, else an A query, else an AAAA query.
func (r *Resolver) address(ctx context.Context, host string, srv *dns.Msg) (netip.Addr, error) {
	for _, rr := range srv.Extra {
		if a, ok := addrOf(rr, host); ok {
			return a, nil
		}
	}
	var errs error
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
		m, err := r.exchange(ctx, host, qt)
		if err != nil {
			errs = errors.Join(errs, err)
			continue
		}
		for _, rr := range m.Answer {
			if a, ok := addrOf(rr, host); ok {
				return a, nil
			}
		}
	}
	if errs != nil {
		return netip.Addr{}, errs
	}
	return netip.Addr{}, fmt.Errorf("%s has no address record", host)
}

// addrOf returns the address of an A or AAAA record of host.
func addrOf(rr dns.RR, host string) (netip.Addr, bool) {
	if !strings.EqualFold(rr.Header().Name, host) {
		return netip.Addr{}, false
	}
	var ip net.IP
	switch v := rr.(type) {
	case *dns.A:
		ip = v.A
	case *dns.AAAA:
		ip = v.AAAA
	default:
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(ip)
	return a.Unmap(), ok
}

// exchange asks each server in turn for name's records of type qt
// (over UDP, again over TCP when the answer was truncated) and returns
// the first response that is NOERROR or NXDOMAIN; SERVFAIL, REFUSED and
// the rest are errors, and the next server is asked.
func (r *Resolver) exchange(ctx context.Context, name string, qt uint16) (*dns.Msg, error) {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qt)
	q.SetEdns0(4096, false)
	var errs error
	for _, server := range r.Servers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c := &dns.Client{Timeout: r.Timeout}
		m, _, err := c.ExchangeContext(ctx, q, server)
		if err == nil && m.Truncated {
			c.Net = "tcp"
			m, _, err = c.ExchangeContext(ctx, q, server)
		}
		if err != nil {
			errs = errors.Join(errs, fmt.Errorf("%s %s at %s: %w", dns.TypeToString[qt], name, server, err))
			continue
		}
		if m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError {
			errs = errors.Join(errs, fmt.Errorf("%s %s at %s: %s", dns.TypeToString[qt], name, server, dns.RcodeToString[m.Rcode]))
			continue
		}
		return m, nil
	}
	return nil, errs
}

// rrsOf returns the answer records of m of type T.
func rrsOf[T dns.RR](m *dns.Msg) []T {
	var out []T
	for _, rr := range m.Answer {
		if v, ok := rr.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// negativeTTL is the TTL of a negative answer (RFC 2308 §5: the smaller
// of the SOA record's TTL and its MINIMUM field), 0 without an SOA.
func negativeTTL(m *dns.Msg) uint32 {
	for _, rr := range m.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			return min(soa.Hdr.Ttl, soa.Minttl)
		}
	}
	return 0
}

// minTTL is the smaller of a and b that is not 0 (0 when both are):
// a zero TTL does not count, as in hsflowd's myDnsCB.
func minTTL(a, b uint32) uint32 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}
