package sonic

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options configure a Client.
type Options struct {
	// DBConfig is database_config.json (DefaultDBConfig when "").
	DBConfig string
	// TCP connects to the instances' host and port even where they have a
	// unix socket (hsflowd's sonic { unixsock = off }).
	TCP bool
	// WaitReady is how long to wait for SYSTEM_READY before reporting the
	// ports anyway (0: DefaultWaitReady seconds).
	WaitReady time.Duration
	// CounterInterval is how often COUNTERS_DB is read (0: one second):
	// the counter samples and the flow samples' pools carry the last read.
	CounterInterval time.Duration
	// OnChange is called, from the client's goroutine, with every new
	// State whose configuration, readiness or ports differ from the last.
	OnChange func(*State)
	Logger   *slog.Logger
}

// Timing of the client.
const (
	retryMin = time.Second
	retryMax = 30 * time.Second
	// settle coalesces a burst of keyspace notifications (a collector's
	// three fields, a LAG's members) into one read.
	settle = 20 * time.Millisecond
	// resync reads everything again, in case a notification was lost (a
	// subscription reconnecting); resyncNoNotify when the server does not
	// send keyspace notifications.
	resync         = 10 * time.Second
	resyncNoNotify = time.Second
	opTimeout      = 5 * time.Second
)

// Client follows the switch's state in Redis.
type Client struct {
	opts  Options
	log   *slog.Logger
	start time.Time

	state    atomic.Pointer[State]
	counters atomic.Pointer[map[string]*Counters] // by OID

	mu       sync.Mutex
	ready    bool             // sticky: reached once
	reported map[Problem]bool // problems logged and still present
	bad      map[string]uint64
	resets   map[uint32]bool // ports whose counters restarted (OID changed)
	oids     map[string]string

	// Connected is set while every database answers.
	Connected atomic.Bool
	// Reconnects counts the sessions that ended with an error.
	Reconnects atomic.Uint64
	// Reads counts full reads of the state; CounterReads the reads of
	// COUNTERS_DB.
	Reads, CounterReads atomic.Uint64
	// Notifications counts keyspace notifications received.
	Notifications atomic.Uint64
}

// New returns a client; nothing is read until Run.
func New(o Options) *Client {
	if o.DBConfig == "" {
		o.DBConfig = DefaultDBConfig
	}
	if o.WaitReady <= 0 {
		o.WaitReady = DefaultWaitReady * time.Second
	}
	if o.CounterInterval <= 0 {
		o.CounterInterval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{opts: o, log: o.Logger, start: time.Now(), reported: map[Problem]bool{}, bad: map[string]uint64{},
		resets: map[uint32]bool{}, oids: map[string]string{}}
	empty := map[string]*Counters{}
	c.counters.Store(&empty)
	return c
}

// State returns the last state read (nil before the first read).
func (c *Client) State() *State { return c.state.Load() }

// Counters returns port p's counters as last read: its own, or a LAG's
// members' summed; false when none were read.
func (c *Client) Counters(st *State, p *Port) (*Counters, bool) {
	t := *c.counters.Load()
	if !p.IsLAG() {
		ct, ok := t[p.OID]
		return ct, ok
	}
	ms := make([]*Counters, 0, len(p.Members))
	for _, m := range p.Members {
		mp, ok := st.PortByName(m)
		if !ok {
			continue
		}
		if ct, ok := t[mp.OID]; ok {
			ms = append(ms, ct)
		}
	}
	if len(ms) == 0 {
		return nil, false
	}
	return sumCounters(ms), true
}

// TakeReset tells whether the counters of SONiC ifIndex idx restarted
// since the last call (the port's OID changed: the port was made anew, or
// a LAG's members changed), and clears it.
func (c *Client) TakeReset(idx uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.resets[idx]
	delete(c.resets, idx)
	return r
}

// BadValues returns the bad values reported so far, by table.
func (c *Client) BadValues() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.bad)
}

// Run follows Redis until ctx ends: a session reads everything, then
// again at each keyspace notification, and COUNTERS_DB every
// CounterInterval. A Redis that goes away is retried with backoff; the
// last state stays in force meanwhile.
func (c *Client) Run(ctx context.Context) {
	var wait time.Duration
	failing := false
	for {
		err := c.session(ctx)
		c.Connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		c.Reconnects.Add(1)
		wait = min(max(2*wait, retryMin), retryMax)
		if !failing {
			c.log.Error("sonic: Redis not reachable; the last configuration stays in force, retrying with backoff", "err", err, "retry_in", wait)
		} else {
			c.log.Debug("sonic: Redis still not reachable", "err", err, "retry_in", wait)
		}
		failing = true
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// dbs are the session's clients, by database name.
type dbs struct {
	topo *Topology
	cl   map[string]*redis.Client
}

func (d *dbs) close() {
	for _, cl := range d.cl {
		_ = cl.Close() // a client being abandoned: its error tells nothing more
	}
}

// session runs one connection to the databases until an error or ctx.
func (c *Client) session(ctx context.Context) error {
	topo, err := LoadTopology(c.opts.DBConfig)
	if err != nil {
		return err
	}
	d := &dbs{topo: topo, cl: map[string]*redis.Client{}}
	defer d.close()
	for _, name := range []string{ConfigDB, ApplDB, StateDB, CountersDB} {
		o, err := topo.Options(name, !c.opts.TCP)
		if err != nil {
			return err
		}
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = opTimeout, opTimeout, opTimeout
		o.MaxRetries = -1 // the session retries, with backoff
		o.PoolSize = 2
		d.cl[name] = redis.NewClient(o)
		pctx, cancel := context.WithTimeout(ctx, opTimeout)
		err = d.cl[name].Ping(pctx).Err()
		cancel()
		if err != nil {
			return fmt.Errorf("%s (%s %s): %w", name, o.Network, o.Addr, err)
		}
	}
	notify := make(chan struct{}, 1)
	lost := make(chan error, 1)
	period := resync
	if !c.notificationsOn(ctx, d) {
		period = resyncNoNotify
		c.log.Warn("sonic: Redis sends no keyspace notifications (notify-keyspace-events lacks K and h/g/$ events): changes are read every second")
	}
	for name, pats := range c.patterns(topo) {
		ps := d.cl[name].PSubscribe(ctx, pats...)
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			return fmt.Errorf("%s: subscribing to keyspace notifications: %w", name, err)
		}
		ch := ps.Channel(redis.WithChannelHealthCheckInterval(5 * time.Second))
		go func() {
			for range ch {
				c.Notifications.Add(1)
				select {
				case notify <- struct{}{}:
				default:
				}
			}
			select {
			case lost <- fmt.Errorf("%s: keyspace notifications ended", name):
			default:
			}
		}()
	}
	if err := c.readAll(ctx, d); err != nil {
		return err
	}
	c.Connected.Store(true)
	c.log.Info("sonic: reading Redis", "db_config", c.opts.DBConfig, "ports", len(c.State().Ports), "ready", c.State().Ready)
	counterT := time.NewTicker(c.opts.CounterInterval)
	defer counterT.Stop()
	resyncT := time.NewTicker(period)
	defer resyncT.Stop()
	var settleC <-chan time.Time
	var readyC <-chan time.Time
	if !c.isReady() {
		readyC = time.After(time.Until(c.start.Add(c.opts.WaitReady)))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-lost:
			return err
		case <-notify:
			if settleC == nil {
				settleC = time.After(settle)
			}
		case <-settleC:
			settleC = nil
			if err := c.readAll(ctx, d); err != nil {
				return err
			}
		case <-readyC:
			readyC = nil
			if err := c.readAll(ctx, d); err != nil {
				return err
			}
		case <-resyncT.C:
			if err := c.readAll(ctx, d); err != nil {
				return err
			}
		case <-counterT.C:
			if err := c.readCounters(ctx, d, c.State()); err != nil {
				return err
			}
		}
	}
}

// notificationsOn tells whether the server publishes keyspace
// notifications of hash and generic commands (SONiC's Redis runs with
// notify-keyspace-events AKE).
func (c *Client) notificationsOn(ctx context.Context, d *dbs) bool {
	cctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	v, err := d.cl[ConfigDB].ConfigGet(cctx, "notify-keyspace-events").Result()
	if err != nil {
		return true // CONFIG may be renamed away: assume SONiC's setting
	}
	f := v["notify-keyspace-events"]
	return strings.Contains(f, "K") && (strings.Contains(f, "A") || (strings.Contains(f, "h") && strings.Contains(f, "g")))
}

// patterns are the keyspace notification patterns of each database: the
// tables the state is made of.
func (c *Client) patterns(t *Topology) map[string][]string {
	p := func(db string, tables ...string) []string {
		var out []string
		for _, tb := range tables {
			out = append(out, fmt.Sprintf("__keyspace@%d__:%s*", t.ID(db), tb))
		}
		return out
	}
	return map[string][]string{
		ConfigDB:   p(ConfigDB, sflowGlobal, portchannelMember+t.Sep(ConfigDB), deviceMetadata+t.Sep(ConfigDB)),
		ApplDB:     p(ApplDB, portTable+t.Sep(ApplDB), lagTable+t.Sep(ApplDB), lagMemberTable+t.Sep(ApplDB)),
		StateDB:    p(StateDB, portIndexTable+t.Sep(StateDB), systemReady+t.Sep(StateDB), lagMemberTable+t.Sep(StateDB)),
		CountersDB: p(CountersDB, portNameMap),
	}
}

func (c *Client) isReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// scan returns the keys matching pattern.
func scan(ctx context.Context, cl *redis.Client, pattern string) ([]string, error) {
	var keys []string
	it := cl.Scan(ctx, 0, pattern, 1000).Iterator()
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	return keys, it.Err()
}

// hgetall reads every key's hash in one pipeline.
func hgetall(ctx context.Context, cl *redis.Client, keys []string) (map[string]map[string]string, error) {
	out := make(map[string]map[string]string, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	pipe := cl.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.HGetAll(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		if !isWrongType(err) {
			return nil, err
		}
	}
	for i, k := range keys {
		h, err := cmds[i].Result()
		if err != nil {
			continue // a key of another type: not a table entry
		}
		out[k] = h
	}
	return out, nil
}

func isWrongType(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") }

// readAll reads the configuration, readiness and ports (pipelined, one
// round trip per database and table scan) and publishes a new State when
// it differs.
func (c *Client) readAll(ctx context.Context, d *dbs) error {
	ctx, cancel := context.WithTimeout(ctx, 4*opTimeout)
	defer cancel()
	t := d.topo
	csep, asep, ssep := t.Sep(ConfigDB), t.Sep(ApplDB), t.Sep(StateDB)
	var ck []string
	for _, pat := range []string{sflowGlobal + csep + "*", sflowCollector + csep + "*"} {
		keys, err := scan(ctx, d.cl[ConfigDB], pat)
		if err != nil {
			return fmt.Errorf("%s: %w", ConfigDB, err)
		}
		ck = append(ck, keys...)
	}
	mkeys, err := scan(ctx, d.cl[ConfigDB], portchannelMember+csep+"*")
	if err != nil {
		return fmt.Errorf("%s: %w", ConfigDB, err)
	}
	ck = append(ck, deviceMetadata+csep+"localhost")
	cfgH, err := hgetall(ctx, d.cl[ConfigDB], ck)
	if err != nil {
		return fmt.Errorf("%s: %w", ConfigDB, err)
	}
	var ps problems
	st := &State{Config: parseConfig(cfgH, csep, &ps)}
	readyH, err := hgetall(ctx, d.cl[StateDB], []string{systemReady + ssep + systemReadyKey})
	if err != nil {
		return fmt.Errorf("%s: %w", StateDB, err)
	}
	st.SystemReady = systemIsReady(readyH[systemReady+ssep+systemReadyKey])
	c.mu.Lock()
	if !c.ready && (st.SystemReady || time.Since(c.start) >= c.opts.WaitReady) {
		c.ready = true
		if st.SystemReady {
			c.log.Info("sonic: SYSTEM_READY is UP: reporting the ports", "after", time.Since(c.start).Round(time.Millisecond))
		} else {
			c.log.Warn("sonic: no SYSTEM_READY UP within waitReady: reporting the ports anyway", "wait_ready", c.opts.WaitReady)
		}
	}
	st.Ready = c.ready
	c.mu.Unlock()
	if st.Ready {
		in := portInputs{members: map[string][]string{}, applSep: asep, stateSep: ssep, configSep: csep}
		for _, k := range mkeys {
			parts := strings.Split(k, csep)
			if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
				ps.add(ConfigDB, k, "", "", "not PORTCHANNEL_MEMBER%s<lag>%s<member>; skipped", csep, csep)
				continue
			}
			in.members[parts[1]] = append(in.members[parts[1]], parts[2])
		}
		if in.nameMap, err = d.cl[CountersDB].HGetAll(ctx, portNameMap).Result(); err != nil {
			return fmt.Errorf("%s: %w", CountersDB, err)
		}
		if in.ports, err = c.table(ctx, d.cl[ApplDB], portTable, asep); err != nil {
			return fmt.Errorf("%s: %w", ApplDB, err)
		}
		if in.lags, err = c.table(ctx, d.cl[ApplDB], lagTable, asep); err != nil {
			return fmt.Errorf("%s: %w", ApplDB, err)
		}
		if in.index, err = c.table(ctx, d.cl[StateDB], portIndexTable, ssep); err != nil {
			return fmt.Errorf("%s: %w", StateDB, err)
		}
		if in.memberAppl, err = c.table(ctx, d.cl[ApplDB], lagMemberTable, asep); err != nil {
			return fmt.Errorf("%s: %w", ApplDB, err)
		}
		if in.memberState, err = c.table(ctx, d.cl[StateDB], lagMemberTable, ssep); err != nil {
			return fmt.Errorf("%s: %w", StateDB, err)
		}
		st.Ports = parsePorts(in, &ps)
	}
	st.index()
	c.Reads.Add(1)
	c.noteProblems(ps, "config")
	c.noteOIDs(st)
	old := c.state.Load()
	if st.equal(old) {
		return nil
	}
	if c.missingCounters(st) {
		// New ports: their counters are read before they are reported,
		// so that their first polls have them.
		if err := c.readCounters(ctx, d, st); err != nil {
			return err
		}
	}
	c.state.Store(st)
	if c.opts.OnChange != nil {
		c.opts.OnChange(st)
	}
	return nil
}

// table reads every entry of table tb (keys tb<sep><name>), by name.
func (c *Client) table(ctx context.Context, cl *redis.Client, tb, sep string) (map[string]map[string]string, error) {
	keys, err := scan(ctx, cl, tb+sep+"*")
	if err != nil {
		return nil, err
	}
	h, err := hgetall(ctx, cl, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]string, len(h))
	for k, v := range h {
		out[strings.TrimPrefix(k, tb+sep)] = v
	}
	return out, nil
}

// noteOIDs marks the ports whose OID changed, and the LAGs whose members
// or members' OIDs changed, as restarted counters.
func (c *Client) noteOIDs(st *State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := make(map[string]string, len(st.Ports))
	for _, p := range st.Ports {
		id := CounterID(st, &p)
		key := fmt.Sprintf("%d", p.Index)
		now[key] = id
		if old, ok := c.oids[key]; ok && old != id {
			c.resets[p.Index] = true
			c.log.Info("sonic: counters of the port restarted (its SAI object changed): shown to collectors as a counter discontinuity", "port", p.Name, "ifindex", p.Index)
		}
	}
	if len(st.Ports) > 0 || st.Ready {
		c.oids = now
	}
}

// missingCounters tells whether a port of st has no counters read yet.
func (c *Client) missingCounters(st *State) bool {
	t := *c.counters.Load()
	for _, p := range st.Ports {
		if _, ok := t[p.OID]; !ok && !p.IsLAG() {
			return true
		}
	}
	return false
}

// CounterID identifies where port p's counters come from: its SAI
// object (OID), a LAG's members and theirs. When it changes, the counters
// restarted (a discontinuity).
func CounterID(st *State, p *Port) string {
	if !p.IsLAG() {
		return p.OID
	}
	var b strings.Builder
	for _, m := range p.Members {
		oid := ""
		if mp, ok := st.PortByName(m); ok {
			oid = mp.OID
		}
		b.WriteString(m + "=" + oid + ",")
	}
	return b.String()
}

// readCounters reads COUNTERS:<oid> of every port of st, pipelined.
func (c *Client) readCounters(ctx context.Context, d *dbs, st *State) error {
	if st == nil || len(st.Ports) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	sep := d.topo.Sep(CountersDB)
	keys := make([]string, 0, len(st.Ports))
	for _, p := range st.Ports {
		if !p.IsLAG() {
			keys = append(keys, "COUNTERS"+sep+p.OID)
		}
	}
	h, err := hgetall(ctx, d.cl[CountersDB], keys)
	if err != nil {
		return fmt.Errorf("%s: %w", CountersDB, err)
	}
	var ps problems
	t := make(map[string]*Counters, len(keys))
	for _, p := range st.Ports {
		if p.IsLAG() {
			continue
		}
		k := "COUNTERS" + sep + p.OID
		if len(h[k]) == 0 {
			ps.add(CountersDB, k, "", p.Name, "no counters for the port's OID; no counter samples for it")
			continue
		}
		t[p.OID] = parseCounters(k, h[k], &ps)
	}
	c.counters.Store(&t)
	c.CounterReads.Add(1)
	c.noteProblems(ps, "counters")
	return nil
}

// noteProblems logs each problem of kind the first time it is seen (again
// if it went away and came back), counts it by table, and forgets those
// of kind no longer present.
func (c *Client) noteProblems(ps problems, kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := make(map[Problem]bool, len(ps))
	for _, p := range ps {
		now[p] = true
		if !c.reported[p] {
			c.reported[p] = true
			c.bad[p.Table()]++
			c.log.Warn("sonic: bad value in Redis, skipped", "db", p.DB, "key", p.Key, "field", p.Field, "value", p.Value, "reason", p.Reason)
		}
	}
	for p := range c.reported {
		isCounters := strings.HasPrefix(p.Key, "COUNTERS") && p.DB == CountersDB && p.Key != portNameMap
		if (kind == "counters") == isCounters && !now[p] {
			delete(c.reported, p)
		}
	}
}
