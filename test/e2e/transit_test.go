package e2e

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// transitSeen is what one decoder read of a sample's transit records.
type transitSeen struct {
	num                  uint64 // the frame's number
	output               uint32
	queue, delay, depth  uint32
	hasQ, hasT, hasDepth bool
}

// TestTransit: with -transit, a frame sampled at p1 (TC, 1 in 1) and
// bridged to p2, where a token bucket (tbf, 8 Mbit/s) makes a burst of
// 1000-byte frames queue, is reported once it left p2: its flow sample
// names p2 as the output and carries extended_egress_queue (1036: queue
// 0, p2 has one), extended_queue (1040: the bytes queued ahead of it, a
// whole number of frames, never more than were sent before it) and
// extended_transit (1039: at least the time those bytes take at the token
// rate). goflow2 reads the same (1036 itself; 1039 and 1040 it keeps raw,
// decoded here as sflow_transit.txt lays them out: one unsigned int);
// tshark, which knows none of the three (they come last), reads the same
// samples' ports. The metrics account for every wait.
func TestTransit(t *testing.T) {
	fs := features.ProbeFeatures()
	testskip.Feature(t, fs, features.FeatureKernCtx)
	testskip.Feature(t, fs, features.FeatureTransit)
	lab := newLab(t, 2)
	sw := lab.Switch
	p1 := uint32(lab.LinkIndex(sw, "p1"))
	p2 := uint32(lab.LinkIndex(sw, "p2"))
	if out, err := lab.Run(sw, "tc", "qdisc", "add", "dev", "p2", "root", "tbf",
		"rate", "8mbit", "burst", "1600", "limit", "1000000"); err != nil {
		t.Fatalf("tbf on p2: %v\n%s", err, out)
	}
	col := listen(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "1", "-ports", "p1", "-polling", "0", "-hook", "tc", "-transit")
	d.waitReady(t, lab, "p1")

	// 40 numbered 1000-byte frames to h2's MAC (bridged to p2), to an
	// address h2 does not have (h2 drops them without a word).
	const k, rateBytesPerSec = 40, 1_000_000
	frames := make([][]byte, k)
	payload := make([]byte, 958)
	for i := range frames {
		binary.BigEndian.PutUint64(payload[0:], uint64(i+1))
		binary.BigEndian.PutUint16(payload[16:], frameTag)
		frames[i] = netlab.UDPFrame(lab.HostMACs[0], lab.HostMACs[1],
			netip.AddrPortFrom(lab.HostAddrs[0], 10000), netip.AddrPortFrom(lab.HostAddrs[1].Next().Next().Next(), 9), payload)
	}
	frameLen := uint32(len(frames[0]))
	lab.SendFrames(t, 0, frames)
	dgs := col.waitDelivered(t, lab)

	var ours []transitSeen
	for _, dg := range dgs {
		for _, s := range dg.our.Samples {
			fs, ok := s.(*sflow.FlowSample)
			if !ok || fs.Source.Index != p1 {
				continue
			}
			var ts transitSeen
			var hdr *sflow.SampledHeader
			for _, rec := range fs.Records {
				switch v := rec.(type) {
				case *sflow.SampledHeader:
					hdr = v
				case *sflow.ExtendedEgressQueue:
					ts.queue, ts.hasQ = v.Queue, true
				case *sflow.ExtendedTransit:
					ts.delay, ts.hasT = v.Delay, true
				case *sflow.ExtendedQueue:
					ts.depth, ts.hasDepth = v.Depth, true
				}
			}
			num, ok := frameNumber(hdr)
			if !ok {
				continue
			}
			ts.num, ts.output = num, fs.Output.Value
			ours = append(ours, ts)
		}
	}
	if len(ours) != k {
		t.Fatalf("%d samples of the %d frames", len(ours), k)
	}
	maxDepth := uint32(0)
	for _, s := range ours {
		if !s.hasQ || !s.hasT || !s.hasDepth {
			t.Errorf("frame %d: egress queue %v, transit %v, queue depth %v: want all three", s.num, s.hasQ, s.hasT, s.hasDepth)
			continue
		}
		if s.output != p2 || s.queue != 0 {
			t.Errorf("frame %d: output %d queue %d, want p2 (%d) queue 0", s.num, s.output, s.queue, p2)
		}
		if s.depth%frameLen != 0 || s.depth > uint32(s.num-1)*frameLen {
			t.Errorf("frame %d: depth %d: not whole %d-byte frames, or more than the %d sent before it", s.num, s.depth, frameLen, s.num-1)
		}
		wait := time.Duration(float64(s.depth) / rateBytesPerSec * float64(time.Second))
		if delay := time.Duration(s.delay); delay < wait-200*time.Microsecond {
			t.Errorf("frame %d: transit %v, less than the %v its %d queued bytes take", s.num, delay, wait, s.depth)
		}
		maxDepth = max(maxDepth, s.depth)
		if s.num%10 == 1 || s.num == k {
			t.Logf("frame %2d: output %d queue %d depth %5d transit %v", s.num, s.output, s.queue, s.depth, time.Duration(s.delay).Round(time.Microsecond))
		}
	}
	if maxDepth < 10*frameLen {
		t.Errorf("deepest queue %d bytes: the burst did not queue", maxDepth)
	}

	// goflow2: the same records, in the same order.
	var gf []transitSeen
	for _, dg := range dgs {
		for _, s := range dg.gf.Samples {
			fs, ok := s.(goflow.FlowSample)
			if !ok || fs.Header.SourceIdValue != p1 {
				continue
			}
			ts := transitSeen{output: fs.Output & 0x3FFFFFFF}
			isTest := false
			for _, rec := range fs.Records {
				switch v := rec.Data.(type) {
				case goflow.SampledHeader:
					if n, ok := frameNumber(&sflow.SampledHeader{Header: v.HeaderData}); ok {
						ts.num, isTest = n, true
					}
				case goflow.EgressQueue:
					ts.queue, ts.hasQ = v.Queue, true
				case goflow.RawRecord:
					if len(v.Data) != 4 {
						t.Errorf("goflow2: raw record %d of %d bytes, want 4", rec.Header.DataFormat, len(v.Data))
						continue
					}
					u := binary.BigEndian.Uint32(v.Data)
					switch rec.Header.DataFormat {
					case 1039:
						ts.delay, ts.hasT = u, true
					case 1040:
						ts.depth, ts.hasDepth = u, true
					}
				}
			}
			if isTest {
				gf = append(gf, ts)
			}
		}
	}
	compareRouters(t, "goflow2", gf, ours, func(s transitSeen) string { return fmt.Sprintf("%+v", s) })

	// tshark: the same samples, with the same output port.
	const fIdx, fOut = "sflow.flow_sample.index", "sflow.flow_sample.output_interface"
	var outs []string
	for _, r := range tsharkFields(t, dgs, collectorPort, fIdx, fOut) {
		for i, idx := range r[fIdx] {
			if idx == fmt.Sprint(p1) && i < len(r[fOut]) {
				outs = append(outs, r[fOut][i])
			}
		}
	}
	if len(outs) < k {
		t.Errorf("tshark reads %d flow samples of p1, want at least the %d test frames'", len(outs), k)
	}
	for _, o := range outs {
		// tshark shows the compact form's 32 bits in hex (0x00000005).
		if v, err := strconv.ParseUint(o, 0, 32); err != nil || uint32(v) != p2 {
			t.Errorf("tshark: a sample of p1 with output %s, want p2 (%d)", o, p2)
			break
		}
	}

	m, err := fetchMetrics(lab)
	if err != nil {
		t.Fatal(err)
	}
	parked := m.scalar("sflowswitchd_transit_parked_total")
	sent := m.sumWith("sflowswitchd_transit_ended_total", `how="sent"`, "")
	ended := m.sum("sflowswitchd_transit_ended_total")
	waiting := m.scalar("sflowswitchd_transit_waiting")
	t.Logf("transit: parked %d, ended %d (sent %d), waiting %d", parked, ended, sent, waiting)
	if parked < k || sent < k || parked != ended+waiting {
		t.Errorf("transit metrics: parked %d, ended %d (sent %d), waiting %d: want every test frame parked and sent, parked = ended + waiting", parked, ended, sent, waiting)
	}
}
