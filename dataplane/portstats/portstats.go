// Package portstats reads the samplers' per-port counters (Counters: the
// sFlow sample_pool, the samples taken and the drops) from the per-CPU
// counter arrays the kernel programs write (struct port_counters,
// dataplane/bpf/sampler.h), memory-mapped (Map): summed and zeroed per
// port slot without a system call or a lock, so that workers on every CPU
// can read a port's pool for each flow sample.
package portstats

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Counters are the summed per-CPU counters of one port.
type Counters struct {
	Pool    uint64 // frames seen by the sampler (sFlow sample_pool)
	Samples uint64 // frames selected for sampling
	Drops   uint64 // selected frames that could not be delivered (sFlow drops)
}

// counterSize is the size of one struct port_counters (dataplane/bpf/sampler.h): one
// CPU's pool, samples and drops of one port, padded to a cache line.
const counterSize = 64

// Offsets of the fields in struct port_counters.
const (
	offPool    = 0
	offSamples = 8
	offDrops   = 16
	offSkip    = 24
	offRate    = 32 // u32; cleared with the 8 bytes at this offset
)

// Pages is the memory-mapped BPF_F_MMAPABLE counter array (Map). Element
// slot*cpus+cpu is written only by that CPU (see dataplane/bpf/sampler.h); user space
// reads it with atomic 64-bit loads.
//
// The array is mapped here with unix.Mmap on the map's FD rather than
// through ebpf.Map.Memory, whose ReadAt copies with memmove and so does not
// promise untorn 64-bit reads; sync/atomic loads do.
type Pages struct {
	mem  []byte
	cpus int
}

// Map maps the counter array m of ports port slots and cpus CPUs.
func Map(m *ebpf.Map, ports, cpus int) (*Pages, error) {
	size := ports * cpus * counterSize
	page := os.Getpagesize()
	size = (size + page - 1) / page * page
	mem, err := unix.Mmap(m.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("dataplane: mmap counters (%d bytes): %w", size, err)
	}
	return &Pages{mem: mem, cpus: cpus}, nil
}

// word returns the 64-bit counter at byte offset off. off is always a
// multiple of 8 inside the page-aligned mapping, so the load is aligned.
func (c *Pages) word(off int) *uint64 {
	return (*uint64)(unsafe.Pointer(&c.mem[off]))
}

// Sum adds up the per-CPU counters of slot. Each counter only grows, so
// the sum never runs backwards while the slot is in use.
func (c *Pages) Sum(slot uint32) Counters {
	var pc Counters
	base := int(slot) * c.cpus * counterSize
	for cpu := 0; cpu < c.cpus; cpu++ {
		off := base + cpu*counterSize
		pc.Pool += atomic.LoadUint64(c.word(off + offPool))
		pc.Samples += atomic.LoadUint64(c.word(off + offSamples))
		pc.Drops += atomic.LoadUint64(c.word(off + offDrops))
	}
	return pc
}

// Zero clears all CPUs' counters of slot (only while no config points at
// the slot, so no BPF writer races with it except stragglers of a port
// being detached, which is why dataplane.Dataplane.AttachPort zeroes a slot again before use).
func (c *Pages) Zero(slot uint32) {
	base := int(slot) * c.cpus * counterSize
	for cpu := 0; cpu < c.cpus; cpu++ {
		off := base + cpu*counterSize
		atomic.StoreUint64(c.word(off+offPool), 0)
		atomic.StoreUint64(c.word(off+offSamples), 0)
		atomic.StoreUint64(c.word(off+offDrops), 0)
		// No skip drawn: the CPU's next frame draws its first skip.
		atomic.StoreUint64(c.word(off+offSkip), 0)
		atomic.StoreUint64(c.word(off+offRate), 0)
	}
}

// Close unmaps the array.
func (c *Pages) Close() error {
	if c.mem == nil {
		return nil
	}
	err := unix.Munmap(c.mem)
	c.mem = nil
	if err != nil {
		return fmt.Errorf("dataplane: munmap counters: %w", err)
	}
	return nil
}
