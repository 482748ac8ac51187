package sflow

import (
	"errors"
	"net/netip"
	"testing"
)

// ctrAddRestarting adds s to w, starting a new datagram when the current
// one is full, as a sub-agent flushing full datagrams does.
func ctrAddRestarting(w *DatagramWriter, s Sample, seq *uint32) error {
	err := w.Add(s)
	if errors.Is(err, ErrDatagramFull) {
		*seq++
		w.Begin(*seq, 0)
		err = w.Add(s)
	}
	return err
}

func ctrBenchWriter(b testing.TB) *DatagramWriter {
	w, err := NewDatagramWriter(netip.MustParseAddr("198.18.0.1"), 0, DefaultMaxDatagramSize)
	if err != nil {
		b.Fatal(err)
	}
	w.Begin(1, 0)
	return w
}

// BenchmarkEncodeCounterSample appends a counters_sample with if_counters
// and ethernet_counters (one port poll) into a DatagramWriter.
func BenchmarkEncodeCounterSample(b *testing.B) {
	w := ctrBenchWriter(b)
	ifc, eth := ctrTestIf(12), ctrTestEth(1000)
	s := &CounterSample{Source: DataSource{SourceIfIndex, 12}, Records: []Record{ifc, eth}}
	seq := uint32(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.SequenceNumber = uint32(i)
		ifc.IfInOctets += 1500
		if err := ctrAddRestarting(w, s, &seq); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeHostCounters appends a counters_sample with host_cpu,
// host_memory, host_net_io and host_disk_io (one host poll).
func BenchmarkEncodeHostCounters(b *testing.B) {
	w := ctrBenchWriter(b)
	s := &CounterSample{Source: DataSource{SourceEntPhysicalEntry, 1}, Records: []Record{
		ctrTestHostCPU(), ctrTestHostMemory(), ctrTestHostNetIO(), ctrTestHostDiskIO(),
	}}
	seq := uint32(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.SequenceNumber = uint32(i)
		if err := ctrAddRestarting(w, s, &seq); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCounterEncodingDoesNotAllocate checks that appending every counter
// record type, framed in a counters sample, into a DatagramWriter
// allocates nothing once the writer exists.
func TestCounterEncodingDoesNotAllocate(t *testing.T) {
	records := append([]Record{ctrTestIf(3), ctrTestEth(1)}, ctrHostTestRecords()...)
	records = append(records, ctrAppTestRecords()...)
	w := ctrBenchWriter(t)
	seq := uint32(1)
	for _, rec := range records {
		s := &CounterSample{SequenceNumber: 1, Source: DataSource{0, 3}, Records: []Record{rec}}
		allocs := testing.AllocsPerRun(200, func() {
			if err := ctrAddRestarting(w, s, &seq); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per encoded sample, want 0", rec.Name(), allocs)
		}
	}
}
