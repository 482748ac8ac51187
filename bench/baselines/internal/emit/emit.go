// Package emit turns the samples of a baseline sampler (bench/baselines)
// into sFlow datagrams sent to a collector, the way the host agent
// (hsflowd) reports them: one flow_sample with a sampled_header per
// sample, sample_pool estimated as samples x rate (hsflowd readPackets.c
// adds the sampling rate to the pool per sample), drops as the technique
// reports them. Both baselines share it, so the comparison of CPU between
// them and sflowswitchd is about the capture technique, not the encoder:
// the encoder is sflowswitchd's own (sflow.DatagramWriter).
package emit

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Emitter builds and sends the datagrams of one sampled port. Not safe for
// concurrent use.
type Emitter struct {
	conn   *net.UDPConn
	w      *sflow.DatagramWriter
	start  time.Time
	dgSeq  uint32
	fsSeq  uint32
	source sflow.DataSource
	in     sflow.Interface
	rate   uint32

	fs   sflow.FlowSample
	hdr  sflow.SampledHeader
	recs [1]sflow.Record

	// Samples, Datagrams and SendErrors count what was emitted.
	Samples, Datagrams, SendErrors uint64
	lastFlush                      time.Time
}

// New returns an Emitter for port ifindex sampled 1-in-rate, sending
// datagrams of at most maxSize bytes to collector (host:port) from agent.
func New(collector string, agent netip.Addr, ifindex, rate uint32, maxSize int) (*Emitter, error) {
	raddr, err := net.ResolveUDPAddr("udp", collector)
	if err != nil {
		return nil, fmt.Errorf("emit: collector %q: %w", collector, err)
	}
	conn, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return nil, fmt.Errorf("emit: dialing %s: %w", collector, err)
	}
	w, err := sflow.NewDatagramWriter(agent, 0, maxSize)
	if err != nil {
		return nil, errors.Join(err, conn.Close())
	}
	e := &Emitter{conn: conn, w: w, start: time.Now(), rate: rate,
		source: sflow.DataSource{Type: sflow.SourceIfIndex, Index: ifindex},
		in:     sflow.IfIndex(ifindex)}
	e.recs[0] = &e.hdr
	e.dgSeq = 1
	e.w.Begin(e.dgSeq, 0)
	e.lastFlush = e.start
	return e, nil
}

// Sample emits one flow sample of a frame of frameLen bytes (without FCS)
// whose first bytes are header; drops is the technique's own count of
// samples it lost (0 when it cannot know).
func (e *Emitter) Sample(frameLen uint32, header []byte, drops uint32) {
	e.fsSeq++
	e.Samples++
	e.hdr = sflow.SampledHeader{Protocol: sflow.HeaderProtocolEthernet, FrameLength: frameLen + 4, Stripped: 4, Header: header}
	e.fs = sflow.FlowSample{
		SequenceNumber: e.fsSeq,
		Source:         e.source,
		SamplingRate:   e.rate,
		SamplePool:     uint32(e.Samples * uint64(e.rate)), // the host agent's estimate
		Drops:          drops,
		Input:          e.in,
		Records:        e.recs[:],
	}
	if err := e.w.Add(&e.fs); errors.Is(err, sflow.ErrDatagramFull) {
		e.Flush()
		_ = e.w.Add(&e.fs) // fits an empty datagram: checked by the caller's header limit
	}
}

// Flush sends the datagram being built, if it holds samples.
func (e *Emitter) Flush() {
	e.lastFlush = time.Now()
	if e.w.Len() == 0 {
		return
	}
	e.w.SetUptime(uint32(time.Since(e.start).Milliseconds()))
	if _, err := e.conn.Write(e.w.Bytes()); err != nil {
		e.SendErrors++
	} else {
		e.Datagrams++
	}
	e.dgSeq++
	e.w.Begin(e.dgSeq, 0)
}

// FlushIfDue flushes when the last flush is a second old (sFlow: at least
// one datagram a second when samples wait).
func (e *Emitter) FlushIfDue(now time.Time) {
	if now.Sub(e.lastFlush) >= time.Second {
		e.Flush()
	}
}

// Close flushes and closes the socket.
func (e *Emitter) Close() error {
	e.Flush()
	if err := e.conn.Close(); err != nil {
		return fmt.Errorf("emit: closing socket: %w", err)
	}
	return nil
}
