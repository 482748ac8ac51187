package dnssd

import (
	"context"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// zone is what the test server answers: records by name and type, or an
// rcode by name.
type zone struct {
	mu     sync.Mutex
	rrs    map[string][]dns.RR // "name type" -> records
	rcode  map[string]int      // name -> rcode
	silent map[string]bool     // name -> no answer at all
	extra  bool                // put the targets' A records in the SRV answer
}

func (z *zone) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	z.mu.Lock()
	defer z.mu.Unlock()
	name := strings.ToLower(q.Question[0].Name)
	if z.silent[name] {
		return
	}
	m := new(dns.Msg)
	m.SetReply(q)
	if rc, ok := z.rcode[name]; ok {
		m.Rcode = rc
		if rc == dns.RcodeNameError {
			soa, _ := dns.NewRR("example.net. 3600 IN SOA ns.example.net. host.example.net. 1 60 60 60 45")
			m.Ns = append(m.Ns, soa)
		}
		_ = w.WriteMsg(m)
		return
	}
	qt := q.Question[0].Qtype
	m.Answer = z.rrs[name+" "+dns.TypeToString[qt]]
	if qt == dns.TypeSRV && z.extra {
		for _, rr := range m.Answer {
			m.Extra = append(m.Extra, z.rrs[rr.(*dns.SRV).Target+" A"]...)
		}
	}
	_ = w.WriteMsg(m)
}

func rr(t *testing.T, s string) dns.RR {
	t.Helper()
	r, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// serve starts a DNS server for z on loopback and returns its address.
func serve(t *testing.T, z dns.Handler) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: z}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

// TestQueryOutcomes: each kind of response has the outcome of hsflowd's
// evt_config_end (records, empty, error), and records carry the
// collectors' addresses, the TXT strings and the smallest TTL.
func TestQueryOutcomes(t *testing.T) {
	const name = "_sflow._udp.example.net."
	z := &zone{rrs: map[string][]dns.RR{}, rcode: map[string]int{}, silent: map[string]bool{}}
	addr := serve(t, z)
	r := &Resolver{Servers: []string{addr}, Names: []string{name}, Timeout: 300 * time.Millisecond}
	ctx := context.Background()

	records := func() {
		z.rrs = map[string][]dns.RR{
			name + " SRV":          {rr(t, name+" 60 IN SRV 0 0 6343 c1.example.net."), rr(t, name+" 30 IN SRV 0 0 6344 c2.example.net.")},
			name + " TXT":          {rr(t, name+` 45 IN TXT "txtvers=1" "sampling=400"`), rr(t, name+` 20 IN TXT "polling=5"`)},
			"c1.example.net. A":    {rr(t, "c1.example.net. 5 IN A 198.18.0.1")},
			"c2.example.net. AAAA": {rr(t, "c2.example.net. 5 IN AAAA 2001:db8::2")},
		}
		z.rcode, z.silent = map[string]int{}, map[string]bool{}
	}
	records()
	for _, extra := range []bool{false, true} {
		z.extra = extra
		a := r.Query(ctx)
		if a.Outcome != Records || a.Err != nil || len(a.Problems) != 0 {
			t.Fatalf("extra %v: %+v", extra, a)
		}
		if want := []string{"198.18.0.1:6343", "[2001:db8::2]:6344"}; !reflect.DeepEqual(a.Collectors, want) {
			t.Errorf("collectors %q, want %q", a.Collectors, want)
		}
		if want := []string{"txtvers=1", "sampling=400", "polling=5"}; !reflect.DeepEqual(a.TXT, want) {
			t.Errorf("TXT %q, want %q", a.TXT, want)
		}
		if a.TTL != 20*time.Second {
			t.Errorf("TTL %v, want the smallest of SRV and TXT, 20s", a.TTL)
		}
	}

	// A target without an address is left out and reported.
	delete(z.rrs, "c2.example.net. AAAA")
	a := r.Query(ctx)
	if a.Outcome != Records || !reflect.DeepEqual(a.Collectors, []string{"198.18.0.1:6343"}) || len(a.Problems) != 1 || a.Problems[0].Kind != UnresolvedTarget {
		t.Errorf("one unresolved target: %+v", a)
	}
	// None resolves: an error (the configuration stays).
	delete(z.rrs, "c1.example.net. A")
	if a := r.Query(ctx); a.Outcome != Error || len(a.Problems) != 2 {
		t.Errorf("no target resolves: %+v", a)
	}

	// No SRV record (a TXT record alone): empty.
	records()
	delete(z.rrs, name+" SRV")
	if a := r.Query(ctx); a.Outcome != Empty {
		t.Errorf("no SRV record: %+v", a)
	}
	// NXDOMAIN: empty, with the SOA's negative TTL (RFC 2308).
	z.rcode[name] = dns.RcodeNameError
	if a := r.Query(ctx); a.Outcome != Empty || a.TTL != 45*time.Second {
		t.Errorf("NXDOMAIN: %+v", a)
	}
	// SERVFAIL, REFUSED, no answer: error.
	for _, rc := range []int{dns.RcodeServerFailure, dns.RcodeRefused} {
		records()
		z.rcode[name] = rc
		if a := r.Query(ctx); a.Outcome != Error || !strings.Contains(a.Err.Error(), dns.RcodeToString[rc]) {
			t.Errorf("%s: %+v", dns.RcodeToString[rc], a)
		}
	}
	records()
	z.silent[name] = true
	if a := r.Query(ctx); a.Outcome != Error || a.Err == nil {
		t.Errorf("no answer: %+v", a)
	}
	// A failed TXT query fails the whole answer: the settings it would
	// carry are unknown.
	records()
	z.mu.Lock()
	z.rrs[name+" SRV"] = append(z.rrs[name+" SRV"], rr(t, name+" 60 IN SRV 0 0 6343 c1.example.net."))
	z.mu.Unlock()
	srvOnly := &zone{rrs: z.rrs, rcode: map[string]int{}, silent: map[string]bool{}}
	addr2 := serve(t, &txtFails{srvOnly})
	r2 := &Resolver{Servers: []string{addr2}, Names: []string{name}, Timeout: 300 * time.Millisecond}
	if a := r2.Query(ctx); a.Outcome != Error || !strings.Contains(a.Err.Error(), "TXT") {
		t.Errorf("TXT SERVFAIL: %+v", a)
	}

	// The search list: the first name with SRV records is used; an
	// error on an earlier name does not hide a later answer.
	records()
	other := "_sflow._udp.other.example."
	z.rcode[other] = dns.RcodeNameError
	r3 := &Resolver{Servers: []string{addr}, Names: []string{other, name}, Timeout: 300 * time.Millisecond}
	if a := r3.Query(ctx); a.Outcome != Records || a.Name != name {
		t.Errorf("search list: %+v", a)
	}
	z.rcode[other] = dns.RcodeServerFailure
	delete(z.rrs, name+" SRV")
	if a := r3.Query(ctx); a.Outcome != Error {
		t.Errorf("SERVFAIL on one name, nothing on the other: %+v, want an error", a)
	}
	// A second server answers when the first does not.
	records()
	r4 := &Resolver{Servers: []string{"127.0.0.1:1", addr}, Names: []string{name}, Timeout: 300 * time.Millisecond}
	if a := r4.Query(ctx); a.Outcome != Records {
		t.Errorf("second server: %+v", a)
	}
}

// txtFails answers TXT queries with SERVFAIL.
type txtFails struct{ z *zone }

func (f *txtFails) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	if q.Question[0].Qtype == dns.TypeTXT {
		m := new(dns.Msg)
		m.SetRcode(q, dns.RcodeServerFailure)
		_ = w.WriteMsg(m)
		return
	}
	f.z.ServeDNS(w, q)
}
