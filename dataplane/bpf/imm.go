package bpf

import (
	"fmt"

	"github.com/cilium/ebpf/asm"
)

// Magic 64-bit immediates of sampler.h (PORT_IMM_*) that patchImm replaces
// with a port's values.
const (
	immCounterBase = 0x5f5f5eb1c0b4a5e1
	immMode        = 0x5f5f5eb1c0b4a5e2
	immIfIndex     = 0x5f5f5eb1c0b4a5e3
)

// PatchPortImms patches a port's own program instance (sampler.h,
// "Per-port constants"): its counter lines' base (slot * cpuSlots) and
// its ifindex, and the delivery mode where the program has one
// (xdp_sampler).
func PatchPortImms(insns asm.Instructions, ifindex int, slot uint32, cpuSlots int, mode ...uint32) error {
	imms := []struct{ magic, v uint64 }{
		{immCounterBase, uint64(slot) * uint64(cpuSlots)},
		{immIfIndex, uint64(ifindex)},
	}
	for _, m := range mode {
		imms = append(imms, struct{ magic, v uint64 }{immMode, uint64(m)})
	}
	for _, p := range imms {
		if err := patchImm(insns, p.magic, p.v); err != nil {
			return err
		}
	}
	return nil
}

// patchImm sets every 64-bit immediate load of magic in insns to v; the
// program must hold at least one.
func patchImm(insns asm.Instructions, magic, v uint64) error {
	n := 0
	for i := range insns {
		if insns[i].OpCode.IsDWordLoad() && uint64(insns[i].Constant) == magic {
			insns[i].Constant = int64(v)
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("dataplane: sampler has no immediate %#x to patch (dataplane/bpf/sampler.h PORT_IMM)", magic)
	}
	return nil
}
