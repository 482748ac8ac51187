package bpf

import "testing"

// TestSumPerCPU: each field is the sum of its namesake over the CPUs; a
// field with no namesake keeps its value.
func TestSumPerCPU(t *testing.T) {
	per := []DropsDropStats{
		{Drops: 1, Notified: 2, Suppressed: 3, RingFull: 4, Uncounted: 5},
		{Drops: 10, Notified: 20, Suppressed: 30, RingFull: 40, Uncounted: 50},
		{Drops: 100, Notified: 200, Suppressed: 300, RingFull: 400, Uncounted: 500},
	}
	var got struct {
		Drops, Notified, Suppressed, RingFull, Uncounted uint64
		BufferLost                                       uint64
	}
	got.BufferLost = 7
	SumPerCPU(&got, per)
	if got.Drops != 111 || got.Notified != 222 || got.Suppressed != 333 || got.RingFull != 444 || got.Uncounted != 555 || got.BufferLost != 7 {
		t.Errorf("sum %+v", got)
	}
	if s := Sum([]uint64{1, 2, 3, 1 << 40}); s != 6+1<<40 {
		t.Errorf("Sum = %d", s)
	}
}
