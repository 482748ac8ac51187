package decode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestPcapReaderObsoletePacketBlock reads the obsolete pcapng Packet Block
// (type 2: a 16-bit interface ID and a 16-bit drops count where the
// Enhanced Packet Block has a 32-bit interface ID) next to an Enhanced
// Packet Block, and refuses a Packet Block too short for its fixed fields.
func TestPcapReaderObsoletePacketBlock(t *testing.T) {
	le := binary.LittleEndian
	block := func(p []byte, typ uint32, body []byte) []byte {
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
		p = le.AppendUint32(p, typ)
		p = le.AppendUint32(p, uint32(12+len(body)))
		p = append(p, body...)
		return le.AppendUint32(p, uint32(12+len(body)))
	}
	shb := le.AppendUint32(nil, 0x1A2B3C4D)
	shb = le.AppendUint16(shb, 1)
	shb = le.AppendUint16(shb, 0)
	shb = le.AppendUint64(shb, 0xffffffffffffffff)
	head := block(nil, 0x0A0D0D0A, shb)
	// sflow.Interface 0: Ethernet, no options (microsecond timestamps).
	head = block(head, 1, []byte{1, 0, 0, 0, 0, 0, 0, 0})

	payload1, payload2 := []byte{0, 0, 0, 5, 1, 2, 3, 4}, []byte{0, 0, 0, 5, 9, 9, 9, 9}
	frame1 := ethFrame(0x0800, nil, ipv4UDP("198.18.0.1", "198.18.0.2", 50000, 6343, payload1, 0))
	frame2 := ethFrame(0x0800, nil, ipv4UDP("198.18.0.3", "198.18.0.2", 50001, 6343, payload2, 0))
	const usec1, usec2 = 1_767_323_045_123_456, 1_767_323_046_000_001 // 2026-01-02T03:04:05.123456Z, +0.876545 s
	packetBody := func(first []byte, usec uint64, frame []byte) []byte {
		b := append([]byte(nil), first...)
		b = le.AppendUint32(b, uint32(usec>>32))
		b = le.AppendUint32(b, uint32(usec))
		b = le.AppendUint32(b, uint32(len(frame)))
		b = le.AppendUint32(b, uint32(len(frame)))
		return append(b, frame...)
	}
	// Packet Block: interface 0, drops count 7 (must not be read as part of
	// the interface ID).
	file := block(head, 2, packetBody([]byte{0, 0, 7, 0}, usec1, frame1))
	file = block(file, 6, packetBody([]byte{0, 0, 0, 0}, usec2, frame2))

	r, err := newPcapReader(bytes.NewReader(file), 6343)
	if err != nil {
		t.Fatal(err)
	}
	wants := []struct {
		payload []byte
		src     string
		time    time.Time
	}{
		{payload1, "198.18.0.1:50000", time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)},
		{payload2, "198.18.0.3:50001", time.Date(2026, 1, 2, 3, 4, 6, 1000, time.UTC)},
	}
	for i, w := range wants {
		d, err := r.Next()
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if d.Frame != i+1 || !bytes.Equal(d.Payload, w.payload) || d.Source.String() != w.src || !d.Time.Equal(w.time) {
			t.Errorf("datagram %d: frame %d from %v at %v, payload %x; want frame %d from %s at %v, payload %x",
				i, d.Frame, d.Source, d.Time, d.Payload, i+1, w.src, w.time, w.payload)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last datagram: %v, want io.EOF", err)
	}

	short := block(head, 2, make([]byte, 16))
	r, err = newPcapReader(bytes.NewReader(short), 6343)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Next()
	if !errors.Is(err, errCaptureFormat) || !strings.Contains(err.Error(), "packet block too short") {
		t.Fatalf("short packet block: %v, want errCaptureFormat (packet block too short)", err)
	}
}
