package agent

import (
	"runtime"
	"sync/atomic"

	"github.com/sflowswitchd/sflowswitchd/agent/persist"
)

// portPool is a port's sample_pool at sample time, as one worker knows it.
//
// The kernel counts a port's frames per CPU, and each ring record carries
// the sampling CPU's count at the sampled frame (PacketSample.CPUPool). The
// pool of a sample is that count plus every other CPU's count as its own
// latest sample reported it: the frames that could have been sampled up to
// this one (sflow_version_5.txt section 4, flow_sample.sample_pool), as far
// as the samples tell. Chosen over reading the other CPUs' live counters
// when the sample is encoded: those are read later than the sample was
// taken, so they would count frames that arrived after it, and a later
// sample could then carry a smaller pool. With sample-reported counts:
//   - a port's records reach one worker in the order each CPU reserved
//     them, and a CPU's count only grows, so each CPU's term never
//     decreases and the sampling CPU's term grows with every sample: the
//     pools of consecutive samples are strictly increasing;
//   - the pool undercounts by the frames other CPUs received since their
//     own last sample (on average fewer than one sampling interval per
//     other CPU); the port's total (counters, MIB, metrics) stays exact,
//     read from the kernel's counters.
//
// The per-CPU counts live in the agent's persistent state (agent/persist,
// lines of PoolCPUKey) when it has room: a program that takes the
// samplers over (an upgrade, a restart after a crash) continues them, so
// the pools of the samples that waited in the ring do not run backwards.
//
// A port sampled both ways has a count per CPU in each direction (the
// kernel's ingress and egress counters): its pool is the sum of both, the
// data source covering both directions. Only the ingress counts are kept
// in the persistent state: an egress sampler is not pinned (dataplane
// pins ingress attachments only), so a take-over attaches it anew.
type portPool struct {
	base uint64    // pool of earlier attachments (identifies this attachment)
	cpu  []*uint64 // latest reported ingress pool per CPU
	out  []uint64  // latest reported egress pool per CPU
	sum  uint64    // sum of cpu and out
}

// newPortPool is the pool of port ifindex's attachment over base, its
// per-CPU counts kept in state (nil: in this process only). Counts kept
// there for another attachment (another base) start afresh.
func newPortPool(base uint64, state *persist.Store, ifindex uint32) *portPool {
	p := &portPool{base: base, cpu: make([]*uint64, runtime.NumCPU()), out: make([]uint64, runtime.NumCPU())}
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
			p.cpu[g*per+i-1] = &line[i]
			p.sum += atomic.LoadUint64(&line[i])
		}
	}
	return p
}

// free forgets the persistent counts of port ifindex (no longer sampled).
func (p *portPool) free(state *persist.Store, ifindex uint32) {
	per := persist.LineWords - 1
	for g := 0; g*per < runtime.NumCPU(); g++ {
		state.Free(persist.PoolCPUKey(ifindex, uint32(g)))
	}
}

// maxCPUs bounds the per-port CPU table against a corrupt record.
const maxCPUs = 1 << 14

// at records that cpu's pool is cpuPool and returns the port's pool (without
// base) at that sample. It allocates only the first time a CPU beyond
// runtime.NumCPU is seen.
func (p *portPool) at(egress bool, cpu uint32, cpuPool uint64) uint64 {
	if cpu >= maxCPUs {
		return p.sum
	}
	if egress {
		if int(cpu) >= len(p.out) {
			p.out = append(p.out, make([]uint64, int(cpu)+1-len(p.out))...)
		}
		if old := p.out[cpu]; cpuPool > old {
			p.sum += cpuPool - old
			p.out[cpu] = cpuPool
		}
		return p.sum
	}
	for len(p.cpu) <= int(cpu) {
		p.cpu = append(p.cpu, new(uint64))
	}
	c := p.cpu[cpu]
	if old := *c; cpuPool > old {
		p.sum += cpuPool - old
		atomic.StoreUint64(c, cpuPool)
	}
	return p.sum
}
