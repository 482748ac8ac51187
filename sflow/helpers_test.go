package sflow

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// sharedTestdata is the folder of golden datagrams built by hand from the
// spec texts (sflow/testdata).
func sharedTestdata(t testing.TB) string { return testutil.GoldenDir(t) }

// readTestdata returns the bytes of a shared golden datagram.
func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sharedTestdata(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// unhex parses hex digits, ignoring white space and "//" comments to the
// end of a line, so golden bytes can be written one field per line with
// the spec's field name beside each.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	var digits strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		for _, r := range line {
			if r != ' ' && r != '\t' && r != '\r' {
				digits.WriteRune(r)
			}
		}
	}
	b, err := hex.DecodeString(digits.String())
	if err != nil {
		t.Fatalf("bad golden hex: %v", err)
	}
	return b
}

// checkRecordGolden checks that rec encodes to exactly want (the record
// body, hand-derived from the spec), and that want decodes back to a
// record that encodes to the same bytes, in the flow (flow=true) or counter
// context.
func checkRecordGolden(t *testing.T, rec Record, want []byte, flow bool) {
	t.Helper()
	got := rec.AppendXDR(nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s encoding:\n got %x\nwant %x", rec.Name(), got, want)
	}
	var s Sample
	if flow {
		s = &FlowSample{SequenceNumber: 1, Source: DataSource{0, 3}, SamplingRate: 1, Records: []Record{rec}}
	} else {
		s = &CounterSample{SequenceNumber: 1, Source: DataSource{0, 3}, Records: []Record{rec}}
	}
	d := &Datagram{SequenceNumber: 1, Samples: []Sample{s}}
	wire := d.AppendXDR(nil)
	back, err := Decode(wire)
	if err != nil {
		t.Fatalf("decoding %s: %v", rec.Name(), err)
	}
	var recs []Record
	switch bs := back.Samples[0].(type) {
	case *FlowSample:
		recs = bs.Records
	case *CounterSample:
		recs = bs.Records
	}
	if len(recs) != 1 || recs[0].Format() != rec.Format() {
		t.Fatalf("decoded records %#v, want one %s", recs, rec.Name())
	}
	if again := recs[0].AppendXDR(nil); !bytes.Equal(again, want) {
		t.Fatalf("%s decode+encode:\n got %x\nwant %x", rec.Name(), again, want)
	}
}

// goflowDecode decodes a datagram with the goflow2 sFlow decoder, an
// independent implementation.
func goflowDecode(t testing.TB, datagram []byte) *goflow.Packet {
	t.Helper()
	var p goflow.Packet
	if err := goflow.DecodeMessageVersion(bytes.NewBuffer(datagram), &p); err != nil {
		t.Fatalf("goflow2 rejects the datagram: %v", err)
	}
	return &p
}

// tsharkFields runs tshark on the datagram (wrapped in Ethernet/IPv4/UDP
// to port 6343 in a temporary pcap) and returns, for each requested field
// (e.g. "sflow_5.sampletype"), every value tshark decoded, in order.
func tsharkFields(t testing.TB, datagram []byte, fields ...string) map[string][]string {
	t.Helper()
	return testutil.TsharkFields(t, []testutil.PcapFrame{testutil.UDPPcapFrame(time.Unix(1700000000, 0), datagram, 6343)}, 6343, fields...)[0]
}

// checkGoldenDatagram checks that the annotated golden hex, the file
// testdata/NAME.bin and our encoding of want are the same bytes, and that
// our decoder reads the file back as want, field for field.
func checkGoldenDatagram(t *testing.T, name, golden string, want *Datagram) {
	t.Helper()
	wire := unhex(t, golden)
	if file := readTestdata(t, name+".bin"); !bytes.Equal(file, wire) {
		t.Fatalf("testdata/%s.bin differs from the annotated golden bytes", name)
	}
	if got := want.AppendXDR(nil); !bytes.Equal(got, wire) {
		t.Errorf("encoding differs from %s.bin:\n got %x\nwant %x", name, got, wire)
	}
	d, err := Decode(wire)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("decoded %s.bin:\n got %s\nwant %s", name, dumpDatagram(d), dumpDatagram(want))
	}
}

// dumpDatagram renders a datagram with every record's fields, for
// failure messages.
func dumpDatagram(d *Datagram) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{%v %d %d %d", d.AgentAddress, d.SubAgentID, d.SequenceNumber, d.Uptime)
	for _, s := range d.Samples {
		fmt.Fprintf(&b, " %T%+v", s, s)
		for _, r := range recordsOf(s) {
			fmt.Fprintf(&b, " %s%+v", r.Name(), r)
		}
	}
	return b.String() + "}"
}

// sflowtoolElements returns the "elements" of every sample of sflowtool's
// reading NAME.sflowtool.json, each flattened to key -> string value.
func sflowtoolElements(t *testing.T, name string) [][]map[string]string {
	t.Helper()
	var ref struct {
		Samples []struct {
			Elements []map[string]any `json:"elements"`
		} `json:"samples"`
	}
	if err := json.Unmarshal(readTestdata(t, name+".sflowtool.json"), &ref); err != nil {
		t.Fatalf("%s.sflowtool.json: %v", name, err)
	}
	out := make([][]map[string]string, len(ref.Samples))
	for i, s := range ref.Samples {
		for _, e := range s.Elements {
			flat := map[string]string{}
			ctrFlatten(flat, "", e)
			out[i] = append(out[i], flat)
		}
	}
	return out
}

// recordsOf returns the records of a flow or counters sample.
func recordsOf(s Sample) []Record {
	switch s := s.(type) {
	case *FlowSample:
		return s.Records
	case *CounterSample:
		return s.Records
	case *DiscardedPacket:
		return s.Records
	}
	return nil
}
