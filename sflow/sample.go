package sflow

import (
	"fmt"
)

// Sample formats of sample_data (spec "sample_record").
var (
	FormatFlowSample            = Format(0, 1)
	FormatCounterSample         = Format(0, 2)
	FormatFlowSampleExpanded    = Format(0, 3)
	FormatCounterSampleExpanded = Format(0, 4)
)

// SampleTypeName returns the spec's name of a sample_record format, or
// "unknown".
func SampleTypeName(f DataFormat) string {
	switch f {
	case FormatFlowSample:
		return "flow_sample"
	case FormatCounterSample:
		return "counters_sample"
	case FormatFlowSampleExpanded:
		return "flow_sample_expanded"
	case FormatCounterSampleExpanded:
		return "counters_sample_expanded"
	case FormatRTMetric:
		return "rtmetric"
	case FormatRTFlow:
		return "rtflow"
	case FormatDiscardedPacket:
		return "discarded_packet"
	}
	return "unknown"
}

// Data source types (spec "sFlowDataSource"; sflow_application.txt adds
// type 3 for entLogicalEntry data sources).
const (
	SourceIfIndex          uint32 = 0
	SourceSmonVlan         uint32 = 1
	SourceEntPhysicalEntry uint32 = 2
	SourceEntLogicalEntry  uint32 = 3
)

// DataSource is an sFlowDataSource: a type and an index. In the compact
// sample forms the type takes 8 bits and the index 24.
type DataSource struct {
	Type  uint32
	Index uint32
}

// fitsCompact reports whether the data source fits the compact encoding.
func (d DataSource) fitsCompact() bool { return d.Type <= 0xff && d.Index <= 0xffffff }

func (d DataSource) String() string { return fmt.Sprintf("%d:%d", d.Type, d.Index) }

// appendXDR appends d in the expanded form (type and index words) or the
// compact one (type in the top 8 bits, index in the low 24).
func (d DataSource) appendXDR(b []byte, expanded bool) []byte {
	if expanded {
		b = appendUint32(b, d.Type)
		return appendUint32(b, d.Index)
	}
	return appendUint32(b, d.Type<<24|d.Index)
}

// decodeDataSource reads a data source in the expanded or compact form.
func decodeDataSource(r *reader, expanded bool) DataSource {
	if expanded {
		return DataSource{Type: r.uint32(), Index: r.uint32()}
	}
	v := r.uint32()
	return DataSource{Type: v >> 24, Index: v & 0xffffff}
}

// Interface formats (spec "interface").
const (
	InterfaceSingle    uint32 = 0 // Value is an ifIndex.
	InterfaceDiscarded uint32 = 1 // Value is a discard reason code.
	InterfaceMultiple  uint32 = 2 // Value is a count of output interfaces, 0 = unknown > 1.
)

// IfIndexInternal is the single-interface value meaning the packet was
// sourced by or destined to the device itself (spec "interface",
// format 0, value 0x3FFFFFFF).
const IfIndexInternal uint32 = 0x3FFFFFFF

// Interface is an input or output interface of a flow sample. The zero
// value means "unknown".
type Interface struct {
	Format uint32
	Value  uint32
}

// IfIndex returns a single-interface Interface.
func IfIndex(i uint32) Interface { return Interface{Format: InterfaceSingle, Value: i} }

// fitsCompact reports whether i fits the compact 2+30 bit encoding.
func (i Interface) fitsCompact() bool { return i.Format <= 3 && i.Value <= 0x3FFFFFFF }

func (i Interface) compact() uint32 { return i.Format<<30 | i.Value }

func interfaceFromCompact(v uint32) Interface {
	return Interface{Format: v >> 30, Value: v & 0x3FFFFFFF}
}

// Sample is one sample_record of a datagram: *FlowSample, *CounterSample,
// *DiscardedPacket or *UnknownSample.
type Sample interface {
	// SampleFormat is the sample_type the sample is encoded with, which
	// depends on whether its indexes fit the compact form.
	SampleFormat() DataFormat
	// appendBody appends the sample_data structure.
	appendBody(b []byte) []byte
}

// FlowSample is a flow_sample (format 1) or flow_sample_expanded (3).
type FlowSample struct {
	SequenceNumber uint32
	Source         DataSource
	SamplingRate   uint32
	SamplePool     uint32
	Drops          uint32
	Input          Interface
	Output         Interface
	Records        []Record
	// Expanded forces the expanded encoding. It is also used whenever the
	// source or an interface does not fit the compact one; the decoder sets
	// it when it read an expanded sample.
	Expanded bool
}

// SampleFormat implements Sample.
func (s *FlowSample) SampleFormat() DataFormat {
	if s.Expanded || !s.Source.fitsCompact() || !s.Input.fitsCompact() || !s.Output.fitsCompact() {
		return FormatFlowSampleExpanded
	}
	return FormatFlowSample
}

func (s *FlowSample) appendBody(b []byte) []byte {
	b = appendUint32(b, s.SequenceNumber)
	expanded := s.SampleFormat() == FormatFlowSampleExpanded
	b = s.Source.appendXDR(b, expanded)
	b = appendUint32(b, s.SamplingRate)
	b = appendUint32(b, s.SamplePool)
	b = appendUint32(b, s.Drops)
	if expanded {
		b = appendUint32(b, s.Input.Format)
		b = appendUint32(b, s.Input.Value)
		b = appendUint32(b, s.Output.Format)
		b = appendUint32(b, s.Output.Value)
	} else {
		b = appendUint32(b, s.Input.compact())
		b = appendUint32(b, s.Output.compact())
	}
	return appendRecords(b, s.Records)
}

// CounterSample is a counters_sample (format 2) or
// counters_sample_expanded (4).
type CounterSample struct {
	SequenceNumber uint32
	Source         DataSource
	Records        []Record
	// Expanded forces the expanded encoding (see FlowSample.Expanded).
	Expanded bool
}

// SampleFormat implements Sample.
func (s *CounterSample) SampleFormat() DataFormat {
	if s.Expanded || !s.Source.fitsCompact() {
		return FormatCounterSampleExpanded
	}
	return FormatCounterSample
}

func (s *CounterSample) appendBody(b []byte) []byte {
	b = appendUint32(b, s.SequenceNumber)
	b = s.Source.appendXDR(b, s.SampleFormat() == FormatCounterSampleExpanded)
	return appendRecords(b, s.Records)
}

// AppendSample appends a complete sample_record (sample_type, length and
// sample_data) to b. It does not allocate.
func AppendSample(b []byte, s Sample) []byte {
	b = appendUint32(b, uint32(s.SampleFormat()))
	b, off := beginLength(b)
	b = s.appendBody(b)
	return endLength(b, off)
}

// UnknownSample is a sample_record of a format the decoder does not know,
// kept as opaque bytes.
type UnknownSample struct {
	DataFormat DataFormat
	Data       []byte
}

// SampleFormat implements Sample.
func (u *UnknownSample) SampleFormat() DataFormat { return u.DataFormat }

func (u *UnknownSample) appendBody(b []byte) []byte { return appendFixedOpaque(b, u.Data) }

// decodeFlowSample reads a flow_sample or flow_sample_expanded body.
func decodeFlowSample(r *reader, expanded bool) *FlowSample {
	s := &FlowSample{Expanded: expanded}
	s.SequenceNumber = r.uint32()
	s.Source = decodeDataSource(r, expanded)
	s.SamplingRate = r.uint32()
	s.SamplePool = r.uint32()
	s.Drops = r.uint32()
	if expanded {
		s.Input = Interface{Format: r.uint32(), Value: r.uint32()}
		s.Output = Interface{Format: r.uint32(), Value: r.uint32()}
	} else {
		s.Input = interfaceFromCompact(r.uint32())
		s.Output = interfaceFromCompact(r.uint32())
	}
	s.Records = decodeRecords(r, flowRecords)
	return s
}

// decodeCounterSample reads a counters_sample or counters_sample_expanded
// body.
func decodeCounterSample(r *reader, expanded bool) *CounterSample {
	s := &CounterSample{Expanded: expanded}
	s.SequenceNumber = r.uint32()
	s.Source = decodeDataSource(r, expanded)
	s.Records = decodeRecords(r, counterRecords)
	return s
}
