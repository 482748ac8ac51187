package host

import (
	"encoding/binary"
	"math"
	"net/netip"
	"reflect"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// encodeFixture encodes the fixture's records as the counters_sample of
// data source 2:1 (entPhysicalEntry.1) in one datagram.
func encodeFixture(t *testing.T) ([]sflow.Record, []byte) {
	t.Helper()
	adapters := []Adapter{{IfIndex: 7, MACs: [][6]byte{{0x02, 0x42, 0xc6, 0x12, 0, 7}}}}
	r := newFixtureReader(t, fixtureRoot, func() []Adapter { return adapters })
	recs, err := r.AppendRecords(nil)
	if err != nil {
		t.Fatalf("AppendRecords: %v", err)
	}
	d := sflow.Datagram{
		AgentAddress:   netip.MustParseAddr("198.18.0.1"),
		SequenceNumber: 1,
		Uptime:         1000,
		Samples: []sflow.Sample{&sflow.CounterSample{
			SequenceNumber: 1,
			Source:         sflow.DataSource{Type: sflow.SourceEntPhysicalEntry, Index: 1},
			Records:        recs,
		}},
	}
	return recs, d.AppendXDR(nil)
}

// TestEncodeDecodeRoundTrip decodes the datagram and compares the records.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	recs, b := encodeFixture(t)
	d, err := sflow.Decode(b)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if len(d.Samples) != 1 {
		t.Fatalf("%d samples", len(d.Samples))
	}
	cs, ok := d.Samples[0].(*sflow.CounterSample)
	if !ok {
		t.Fatalf("sample is %T", d.Samples[0])
	}
	if cs.Source != (sflow.DataSource{Type: sflow.SourceEntPhysicalEntry, Index: 1}) {
		t.Errorf("source = %v", cs.Source)
	}
	if len(cs.Records) != len(recs) {
		t.Fatalf("decoded %d records, encoded %d", len(cs.Records), len(recs))
	}
	for i := range recs {
		if !reflect.DeepEqual(cs.Records[i], recs[i]) {
			t.Errorf("record %s:\n decoded %+v\n encoded %+v", recs[i].Name(), cs.Records[i], recs[i])
		}
	}
}

// TestEncodedLayout walks the datagram by hand, by the spec's XDR layout
// (sflow_version_5.txt sample_datagram_v5 / counters_sample,
// sflow_host.txt structures), independently of the sflow decoder, and
// checks the fields whose units this package converts.
func TestEncodedLayout(t *testing.T) {
	_, b := encodeFixture(t)
	be := binary.BigEndian
	// version, address type, IPv4 address, sub-agent, sequence, uptime,
	// number of samples.
	if be.Uint32(b[0:]) != 5 || be.Uint32(b[24:]) != 1 {
		t.Fatalf("header: %x", b[:28])
	}
	s := b[28:]
	if be.Uint32(s[0:]) != 2 { // counters_sample
		t.Fatalf("sample type %d", be.Uint32(s[0:]))
	}
	if src := be.Uint32(s[12:]); src != 2<<24|1 {
		t.Errorf("source_id = %#x, want 2:1", src)
	}
	n := int(be.Uint32(s[16:]))
	rec := s[20:]
	bodies := map[uint32][]byte{}
	for i := 0; i < n; i++ {
		format, length := be.Uint32(rec[0:]), int(be.Uint32(rec[4:]))
		bodies[format] = rec[8 : 8+length]
		rec = rec[8+length:]
	}
	if len(rec) != 0 {
		t.Fatalf("%d bytes after the records", len(rec))
	}
	want := wantFixture()

	descr := bodies[2000]
	if hl := be.Uint32(descr); hl != 8 || string(descr[4:12]) != "switch01" {
		t.Errorf("host_descr hostname: %q", descr[:12])
	}
	if got := descr[12:28]; string(got) != string(want.descr.UUID[:]) {
		t.Errorf("host_descr uuid %x", got)
	}
	if os := be.Uint32(descr[32:]); os != 2 {
		t.Errorf("os_name = %d, want linux (2)", os)
	}

	ad := bodies[2001] // adapters<>: n, ifIndex, macs<>: n, mac padded to 8
	if be.Uint32(ad[0:]) != 1 || be.Uint32(ad[4:]) != 7 || be.Uint32(ad[8:]) != 1 ||
		string(ad[12:18]) != "\x02\x42\xc6\x12\x00\x07" || len(ad) != 20 {
		t.Errorf("host_adapters = %x", ad)
	}

	cpu := bodies[2003]
	if len(cpu) != 80 {
		t.Fatalf("host_cpu is %d bytes, want 80", len(cpu))
	}
	word := func(b []byte, i int) uint32 { return be.Uint32(b[4*i:]) }
	if l := math.Float32frombits(word(cpu, 0)); l != 0.52 {
		t.Errorf("load_one = %v", l)
	}
	for i, w := range map[int]uint32{3: 3, 4: 412, 5: 4, 6: 2394, 7: 123456, 8: 47050, 11: 36991760, 14: 1590, 15: 4346411, 16: 13666512, 17: 70, 19: 130} {
		if got := word(cpu, i); got != w {
			t.Errorf("host_cpu word %d = %d, want %d", i, got, w)
		}
	}

	mem := bodies[2004]
	if got := be.Uint64(mem[0:]); got != 8052948*1024 {
		t.Errorf("mem_total = %d", got)
	}
	if got := be.Uint32(mem[56:]); got != 8653890 {
		t.Errorf("page_in = %d", got)
	}

	disk := bodies[2005]
	if got := int32(be.Uint32(disk[16:])); got != 9600 {
		t.Errorf("part_max_used = %d", got)
	}
	if got := be.Uint64(disk[24:]); got != want.disk.BytesRead {
		t.Errorf("bytes_read = %d", got)
	}

	nio := bodies[2006]
	if got := be.Uint64(nio[0:]); got != want.net.BytesIn {
		t.Errorf("bytes_in = %d", got)
	}
	if got := be.Uint32(nio[8:]); got != 4016 {
		t.Errorf("pkts_in = %d", got)
	}
}
