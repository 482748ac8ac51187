package sflow

import (
	"math"
	"time"
)

// Flow records of a sampled packet's way through the device's queues: the
// egress queue it was put in, the bytes already queued there, and the
// time it spent in the device. extended_egress_queue is defined with the
// drop notifications (sflow.org/sflow_drops.txt; ../docs/spec/
// sflow_drops.md) and used both in discarded_packet samples (the queue a
// packet was dropped from) and in flow samples (the queue it was put in);
// extended_transit and extended_queue are the sFlow Transit Delay
// Structures (sflow.org/sflow_transit.txt, 2020), which require an
// extended_egress_queue beside extended_queue. Layouts: one unsigned int
// each, as hsflowd's sflow.h declares them (SFLExtended_egress_queue,
// SFLExtended_transit_delay, SFLExtended_queue_depth) and sflowtool reads
// them (readExtendedEgressQueue, readExtendedTransitDelay,
// readExtendedQueueDepth).
var (
	FormatExtendedEgressQueue = Format(0, 1036)
	FormatExtendedTransit     = Format(0, 1039)
	FormatExtendedQueue       = Format(0, 1040)
)

func init() {
	registerFlow(FormatExtendedEgressQueue, "extended_egress_queue", decodeExtendedEgressQueue)
	registerFlow(FormatExtendedTransit, "extended_transit", decodeExtendedTransit)
	registerFlow(FormatExtendedQueue, "extended_queue", decodeExtendedQueue)
}

// ExtendedEgressQueue is extended_egress_queue (flow format 1036): the
// egress queue selected for the packet (the traffic class, e.g. psample's
// PSAMPLE_ATTR_OUT_TC). The output port is the enclosing sample's.
type ExtendedEgressQueue struct {
	Queue uint32 `json:"queue"`
}

// Format implements Record.
func (*ExtendedEgressQueue) Format() DataFormat { return FormatExtendedEgressQueue }

// Name implements Record.
func (*ExtendedEgressQueue) Name() string { return "extended_egress_queue" }

// AppendXDR implements Record.
func (q *ExtendedEgressQueue) AppendXDR(b []byte) []byte { return appendUint32(b, q.Queue) }

func decodeExtendedEgressQueue(r *reader) Record { return &ExtendedEgressQueue{Queue: r.uint32()} }

// ExtendedTransit is extended_transit (flow format 1039): the time the
// sampled packet spent in the device, in nanoseconds. It saturates
// (sflow.h: "0xffffffff indicates value >= 0xffffffff", about 4.3 s). Use SetDelay, which saturates, rather than truncating a wider value
// (hsflowd's mod_psample keeps the low 32 bits of PSAMPLE_ATTR_LATENCY).
type ExtendedTransit struct {
	Delay uint32 `json:"delay"`
}

// Format implements Record.
func (*ExtendedTransit) Format() DataFormat { return FormatExtendedTransit }

// Name implements Record.
func (*ExtendedTransit) Name() string { return "extended_transit" }

// SetDelay sets Delay from d, saturating at 0xFFFFFFFF ns; a negative d
// (clock steps) is 0.
func (t *ExtendedTransit) SetDelay(d time.Duration) { t.Delay = saturate32(d.Nanoseconds()) }

// AppendXDR implements Record.
func (t *ExtendedTransit) AppendXDR(b []byte) []byte { return appendUint32(b, t.Delay) }

func decodeExtendedTransit(r *reader) Record { return &ExtendedTransit{Delay: r.uint32()} }

// ExtendedQueue is extended_queue (flow format 1040): the bytes already in
// the selected egress queue when the sampled packet was enqueued (for a
// VOQ architecture, in the selected VOQ). An extended_egress_queue record
// naming the queue must be in the same sample.
type ExtendedQueue struct {
	Depth uint32 `json:"depth"`
}

// Format implements Record.
func (*ExtendedQueue) Format() DataFormat { return FormatExtendedQueue }

// Name implements Record.
func (*ExtendedQueue) Name() string { return "extended_queue" }

// SetDepth sets Depth from a byte count, saturating at 0xFFFFFFFF (the spec
// gives depth no wider form; psample's PSAMPLE_ATTR_OUT_TC_OCC is 64 bits).
func (q *ExtendedQueue) SetDepth(bytes uint64) { q.Depth = uint32(min(bytes, math.MaxUint32)) }

// AppendXDR implements Record.
func (q *ExtendedQueue) AppendXDR(b []byte) []byte { return appendUint32(b, q.Depth) }

func decodeExtendedQueue(r *reader) Record { return &ExtendedQueue{Depth: r.uint32()} }

// saturate32 clamps v to [0, 0xFFFFFFFF].
func saturate32(v int64) uint32 {
	switch {
	case v < 0:
		return 0
	case v > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(v)
}
