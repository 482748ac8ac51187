package sflow

import (
	"bytes"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// FuzzDecode checks that Decode never panics on any input and that
// whatever it accepts is stable under re-encoding: encode(decode(x)) must
// decode again, and encoding that second reading must give the same bytes.
// (encode(decode(x)) may differ from x itself only where the encoder
// normalises, e.g. it pads opaque data of unknown records to 4 bytes.)
// (That they also render as valid JSON is the decode tool's FuzzRender.)
//
// Seeds are the shared golden and malformed datagrams. Run with
//
//	go test -fuzz FuzzDecode -fuzztime 2m ./sflow/
func FuzzDecode(f *testing.F) {
	testutil.AddGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := Decode(in)
		if err != nil {
			if _, ok := err.(*DecodeError); !ok {
				t.Fatalf("error %T is not a *DecodeError: %v", err, err)
			}
			if d != nil {
				t.Fatalf("datagram returned with error %v", err)
			}
			return
		}
		first := d.AppendXDR(nil)
		again, err := Decode(first)
		if err != nil {
			t.Fatalf("re-encoded datagram rejected: %v\ninput   %x\nencoded %x", err, in, first)
		}
		second := again.AppendXDR(nil)
		if !bytes.Equal(first, second) {
			t.Fatalf("encoding not stable\ninput  %x\nfirst  %x\nsecond %x", in, first, second)
		}
	})
}
