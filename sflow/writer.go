package sflow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// DefaultMaxDatagramSize is sFlowRcvrMaximumDatagramSize's default (1400).
const DefaultMaxDatagramSize = 1400

// ErrDatagramFull is returned by DatagramWriter.Add when the sample does
// not fit in the datagram being built: flush it and add the sample to the
// next one.
var ErrDatagramFull = errors.New("sflow: datagram full")

// ErrSampleTooLarge is returned by DatagramWriter.Add when a sample does not
// fit even in an empty datagram of the writer's maximum size.
var ErrSampleTooLarge = errors.New("sflow: sample larger than the maximum datagram size")

// DatagramWriter builds datagrams for one receiver into a reused buffer.
// It never produces a datagram larger than MaxSize: a sample that does not
// fit is refused with ErrDatagramFull and left for the next datagram.
// A DatagramWriter is not safe for concurrent use; each sub-agent owns its
// own. Steady-state use allocates nothing.
type DatagramWriter struct {
	hdr     Datagram
	maxSize int
	buf     []byte
	n       int // samples in buf
}

// NewDatagramWriter returns a writer for datagrams from agent address
// agent and sub-agent subAgentID, at most maxSize bytes each (the
// receiver's sFlowRcvrMaximumDatagramSize).
func NewDatagramWriter(agent netip.Addr, subAgentID uint32, maxSize int) (*DatagramWriter, error) {
	if min := headerSize(agent) + minSampleSize; maxSize < min {
		return nil, fmt.Errorf("sflow: maximum datagram size %d is below the minimum %d", maxSize, min)
	}
	w := &DatagramWriter{
		hdr:     Datagram{AgentAddress: agent, SubAgentID: subAgentID},
		maxSize: maxSize,
		buf:     make([]byte, 0, maxSize+256),
	}
	return w, nil
}

// MaxSize returns the maximum datagram size.
func (w *DatagramWriter) MaxSize() int { return w.maxSize }

// Begin starts a new datagram with the given sequence number and uptime
// (ms), discarding any unflushed samples.
func (w *DatagramWriter) Begin(seq, uptime uint32) {
	w.hdr.SequenceNumber = seq
	w.hdr.Uptime = uptime
	w.buf = appendHeader(w.buf[:0], &w.hdr, 0)
	w.n = 0
}

// Seq returns the sequence number of the datagram being built.
func (w *DatagramWriter) Seq() uint32 { return w.hdr.SequenceNumber }

// Len returns the number of samples in the datagram being built.
func (w *DatagramWriter) Len() int { return w.n }

// Add appends sample s. It returns ErrDatagramFull if s does not fit in
// the remaining space (the datagram is left unchanged), or
// ErrSampleTooLarge if s would not fit even in an empty datagram.
func (w *DatagramWriter) Add(s Sample) error {
	mark := len(w.buf)
	w.buf = AppendSample(w.buf, s)
	if len(w.buf) > w.maxSize {
		size := len(w.buf) - mark
		w.buf = w.buf[:mark]
		if headerSize(w.hdr.AgentAddress)+size > w.maxSize {
			return ErrSampleTooLarge
		}
		return ErrDatagramFull
	}
	w.n++
	return nil
}

// SetUptime sets the datagram's uptime field (ms). The spec asks for the
// time "as close to datagram transmission time as possible", so senders
// set it right before Bytes.
func (w *DatagramWriter) SetUptime(ms uint32) {
	w.hdr.Uptime = ms
	binary.BigEndian.PutUint32(w.buf[headerSize(w.hdr.AgentAddress)-8:], ms)
}

// Bytes returns the datagram built so far, with its sample count filled
// in. The slice is valid until the next call of Begin or Add.
func (w *DatagramWriter) Bytes() []byte {
	binary.BigEndian.PutUint32(w.buf[headerSize(w.hdr.AgentAddress)-4:], uint32(w.n))
	return w.buf
}
