package source

// The psample sample source: ports sampled by tc's sample action (a
// switch ASIC's, offloaded, or act_sample in software), their samples read
// from the kernel's PSAMPLE channel (dataplane/psample), fed to the same
// workers as the XDP and TC samplers' (docs/ARCHITECTURE.md, "The psample
// path").
//
// Two modes:
//   - rules (hook psample): the agent installs one matchall + sample rule
//     per port and direction, at the port's exact smallest configured rate,
//     each with a psample group of its own (Group), so that the group's
//     GROUP_SEQ gaps are exactly that port's and direction's lost samples;
//   - listen-only (psample_group G): another component (SONiC's sflowmgrd,
//     DENT's tc configuration) installs the rules; the agent reads group G
//     and takes each sample's rate from PSAMPLE_ATTR_SAMPLE_RATE. One
//     sequence covers every port of the group, so a gap cannot be told to
//     a port: it is charged to the next sample of a port this worker
//     owns (the drops fields still add up to every loss), and counted in
//     the reader's metrics.
//
// sample_pool comes from the port's own 64-bit packet counter (rx_packets
// for ingress, tx_packets for egress, both summed for a port sampled both
// ways), read with RTM_GETSTATS once per port and batch of samples, as
// the packets counted since the port's sampling began; it never runs
// backwards (a counter that steps back, a driver reset, starts a new
// delta). It counts the directions the port's rules sample. The pool and
// the drops are kept in the agent's state (PsampleConfig.State): the
// program that takes over after an upgrade in place or a crash continues
// them (the frames in between, which no program sampled, not counted).
// What it covers is in docs/ARCHITECTURE.md.

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/agent/persist"
	"github.com/sflowswitchd/sflowswitchd/dataplane/psample"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// PsampleConfig configures a Psample.
type PsampleConfig struct {
	// Workers is the number of workers, one reader each.
	Workers int
	// ListenGroup, when not 0, is listen-only mode: no rule is
	// installed, samples of this group are read.
	ListenGroup uint32
	// IngressGroup and EgressGroup, when either is not 0, are listen-only
	// by group (hsflowd's mod_psample: group G ingress, G+1 egress): the
	// samples of IngressGroup are the ingress samples of the port they
	// came in by, those of EgressGroup the egress samples of the port they
	// leave by; the direction comes from the group, not OIFINDEX.
	IngressGroup, EgressGroup uint32
	// InstallRules, with IngressGroup/EgressGroup, installs the rules of
	// those groups (hsflowd's mod_dent): a matchall + sample rule per
	// port and direction at the port's rate, truncated to its header
	// bytes, skip_sw unless SoftwareRules. The rules are the agent's own
	// (dataplane/psample's cookie): only they are changed or removed.
	InstallRules, SoftwareRules bool
	// GroupBase numbers the groups of the rules (rules mode): port
	// ifindex's ingress group is GroupBase | ifindex<<1, its egress group
	// that | 1 (default DefaultGroupBase), for an ifindex below 2^23 (the
	// 24 bits below the base's); a larger ifindex gets a pair handed out
	// in turn from the range above (groupFor).
	GroupBase uint32
	Logger    *slog.Logger
	// Conn sizes the readers' sockets.
	Conn psample.ConnConfig
	// State, when not nil, keeps each port's pool and drops (the agent's
	// state, agent/persist): a program that takes over (an upgrade in
	// place, a crash restart) continues them, as it continues the
	// sequence numbers, rather than restarting them from 0.
	State *persist.Store
	// Pool, when set, gives the ports' packet counters for the pools in
	// place of the netdevs' (RTM_GETSTATS): SONiC's ASIC counters. It is
	// read by the agent's port index and must be safe for concurrent use.
	Pool PortCounters
	// PortMap, when set, maps the kernel's ifindex of a sample's ports to
	// the agent's port index (SONiC's ifIndex) in the listen-only modes; a
	// port it does not know is not the agent's (its samples counted as
	// foreign, its other port reported unknown).
	PortMap func(ifindex uint32) (uint32, bool)
}

// PortCounters reads a port's packet counters, by the agent's port index.
type PortCounters interface {
	Read(ifindex uint32) (psample.PortCounts, error)
}

// DefaultGroupBase puts the agent's groups at 0x73000000 ("s"), out of
// the way of the small numbers switch software uses (SONiC and DENT use
// 1 and up).
const DefaultGroupBase = 0x73000000

// byGroup tells whether the samples' direction comes from their group
// (IngressGroup, EgressGroup).
func (c *PsampleConfig) byGroup() bool { return c.IngressGroup != 0 || c.EgressGroup != 0 }

// listenOnly tells whether the readers take the samples of fixed groups
// (ListenGroup, or IngressGroup/EgressGroup) rather than a group per
// port and direction.
func (c *PsampleConfig) listenOnly() bool { return c.ListenGroup != 0 || c.byGroup() }

// Group is the psample group of port ifindex's rule in one direction.
func (c *PsampleConfig) Group(ifindex uint32, egress bool) uint32 {
	if c.byGroup() {
		if egress {
			return c.EgressGroup
		}
		return c.IngressGroup
	}
	g := c.GroupBase | ifindex<<1&0x00ffffff
	if egress {
		g |= 1
	}
	return g
}

// psPort is a port sampled through psample.
type psPort struct {
	ifindex uint32
	worker  int
	dir     sflow.Direction
	rate    uint32
	trunc   uint32
	skipSW  bool
	egress  bool // its egress rule is installed (rules mode)
	// l3 says the device has no MAC header (noMACHeader): its samples
	// start at the network header.
	l3 bool
	// counted are the directions its pool counts (agent.Direction): the
	// rules the kernel took (rules mode: a port refusing its egress rule
	// is sampled, and counted, at ingress only), or the configured ones
	// (listen-only: the rules are another component's). Written under
	// Psample.mu, read by the reader.
	counted atomic.Uint32
	// Touched by the reader of the socket (the first worker's) only:
	raw    psample.PortCounts // counters at the last read
	pool   uint64             // packets counted since sampling began
	gen    uint64             // the batch (psample.Sample.Batch) the pool was read in
	seq    [2]psample.Seq     // ingress, egress (rules mode)
	poolA  atomic.Uint64      // pool, for PortPool
	dropsA atomic.Uint64      // samples lost, for PortPool
	// takenA counts the samples its rules took: read, or lost (GROUP_SEQ
	// gaps charged to it), for PortSamples (the backoff).
	takenA atomic.Uint64
	// kept is the port's line in PsampleConfig.State (pool, drops), nil
	// without one.
	kept []uint64
}

// addDrops counts lost samples of the port.
func (pp *psPort) addDrops(n uint64) {
	d := pp.dropsA.Add(n)
	if pp.kept != nil {
		atomic.StoreUint64(&pp.kept[1], d)
	}
}

// psTable is the ports as the readers see them: replaced whole (copy on
// write) at every change, read without a lock.
type psTable struct {
	ports  map[uint32]*psPort
	groups map[uint32]*psPort // rules mode: group → port
}

// Psample is the agent's psample dataplane (agent.SampleSource).
type Psample struct {
	cfg   PsampleConfig
	log   *slog.Logger
	owner *psample.Owner // rules mode

	mu    sync.Mutex
	stats *psample.StatsReader
	// counts reads the pools' counters: stats, or cfg.Pool.
	counts PortCounters
	ports  map[uint32]*psPort
	table  atomic.Pointer[psTable]
	// EgressRefused counts ports whose egress rule the kernel refused
	// (sampled at ingress only).
	EgressRefused atomic.Uint64
	readers       []*PsampleReader
	// rstats are the readers' counters, kept after Close.
	rstats []*PsampleReaderStats
	// large are the group pairs handed out to ports whose ifindex is
	// 2^23 or more (groupFor), largeFree the pairs given back.
	large     map[uint32]uint32
	largeFree []uint32
	// open opens a reader's socket (psample.Open, or a test's), in ns:
	// the namespace the Psample was made in, whose psample groups the
	// samples come from (the kernel multicasts them to the group's
	// namespace only).
	open func() (*psample.Conn, error)
	ns   netns.NsHandle
	// Rejoins counts the re-creations of the psample family the readers
	// re-joined (WatchFamily); FamilyGone is set while the family is gone.
	Rejoins    atomic.Uint64
	FamilyGone atomic.Bool
	// leaderStopped is closed (once, leaderStop) when the first worker's
	// reader read its socket to the end at a stop (with
	// followers: PsampleReader.ReadAtStop).
	leaderStopped chan struct{}
	leaderStop    sync.Once
}

// groupFor returns port ifindex's group in one direction (rules mode).
// An ifindex below 2^23 has Group's, which the port's number makes
// unique; a larger one (a device made after millions of others, or with
// an ifindex chosen at creation) would collide there, and gets the pair
// n of the range above the base's, GroupBase + 2^24 + 2n, held until the
// port is no longer sampled. Called with mu held.
func (p *Psample) groupFor(ifindex uint32, egress bool) uint32 {
	if ifindex < 1<<23 || p.cfg.byGroup() {
		return p.cfg.Group(ifindex, egress)
	}
	n, ok := p.large[ifindex]
	if !ok {
		if k := len(p.largeFree); k > 0 {
			n, p.largeFree = p.largeFree[k-1], p.largeFree[:k-1]
		} else {
			n = uint32(len(p.large))
		}
		if p.large == nil {
			p.large = map[uint32]uint32{}
		}
		p.large[ifindex] = n
	}
	g := p.cfg.GroupBase + 1<<24 + (n<<1)&0x00ffffff
	if egress {
		g |= 1
	}
	return g
}

// freeGroups gives back the pair groupFor handed out to ifindex, if any.
// Called with mu held.
func (p *Psample) freeGroups(ifindex uint32) {
	if n, ok := p.large[ifindex]; ok {
		delete(p.large, ifindex)
		p.largeFree = append(p.largeFree, n)
	}
}

// NewPsample opens the psample path in the calling thread's network
// namespace: the psample family must exist (feature psample). In rules
// mode, the rules a killed earlier daemon left are removed first.
func NewPsample(cfg PsampleConfig) (*Psample, error) {
	if _, err := psample.GetFamily(); err != nil {
		return nil, err
	}
	return newPsample(cfg, func() (*psample.Conn, error) { return psample.Open(cfg.Conn) })
}

// newPsample is NewPsample with the readers' sockets from open.
func newPsample(cfg PsampleConfig, open func() (*psample.Conn, error)) (*Psample, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.GroupBase == 0 {
		cfg.GroupBase = DefaultGroupBase
	}
	cfg.Workers = max(cfg.Workers, 1)
	p := &Psample{cfg: cfg, log: cfg.Logger, ports: map[uint32]*psPort{}, open: open, ns: netns.None(), leaderStopped: make(chan struct{})}
	if ns, err := netns.Get(); err == nil {
		p.ns = ns
	}
	p.table.Store(&psTable{ports: map[uint32]*psPort{}, groups: map[uint32]*psPort{}})
	var err error
	if cfg.Pool != nil {
		p.counts = cfg.Pool
	} else if p.stats, err = psample.NewStatsReader(); err != nil {
		return nil, err
	} else {
		p.counts = p.stats
	}
	if !cfg.listenOnly() || cfg.InstallRules {
		n, err := psample.RemoveStale()
		if n > 0 || err != nil {
			p.log.Info("startup psample cleanup", "stale_removed", n, "err", err)
		}
		if p.owner, err = psample.NewOwner(); err != nil {
			if p.stats != nil {
				p.stats.Close()
			}
			return nil, err
		}
	}
	for w := 0; w < cfg.Workers; w++ {
		var r *PsampleReader
		var err error
		if w > 0 {
			// One socket, the first worker's; the others get their
			// samples from it (psample_dispatch.go).
			r, err = p.newFollower(w)
		} else {
			r, err = p.newReader(w, open)
		}
		if err != nil {
			return nil, errors.Join(err, p.Close())
		}
		p.readers = append(p.readers, r)
		p.rstats = append(p.rstats, r.Stats)
	}
	if cfg.Workers > 1 {
		lead := p.readers[0]
		lead.followers = make([]*psQueue, cfg.Workers)
		for w, r := range p.readers[1:] {
			lead.followers[w+1] = r.queue
		}
	}
	mode := "rules"
	switch {
	case cfg.ListenGroup != 0:
		mode = fmt.Sprintf("listen-only group=%d", cfg.ListenGroup)
	case cfg.InstallRules:
		mode = fmt.Sprintf("switch-port rules, ingress group=%d egress group=%d (0: none)", cfg.IngressGroup, cfg.EgressGroup)
	case cfg.byGroup():
		mode = fmt.Sprintf("listen-only ingress group=%d egress group=%d (0: none)", cfg.IngressGroup, cfg.EgressGroup)
	}
	conn := p.readers[0].conn.Load()
	if err := conn.TapErr(); err != nil {
		p.log.Info("psample: the tap cannot attach here: samples come through netlink", "err", err)
	}
	p.log.Info("psample sampling", "mode", mode, "workers", cfg.Workers, "intake", conn.Intake())
	return p, nil
}

// Intake tells how the samples come in (the first reader's Conn: the
// tap or netlink); IntakeAuto once closed.
func (p *Psample) Intake() psample.Intake {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.readers) == 0 || p.readers[0].conn.Load() == nil {
		return psample.IntakeAuto
	}
	return p.readers[0].conn.Load().Intake()
}

// TapStats returns the tap's counters (zero with the netlink intake): a
// map read, for metrics.
func (p *Psample) TapStats() (psample.TapStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.readers) == 0 || p.readers[0].conn.Load() == nil {
		return psample.TapStats{}, nil
	}
	return p.readers[0].conn.Load().TapStats()
}

// Readers returns the workers' sample readers.
func (p *Psample) Readers() []agent.SampleReader {
	out := make([]agent.SampleReader, len(p.readers))
	for i, r := range p.readers {
		out[i] = r
	}
	return out
}

// Workers returns the number of readers (one per worker).
func (p *Psample) Workers() int { return len(p.rstats) }

// ReaderStats returns reader w's counters.
func (p *Psample) ReaderStats(w int) *PsampleReaderStats { return p.rstats[w] }

// publish replaces the readers' table. Called with mu held.
func (p *Psample) publish() {
	t := &psTable{ports: make(map[uint32]*psPort, len(p.ports)), groups: make(map[uint32]*psPort, 2*len(p.ports))}
	for idx, pp := range p.ports {
		t.ports[idx] = pp
		if !p.cfg.listenOnly() {
			t.groups[p.groupFor(idx, false)] = pp
			t.groups[p.groupFor(idx, true)] = pp
		}
	}
	p.table.Store(t)
}

// SetPort starts or changes psample sampling of a port (agent.SampleSource).
// Rules mode: the ingress rule, and the egress one where the port is
// sampled egress and the kernel accepts it, at the exact rate ps.Rate,
// changed in place. A port already sampled keeps its pool.
func (p *Psample) SetPort(ifindex uint32, ps agent.PortSampling) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	rate := ps.Rate
	if rate == 0 {
		rate = ps.KernelRate
	}
	dir := ps.Direction
	if dir == 0 {
		dir = sflow.DirectionIngress
	}
	old := p.ports[ifindex]
	pp := &psPort{ifindex: ifindex, worker: ps.Worker, dir: dir, rate: rate, trunc: uint32(ps.HeaderBytes)}
	if old != nil && old.worker == ps.Worker && old.dir == dir {
		// Same port, same reader: the reader's state stays (its pool, its
		// sequences); only the rule changes.
		pp = old
	} else {
		c, err := p.counts.Read(ifindex)
		if err != nil {
			return fmt.Errorf("psample: counters of ifindex %d: %w", ifindex, err)
		}
		pp.raw = c
		if old != nil { // its reader may still run: atomics only
			pp.pool = old.poolA.Load()
			pp.poolA.Store(pp.pool)
			pp.dropsA.Store(old.dropsA.Load())
			pp.takenA.Store(old.takenA.Load())
			pp.kept = old.kept
		} else if p.cfg.State != nil {
			// What an earlier program counted (0 for a port new to
			// the state): the pool goes on from it, over the frames
			// counted from now on.
			line, err := p.cfg.State.ClaimLine(persist.PsampleKey(ifindex))
			if err != nil {
				p.log.Warn("agent state full: a psample port's pool is not kept across upgrades and restarts", "ifindex", ifindex, "err", err)
			} else {
				pp.kept = line
				pp.pool = atomic.LoadUint64(&line[0])
				pp.poolA.Store(pp.pool)
				pp.dropsA.Store(atomic.LoadUint64(&line[1]))
			}
		}
		if old == nil && p.owner != nil {
			// Rules mode, a port not sampled: its groups are made by
			// its rules now (the kernel frees a group with its last
			// rule, and the rules an earlier program left were removed
			// at start), so their first sample is numbered 0 and a
			// sample lost before the first one read counts too.
			pp.seq[0].StartAt(0)
			pp.seq[1].StartAt(0)
		}
	}
	pp.rate, pp.trunc = rate, uint32(ps.HeaderBytes)
	pp.l3 = noMACHeader(ifindex)
	if p.owner == nil {
		pp.counted.Store(uint32(dir))
	} else if err := p.install(pp); err != nil {
		if old == nil { // nothing of a port that is not sampled stays behind
			err = errors.Join(err, p.owner.Remove(int(ifindex), false), p.owner.Remove(int(ifindex), true))
			p.freeGroups(ifindex)
		}
		return err
	}
	p.ports[ifindex] = pp
	p.publish()
	return nil
}

// install puts pp's rules in place. Called with mu held.
func (p *Psample) install(pp *psPort) error {
	idx := int(pp.ifindex)
	if p.cfg.InstallRules {
		// mod_dent: skip_sw unless sw=on, whatever the port offloads.
		pp.skipSW = !p.cfg.SoftwareRules
	} else if l, err := netlink.LinkByIndex(idx); err == nil {
		if on, err := psample.TCOffload(l.Attrs().Name); err == nil {
			pp.skipSW = on
		} else {
			p.log.Debug("psample: hw-tc-offload unknown: rules in software", "port", l.Attrs().Name, "err", err)
		}
	}
	r := psample.Rule{IfIndex: idx, Rate: pp.rate, Group: p.groupFor(pp.ifindex, false), TruncSize: pp.trunc, SkipSW: pp.skipSW}
	if pp.dir&sflow.DirectionIngress != 0 && r.Group != 0 {
		if err := p.owner.Install(r); err != nil {
			return err
		}
	} else if err := p.owner.Remove(idx, false); err != nil {
		return err
	}
	r.Egress, r.Group = true, p.groupFor(pp.ifindex, true)
	if pp.dir&sflow.DirectionEgress != 0 && r.Group != 0 {
		if err := p.owner.Install(r); err != nil {
			if pp.dir&sflow.DirectionIngress == 0 {
				return err
			}
			// Egress where the port accepts it: sampled at ingress only.
			if !pp.egress {
				p.EgressRefused.Add(1)
				p.log.Warn("psample: the port refuses an egress sampling rule: sampled at ingress only", "ifindex", idx, "err", err)
			}
			pp.egress = false
			pp.counted.Store(uint32(sflow.DirectionIngress))
			return nil
		}
		pp.egress = true
		pp.counted.Store(uint32(pp.dir))
		return nil
	}
	pp.egress = false
	pp.counted.Store(uint32(pp.dir))
	return p.owner.Remove(idx, true)
}

// RemovePort stops sampling a port: its rules are removed.
func (p *Psample) RemovePort(ifindex uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.ports[ifindex]; !ok {
		return nil
	}
	delete(p.ports, ifindex)
	p.publish()
	if p.cfg.State != nil {
		// The agent keeps what it counted in the port's base.
		p.cfg.State.Free(persist.PsampleKey(ifindex))
	}
	if p.owner == nil {
		return nil
	}
	err := errors.Join(p.owner.Remove(int(ifindex), false), p.owner.Remove(int(ifindex), true))
	p.freeGroups(ifindex) // its rules, which used them, are gone
	return err
}

// PortSamples returns the samples the port's rules took so far, read or
// lost (agent.SampleCounter: the backoff applies to psample ports as to
// the BPF ones, its rate changes rewriting the rules in place). A port's
// count starts with its sampling in this program. No lock.
//
// Rules mode only: in listen-only mode the rules, and their rates, are
// another component's, which the backoff cannot change; a port there
// reports none.
func (p *Psample) PortSamples(ifindex uint32) (uint64, bool) {
	pp := p.table.Load().ports[ifindex]
	if pp == nil || (p.cfg.listenOnly() && !p.cfg.InstallRules) {
		return 0, false
	}
	return pp.takenA.Load(), true
}

// ExactRate implements agent.ExactRater: a psample port is sampled at
// its exact rate (tc sample's rate), not at a power of two.
func (p *Psample) ExactRate(ifindex uint32) bool { return p.has(ifindex) }

// PortPool returns the port's pool (packets counted since its sampling
// began, as its latest sample read them) and the samples lost
// (agent.PoolReader). No system call, no lock.
func (p *Psample) PortPool(ifindex uint32) (uint64, uint64) {
	pp := p.table.Load().ports[ifindex]
	if pp == nil {
		return 0, 0
	}
	return pp.poolA.Load(), pp.dropsA.Load()
}

// Close removes every rule of the agent and closes the readers. The
// workers must have stopped.
func (p *Psample) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	// The samples queued since the workers stopped cannot be sent: they
	// are counted in their ports' drops (which the agent's state keeps
	// for the next program), first with the pools read (the rules still
	// sample), then, once the rules are gone, what they took until then.
	for _, r := range p.readers {
		errs = append(errs, r.readClosing(true))
	}
	if p.owner != nil {
		for idx := range p.ports {
			errs = append(errs, p.owner.Remove(int(idx), false), p.owner.Remove(int(idx), true))
		}
	}
	for _, r := range p.readers {
		errs = append(errs, r.readClosing(false))
		r.countQueued(p.ports)
	}
	var unsent uint64
	for _, st := range p.rstats {
		unsent += st.Unsent.Load()
	}
	if unsent > 0 {
		p.log.Info("psample: samples read after the workers stopped, not sent: counted in their ports' drops", "samples", unsent)
	}
	if p.owner != nil {
		errs = append(errs, p.owner.Close())
		p.owner = nil
	}
	p.ports = map[uint32]*psPort{}
	p.publish()
	for _, r := range p.readers {
		errs = append(errs, r.close())
	}
	p.readers = nil
	if p.stats != nil {
		errs = append(errs, p.stats.Close())
		p.stats = nil
	}
	if p.ns.IsOpen() {
		errs = append(errs, p.ns.Close())
		p.ns = netns.None()
	}
	return errors.Join(errs...)
}

// PsampleReaderStats are a reader's counters (metrics).
type PsampleReaderStats struct {
	// Lost counts the samples GROUP_SEQ gaps showed lost; Overruns the
	// socket's ENOBUFS reports; Foreign the samples of groups or ports
	// not this reader's; PoolErrors the counter reads that failed.
	Lost, Overruns, Foreign, PoolErrors, Restarts atomic.Uint64
	// RejoinErrors counts the sockets that could not be opened again
	// after the family was made anew (retried at the next check).
	RejoinErrors atomic.Uint64
	// Unsent counts the samples read as the program stopped, after the
	// workers had (Psample.Close): not sent, counted in their ports'
	// drops.
	Unsent atomic.Uint64
}

// PsampleReader is one worker's psample socket (agent.SampleReader and
// agent.Waker).
type PsampleReader struct {
	p  *Psample
	id int
	// conn is swapped by the reader itself when the family was made anew
	// (rejoin); Wake reads it from other goroutines. nil for a follower.
	conn   atomic.Pointer[psample.Conn]
	rejoin atomic.Bool
	// fresh: the groups' sequences are new ones (after a rejoin): the
	// first number seen counts the samples numbered before it as lost
	// (a new group numbers its samples from 0, net/psample/psample.c).
	freshIn, freshEg bool
	stats            *psample.StatsReader // nil with PsampleConfig.Pool
	counts           PortCounters
	listen           psample.Seq // listen-only mode: the group's sequence
	// listenEg is the egress group's sequence (listen-only by group).
	listenEg psample.Seq
	// pending are listen-only losses revealed by a sample of a port this
	// worker does not own: charged to its next own sample.
	pending uint64
	// queue, for a follower (not the first worker): where
	// the first worker's reader puts this worker's samples; conn is nil.
	// followers, for that first reader: the queues by worker (nil: none).
	queue     *psQueue
	followers []*psQueue
	fn        func(*agent.PacketSample)
	// closing: the workers stopped (Psample.Close): a sample read now is
	// counted in its port's drops, not handed on; closingPool says
	// whether its port's pool is still read (not once the rules are
	// gone: the frames after them could not be sampled).
	closing, closingPool bool
	// stopWaited: a follower waited for the first reader at the stop.
	stopWaited bool
	ps         agent.PacketSample
	conv       func(*psample.Sample)
	Stats      *PsampleReaderStats
}

func (p *Psample) newReader(w int, open func() (*psample.Conn, error)) (*PsampleReader, error) {
	conn, err := open()
	if err != nil {
		return nil, err
	}
	r := &PsampleReader{p: p, id: w, counts: p.cfg.Pool, Stats: &PsampleReaderStats{}}
	if p.cfg.Pool == nil {
		st, err := psample.NewStatsReader()
		if err != nil {
			conn.Close()
			return nil, err
		}
		r.stats, r.counts = st, st
	}
	r.conv = r.convert
	conn.OnGroup = r.groupChanged
	conn.OnLost = r.tapLost
	r.conn.Store(conn)
	return r, nil
}

// newFollower is worker w's reader (w > 0): the first worker's socket
// reads the samples of every worker (psample_dispatch.go).
func (p *Psample) newFollower(w int) (*PsampleReader, error) {
	q, err := newPsQueue()
	if err != nil {
		return nil, err
	}
	return &PsampleReader{p: p, id: w, queue: q, Stats: &PsampleReaderStats{}}, nil
}

func (r *PsampleReader) close() error {
	if r.queue != nil {
		return r.queue.close()
	}
	if r.stats == nil {
		return r.conn.Load().Close()
	}
	return errors.Join(r.conn.Load().Close(), r.stats.Close())
}

// ReadSamples implements agent.SampleReader.
func (r *PsampleReader) ReadSamples(deadline time.Time, fn func(*agent.PacketSample)) (int, error) {
	if r.queue != nil {
		return r.queue.read(deadline, fn)
	}
	r.fn = fn
	if r.rejoin.Swap(false) {
		r.reopen()
	}
	conn := r.conn.Load()
	if woken, err := r.waitRoom(conn, deadline); woken || err != nil {
		return 0, err
	}
	before := conn.Overruns.Load()
	n, err := conn.Read(deadline, r.conv)
	for _, q := range r.followers {
		if q != nil {
			if kerr := q.kick(); kerr != nil {
				err = errors.Join(err, kerr)
			}
		}
	}
	if d := conn.Overruns.Load() - before; d > 0 {
		r.Stats.Overruns.Add(d)
	}
	if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		r.settle()
	}
	if n > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		err = nil
	}
	return n, err
}

// roomPoll is how often a reader whose followers' queues are full looks
// again.
const roomPoll = time.Millisecond

// waitRoom waits, before the first worker's reader reads its socket, until
// every follower's queue has room for what one read can hand it, so that
// a follower slower than the socket leaves the samples in the socket's
// buffer (4 MiB), not in a full queue: the samples that buffer cannot
// hold are the kernel's to drop, and count as GROUP_SEQ gaps. It returns
// at deadline (os.ErrDeadlineExceeded: the worker ticks) or when Wake
// cut the wait short (woken: the worker takes its configuration first).
func (r *PsampleReader) waitRoom(conn *psample.Conn, deadline time.Time) (woken bool, err error) {
	need := uint64(conn.MaxPerRead())
	for {
		full := false
		for _, q := range r.followers {
			if q != nil && q.free() < need {
				full = true
				if err := q.kick(); err != nil {
					return false, err
				}
			}
		}
		if !full {
			return false, nil
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return false, os.ErrDeadlineExceeded
		}
		if woken, err := conn.Pause(roomPoll, deadline); woken || err != nil {
			return woken, err
		}
	}
}

// Wake implements agent.Waker.
func (r *PsampleReader) Wake() error {
	if r.queue != nil {
		return r.queue.wake()
	}
	return r.conn.Load().Wake()
}

// ReadAtStop implements agent.StopReader: what the socket (a follower:
// its queue) holds as the worker stops, without waiting. The kernel frees
// a socket's queue with the socket, and the next program opens its own:
// what is not read now would be neither sent nor counted.
//
// Listen-only with several workers, a follower first waits (a bounded
// time) for the first worker's reader to have read the socket to its end,
// so that the samples it hands on at the stop are in the queue.
func (r *PsampleReader) ReadAtStop(fn func(*agent.PacketSample)) (int, error) {
	if r.queue != nil {
		if !r.stopWaited {
			r.stopWaited = true
			select {
			case <-r.p.leaderStopped:
			case <-time.After(stopWaitLeader):
			}
		}
		return r.queue.drain(fn), nil
	}
	n, err := r.tryRead(fn)
	if n == 0 && err == nil {
		r.settle()
	}
	if (n == 0 || err != nil) && r.followers != nil {
		r.p.leaderStop.Do(func() { close(r.p.leaderStopped) })
	}
	return n, err
}

// stopWaitLeader bounds a follower's wait for the first worker's last
// read at a stop.
const stopWaitLeader = 2 * time.Second

// readClosing reads what the socket holds once the workers stopped
// (Psample.Close), counting each sample in its port's drops (closing),
// the ports' pools read while pool; bounded as a worker's reads, for a
// group another component's rules keep feeding (listen-only).
func (r *PsampleReader) readClosing(pool bool) error {
	if r.queue != nil {
		return nil
	}
	r.closing, r.closingPool = true, pool
	r.fn = func(*agent.PacketSample) {}
	conn := r.conn.Load()
	before := conn.Overruns.Load()
	var err error
	for range 64 {
		var n int
		if n, err = conn.TryRead(r.conv); n == 0 || err != nil {
			break
		}
	}
	if d := conn.Overruns.Load() - before; d > 0 {
		r.Stats.Overruns.Add(d)
	}
	r.settle()
	return err
}

// countQueued counts the samples left in a follower's queue once the
// workers stopped (Psample.Close) in their ports' drops.
func (r *PsampleReader) countQueued(ports map[uint32]*psPort) {
	if r.queue == nil {
		return
	}
	r.queue.drain(func(ps *agent.PacketSample) {
		if pp := ports[ps.IfIndex]; pp != nil {
			pp.addDrops(1)
		}
		r.Stats.Unsent.Add(1)
	})
}

// convert turns a psample message into the worker's PacketSample.
func (r *PsampleReader) convert(s *psample.Sample) {
	// The ports as they are now (one atomic load): a port configured
	// while the reader waited is known to its first sample.
	t := r.p.table.Load()
	var pp *psPort
	egress := false
	var lost uint64 // samples lost before this one, charged to its port
	if c := &r.p.cfg; c.listenOnly() && c.PortMap != nil {
		// The kernel's ifindex numbers to the agent's (SONiC's); a port
		// it does not know is reported unknown (0), and is no port of the
		// agent's.
		s.IIfIndex, _ = c.PortMap(s.IIfIndex)
		if s.Has&psample.HasOIf != 0 {
			s.OIfIndex, _ = c.PortMap(s.OIfIndex)
		}
	}
	if c := &r.p.cfg; c.byGroup() {
		// The direction comes from the group (mod_psample.c): an ingress
		// sample belongs to the port it came in by, an egress sample to
		// the port it leaves by.
		switch {
		case c.IngressGroup != 0 && s.Group == c.IngressGroup:
			lost = r.seqLost(&r.listen, &r.freshIn, s)
			pp = t.ports[s.IIfIndex]
		case c.EgressGroup != 0 && s.Group == c.EgressGroup:
			lost = r.seqLost(&r.listenEg, &r.freshEg, s)
			if s.Has&psample.HasOIf != 0 {
				pp, egress = t.ports[s.OIfIndex], true
			}
		default:
			r.Stats.Foreign.Add(1)
			return
		}
		if pp == nil || (pp.worker != r.id && r.followers == nil) {
			r.Stats.Foreign.Add(1)
			r.pending += lost
			return
		}
		lost, r.pending = lost+r.pending, 0
	} else if g := r.p.cfg.ListenGroup; g != 0 {
		if s.Group != g {
			r.Stats.Foreign.Add(1)
			return
		}
		lost = r.seqLost(&r.listen, &r.freshIn, s)
		// A sample taken at egress names the port it leaves by
		// (OIFINDEX); a port sampled at egress here takes it.
		if o := t.ports[s.OIfIndex]; s.Has&psample.HasOIf != 0 && o != nil && o.dir&sflow.DirectionEgress != 0 {
			pp, egress = o, true
		} else {
			pp = t.ports[s.IIfIndex]
		}
		if pp == nil || (pp.worker != r.id && r.followers == nil) {
			// No port, or another worker's (each worker reading the
			// group itself): the gap it revealed goes to this worker's
			// next own sample.
			r.Stats.Foreign.Add(1)
			r.pending += lost
			return
		}
		lost, r.pending = lost+r.pending, 0
	} else {
		pp = t.groups[s.Group]
		egress = s.Group&1 != 0
		if pp == nil || (pp.worker != r.id && r.followers == nil) {
			r.Stats.Foreign.Add(1)
			return
		}
		d := 0
		if egress {
			d = 1
		}
		if s.Has&psample.HasSeq != 0 {
			lost = r.observe(&pp.seq[d], s.Seq)
		}
	}
	if lost > 0 {
		pp.addDrops(lost)
	}
	pp.takenA.Add(1 + lost)
	if r.closing {
		if r.closingPool && pp.gen != s.Batch {
			r.readPool(pp, s.Batch)
		}
		pp.addDrops(1)
		r.Stats.Unsent.Add(1)
		return
	}
	// The counters once per port and recvmmsg batch: read after every
	// message of the batch was queued, so after each of their frames was
	// counted.
	if pp.gen != s.Batch {
		r.readPool(pp, s.Batch)
	}
	ps := &r.ps
	// CPUPool 0: the worker takes the pool from PortPool, which returns
	// what readPool just stored (both directions' counters read at once).
	*ps = agent.PacketSample{IfIndex: pp.ifindex, FrameLen: s.OrigSize, KernelRate: s.Rate, Header: s.Data}
	if egress {
		ps.Egress, ps.InIfIndex = true, s.IIfIndex
	}
	if pp.l3 {
		ps.HeaderProtocol = networkProtocol(s)
	}
	if s.Has&psample.HasOutTC != 0 {
		ps.Queue.HasTC, ps.Queue.TC = true, s.OutTC
		if s.Has&psample.HasOutTCOcc != 0 {
			ps.Queue.HasDepth, ps.Queue.Depth = true, s.OutTCOcc
		}
	}
	if s.Has&psample.HasLatency != 0 {
		ps.Queue.HasDelay, ps.Queue.Delay = true, time.Duration(min(s.Latency, 1<<62))
	}
	if pp.worker != r.id {
		// Listen-only, another worker's port: to its queue; counted lost
		// when the queue is full.
		if pp.worker >= len(r.followers) || r.followers[pp.worker] == nil || !r.followers[pp.worker].push(ps) {
			pp.addDrops(1)
			r.Stats.Lost.Add(1)
		}
		return
	}
	r.fn(ps)
}

// noMACHeader reports whether port ifindex is a device act_sample pushes
// no MAC header on (net/sched/act_sample.c, tcf_sample_dev_ok_push: IP
// tunnels ipip, ip6tnl, sit, gre and ip6gre, ARPHRD_VOID and ARPHRD_NONE
// devices such as tun and WireGuard) or that has none (PPP, raw IP): its
// samples start at the network header, whatever the direction. netlink
// names the device type (ifinfomsg.ifi_type) in EncapType; a device it
// cannot read is taken for Ethernet.
func noMACHeader(ifindex uint32) bool {
	l, err := netlink.LinkByIndex(int(ifindex))
	if err != nil {
		return false
	}
	switch l.Attrs().EncapType {
	case "ipip", "tunnel6", "sit", "gre", "ip6gre", "ppp", "rawip", "none", "void",
		"unknown823",   // ARPHRD_IP6GRE, where netlink has no name for it
		"unknown519",   // ARPHRD_RAWIP
		"unknown65534", // ARPHRD_NONE
		"unknown65535": // ARPHRD_VOID
		return true
	}
	return false
}

// networkProtocol is the sFlow header_protocol of a sample that starts at
// its network header: PSAMPLE_ATTR_PROTO (the skb's protocol, Linux 5.13),
// else the IP version in the first byte.
func networkProtocol(s *psample.Sample) sflow.HeaderProtocol {
	if s.Has&psample.HasProto != 0 {
		switch s.Proto {
		case 0x0800:
			return sflow.HeaderProtocolIPv4
		case 0x86dd:
			return sflow.HeaderProtocolIPv6
		case 0x8847, 0x8848:
			return sflow.HeaderProtocolMPLS
		}
	}
	if len(s.Data) > 0 && s.Data[0]>>4 == 6 {
		return sflow.HeaderProtocolIPv6
	}
	return sflow.HeaderProtocolIPv4
}

// groupChanged follows the kernel's announcement that group was made
// (created) or freed: the group's sequence starts again, from 0 for a
// group made, so that a group made anew after 2^31 or more samples (a
// step forward Seq cannot tell from a gap) shows no false loss; what its
// window still missed is lost. Rules mode: the port's group of that
// number, if this reader's; listen-only: the group read.
func (r *PsampleReader) groupChanged(group uint32, created bool) {
	var q *psample.Seq
	var pp *psPort
	c := &r.p.cfg
	switch {
	case c.byGroup():
		switch {
		case c.IngressGroup != 0 && group == c.IngressGroup:
			q = &r.listen
		case c.EgressGroup != 0 && group == c.EgressGroup:
			q = &r.listenEg
		default:
			return
		}
	case c.ListenGroup != 0:
		if group != c.ListenGroup {
			return
		}
		q = &r.listen
	default:
		if pp = r.p.table.Load().groups[group]; pp == nil || (pp.worker != r.id && r.followers == nil) {
			return
		}
		q = &pp.seq[group&1]
	}
	lost := uint64(q.Reset())
	if created {
		q.StartAt(0)
	} else {
		r.Stats.Restarts.Add(1)
	}
	r.Stats.Lost.Add(lost)
	if pp != nil {
		pp.addDrops(lost)
	} else {
		r.pending += lost
	}
}

// settle counts as lost, once the socket is quiet (a read waited and got
// nothing), the numbers the reordering windows of this reader's groups
// still miss (psample.Seq.Settle): the losses at the end of a burst reach
// the drops field without waiting for a window's worth of later samples.
// Rules mode: each port's own groups, charged to the port; listen-only:
// the group's, charged to this worker's next own sample.
func (r *PsampleReader) settle() {
	if r.p.cfg.listenOnly() {
		lost := uint64(r.listen.Settle()) + uint64(r.listenEg.Settle())
		r.Stats.Lost.Add(lost)
		r.pending += lost
		return
	}
	for _, pp := range r.p.table.Load().ports {
		if pp.worker != r.id && r.followers == nil {
			continue
		}
		for d := range pp.seq {
			if lost := uint64(pp.seq[d].Settle()); lost > 0 {
				r.Stats.Lost.Add(lost)
				pp.addDrops(lost)
			}
		}
	}
}

// seqLost is what a listen-only group's sequence says was lost before
// sample s: its gaps, and after a rejoin what the new group numbered
// before it. A sample without a sequence number (the tap intake, whose
// losses come through tapLost) says nothing.
func (r *PsampleReader) seqLost(q *psample.Seq, fresh *bool, s *psample.Sample) uint64 {
	if s.Has&psample.HasSeq == 0 {
		return 0
	}
	return r.observe(q, s.Seq) + r.numberedBefore(fresh, s.Seq)
}

// tapLost charges the samples of group the tap could not deliver (its
// ring was full; psample.Conn.OnLost), as a sequence gap of that group
// is charged: rules mode, to the group's port; listen-only, to this
// worker's next own sample. A group of no port of this reader's (a
// port removed since, another component's group) counts in Lost only.
func (r *PsampleReader) tapLost(group uint32, n uint64) {
	r.Stats.Lost.Add(n)
	c := &r.p.cfg
	if c.listenOnly() {
		if group == psample.LostUnknownGroup || group == c.ListenGroup ||
			(c.IngressGroup != 0 && group == c.IngressGroup) || (c.EgressGroup != 0 && group == c.EgressGroup) {
			r.pending += n
		}
		return
	}
	if pp := r.p.table.Load().groups[group]; pp != nil && (pp.worker == r.id || r.followers != nil) {
		pp.addDrops(n)
		pp.takenA.Add(n)
	}
}

// observe follows a group's sequence and counts its gaps and restarts.
func (r *PsampleReader) observe(q *psample.Seq, seq uint32) uint64 {
	before := q.Restarts
	lost := uint64(q.Observe(seq))
	r.Stats.Restarts.Add(q.Restarts - before)
	r.Stats.Lost.Add(lost)
	return lost
}

// readPool reads pp's counters and adds what they counted since the last
// read to its pool: rx for ingress, tx for egress, both for both, as its
// rules sample it (psPort.counted): the pool covers the frames that could
// have been sampled (sflow_version_5.txt section 4, sample_pool).
func (r *PsampleReader) readPool(pp *psPort, batch uint64) {
	pp.gen = batch
	c, err := r.counts.Read(pp.ifindex)
	if err != nil {
		r.Stats.PoolErrors.Add(1)
		return
	}
	step := func(cur, last uint64) uint64 {
		if cur < last { // the counter was reset: count from 0
			return cur
		}
		return cur - last
	}
	var d uint64
	dir := sflow.Direction(pp.counted.Load())
	if dir&sflow.DirectionIngress != 0 {
		d += step(c.RxPackets, pp.raw.RxPackets)
	}
	if dir&sflow.DirectionEgress != 0 {
		d += step(c.TxPackets, pp.raw.TxPackets)
	}
	pp.raw = c
	pp.pool += d
	pp.poolA.Store(pp.pool)
	if pp.kept != nil {
		atomic.StoreUint64(&pp.kept[0], pp.pool)
	}
}
