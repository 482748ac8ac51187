package sflow

import (
	"fmt"
	"net/netip"
)

// Version is the datagram version this package speaks.
const Version = 5

// Datagram is a sample_datagram_v5 (spec "sample_datagram_v5").
type Datagram struct {
	// AgentAddress is sFlowAgentAddress; the zero Addr encodes as the
	// "unknown" address type.
	AgentAddress   netip.Addr
	SubAgentID     uint32
	SequenceNumber uint32
	// Uptime is the agent's uptime in milliseconds.
	Uptime  uint32
	Samples []Sample
}

// headerSize returns the encoded size of the datagram header (up to and
// including the sample count) for agent address a.
func headerSize(a netip.Addr) int {
	switch {
	case a.Is4():
		return 4 + 4 + 4 + 4 + 4 + 4 + 4
	case a.Is6():
		return 4 + 4 + 16 + 4 + 4 + 4 + 4
	default:
		return 4 + 4 + 4 + 4 + 4 + 4
	}
}

// appendHeader appends the datagram header with nsamples as the count.
func appendHeader(b []byte, d *Datagram, nsamples int) []byte {
	b = appendUint32(b, Version)
	b = appendAddress(b, d.AgentAddress)
	b = appendUint32(b, d.SubAgentID)
	b = appendUint32(b, d.SequenceNumber)
	b = appendUint32(b, d.Uptime)
	return appendUint32(b, uint32(nsamples))
}

// AppendXDR appends the whole datagram to b. It does not check a maximum
// size; DatagramWriter does.
func (d *Datagram) AppendXDR(b []byte) []byte {
	b = appendHeader(b, d, len(d.Samples))
	for _, s := range d.Samples {
		b = AppendSample(b, s)
	}
	return b
}

// minSampleSize is the smallest possible sample_record: type and length.
const minSampleSize = 8

// Decode parses one datagram strictly: the version must be 5, every
// declared count and length must match the bytes present, known records
// must fill their declared length exactly, and no bytes may follow the last
// sample. Unknown sample and record formats are kept as opaque. The result
// does not alias b. Errors are *DecodeError.
func Decode(b []byte) (*Datagram, error) {
	r := newReader(b, "datagram")
	d := &Datagram{}
	if v := r.uint32(); r.err == nil && v != Version {
		r.failAt(0, fmt.Errorf("%w: %d", ErrVersion, v))
	}
	d.AgentAddress = r.address()
	d.SubAgentID = r.uint32()
	d.SequenceNumber = r.uint32()
	d.Uptime = r.uint32()
	n := r.count(minSampleSize)
	if r.err != nil {
		return nil, r.err
	}
	d.Samples = make([]Sample, 0, n)
	for i := 0; i < n; i++ {
		f := DataFormat(r.uint32())
		name := SampleTypeName(f)
		if name == "unknown" {
			name = "unknown(" + f.String() + ")"
		}
		sub := r.element("sample", i, name, "datagram")
		if sub == nil {
			return nil, r.err
		}
		var s Sample
		switch f {
		case FormatFlowSample, FormatFlowSampleExpanded:
			s = decodeFlowSample(sub, f == FormatFlowSampleExpanded)
		case FormatCounterSample, FormatCounterSampleExpanded:
			s = decodeCounterSample(sub, f == FormatCounterSampleExpanded)
		case FormatRTMetric:
			s = decodeRTMetricSample(sub)
		case FormatRTFlow:
			s = decodeRTFlowSample(sub)
		case FormatDiscardedPacket:
			s = decodeDiscardedPacket(sub)
		default:
			s = &UnknownSample{DataFormat: f, Data: append([]byte(nil), sub.bytes(sub.remaining())...)}
		}
		if err := sub.finish(); err != nil {
			return nil, err
		}
		d.Samples = append(d.Samples, s)
	}
	if r.remaining() != 0 {
		r.fail(fmt.Errorf("%w: %d bytes after the last sample", ErrTrailing, r.remaining()))
		return nil, r.err
	}
	return d, nil
}
