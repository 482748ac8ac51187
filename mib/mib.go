package mib

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Defaults for Config fields left zero.
const (
	DefaultReceivers = 10
	DefaultInstances = 3
)

// StaticOwner is sFlowRcvrOwner of the receivers from the daemon's
// configuration.
const StaticOwner = "sflowswitchd.conf"

// staticTimeout is what sFlowRcvrTimeout reads for a static receiver,
// which never times out: the largest Integer32, so that a manager that
// checks "owned and time left" sees it as held.
const staticTimeout = math.MaxInt32

// Column defaults (SFLOW-MIB DEFVAL clauses).
const (
	defMaxDatagramSize = 1400
	defRcvrPort        = 6343
	defDatagramVersion = 5
	defHeaderSize      = 128
)

// Value limits of the writable columns (see the package doc).
const (
	minHeaderSize      = 20
	maxHeaderSize      = agent.MaxHeaderBytes
	minDatagramSize    = 200
	maxDatagramSize    = 65507
	maxOwnerLength     = 127 // OwnerString SIZE (0..127), RMON-MIB
	inetAddressTypeV4  = 1   // InetAddressType ipv4(1)
	inetAddressTypeV6  = 2   // InetAddressType ipv6(2)
	inetAddressUnknown = 0   // InetAddressType unknown(0)
)

// Config configures a MIB.
type Config struct {
	// Receivers is the number of sFlowRcvrTable rows (default 10).
	Receivers int
	// Instances is the number of sampler and poller instances per data
	// source (default 3).
	Instances int
	// Revision is the software revision in sFlowVersion
	// ("1.3;sflowswitchd;Revision").
	Revision string
	// Apply installs an agent configuration (agent.Agent.Apply). The MIB
	// calls it after every change, holding its own lock, so calls never
	// overlap and arrive in order. Required.
	Apply func(agent.Config) error
	// Now is the clock of the receiver timeouts (default time.Now).
	Now func() time.Time
	// Logger receives Apply failures outside a SET; default slog.Default().
	Logger *slog.Logger
	// Persist, when set, receives the SNMP-set part of the state
	// (Snapshot) after every change, holding the MIB's lock.
	Persist func(Snapshot)
}

// Port is a sampled port: a data source ifIndex.IfIndex.
type Port struct {
	// IfIndex is the data source's index: the port's ifIndex, or the
	// VLAN ID of a VLAN data source (Type).
	IfIndex uint32
	// Type is the data source type: sflow.SourceIfIndex (0, a port) or
	// sflow.SourceSmonVlan (a VLAN of a VLAN-filtering bridge,
	// smonVlanDataSource.<V> in the tables).
	Type uint32
	// CountersOnly makes a data source with counter pollers only, no
	// sampler rows (sFlowCpTable but not sFlowFsTable): a bond, whose
	// members are the sampled ports, and every VLAN data source.
	CountersOnly bool
	// Monitor selects the AF_XDP monitor path (agent.Config.MonitorPorts).
	Monitor bool
	// Direction is which way the port is sampled (agent.Config.Directions);
	// 0 = ingress.
	Direction sflow.Direction
	// Hook is the port's own hook (agent.Config.Hooks); "" = the
	// daemon's.
	Hook string
	// StaticRate is the sampling rate of the static samplers on this port
	// (0 = off).
	StaticRate uint32
}

// Static is the part of the configuration that comes from the daemon's
// config file and flags.
type Static struct {
	// Receivers become receiver rows 1..len(Receivers).
	Receivers []StaticReceiver
	// HeaderBytes is sFlowFsMaximumHeaderSize of the static samplers.
	HeaderBytes int
	// PollInterval is sFlowCpInterval of the static pollers (ports and
	// host), rounded down to seconds.
	PollInterval time.Duration
}

// StaticReceiver is a collector from the daemon's configuration.
type StaticReceiver struct {
	// Address is the collector's address and port. For a host name not
	// resolved yet (Name set) the address is invalid and only the port
	// counts: the row reads sFlowRcvrAddressType unknown(0) and an empty
	// sFlowRcvrAddress, and the agent counts its samples as lost.
	Address netip.AddrPort
	// Name is the collector's host name when it was given as one.
	Name string
	// MaxDatagramSize is sFlowRcvrMaximumDatagramSize (0 = 1400).
	MaxDatagramSize int
}

// HostSource is the data source of the host counters, entPhysicalEntry.1.
var HostSource = sflow.DataSource{Type: sflow.SourceEntPhysicalEntry, Index: 1}

// receiver is one sFlowRcvrTable row.
type receiver struct {
	owner    string
	deadline time.Time // when an SNMP-owned receiver times out
	static   bool
	maxSize  int32
	addrType int32
	addr     []byte // 4 or 16 octets (0 while unresolved); never modified in place
	port     int32
	// unresolved is a static receiver's host name that has not resolved
	// yet (addrType unknown, addr empty).
	unresolved string
	version    int32
}

func defaultReceiver() receiver {
	return receiver{maxSize: defMaxDatagramSize, addrType: inetAddressTypeV4,
		addr: []byte{0, 0, 0, 0}, port: defRcvrPort, version: defDatagramVersion}
}

// sampler is one sFlowFsTable row.
type sampler struct{ receiver, rate, header int32 }

func defaultSampler() sampler { return sampler{header: defHeaderSize} }

// poller is one sFlowCpTable row.
type poller struct{ receiver, interval int32 }

// source is a data source and its sampler and poller rows.
type source struct {
	ds    sflow.DataSource
	index agentx.OID // the table index: length-prefixed data source OID
	port  Port
	fs    []sampler // nil for the host
	cp    []poller
}

// state is the whole MIB content. Slices are copied by clone, so a staged
// state never shares rows with the current one.
type state struct {
	rcv []receiver
	src []source // sorted by index
}

func (s *state) clone() *state {
	c := &state{rcv: slices.Clone(s.rcv), src: slices.Clone(s.src)}
	for i := range c.src {
		c.src[i].fs = slices.Clone(c.src[i].fs)
		c.src[i].cp = slices.Clone(c.src[i].cp)
	}
	return c
}

// release returns receiver row r (1-based) to its defaults and frees every
// sampler and poller bound to it (SFLOW-MIB SFlowReceiver).
func (s *state) release(r int32) {
	s.rcv[r-1] = defaultReceiver()
	for i := range s.src {
		for j := range s.src[i].fs {
			if s.src[i].fs[j].receiver == r {
				s.src[i].fs[j] = defaultSampler()
			}
		}
		for j := range s.src[i].cp {
			if s.src[i].cp[j].receiver == r {
				s.src[i].cp[j] = poller{}
			}
		}
	}
}

// MIB is the SFLOW-MIB model. It implements agentx.Handler; all methods
// are safe for concurrent use.
type MIB struct {
	cfg     Config
	version string

	mu        sync.Mutex
	cur       *state
	gen       uint64 // incremented on every change of cur
	keys      []key  // every object instance, sorted; rebuilt when src changes
	static    Static
	agentAddr netip.Addr
	pend      *pending
	// timeouts wakes Run when the state changes (buffered 1).
	timeouts chan struct{}
	// failed are the ports the last Apply could not make the kernel
	// sample (agent.PortError): their sFlowFsPacketSamplingRate reads 0,
	// the truth, until an Apply succeeds for them.
	failed map[uint32]error
	// imported are the rows of an Import whose data source has not
	// appeared yet (restoreRows).
	imported map[snapshotKey]SnapshotRow
}

// New returns a MIB with cfg's rows, no data source but the host, no
// static receiver, and every row at its defaults. Nothing is applied until
// the first Set call.
func New(cfg Config) (*MIB, error) {
	if cfg.Apply == nil {
		return nil, errors.New("mib: Config.Apply is nil")
	}
	if cfg.Receivers == 0 {
		cfg.Receivers = DefaultReceivers
	}
	if cfg.Instances == 0 {
		cfg.Instances = DefaultInstances
	}
	if cfg.Receivers < 1 || cfg.Receivers > 65535 {
		return nil, fmt.Errorf("mib: %d receivers, want 1..65535", cfg.Receivers)
	}
	if cfg.Instances < 1 || cfg.Instances > 65535 {
		return nil, fmt.Errorf("mib: %d instances, want 1..65535", cfg.Instances)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &MIB{cfg: cfg, version: "1.3;sflowswitchd;" + cfg.Revision, timeouts: make(chan struct{}, 1)}
	m.cur = &state{rcv: make([]receiver, cfg.Receivers)}
	for i := range m.cur.rcv {
		m.cur.rcv[i] = defaultReceiver()
	}
	m.cur.src = []source{m.newSource(HostSource, Port{})}
	m.keys = buildKeys(m.cur)
	return m, nil
}

// newSource returns the rows of a new data source at their defaults, with
// the static receivers' instances bound.
func (m *MIB) newSource(ds sflow.DataSource, p Port) source {
	s := source{ds: ds, index: encodeSource(ds), port: p, cp: make([]poller, m.cfg.Instances)}
	if ds.Type == sflow.SourceIfIndex && !p.CountersOnly {
		s.fs = make([]sampler, m.cfg.Instances)
		for i := range s.fs {
			s.fs[i] = defaultSampler()
		}
	}
	m.bindStatic(&s)
	return s
}

// bindStatic binds instance r of s to static receiver r, at the static
// rate, header size and interval.
func (m *MIB) bindStatic(s *source) {
	hdr := int32(min(max(m.static.HeaderBytes, minHeaderSize), maxHeaderSize))
	if m.static.HeaderBytes == 0 {
		hdr = defHeaderSize
	}
	ival := int32(min(m.static.PollInterval/time.Second, math.MaxInt32))
	for r := range m.static.Receivers {
		if s.fs != nil {
			s.fs[r] = sampler{receiver: int32(r + 1), rate: int32(min(s.port.StaticRate, math.MaxInt32)), header: hdr}
		}
		s.cp[r] = poller{receiver: int32(r + 1), interval: ival}
	}
}

// SetStatic installs the static receivers (rows 1..len(st.Receivers)) and
// binds instance r of every data source to receiver r. A receiver row an
// SNMP manager owned is taken over; rows that were static and are no more
// return to their defaults.
func (m *MIB) SetStatic(st Static) error {
	if len(st.Receivers) > m.cfg.Receivers {
		return fmt.Errorf("mib: %d static receivers, the MIB has %d receiver rows", len(st.Receivers), m.cfg.Receivers)
	}
	if len(st.Receivers) > m.cfg.Instances {
		return fmt.Errorf("mib: %d static receivers need as many instances per data source, the MIB has %d", len(st.Receivers), m.cfg.Instances)
	}
	for i, r := range st.Receivers {
		if r.Address.Port() == 0 || (!r.Address.Addr().IsValid() && r.Name == "") {
			return fmt.Errorf("mib: static receiver %d: invalid address %s", i+1, r.Address)
		}
		if r.MaxDatagramSize != 0 && (r.MaxDatagramSize < minDatagramSize || r.MaxDatagramSize > maxDatagramSize) {
			return fmt.Errorf("mib: static receiver %d: maximum datagram size %d outside %d..%d", i+1, r.MaxDatagramSize, minDatagramSize, maxDatagramSize)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st.Receivers = slices.Clone(st.Receivers)
	old := m.static
	if slices.Equal(old.Receivers, st.Receivers) && old.HeaderBytes == st.HeaderBytes && old.PollInterval == st.PollInterval {
		return nil
	}
	next := m.cur.clone()
	for i := range next.rcv {
		if i < len(st.Receivers) || next.rcv[i].static {
			next.release(int32(i + 1))
		}
	}
	m.static = st
	for i, r := range st.Receivers {
		a := r.Address.Addr().Unmap()
		rc := receiver{owner: StaticOwner, static: true, maxSize: defMaxDatagramSize,
			addrType: inetAddressTypeV4, addr: a.AsSlice(), port: int32(r.Address.Port()), version: defDatagramVersion}
		switch {
		case !a.IsValid():
			rc.addrType, rc.addr, rc.unresolved = inetAddressUnknown, []byte{}, r.Name
		case a.Is6():
			rc.addrType = inetAddressTypeV6
		}
		if r.MaxDatagramSize != 0 {
			rc.maxSize = int32(r.MaxDatagramSize)
		}
		next.rcv[i] = rc
	}
	for i := range next.src {
		m.bindStatic(&next.src[i])
	}
	return m.install(next, false)
}

// SetPorts makes ports the data sources of the MIB (besides the host).
// Rows of ports that stay keep their values; rows of new ports start at
// their defaults with the static instances bound; rows of ports that are
// gone are dropped.
func (m *MIB) SetPorts(ports []Port) error {
	ports = slices.Clone(ports)
	dsOf := func(p Port) sflow.DataSource { return sflow.DataSource{Type: p.Type, Index: p.IfIndex} }
	// Rows in table index order (length-prefixed OIDs): ifIndex.N
	// (length 11), then smonVlanDataSource.V (12, ...16.22...), then
	// the host's entPhysicalEntry.1 (12, ...47...), appended below.
	slices.SortFunc(ports, func(a, b Port) int { return encodeSource(dsOf(a)).Compare(encodeSource(dsOf(b))) })
	for i := 1; i < len(ports); i++ {
		if dsOf(ports[i]) == dsOf(ports[i-1]) {
			return fmt.Errorf("mib: data source %s given twice", dsOf(ports[i]))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := make(map[sflow.DataSource]source, len(m.cur.src))
	var host source
	for _, s := range m.cur.src {
		if s.ds != HostSource {
			old[s.ds] = s
		} else {
			host = s
		}
	}
	next := &state{rcv: slices.Clone(m.cur.rcv)}
	same := len(old) == len(ports)
	for _, p := range ports {
		s, ok := old[dsOf(p)]
		if !ok || s.port.CountersOnly != p.CountersOnly {
			same = false
			src := m.newSource(dsOf(p), p)
			m.restoreRows(next, &src)
			next.src = append(next.src, src)
			continue
		}
		s.fs, s.cp = slices.Clone(s.fs), slices.Clone(s.cp)
		if s.port != p {
			same = false
			s.port = p
			m.bindStatic(&s)
		}
		next.src = append(next.src, s)
	}
	if same {
		return nil
	}
	host.fs, host.cp = slices.Clone(host.fs), slices.Clone(host.cp)
	next.src = append(next.src, host)
	return m.install(next, true)
}

// SetAgentAddress sets sFlowAgentAddress, also carried in every datagram.
func (m *MIB) SetAgentAddress(a netip.Addr) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a == m.agentAddr {
		return nil
	}
	m.agentAddr = a
	return m.install(m.cur, false)
}

// install applies next and makes it the current state (rebuilding the
// key list when the data sources changed). A configuration the agent
// refuses as a whole (not a port the kernel cannot sample) is not
// installed: the current state stays what the agent runs, and later
// changes are made against it (a state the agent refused would make every
// later one fail too).
func (m *MIB) install(next *state, sourcesChanged bool) error {
	failed, err := agent.SplitPortErrors(m.cfg.Apply(m.agentConfig(next)))
	if err != nil {
		return fmt.Errorf("mib: applying configuration: %w", err)
	}
	m.cur = next
	m.gen++
	select { // Run sleeps until the earliest timeout of the new state
	case m.timeouts <- struct{}{}:
	default:
	}
	if sourcesChanged {
		m.keys = buildKeys(next)
	}
	if m.cfg.Persist != nil {
		m.cfg.Persist(m.snapshot(next))
	}
	// A port the kernel cannot sample affects only that port: the rest is
	// applied and the SET (or change) stands; the port reads rate 0.
	m.failed = failed
	return nil
}

// Reapply applies the current state again: ports that failed are retried
// (a port slot was freed, a driver recovered). It returns the ports that
// still fail.
func (m *MIB) Reapply() (map[uint32]error, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.install(m.cur, false)
	return maps.Clone(m.failed), err
}

// FailedPorts returns the ports the kernel does not sample although the
// configuration asks it to, with the reason.
func (m *MIB) FailedPorts() map[uint32]error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.failed)
}

// Tick expires the receivers whose timeout has run out (at the clock's
// current time) and applies the result. Run calls it periodically.
func (m *MIB) Tick() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Now()
	var next *state
	for i, r := range m.cur.rcv {
		if r.owner == "" || r.static || r.deadline.After(now) {
			continue
		}
		if next == nil {
			next = m.cur.clone()
		}
		next.release(int32(i + 1))
	}
	if next != nil {
		if err := m.install(next, false); err != nil {
			m.cfg.Logger.Warn("sFlow receiver timeout: configuration applied with errors", "err", err)
		}
	}
}

// Run calls Tick when the earliest timeout of an SNMP-owned receiver is
// due, until ctx ends. Every change of the state wakes it to look again;
// with no receiver owned over SNMP it sleeps without a timer (an idle
// daemon wakes for nothing).
func (m *MIB) Run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		if d, ok := m.nextTick(); ok {
			t.Reset(d)
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-m.timeouts:
		case <-t.C:
		}
		t.Stop()
		m.Tick()
	}
}

// nextTick is how long Run may sleep: until the earliest timeout of an
// SNMP-owned receiver; ok is false when there is none.
func (m *MIB) nextTick() (wait time.Duration, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Now()
	for _, r := range m.cur.rcv {
		if r.owner == "" || r.static {
			continue
		}
		// The deadline is on the configured clock, the timer on the real
		// one: sleep for the difference.
		if d := max(r.deadline.Sub(now), 0); !ok || d < wait {
			wait, ok = d, true
		}
	}
	return wait, ok
}

// AgentConfig returns the agent configuration the MIB's current state
// stands for (what it last applied).
func (m *MIB) AgentConfig() agent.Config {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.agentConfig(m.cur)
}

// agentConfig derives the agent configuration from s: every owned
// receiver with a collector address (0.0.0.0 or :: sends nothing, per
// sFlowRcvrAddress), and the samplers and pollers bound to those receivers
// with a non-zero rate or interval.
func (m *MIB) agentConfig(s *state) agent.Config {
	cfg := agent.Config{AgentAddress: m.agentAddr, MonitorPorts: map[uint32]bool{}, Directions: map[uint32]sflow.Direction{},
		Hooks: map[uint32]string{}}
	active := make(map[int32]bool)
	for i, r := range s.rcv {
		if r.static && r.unresolved != "" {
			// Samplers and pollers keep running; the agent counts what
			// they would send as lost until the name resolves.
			active[int32(i+1)] = true
			cfg.Receivers = append(cfg.Receivers, agent.ReceiverConfig{Index: i + 1,
				Unresolved:      net.JoinHostPort(r.unresolved, strconv.Itoa(int(r.port))),
				MaxDatagramSize: int(r.maxSize)})
			continue
		}
		a, ok := netip.AddrFromSlice(r.addr)
		if r.owner == "" || !ok || a.IsUnspecified() || r.port == 0 {
			continue
		}
		active[int32(i+1)] = true
		cfg.Receivers = append(cfg.Receivers, agent.ReceiverConfig{Index: i + 1,
			Address: netip.AddrPortFrom(a, uint16(r.port)), MaxDatagramSize: int(r.maxSize)})
	}
	for _, src := range s.src {
		if src.ds.Type == sflow.SourceIfIndex && src.port.Monitor {
			cfg.MonitorPorts[src.ds.Index] = true
		}
		if d := src.port.Direction; d != 0 && d != sflow.DirectionIngress && src.ds.Type == sflow.SourceIfIndex {
			cfg.Directions[src.ds.Index] = d
		}
		if h := src.port.Hook; h != "" && src.ds.Type == sflow.SourceIfIndex {
			cfg.Hooks[src.ds.Index] = h
		}
		for j, f := range src.fs {
			if active[f.receiver] && f.rate > 0 {
				cfg.Samplers = append(cfg.Samplers, agent.SamplerConfig{IfIndex: src.ds.Index, Instance: j + 1,
					Receiver: int(f.receiver), Rate: uint32(f.rate), HeaderBytes: int(f.header)})
			}
		}
		for j, p := range src.cp {
			if active[p.receiver] && p.interval > 0 {
				cfg.Pollers = append(cfg.Pollers, agent.PollerConfig{Source: src.ds, Instance: j + 1,
					Receiver: int(p.receiver), Interval: time.Duration(p.interval) * time.Second})
			}
		}
	}
	return cfg
}
