// Package source holds the sample sources that feed the agent, each an
// agent.SampleSource with one agent.SampleReader per worker: BPF, the XDP
// and TC samplers' ring buffers and the AF_XDP sockets of monitor ports
// (samples.go); Psample, the PSAMPLE channel of switch ASICs and
// act_sample (psample.go); Mixed, each port on one of the two
// (mixed.go). DropSource hands the kernel's drop notifications to the
// agent's drop reporter (drops.go). The agent knows a source only through
// agent.SampleSource and agent.SampleReader, so a new source is a new
// file here and no edit of the agent. The daemon and the end-to-end
// benchmark (bench/daemon live) both use this package, so the benchmark
// measures the daemon's own sample path.
package source

import (
	"net/netip"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane"

	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane/forwarding"
	"github.com/sflowswitchd/sflowswitchd/dataplane/ports"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Samplers is what a sample source needs of the sampler loader, a
// *dataplane.Dataplane: sampling a port as the agent plans it, its
// counters and pool (Stats), each worker's ring and the ports taken over
// at Open (Pinned). The loader's other methods (attach modes, transit,
// release) are the daemon's.
type Samplers interface {
	SetPort(ifindex int, s ports.Sampling) error
	RemovePort(ifindex int) error
	Stats() *dataplane.Stats
	Source(worker int) (*reader.Source, error)
	Pinned() *dataplane.Pinned
}

// BPF is the source of the XDP and TC samplers: it drives the sampler
// loader for the agent (agent.SampleSource).
type BPF struct {
	DP Samplers
}

// SetPort attaches the sampler to a new port or updates an attached one
// through the config map (no re-attach); a monitor port gets its AF_XDP
// sockets, read by its worker's Source.
func (a BPF) SetPort(ifindex uint32, p agent.PortSampling) error {
	return a.DP.SetPort(int(ifindex), p)
}

// Adopted are the ports dp took over from pinned state at Open, in the
// agent's terms (agent.Agent.Adopt): the directions the earlier program
// sampled each in, those still attached (ingress: an egress sampler is
// not pinned), and what its egress sampler counted.
func Adopted(dp Samplers) map[uint32]agent.AdoptedPort {
	out := map[uint32]agent.AdoptedPort{}
	egress := dp.Pinned().Egress()
	for idx, s := range dp.Pinned().Ports() {
		ap := agent.AdoptedPort{PortSampling: s}
		if s.KernelRate != 0 { // attached: its ingress sampler continues
			ap.Attached = sflow.DirectionIngress
		}
		if e, ok := egress[idx]; ok {
			ap.EndedPool, ap.EndedDrops = e.Pool, e.Drops
		}
		out[uint32(idx)] = ap
	}
	return out
}

// RemovePort detaches the sampler from a port. A port that has vanished
// took its attachment with it; that is not an error.
func (a BPF) RemovePort(ifindex uint32) error {
	return a.DP.RemovePort(int(ifindex))
}

// PortSamples reads the samples the kernel selected on the port so far
// (agent.SampleCounter, for the backoff), from the mmap-ed counters.
func (a BPF) PortSamples(ifindex uint32) (uint64, bool) {
	c, err := a.DP.Stats().Ingress(int(ifindex))
	return c.Samples, err == nil
}

// PortPool reads the port's pool and drops from the mmap-ed counters (no
// system call).
func (a BPF) PortPool(ifindex uint32) (uint64, uint64) {
	return a.DP.Stats().Pool(ifindex)
}

// Reader is a worker's reader.Source as the agent reads it
// (agent.SampleReader and agent.Waker).
type BPFReader struct {
	src *reader.Source
	fn  func(*agent.PacketSample)
	ps  agent.PacketSample
	// conv is made once: a closure per read would allocate.
	conv func(*reader.RawSample)
}

// NewBPFReader returns src as an agent.SampleReader.
func NewBPFReader(src *reader.Source) *BPFReader {
	r := &BPFReader{src: src}
	r.conv = func(rs *reader.RawSample) {
		r.ps = agent.PacketSample{IfIndex: rs.IfIndex, FrameLen: rs.FrameLen, KernelRate: rs.Rate,
			CPU: rs.CPU, CPUPool: rs.CPUPool, Header: rs.Header,
			Egress: rs.Flags&reader.SampleEgress != 0, InIfIndex: rs.InIfIndex,
			PoolSum: rs.Flags&reader.SamplePoolSum != 0}
		if rs.Flags&reader.SampleTransit != 0 {
			transit(&r.ps.Transit, rs)
		}
		if rs.Meta != nil {
			routeQuery(&r.ps.Route, rs)
			if rs.Flags&reader.SampleTunnelPort != 0 {
				r.ps.TunnelPort = true
				tunnelQuery(&r.ps.Tunnel, rs)
			}
		}
		r.fn(&r.ps)
	}
	return r
}

// Readers returns the readers of the first workers sources of dp, one per
// worker (workers as given to dataplane.Open).
func BPFReaders(dp Samplers, workers int) ([]agent.SampleReader, error) {
	rs := make([]agent.SampleReader, max(workers, 1))
	for w := range rs {
		src, err := dp.Source(w)
		if err != nil {
			return nil, err
		}
		rs[w] = NewBPFReader(src)
	}
	return rs, nil
}

// ReadSamples implements agent.SampleReader (reader.Source.Read).
func (r *BPFReader) ReadSamples(deadline time.Time, fn func(*agent.PacketSample)) (int, error) {
	r.fn = fn
	return r.src.Read(deadline, r.conv)
}

// ReadIdle implements agent.IdleReader (reader.Source.ReadIdle).
func (r *BPFReader) ReadIdle(deadline time.Time, fn func(*agent.PacketSample)) (int, error) {
	r.fn = fn
	return r.src.ReadIdle(deadline, r.conv)
}

// CommitRead implements agent.Committer (reader.Source.Commit).
func (r *BPFReader) CommitRead() { r.src.Commit() }

// Wake implements agent.Waker.
func (r *BPFReader) Wake() error { return r.src.Wake() }

// routeQuery fills q from a ring record's route block (dataplane/bpf/route.h): the
// kernel's answers for the packet's destination and source, and the FIB
// generation both lookups saw. No allocation.
func routeQuery(q *forwarding.RouterQuery, rs *reader.RawSample) {
	rt := &rs.Meta.Route
	q.Asked = rt.Family == unix.AF_INET || rt.Family == unix.AF_INET6
	if !q.Asked {
		return
	}
	q.Egress = rs.Flags&reader.SampleEgress != 0
	q.In = rs.InIfIndex
	q.Gen, q.GenOK = rt.Gen, rs.Flags&reader.SampleFIBGen != 0
	q.Dst = answer(rt.Family, rs.Flags&reader.SampleRoute != 0, rt.DstOif, &rt.DstVia)
	q.Src = answer(rt.Family, rs.Flags&reader.SampleSrcRoute != 0, rt.SrcOif, &rt.SrcVia)
}

func answer(family uint8, found bool, oif uint32, via *[16]uint8) forwarding.Answer {
	if !found {
		return forwarding.Answer{}
	}
	a := forwarding.Answer{Found: true, Oif: oif}
	if family == unix.AF_INET {
		a.Via = netip.AddrFrom4([4]byte(via[:4]))
	} else {
		a.Via = netip.AddrFrom16(*via)
	}
	return a
}

// tunnelQuery fills q from a ring record of a tunnel device's frame: its
// port, direction and length, and the kernel's tunnel metadata when the
// record has it (dataplane/bpf/tunnel.h). No allocation.
func tunnelQuery(q *forwarding.TunnelQuery, rs *reader.RawSample) {
	tn := &rs.Meta.Tunnel
	*q = forwarding.TunnelQuery{Port: rs.IfIndex, Egress: rs.Flags&reader.SampleEgress != 0, FrameLen: rs.FrameLen}
	if rs.Flags&reader.SampleTunnel == 0 {
		return
	}
	switch tn.Family {
	case unix.AF_INET:
		q.Src = netip.AddrFrom4([4]byte(tn.Src[:4]))
		q.Dst = netip.AddrFrom4([4]byte(tn.Dst[:4]))
	case unix.AF_INET6:
		q.Src = netip.AddrFrom16(tn.Src)
		q.Dst = netip.AddrFrom16(tn.Dst)
	default:
		return
	}
	q.Known, q.ID, q.TOS = true, tn.Id, tn.Tos
}

// transit is what became of a sample's frame after it was sampled
// (reader.Transit, dataplane/bpf/transit.h), in the agent's terms.
func transit(t *agent.Transit, rs *reader.RawSample) {
	tr := &rs.Transit
	*t = agent.Transit{Waited: true, Left: tr.Status == reader.TransitSent}
	if t.Left {
		t.OutIfIndex, t.Queue = tr.OutIfIndex, tr.Queue
		if tr.DoneNs > rs.Timestamp {
			t.Delay = time.Duration(tr.DoneNs - rs.Timestamp)
		}
	}
	if rs.Flags&reader.SampleQueue != 0 {
		t.Depth, t.DepthOK = tr.Depth, true
	}
}
