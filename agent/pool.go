package agent

import (
	"runtime"
	"sync/atomic"

	"github.com/sflowswitchd/sflowswitchd/agent/persist"
)

// portPool is a port's sample_pool at sample time, as one worker knows it.
//
// sflow_version_5.txt section 4, flow_sample.sample_pool: the frames that
// could have been sampled up to this one. The kernel counts a port's
// frames per CPU. Its sampled path sums every CPU's count at the sampled
// frame (dataplane/bpf/sampler.h port_pool_sum) and the record carries that sum
// (PacketSample.PoolSum): the sample's pool is then exact at its frame.
//
// A record without the sum (from a program older than the sum, still in a
// ring a new program adopted) carries its CPU's count alone; its pool is
// that count plus every other CPU's count as its own latest sample
// reported it. Chosen over reading the other CPUs' live counters when the
// sample is encoded: those are read later than the sample was taken, so
// they would count frames that arrived after it, and a later sample could
// then carry a smaller pool. That method undercounts by the frames other
// CPUs received since their own last sample.
//
// Pools of consecutive samples strictly increase: a port's records reach
// one worker in the order each CPU reserved them; a CPU's count only
// grows; and a pool that would not be above the previous one (a sum read
// by one CPU while another's sample was being taken, smaller than that
// sample's by the frames the other CPU counted meanwhile) is raised to
// one above it: each kernel sample is a frame after the previous. The port's total
// (counters, MIB, metrics) is read from the kernel's counters, exact.
//
// The per-CPU counts live in the agent's persistent state (agent/persist,
// lines of PoolCPUKey) when it has room: a program that takes the
// samplers over (an upgrade, a restart after a crash) continues them, so
// the pools of the samples that waited in the ring do not run backwards.
//
// So are the latest every-CPU sums of each direction and the pool of the
// latest sample (PoolSumKey): a program that takes over reads a sample of
// one direction knowing the other's count and the pool it must stay
// above, as the program before it did. All of them are written there
// only as far as the ring's consumer position goes (persist): the records
// after it are read again by that program, and must find the state as it
// was before them.
//
// A port sampled both ways has its counts in each direction (the
// kernel's ingress and egress counters): its pool is the sum of both, the
// data source covering both directions. Only the ingress counts are kept
// in the persistent state: an egress sampler is not pinned (dataplane
// pins ingress attachments only), so a take-over attaches it anew, what
// it counted added to the port's base once the samples that waited in
// the rings are read (Agent.Adopt).
type portPool struct {
	base uint64   // pool of earlier attachments (identifies this attachment)
	cpu  []uint64 // latest reported ingress pool per CPU
	out  []uint64 // latest reported egress pool per CPU
	// inCPUs and outCPUs are the sums of cpu and out; inAll and outAll
	// the latest every-CPU sums the kernel reported per direction.
	inCPUs, outCPUs uint64
	inAll, outAll   uint64
	last            uint64 // the pool of the latest sample
	// sums is the line of the persistent state (or this process's) that
	// keeps inAll, outAll and last (words sumIn, sumOut, sumLast), and
	// cpuLines those of cpu (word 0 of each: the base).
	sums     []uint64
	cpuLines [][]uint64
	// pre holds the values the latest sample changed, as they were
	// before it (mark), and rec that sample's number in its worker: until
	// the ring position covers that sample, the persistent state must
	// not (persist).
	pre struct {
		in, out, last uint64
		cpu           int // the CPU whose count the sample changed; -1: none
		cpuVal        uint64
	}
	rec uint64
	// cpuDirty: cpu changed since it was last persisted; dirty: the pool
	// is in its worker's list of pools to persist.
	cpuDirty, dirty bool
}

// Words of a port's PoolSumKey line (word 0: the base).
const (
	sumIn   = 1
	sumOut  = 2
	sumLast = 3
)

// newPortPool is the pool of port ifindex's attachment over base, its
// counts kept in state (nil: in this process only). Counts kept there
// for another attachment (another base) start afresh.
func newPortPool(base uint64, state *persist.Store, ifindex uint32) *portPool {
	p := &portPool{base: base, cpu: make([]uint64, runtime.NumCPU()), out: make([]uint64, runtime.NumCPU())}
	p.pre.cpu = -1
	if state != nil {
		p.sums, _ = state.ClaimLine(persist.PoolSumKey(ifindex))
	}
	if p.sums == nil { // no room: this process's own
		p.sums = make([]uint64, persist.LineWords)
	}
	if atomic.LoadUint64(&p.sums[0]) != base {
		for i := range p.sums {
			atomic.StoreUint64(&p.sums[i], 0)
		}
		atomic.StoreUint64(&p.sums[0], base)
	}
	p.inAll, p.outAll = atomic.LoadUint64(&p.sums[sumIn]), atomic.LoadUint64(&p.sums[sumOut])
	p.last = atomic.LoadUint64(&p.sums[sumLast])
	per := persist.LineWords - 1 // word 0 of a line: the base
	for g := 0; g*per < len(p.cpu); g++ {
		var line []uint64
		if state != nil {
			line, _ = state.ClaimLine(persist.PoolCPUKey(ifindex, uint32(g)))
		}
		if line == nil { // no room: this process's own
			line = make([]uint64, persist.LineWords)
		}
		if atomic.LoadUint64(&line[0]) != base {
			for i := range line {
				atomic.StoreUint64(&line[i], 0)
			}
			atomic.StoreUint64(&line[0], base)
		}
		for i := 1; i < len(line) && g*per+i-1 < len(p.cpu); i++ {
			p.cpu[g*per+i-1] = atomic.LoadUint64(&line[i])
			p.inCPUs += p.cpu[g*per+i-1]
		}
		p.cpuLines = append(p.cpuLines, line)
	}
	return p
}

// free forgets the persistent counts of port ifindex (no longer sampled).
func (p *portPool) free(state *persist.Store, ifindex uint32) {
	state.Free(persist.PoolSumKey(ifindex))
	per := persist.LineWords - 1
	for g := 0; g*per < runtime.NumCPU(); g++ {
		state.Free(persist.PoolCPUKey(ifindex, uint32(g)))
	}
}

// mark notes that sample rec (its worker's number for it) is about to
// change the pool: what it changes is kept as it was (pre), for persist.
func (p *portPool) mark(rec uint64) {
	p.rec = rec
	p.pre.in, p.pre.out, p.pre.last, p.pre.cpu = p.inAll, p.outAll, p.last, -1
}

// persist writes the pool's counts to its lines of the persistent state:
// all of them, or, when uncommitted is the number of the sample being
// handled and that sample changed the pool (mark), the counts as they were
// before it.
//
// The state must never be ahead of the ring position (dataplane
// ringReader.commit): a process that takes the ring over reads the
// records after that position again, and a pool kept from one of them
// would raise theirs (the +1 guard of at) and every pool after them, for
// good. So the worker persists when the position is stored: before each
// send (the position then stops at the sample being handled, whose
// sample waits in the next datagram) and after each batch (the position
// covers it whole). Behind is harmless: a record carries the kernel's
// every-CPU sum of its frame. Plain stores, read by the next program only;
// a few words per port per send, none per sample.
func (p *portPool) persist(uncommitted uint64) {
	in, out, last := p.inAll, p.outAll, p.last
	undo := uncommitted != 0 && p.rec == uncommitted
	if undo {
		in, out, last = p.pre.in, p.pre.out, p.pre.last
	}
	p.sums[sumIn], p.sums[sumOut], p.sums[sumLast] = in, out, last
	if !p.cpuDirty {
		return
	}
	per := persist.LineWords - 1
	for c, v := range p.cpu {
		if undo && c == p.pre.cpu {
			v = p.pre.cpuVal
		}
		if g := c / per; g < len(p.cpuLines) { // CPUs beyond NumCPU: this process's only
			atomic.StoreUint64(&p.cpuLines[g][1+c%per], v)
		}
	}
	p.cpuDirty = undo && p.pre.cpu >= 0
}

// maxCPUs bounds the per-port CPU table against a corrupt record.
const maxCPUs = 1 << 14

// at returns the port's pool (without base) at a sample: of the sample's
// direction, all is the kernel's every-CPU sum (PacketSample.PoolSum);
// otherwise cpuPool is the sampling CPU's count, recorded. It allocates
// only the first time a CPU beyond runtime.NumCPU is seen.
func (p *portPool) at(egress, all bool, cpu uint32, cpuPool uint64) uint64 {
	switch {
	case all && egress:
		p.outAll = max(p.outAll, cpuPool)
	case all:
		p.inAll = max(p.inAll, cpuPool)
	case cpu >= maxCPUs:
		return p.last
	case egress:
		if int(cpu) >= len(p.out) {
			p.out = append(p.out, make([]uint64, int(cpu)+1-len(p.out))...)
		}
		if old := p.out[cpu]; cpuPool > old {
			p.outCPUs += cpuPool - old
			p.out[cpu] = cpuPool
		}
	default:
		if int(cpu) >= len(p.cpu) {
			p.cpu = append(p.cpu, make([]uint64, int(cpu)+1-len(p.cpu))...)
		}
		if old := p.cpu[cpu]; cpuPool > old {
			p.inCPUs += cpuPool - old
			p.pre.cpu, p.pre.cpuVal = int(cpu), old
			p.cpu[cpu] = cpuPool
			p.cpuDirty = true
		}
	}
	pool := max(p.inCPUs, p.inAll) + max(p.outCPUs, p.outAll)
	if pool <= p.last {
		// A sum read while another CPU's sample was being taken, or a
		// record of an older program: still a frame after the previous.
		pool = p.last + 1
	}
	p.last = pool
	return pool
}

// late returns the pool (without base) of a sample delivered after samples
// taken later (its record waited for its frame, dataplane/bpf/transit.h): all is
// the kernel's every-CPU sum of its direction at its frame, to which the
// other direction's pool adds. It keeps the pools of the samples in
// sequence as they are: it only raises the direction's sum, should this
// one be the largest seen.
func (p *portPool) late(egress bool, all uint64) uint64 {
	if egress {
		p.outAll = max(p.outAll, all)
		return all + max(p.inCPUs, p.inAll)
	}
	p.inAll = max(p.inAll, all)
	return all + max(p.outCPUs, p.outAll)
}
