package sflow

import (
	"errors"
	"net/netip"
	"testing"
)

// benchFlowSample returns the per-packet sample of the inline sampling
// path: a flow_sample with a 128-byte sampled_header (the default
// sFlowFsMaximumHeaderSize) and an extended_switch record.
func benchFlowSample() *FlowSample {
	hdr := make([]byte, 128)
	copy(hdr, testFrame())
	return &FlowSample{
		Source: DataSource{SourceIfIndex, 7}, SamplingRate: 1024, Input: IfIndex(7), Output: IfIndex(9),
		Records: []Record{
			&SampledHeader{Protocol: HeaderProtocolEthernet, FrameLength: 1518, Stripped: 4, Header: hdr},
			&ExtendedSwitch{SrcVLAN: 10, SrcPriority: 3, DstVLAN: 10, DstPriority: 3},
		},
	}
}

// encodeFlowSample adds s to w, starting a new datagram when w is full, as
// a sub-agent's encoding worker does (the flush itself is left out).
func encodeFlowSample(w *DatagramWriter, s *FlowSample, seq *uint32) error {
	s.SequenceNumber++
	s.SamplePool += s.SamplingRate
	err := w.Add(s)
	if errors.Is(err, ErrDatagramFull) {
		*seq++
		w.Begin(*seq, 0)
		err = w.Add(s)
	}
	return err
}

// TestEncodeFlowSampleAllocs checks the hot-path rule: encoding a flow
// sample into a DatagramWriter allocates nothing.
func TestEncodeFlowSampleAllocs(t *testing.T) {
	w, err := NewDatagramWriter(netip.MustParseAddr("198.18.0.1"), 0, DefaultMaxDatagramSize)
	if err != nil {
		t.Fatal(err)
	}
	s := benchFlowSample()
	var seq uint32
	w.Begin(seq, 0)
	allocs := testing.AllocsPerRun(1000, func() {
		if err := encodeFlowSample(w, s, &seq); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per encoded flow sample, want 0", allocs)
	}
	if seq == 0 {
		t.Fatal("the writer never filled up: the Begin path was not exercised")
	}
	if _, err := Decode(w.Bytes()); err != nil {
		t.Fatalf("encoded datagram does not decode: %v", err)
	}
}

func BenchmarkEncodeFlowSample(b *testing.B) {
	w, err := NewDatagramWriter(netip.MustParseAddr("198.18.0.1"), 0, DefaultMaxDatagramSize)
	if err != nil {
		b.Fatal(err)
	}
	s := benchFlowSample()
	var seq uint32
	w.Begin(seq, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := encodeFlowSample(w, s, &seq); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeFlowSample decodes a full datagram (1400 bytes max) of
// such flow samples and reports the cost per sample.
func BenchmarkDecodeFlowSample(b *testing.B) {
	w, err := NewDatagramWriter(netip.MustParseAddr("198.18.0.1"), 0, DefaultMaxDatagramSize)
	if err != nil {
		b.Fatal(err)
	}
	s := benchFlowSample()
	w.Begin(1, 0)
	for w.Add(s) == nil {
		s.SequenceNumber++
	}
	wire := append([]byte(nil), w.Bytes()...)
	n := w.Len()
	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := Decode(wire)
		if err != nil {
			b.Fatal(err)
		}
		if len(d.Samples) != n {
			b.Fatalf("%d samples, want %d", len(d.Samples), n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
}
