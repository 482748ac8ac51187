package sflow

import (
	"errors"
	"net/netip"
	"testing"
)

func TestUnknownRecordSkippedByLength(t *testing.T) {
	d, err := Decode(readTestdata(t, "unknown_record.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Samples) != 1 {
		t.Fatalf("got %d samples", len(d.Samples))
	}
	t.Logf("%#v", d.Samples[0])
}

func TestDatagramHeaderGolden(t *testing.T) {
	// sample_datagram_v5 with an IPv6 agent address and no samples,
	// field by field from the spec.
	want := unhex(t, `
		00000005                          // version
		00000002                          // address type IPv6
		20010db8000000000000000000000001  // agent address
		00000007                          // sub_agent_id
		0000002a                          // sequence_number
		0001e240                          // uptime 123456 ms
		00000000                          // samples<> count`)
	d := &Datagram{AgentAddress: netip.MustParseAddr("2001:db8::1"), SubAgentID: 7, SequenceNumber: 42, Uptime: 123456}
	if got := d.AppendXDR(nil); string(got) != string(want) {
		t.Fatalf("got %x\nwant %x", got, want)
	}
	back, err := Decode(want)
	if err != nil || back.AgentAddress != d.AgentAddress || back.SubAgentID != 7 || back.SequenceNumber != 42 || back.Uptime != 123456 {
		t.Fatalf("decode: %+v, %v", back, err)
	}
}

func TestDatagramWriterNeverExceedsMax(t *testing.T) {
	w, err := NewDatagramWriter(netip.MustParseAddr("198.18.0.1"), 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	w.Begin(1, 0)
	s := &CounterSample{SequenceNumber: 1, Source: DataSource{0, 1}, Records: []Record{&UnknownRecord{DataFormat: Format(9, 9), Data: make([]byte, 40)}}}
	added := 0
	for {
		err := w.Add(s)
		if errors.Is(err, ErrDatagramFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		added++
	}
	w.SetUptime(777)
	b := w.Bytes()
	if len(b) > 200 {
		t.Fatalf("datagram %d bytes > 200", len(b))
	}
	d, err := Decode(b)
	if err != nil || len(d.Samples) != added || d.Uptime != 777 || d.SequenceNumber != 1 {
		t.Fatalf("decode: %+v (want %d samples, uptime 777), %v", d, added, err)
	}
	big := &CounterSample{Records: []Record{&UnknownRecord{DataFormat: Format(9, 9), Data: make([]byte, 400)}}}
	if err := w.Add(big); !errors.Is(err, ErrSampleTooLarge) {
		t.Fatalf("oversized sample: %v", err)
	}
}
