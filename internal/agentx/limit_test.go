package agentx

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// TestReadPDUSizeLimited (inputs size-limited): a
// header announcing a payload above MaxPayload is refused from the header
// alone, before anything is allocated or read for the payload.
func TestReadPDUSizeLimited(t *testing.T) {
	h := make([]byte, HeaderLen)
	h[0], h[1] = 1, 18 // version 1, agentx-Response-PDU
	h[2] = 0x10        // network byte order
	binary.BigEndian.PutUint32(h[16:], MaxPayload+4)
	r := &countingReader{r: bytes.NewReader(append(h, make([]byte, 64)...))}
	_, err := ReadPDU(r)
	if err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("oversized PDU: %v", err)
	}
	if r.n != HeaderLen {
		t.Errorf("read %d bytes, want only the %d-byte header", r.n, HeaderLen)
	}
}

type countingReader struct {
	r interface{ Read([]byte) (int, error) }
	n int
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += n
	return n, err
}
