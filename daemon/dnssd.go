package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/config/dnssd"
	"github.com/sflowswitchd/sflowswitchd/internal/prom"
)

// Configuration by DNS-SD (config/dnssd; docs/guides/fleet.md). The
// settings in force are the files' and flags' (base, replaced at each
// SIGHUP) with the last DNS-SD answer installed laid over them
// (dnssd.Apply). Each answer, and each SIGHUP, installs the result
// whole through reload, the path of a SIGHUP: the agent, its sequence
// numbers, uptime and pools continue. SNMP-set receivers are the
// operator's and stay; the static receivers follow DNS-SD.

// DNSSDTestIntervalsEnv is a TEST-ONLY environment variable:
// "MIN,NOTTL" (Go durations) replace the 10 s floor between two queries
// and the 300 s interval without a TTL, so that a test of the refresh
// runs in seconds. A fleet's DNS load depends on both: the daemon warns
// when it is set.
const DNSSDTestIntervalsEnv = "SFLOWSWITCHD_TEST_DNSSD_INTERVALS"

// dnssdState is DNS-SD's part of the daemon.
type dnssdState struct {
	// mu serializes installs (DNS-SD answers and SIGHUPs) and guards
	// base and cur.
	mu   sync.Mutex
	base config.Settings
	cur  dnssd.Settings
	// baseSrc is where each base setting came from (config.Load).
	baseSrc config.Sources
	// outcomes count the queries by outcome (dnssd.Outcome), problems the
	// parts of answers not taken (bad values, unknown keys, targets that
	// did not resolve), refused the answers whose settings were refused
	// whole (more collectors than the MIB holds, ...).
	outcomes [3]atomic.Uint64
	problems sync.Map // kind -> *atomic.Uint64
	refused  atomic.Uint64
	// collectors is the number of collectors DNS-SD named last; next the
	// time to the next query, in seconds.
	collectors, next atomic.Int64
}

// newDNSSD returns the DNS-SD state of settings s, nil when DNS-SD is
// off.
func newDNSSD(s config.Settings) *dnssdState {
	if !s.DNSSD {
		return nil
	}
	return &dnssdState{base: s}
}

// testTiming reads DNSSDTestIntervalsEnv.
func testTiming() (dnssd.Timing, bool, error) {
	v := os.Getenv(DNSSDTestIntervalsEnv)
	if v == "" {
		return dnssd.Timing{}, false, nil
	}
	a, b, _ := strings.Cut(v, ",")
	minI, err1 := time.ParseDuration(a)
	noTTL, err2 := time.ParseDuration(b)
	if err := errors.Join(err1, err2); err != nil || minI <= 0 || noTTL <= 0 {
		return dnssd.Timing{}, false, fmt.Errorf("%s=%q: want MIN,NOTTL durations: %v", DNSSDTestIntervalsEnv, v, err)
	}
	return dnssd.Timing{Min: minI, NoTTL: noTTL}, true, nil
}

// runDNSSD queries until ctx ends and installs each answer.
func (d *Daemon) runDNSSD(ctx context.Context) {
	st := d.dnssd
	st.mu.Lock()
	base := st.base
	st.mu.Unlock()
	t, test, err := testTiming()
	if err != nil {
		d.log.Error("DNS-SD: test intervals ignored", "err", err)
	} else if test {
		d.log.Warn("DNS-SD: TEST-ONLY query intervals in force (a fleet's DNS load depends on them)", "min", t.Min, "no_ttl", t.NoTTL)
	}
	t.StartDelay = time.Duration(base.DNSSDStartDelay) * time.Second
	d.log.Info("DNS-SD on: collectors and settings from the DNS", "domain", base.DNSSDDomain, "resolv_conf", base.DNSSDResolvConf, "first_query_within", t.StartDelay)
	r := &dnssdRunner{d: d}
	dnssd.Run(ctx, r, t, d.dnssdAnswer)
}

// dnssdRunner makes the resolver anew at each query from the settings in
// force, so that a change of resolv.conf (DHCP) or of the domain
// (SIGHUP) applies to the next query.
type dnssdRunner struct{ d *Daemon }

// Query implements dnssd.Querier.
func (r *dnssdRunner) Query(ctx context.Context) dnssd.Answer {
	st := r.d.dnssd
	st.mu.Lock()
	domain, path := st.base.DNSSDDomain, st.base.DNSSDResolvConf
	st.mu.Unlock()
	res, err := dnssd.NewResolver(domain, path)
	if err != nil {
		return dnssd.Answer{Outcome: dnssd.Error, Err: err}
	}
	return res.Query(ctx)
}

// dnssdAnswer installs answer a: records install their configuration
// whole, an empty answer stops sFlow (no static receiver), an error
// keeps the configuration in force.
func (d *Daemon) dnssdAnswer(a dnssd.Answer, next time.Duration) {
	st := d.dnssd
	st.outcomes[a.Outcome].Add(1)
	st.next.Store(int64(next / time.Second))
	for _, p := range a.Problems {
		st.problem(p.Kind)
		d.log.Warn("DNS-SD: "+p.String(), "name", a.Name)
	}
	switch a.Outcome {
	case dnssd.Error:
		d.log.Warn("DNS-SD query failed: the configuration in force stays", "name", a.Name, "err", a.Err, "next_query_in", next)
		return
	case dnssd.Empty:
		d.log.Warn("DNS-SD: no SRV record: sFlow stopped (no collector) until records return", "name", a.Name, "next_query_in", next)
		st.collectors.Store(0)
		d.dnssdInstall(dnssd.Settings{})
		return
	}
	st.mu.Lock()
	prev := st.cur
	st.mu.Unlock()
	ds, probs := dnssd.ParseTXT(a.TXT, prev)
	ds.Collectors = a.Collectors
	for _, p := range probs {
		st.problem(p.Kind)
		d.log.Warn("DNS-SD TXT: "+p.String(), "name", a.Name)
	}
	if err := d.dnssdInstall(ds); err != nil {
		return
	}
	st.collectors.Store(int64(len(ds.Collectors)))
	d.log.Info("DNS-SD: configuration installed", "name", a.Name, "collectors", strings.Join(ds.Collectors, ","),
		"settings", strings.Join(a.TXT, " "), "ttl", a.TTL, "next_query_in", next)
}

// dnssdInstall lays ds over the base settings, checks the result whole
// and installs it; a refusal keeps the configuration in force (logged,
// counted).
func (d *Daemon) dnssdInstall(ds dnssd.Settings) error {
	st := d.dnssd
	st.mu.Lock()
	defer st.mu.Unlock()
	s := dnssd.Apply(st.base, ds)
	err := errors.Join(s.Validate(), Validate(s))
	if err == nil {
		err = d.reload(s, dnssdSources(st.base, st.baseSrc, s))
	}
	if err != nil {
		st.refused.Add(1)
		d.log.Error("DNS-SD: configuration refused; the configuration in force stays", "err", err)
		return err
	}
	st.cur = ds
	return nil
}

// reloadBase is Reload with DNS-SD on: s (the files and flags read
// again, from src; nil: as before) becomes the base under the DNS-SD
// answer in force.
func (st *dnssdState) reloadBase(d *Daemon, s config.Settings, src config.Sources) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if src == nil {
		src = st.baseSrc
	}
	if !s.DNSSD {
		d.log.Warn("turning DNS-SD off takes effect at restart; DNS-SD stays on")
		s.DNSSD = true
	}
	eff := dnssd.Apply(s, st.cur)
	if err := errors.Join(eff.Validate(), Validate(eff)); err != nil {
		return err
	}
	if err := d.reload(eff, dnssdSources(s, src, eff)); err != nil {
		return err
	}
	st.base, st.baseSrc = s, src
	return nil
}

// dnssdSources are the sources of eff, the DNS-SD answer laid over base
// (from baseSrc): the settings the answer changed are DNS-SD's.
func dnssdSources(base config.Settings, baseSrc config.Sources, eff config.Settings) config.Sources {
	out := make(config.Sources, len(baseSrc))
	for k, v := range baseSrc {
		out[k] = v
	}
	for _, c := range config.Changes(base, eff) {
		out[c.Key] = config.SourceDNSSD
	}
	return out
}

func (st *dnssdState) problem(kind string) {
	c, _ := st.problems.LoadOrStore(kind, new(atomic.Uint64))
	c.(*atomic.Uint64).Add(1)
}

// DNS-SD's metrics.
var (
	dnssdQueries = prom.Desc("dnssd_queries_total",
		"DNS-SD queries by outcome: records (their configuration installed), empty (NXDOMAIN or no SRV record: sFlow stopped), error (timeout, SERVFAIL, ...: the configuration in force kept).", "outcome")
	dnssdProblems = prom.Desc("dnssd_problems_total",
		"Parts of DNS-SD answers not taken: bad_value (the setting kept its value), unknown_key, unresolved_target (that collector left out).", "kind")
	dnssdRefused = prom.Desc("dnssd_refused_total",
		"DNS-SD answers whose configuration was refused whole (e.g. more collectors than the SFLOW-MIB holds): the configuration in force stayed.")
	dnssdCollectors = prom.Desc("dnssd_collectors",
		"Collectors named by the last DNS-SD answer installed (0 while sFlow is stopped by an empty answer).")
	dnssdNext = prom.Desc("dnssd_next_query_seconds",
		"Time from the last DNS-SD query to the next: its smallest TTL, at least 10 s; 300 s without a TTL.")
)

// dnssdCollector exports DNS-SD's counters.
type dnssdCollector struct{ st *dnssdState }

func (c dnssdCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dnssdQueries, dnssdProblems, dnssdRefused, dnssdCollectors, dnssdNext} {
		ch <- d
	}
}

func (c dnssdCollector) Collect(ch chan<- prometheus.Metric) {
	for _, o := range []dnssd.Outcome{dnssd.Records, dnssd.Empty, dnssd.Error} {
		ch <- prom.Counter(dnssdQueries, c.st.outcomes[o].Load(), o.String())
	}
	for _, k := range []string{dnssd.BadValue, dnssd.UnknownKey, dnssd.UnresolvedTarget} {
		var n uint64
		if v, ok := c.st.problems.Load(k); ok {
			n = v.(*atomic.Uint64).Load()
		}
		ch <- prom.Counter(dnssdProblems, n, k)
	}
	ch <- prom.Counter(dnssdRefused, c.st.refused.Load())
	ch <- prom.Gauge(dnssdCollectors, float64(c.st.collectors.Load()))
	ch <- prom.Gauge(dnssdNext, float64(c.st.next.Load()))
}
