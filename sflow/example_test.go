package sflow_test

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Encode a datagram holding one flow sample with a sampled Ethernet header,
// then decode it again with the strict decoder.
func Example() {
	w, err := sflow.NewDatagramWriter(netip.MustParseAddr("198.18.0.1"), 0, 1400)
	if err != nil {
		panic(err)
	}
	frame := make([]byte, 64) // the first bytes of a sampled frame
	sample := &sflow.FlowSample{
		SequenceNumber: 1,
		Source:         sflow.DataSource{Type: sflow.SourceIfIndex, Index: 7},
		SamplingRate:   1000,
		SamplePool:     1000,
		Input:          sflow.IfIndex(7),
		Output:         sflow.IfIndex(9),
		Records: []sflow.Record{&sflow.SampledHeader{
			Protocol: sflow.HeaderProtocolEthernet, FrameLength: 68, Stripped: 4, Header: frame,
		}},
	}
	w.Begin(1, 5000) // datagram sequence number 1, uptime 5 s
	if err := w.Add(sample); err != nil {
		panic(err)
	}
	d, err := sflow.Decode(w.Bytes())
	if err != nil {
		panic(err)
	}
	fs := d.Samples[0].(*sflow.FlowSample)
	fmt.Println(d.AgentAddress, d.SequenceNumber, len(d.Samples))
	fmt.Println(fs.Source, fs.SamplingRate, fs.Input.Value, fs.Output.Value)
	// Output:
	// 198.18.0.1 1 1
	// 0:7 1000 7 9
}

// DatagramWriter keeps every datagram under the receiver's maximum size: a
// sample that does not fit is refused with ErrDatagramFull, the full
// datagram is sent, and the sample starts the next one.
func ExampleDatagramWriter() {
	w, err := sflow.NewDatagramWriter(netip.MustParseAddr("198.18.0.1"), 0, 300)
	if err != nil {
		panic(err)
	}
	seq := uint32(1)
	w.Begin(seq, 0)
	var sent []int
	for i := range 5 {
		s := &sflow.CounterSample{SequenceNumber: uint32(i), Source: sflow.DataSource{Type: sflow.SourceIfIndex, Index: 3},
			Records: []sflow.Record{&sflow.IfCounters{IfIndex: 3, IfType: 6}}}
		if err := w.Add(s); errors.Is(err, sflow.ErrDatagramFull) {
			sent = append(sent, w.Len()) // send w.Bytes() here
			seq++
			w.Begin(seq, 0)
			err = w.Add(s)
		}
		if err != nil {
			panic(err)
		}
	}
	sent = append(sent, w.Len())
	fmt.Println("samples per datagram:", sent)
	// Output:
	// samples per datagram: [2 2 1]
}

// A malformed datagram is reported as a *DecodeError naming the structure
// and the byte offset.
func ExampleDecode_error() {
	_, err := sflow.Decode([]byte{0, 0, 0, 4}) // version 4
	var de *sflow.DecodeError
	if errors.As(err, &de) {
		fmt.Println(de.Structure, de.Offset)
	}
	// Output:
	// datagram 0
}
