package agent

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// pinThread binds the calling OS thread to the i-th CPU (modulo count) of
// those the process may run on, and returns that CPU. The caller must have
// locked the goroutine to its thread.
func pinThread(i int) (int, error) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return -1, fmt.Errorf("reading CPU affinity: %w", err)
	}
	var cpus []int
	for c := 0; c < len(allowed)*64; c++ {
		if allowed.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return -1, fmt.Errorf("no CPU in the affinity mask")
	}
	cpu := cpus[i%len(cpus)]
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return -1, fmt.Errorf("pinning to CPU %d: %w", cpu, err)
	}
	return cpu, nil
}
