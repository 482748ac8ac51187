package persist

import (
	"errors"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// TestAdoptContinues: a second Open of the same memory (the next process)
// finds every claimed value and the first process's start.
func TestAdoptContinues(t *testing.T) {
	mem := make([]byte, Words(8)*8)
	s, err := Open(mem)
	if err != nil {
		t.Fatal(err)
	}
	if s.Adopted() {
		t.Fatal("fresh memory adopted")
	}
	v, err := s.Claim(SamplerKey(7, 1))
	if err != nil {
		t.Fatal(err)
	}
	*v = 41
	p, _ := s.Claim(PollerKey(2, 1, 1))
	*p = 9
	time.Sleep(20 * time.Millisecond)

	s2, err := Open(mem)
	if err != nil {
		t.Fatal(err)
	}
	if !s2.Adopted() {
		t.Fatal("not adopted")
	}
	// The start is rebuilt from the monotonic clock and the wall clock,
	// read one after the other: they can be apart by more than a
	// millisecond under emulation (1.36 ms in the 6.12 VM), so the bound
	// scales.
	if d, bound := s2.Start().Sub(s.Start()), testutil.Scaled(time.Millisecond); d < -bound || d > bound {
		t.Errorf("adopted start differs by %v (bound %v)", d, bound)
	}
	if time.Since(s2.Start()) < 20*time.Millisecond {
		t.Errorf("uptime restarted: %v", time.Since(s2.Start()))
	}
	v2, _ := s2.Claim(SamplerKey(7, 1))
	if *v2 != 41 {
		t.Errorf("sampler value %d, want 41", *v2)
	}
	// Not claimed by the second process: swept.
	if n := s2.Sweep(); n != 1 {
		t.Errorf("Sweep freed %d, want 1", n)
	}
	p2, _ := s2.Claim(PollerKey(2, 1, 1))
	if *p2 != 0 {
		t.Errorf("swept poller value %d, want 0 (new)", *p2)
	}
}

// TestClaimFree: keys are distinct, the region fills, Free makes room.
func TestClaimFree(t *testing.T) {
	s := New(3)
	keys := []Key{SamplerKey(1, 1), StreamKey(0, 1), PoolBaseKey(1)}
	for i, k := range keys {
		v, err := s.Claim(k)
		if err != nil {
			t.Fatal(err)
		}
		*v = uint64(i + 1)
	}
	if _, err := s.Claim(SamplerKey(1, 2)); !errors.Is(err, ErrFull) {
		t.Fatalf("4th claim: %v, want ErrFull", err)
	}
	s.Free(StreamKey(0, 1))
	v, err := s.Claim(SamplerKey(1, 2))
	if err != nil || *v != 0 {
		t.Fatalf("claim after free: %v value %d", err, *v)
	}
	if v, _ := s.Claim(SamplerKey(1, 1)); *v != 1 {
		t.Errorf("value of a kept key changed: %d", *v)
	}
}

// TestResetOtherLayout: memory not written by this layout (another
// version, another size, garbage) is reset, never read.
func TestResetOtherLayout(t *testing.T) {
	mem := make([]byte, Words(4)*8)
	s, _ := Open(mem)
	v, _ := s.Claim(SamplerKey(3, 1))
	*v = 77
	mem[3*8] = version + 1 // another layout version
	s2, _ := Open(mem)
	if s2.Adopted() || s2.Used() != 0 {
		t.Errorf("other version adopted (%v) with %d keys", s2.Adopted(), s2.Used())
	}
	s3, _ := Open(mem[:Words(3)*8]) // another size
	if s3.Adopted() {
		t.Error("other size adopted")
	}
}
