package agent

import "runtime"

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
// A port sampled both ways has a count per CPU in each direction (the
// kernel's ingress and egress counters): its pool is the sum of both, the
// data source covering both directions.
type portPool struct {
	base uint64   // pool of earlier attachments (identifies this attachment)
	cpu  []uint64 // latest reported ingress pool per CPU
	out  []uint64 // latest reported egress pool per CPU
	sum  uint64   // sum of cpu and out
}

func newPortPool(base uint64) *portPool {
	return &portPool{base: base, cpu: make([]uint64, runtime.NumCPU()), out: make([]uint64, runtime.NumCPU())}
}

// maxCPUs bounds the per-port CPU table against a corrupt record.
const maxCPUs = 1 << 14

// at records that cpu's pool is cpuPool and returns the port's pool (without
// base) at that sample. It allocates only the first time a CPU beyond
// runtime.NumCPU is seen.
func (p *portPool) at(egress bool, cpu uint32, cpuPool uint64) uint64 {
	t := &p.cpu
	if egress {
		t = &p.out
	}
	if int(cpu) >= len(*t) {
		if cpu >= maxCPUs {
			return p.sum
		}
		*t = append(*t, make([]uint64, int(cpu)+1-len(*t))...)
	}
	if old := (*t)[cpu]; cpuPool > old {
		p.sum += cpuPool - old
		(*t)[cpu] = cpuPool
	}
	return p.sum
}
