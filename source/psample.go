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
// delta). What it covers is in docs/ARCHITECTURE.md.

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/sflowswitchd/sflowswitchd/agent"
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
	// that | 1 (default DefaultGroupBase).
	GroupBase uint32
	Logger    *slog.Logger
	// Conn sizes the readers' sockets.
	Conn psample.ConnConfig
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
	// Touched by its worker's reader only:
	raw    psample.PortCounts // counters at the last read
	pool   uint64             // packets counted since sampling began
	gen    uint64             // the batch (psample.Sample.Batch) the pool was read in
	seq    [2]psample.Seq     // ingress, egress (rules mode)
	poolA  atomic.Uint64      // pool, for PortPool
	dropsA atomic.Uint64      // samples lost, for PortPool
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
	ports map[uint32]*psPort
	table atomic.Pointer[psTable]
	// EgressRefused counts ports whose egress rule the kernel refused
	// (sampled at ingress only).
	EgressRefused atomic.Uint64
	readers       []*PsampleReader
	// rstats are the readers' counters, kept after Close.
	rstats []*PsampleReaderStats
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
	p := &Psample{cfg: cfg, log: cfg.Logger, ports: map[uint32]*psPort{}}
	p.table.Store(&psTable{ports: map[uint32]*psPort{}, groups: map[uint32]*psPort{}})
	var err error
	if p.stats, err = psample.NewStatsReader(); err != nil {
		return nil, err
	}
	if !cfg.listenOnly() || cfg.InstallRules {
		n, err := psample.RemoveStale()
		if n > 0 || err != nil {
			p.log.Info("startup psample cleanup", "stale_removed", n, "err", err)
		}
		if p.owner, err = psample.NewOwner(); err != nil {
			p.stats.Close()
			return nil, err
		}
	}
	for w := 0; w < cfg.Workers; w++ {
		r, err := p.newReader(w, open)
		if err != nil {
			return nil, errors.Join(err, p.Close())
		}
		p.readers = append(p.readers, r)
		p.rstats = append(p.rstats, r.Stats)
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
	p.log.Info("psample sampling", "mode", mode, "workers", cfg.Workers)
	return p, nil
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
			t.groups[p.cfg.Group(idx, false)] = pp
			t.groups[p.cfg.Group(idx, true)] = pp
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
		c, err := p.stats.Read(ifindex)
		if err != nil {
			return fmt.Errorf("psample: counters of ifindex %d: %w", ifindex, err)
		}
		pp.raw = c
		if old != nil { // its reader may still run: atomics only
			pp.pool = old.poolA.Load()
			pp.poolA.Store(pp.pool)
			pp.dropsA.Store(old.dropsA.Load())
		}
	}
	pp.rate, pp.trunc = rate, uint32(ps.HeaderBytes)
	if p.owner != nil {
		if err := p.install(pp); err != nil {
			if old == nil { // nothing of a port that is not sampled stays behind
				err = errors.Join(err, p.owner.Remove(int(ifindex), false), p.owner.Remove(int(ifindex), true))
			}
			return err
		}
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
	r := psample.Rule{IfIndex: idx, Rate: pp.rate, Group: p.cfg.Group(pp.ifindex, false), TruncSize: pp.trunc, SkipSW: pp.skipSW,
		Continue: p.cfg.InstallRules}
	if pp.dir&sflow.DirectionIngress != 0 && r.Group != 0 {
		if err := p.owner.Install(r); err != nil {
			return err
		}
	} else if err := p.owner.Remove(idx, false); err != nil {
		return err
	}
	r.Egress, r.Group = true, p.cfg.Group(pp.ifindex, true)
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
			return nil
		}
		pp.egress = true
		return nil
	}
	pp.egress = false
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
	if p.owner == nil {
		return nil
	}
	return errors.Join(p.owner.Remove(int(ifindex), false), p.owner.Remove(int(ifindex), true))
}

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
	if p.owner != nil {
		for idx := range p.ports {
			errs = append(errs, p.owner.Remove(int(idx), false), p.owner.Remove(int(idx), true))
		}
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
	return errors.Join(errs...)
}

// PsampleReaderStats are a reader's counters (metrics).
type PsampleReaderStats struct {
	// Lost counts the samples GROUP_SEQ gaps showed lost; Overruns the
	// socket's ENOBUFS reports; Foreign the samples of groups or ports
	// not this reader's; PoolErrors the counter reads that failed.
	Lost, Overruns, Foreign, PoolErrors, Restarts atomic.Uint64
}

// PsampleReader is one worker's psample socket (agent.SampleReader and
// agent.Waker).
type PsampleReader struct {
	p      *Psample
	id     int
	conn   *psample.Conn
	stats  *psample.StatsReader
	listen psample.Seq // listen-only mode: the group's sequence
	// listenEg is the egress group's sequence (listen-only by group).
	listenEg psample.Seq
	// pending are listen-only losses revealed by a sample of a port this
	// worker does not own: charged to its next own sample.
	pending uint64
	fn      func(*agent.PacketSample)
	ps      agent.PacketSample
	conv    func(*psample.Sample)
	Stats   *PsampleReaderStats
}

func (p *Psample) newReader(w int, open func() (*psample.Conn, error)) (*PsampleReader, error) {
	conn, err := open()
	if err != nil {
		return nil, err
	}
	st, err := psample.NewStatsReader()
	if err != nil {
		conn.Close()
		return nil, err
	}
	r := &PsampleReader{p: p, id: w, conn: conn, stats: st, Stats: &PsampleReaderStats{}}
	r.conv = r.convert
	return r, nil
}

func (r *PsampleReader) close() error {
	return errors.Join(r.conn.Close(), r.stats.Close())
}

// ReadSamples implements agent.SampleReader.
func (r *PsampleReader) ReadSamples(deadline time.Time, fn func(*agent.PacketSample)) (int, error) {
	r.fn = fn
	before := r.conn.Overruns.Load()
	n, err := r.conn.Read(deadline, r.conv)
	if d := r.conn.Overruns.Load() - before; d > 0 {
		r.Stats.Overruns.Add(d)
	}
	if n > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		err = nil
	}
	return n, err
}

// Wake implements agent.Waker.
func (r *PsampleReader) Wake() error { return r.conn.Wake() }

// convert turns a psample message into the worker's PacketSample.
func (r *PsampleReader) convert(s *psample.Sample) {
	// The ports as they are now (one atomic load): a port configured
	// while the reader waited is known to its first sample.
	t := r.p.table.Load()
	var pp *psPort
	egress := false
	var lost uint64 // samples lost before this one, charged to its port
	if c := &r.p.cfg; c.byGroup() {
		// The direction comes from the group (mod_psample.c): an ingress
		// sample belongs to the port it came in by, an egress sample to
		// the port it leaves by.
		switch {
		case c.IngressGroup != 0 && s.Group == c.IngressGroup:
			lost = r.observe(&r.listen, s.Seq)
			pp = t.ports[s.IIfIndex]
		case c.EgressGroup != 0 && s.Group == c.EgressGroup:
			lost = r.observe(&r.listenEg, s.Seq)
			if s.Has&psample.HasOIf != 0 {
				pp, egress = t.ports[s.OIfIndex], true
			}
		default:
			r.Stats.Foreign.Add(1)
			return
		}
		if pp == nil || pp.worker != r.id {
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
		lost = r.observe(&r.listen, s.Seq)
		// A sample taken at egress names the port it leaves by
		// (OIFINDEX); a port sampled at egress here takes it.
		if o := t.ports[s.OIfIndex]; s.Has&psample.HasOIf != 0 && o != nil && o.dir&sflow.DirectionEgress != 0 {
			pp, egress = o, true
		} else {
			pp = t.ports[s.IIfIndex]
		}
		if pp == nil || pp.worker != r.id {
			// Another worker's port, or none: the gap it revealed goes
			// to this worker's next own sample.
			r.Stats.Foreign.Add(1)
			r.pending += lost
			return
		}
		lost, r.pending = lost+r.pending, 0
	} else {
		pp = t.groups[s.Group]
		egress = s.Group&1 != 0
		if pp == nil || pp.worker != r.id {
			r.Stats.Foreign.Add(1)
			return
		}
		d := 0
		if egress {
			d = 1
		}
		lost = r.observe(&pp.seq[d], s.Seq)
	}
	if lost > 0 {
		pp.dropsA.Add(lost)
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
	if s.Has&psample.HasOutTC != 0 {
		ps.Queue.HasTC, ps.Queue.TC = true, s.OutTC
		if s.Has&psample.HasOutTCOcc != 0 {
			ps.Queue.HasDepth, ps.Queue.Depth = true, s.OutTCOcc
		}
	}
	if s.Has&psample.HasLatency != 0 {
		ps.Queue.HasDelay, ps.Queue.Delay = true, time.Duration(min(s.Latency, 1<<62))
	}
	r.fn(ps)
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
// read to its pool: rx for ingress, tx for egress, both for both.
func (r *PsampleReader) readPool(pp *psPort, batch uint64) {
	pp.gen = batch
	c, err := r.stats.Read(pp.ifindex)
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
	if pp.dir&sflow.DirectionIngress != 0 {
		d += step(c.RxPackets, pp.raw.RxPackets)
	}
	if pp.dir&sflow.DirectionEgress != 0 {
		d += step(c.TxPackets, pp.raw.TxPackets)
	}
	pp.raw = c
	pp.pool += d
	pp.poolA.Store(pp.pool)
}
