package portstats

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// TestSumZero: the counters a port's CPUs wrote into a real BPF_F_MMAPABLE
// array (through the map, as the kernel's programs would) are summed per
// slot through the mapping, other slots untouched; Zero clears the slot's
// pool, samples, drops, skip and rate on every CPU and nothing else.
func TestSumZero(t *testing.T) {
	const ports, cpus = 3, 4
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: counterSize,
		MaxEntries: ports * cpus, Flags: unix.BPF_F_MMAPABLE})
	if err != nil {
		t.Fatalf("mmapable array: %v", err)
	}
	defer m.Close()
	line := func(slot, cpu int) []byte {
		b := make([]byte, counterSize)
		v := uint64(slot*100 + cpu + 1)
		binary.NativeEndian.PutUint64(b[offPool:], v*1000)
		binary.NativeEndian.PutUint64(b[offSamples:], v*10)
		binary.NativeEndian.PutUint64(b[offDrops:], v)
		binary.NativeEndian.PutUint64(b[offSkip:], 7)
		binary.NativeEndian.PutUint32(b[offRate:], 64)
		binary.NativeEndian.PutUint64(b[40:], 0xfeed) // past the fields Zero clears
		return b
	}
	for slot := 0; slot < ports; slot++ {
		for cpu := 0; cpu < cpus; cpu++ {
			if err := m.Put(uint32(slot*cpus+cpu), line(slot, cpu)); err != nil {
				t.Fatal(err)
			}
		}
	}
	pages, err := Map(m, ports, cpus)
	if err != nil {
		t.Fatal(err)
	}
	for slot := 0; slot < ports; slot++ {
		var want Counters
		for cpu := 0; cpu < cpus; cpu++ {
			v := uint64(slot*100 + cpu + 1)
			want.Pool += v * 1000
			want.Samples += v * 10
			want.Drops += v
		}
		if got := pages.Sum(uint32(slot)); got != want {
			t.Errorf("slot %d: %+v, want %+v", slot, got, want)
		}
	}
	pages.Zero(1)
	if got := pages.Sum(1); got != (Counters{}) {
		t.Errorf("slot 1 after Zero: %+v", got)
	}
	if got, want := pages.Sum(2).Pool, uint64((201+202+203+204)*1000); got != want {
		t.Errorf("slot 2's pool %d after slot 1 was zeroed, want %d", got, want)
	}
	for cpu := 0; cpu < cpus; cpu++ {
		b, err := m.LookupBytes(uint32(1*cpus + cpu))
		if err != nil {
			t.Fatal(err)
		}
		for _, off := range []int{offPool, offSamples, offDrops, offSkip, offRate} {
			if v := binary.NativeEndian.Uint64(b[off:]); v != 0 {
				t.Errorf("cpu %d: offset %d is %d after Zero", cpu, off, v)
			}
		}
		if v := binary.NativeEndian.Uint64(b[40:]); v != 0xfeed {
			t.Errorf("cpu %d: Zero touched offset 40 (%#x)", cpu, v)
		}
	}
	if err := pages.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pages.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
