package e2e

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// routeState is what extended_router should say while one set of routes
// is in force: the next hop and the prefix lengths, or none (no route).
type routeState struct {
	cmd              []string // the change that brings it about
	routed           bool
	nextHop          netip.Addr
	dstMask, srcMask uint32
}

// TestExtendedRouter routes between two ports (p1 198.18.1.1/24, p2
// 198.18.2.1/24, out of the bridge) while frames from host1
// (198.18.1.2) to 198.18.64.5 flow without pause, sampled at rate 1 at
// p1's ingress and p2's egress, and changes the route to 198.18.64.5
// under them: a /20 via 198.18.2.2 is added, replaced by a /20 via
// 198.18.2.3, a more specific /24 via 198.18.2.2 added, removed, and the
// /20 removed. Checked, as our decoder, goflow2 and tshark read each
// flow sample:
//   - every extended_router is one of the states (next hop, destination
//     mask, source mask 24), never a mix;
//   - a frame sent after a change completed never names a state before
//     it: a sample never names a route that was no longer in force;
//   - after the last removal, no sample carries extended_router;
//   - in each state most samples carry it (the rest are counted, by
//     reason, in sflowswitchd_extended_router_total).
func TestExtendedRouter(t *testing.T) {
	lab := newLab(t, 2)
	sw, h1, h2 := lab.Switch, lab.HostMACs[0], lab.HostMACs[1]
	src, dst := netip.MustParseAddr("198.18.1.2"), netip.MustParseAddr("198.18.64.5")
	gwA, gwB := netip.MustParseAddr("198.18.2.2"), netip.MustParseAddr("198.18.2.3")
	for _, c := range [][]string{
		{"ip", "link", "set", "p1", "nomaster"},
		{"ip", "link", "set", "p2", "nomaster"},
		{"ip", "addr", "add", "198.18.1.1/24", "dev", "p1"},
		{"ip", "addr", "add", "198.18.2.1/24", "dev", "p2"},
		{"ip", "neigh", "replace", src.String(), "lladdr", h1.String(), "dev", "p1", "nud", "permanent"},
		{"ip", "neigh", "replace", gwA.String(), "lladdr", h2.String(), "dev", "p2", "nud", "permanent"},
		{"ip", "neigh", "replace", gwB.String(), "lladdr", h2.String(), "dev", "p2", "nud", "permanent"},
		{"sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
	} {
		if out, err := lab.Run(sw, c[0], c[1:]...); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	p1 := uint32(lab.LinkIndex(sw, "p1"))
	p2 := uint32(lab.LinkIndex(sw, "p2"))
	col := listen(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "1", "-ports", "p1,p2", "-polling", "0", "-port-direction", "p2=egress")
	d.waitReady(t, lab, "p1", "p2")

	states := []routeState{
		{cmd: []string{"ip", "route", "add", "198.18.64.0/20", "via", gwA.String(), "dev", "p2"}, routed: true, nextHop: gwA, dstMask: 20, srcMask: 24},
		{cmd: []string{"ip", "route", "replace", "198.18.64.0/20", "via", gwB.String(), "dev", "p2"}, routed: true, nextHop: gwB, dstMask: 20, srcMask: 24},
		{cmd: []string{"ip", "route", "add", "198.18.64.0/24", "via", gwA.String(), "dev", "p2"}, routed: true, nextHop: gwA, dstMask: 24, srcMask: 24},
		{cmd: []string{"ip", "route", "del", "198.18.64.0/24"}, routed: true, nextHop: gwB, dstMask: 20, srcMask: 24},
		{cmd: []string{"ip", "route", "del", "198.18.64.0/20"}},
	}

	// The sender: numbered frames to the switch's p1 MAC, 20 at a time,
	// without pause while the routes change.
	var sent atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		payload := make([]byte, 18)
		for n := uint64(1); ; n += 20 {
			select {
			case <-stop:
				return
			default:
			}
			frames := make([][]byte, 20)
			for i := range frames {
				binary.BigEndian.PutUint64(payload[0:], n+uint64(i))
				binary.BigEndian.PutUint64(payload[8:], uint64(time.Now().UnixNano()))
				binary.BigEndian.PutUint16(payload[16:], frameTag)
				frames[i] = netlab.UDPFrame(h1, netlab.PortMAC(1),
					netip.AddrPortFrom(src, 10000), netip.AddrPortFrom(dst, 9), payload)
			}
			// Stored before the frames go: a frame numbered above a
			// reading of sent taken after a change began its way after
			// the change.
			sent.Store(n + 19)
			lab.SendFrames(t, 0, frames)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// after[k]: the frames sent when state k's change had completed:
	// every later frame was routed by state k or a later one.
	after := make([]uint64, len(states))
	// Each state lasts until 400 more frames began their way (at least
	// 200 ms): a loaded machine slowing the sender leaves no state empty.
	settle := func(from uint64) {
		deadline := time.Now().Add(20 * time.Second)
		time.Sleep(200 * time.Millisecond)
		for sent.Load() < from+400 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	for k, s := range states {
		if k == 0 {
			settle(0)
		} else {
			settle(after[k-1])
		}
		if out, err := lab.Run(sw, s.cmd[0], s.cmd[1:]...); err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("%v: %v\n%s", s.cmd, err, out)
		}
		after[k] = sent.Load()
	}
	settle(after[len(after)-1])
	close(stop)
	wg.Wait()
	total := sent.Load()
	dgs := col.waitDelivered(t, lab)
	if err := features.ProbeFeatures().Unavailable(features.FeatureKernCtx); err != nil {
		// The fallback (Debian 12's 6.1): without the FIB generation no
		// sample carries extended_router, and each is counted.
		checkNoRouter(t, lab, dgs, total, err)
		return
	}

	// stateOf returns the state a frame sent after after[k] (and no
	// later change) must be routed by at the earliest.
	earliest := func(n uint64) int {
		k := -1
		for i, a := range after {
			if n > a {
				k = i
			}
		}
		return k
	}
	type seenRouter struct {
		ok               bool
		nextHop          netip.Addr
		dstMask, srcMask uint32
	}
	// match returns the state whose route r names: of the states with
	// that route, the first from e on (a frame sent in state e may be
	// routed by a later state, the change being made while it was on its
	// way), else the last before e. States 1 and 3 have the same route:
	// a frame numbered in state 2 and routed by state 3 (sent while the
	// /24 was being removed) names state 3, not state 1 (seen in the
	// 6.12 VM: 20 frames sent as the removal ran).
	match := func(r seenRouter, e int) int {
		best := -2
		for k, s := range states {
			if s.routed && r.ok && r.nextHop == s.nextHop && r.dstMask == s.dstMask && r.srcMask == s.srcMask {
				if k >= e {
					return k
				}
				best = k
			}
		}
		return best
	}
	withRouter := make([]int, len(states))
	frames := make([]int, len(states))
	var ours []seenRouter // in the order our decoder reads the samples of p1 and p2
	for _, f := range flowSamplesOfRecords(dgs) {
		if f.source != p1 && f.source != p2 {
			continue
		}
		num, ok := frameNumber(f.header)
		if !ok || num > total {
			continue
		}
		r := seenRouter{}
		if f.router != nil {
			r = seenRouter{true, f.router.NextHop, f.router.DstMaskLen, f.router.SrcMaskLen}
		}
		ours = append(ours, r)
		e := earliest(num) // -1: sent before the first route existed
		if e >= 0 {
			frames[e]++
		}
		if !r.ok {
			continue // left out: counted by reason in the metrics
		}
		k := match(r, e)
		switch {
		case k < 0:
			t.Errorf("frame %d (data source %d): extended_router %v/%d/%d is none of the routes in force", num, f.source, r.nextHop, r.dstMask, r.srcMask)
		case e == len(states)-1:
			t.Errorf("frame %d sent after the last route was removed names %v/%d", num, r.nextHop, r.dstMask)
		case k < e && !sameRoute(states[k], states[e]):
			t.Errorf("frame %d (data source %d) sent in state %d (after frame %d) names state %d (%v/%d): a route no longer in force", num, f.source, e, after[e], k, r.nextHop, r.dstMask)
		case e >= 0:
			withRouter[e]++
		}
	}
	for k := 0; k < len(states)-1; k++ {
		t.Logf("state %d (%v/%d): %d samples of frames sent in it, %d with extended_router", k, states[k].nextHop, states[k].dstMask, frames[k], withRouter[k])
		if frames[k] == 0 || withRouter[k]*2 < frames[k] {
			t.Errorf("state %d: %d of %d samples carry extended_router", k, withRouter[k], frames[k])
		}
	}
	m, err := fetchMetrics(lab)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"ok", "not_routed", "no_route", "no_generation", "stale", "mismatch"} {
		t.Logf("extended_router %s: %d", r, m.sumWith("sflowswitchd_extended_router_total", `result="`+r+`"`, ""))
	}

	// goflow2 and tshark read the same extended_router records, in order.
	var gf []seenRouter
	for _, dg := range dgs {
		for _, s := range dg.gf.Samples {
			fs, ok := s.(goflow.FlowSample)
			if !ok || (fs.Header.SourceIdValue != p1 && fs.Header.SourceIdValue != p2) {
				continue
			}
			var r seenRouter
			isTest := false
			for _, rec := range fs.Records {
				switch v := rec.Data.(type) {
				case goflow.ExtendedRouter:
					a, _ := netip.AddrFromSlice(v.NextHop)
					r = seenRouter{true, a.Unmap(), v.DstMaskLen, v.SrcMaskLen}
				case goflow.SampledHeader:
					h := &sflow.SampledHeader{Header: v.HeaderData}
					if n, ok := frameNumber(h); ok && n <= total {
						isTest = true
					}
				}
			}
			if isTest {
				gf = append(gf, r)
			}
		}
	}
	compareRouters(t, "goflow2", gf, ours, func(r seenRouter) string { return fmt.Sprint(r) })
	const fIdx, fNH, fDst, fSrc = "sflow.flow_sample.index", "sflow_245.nexthop", "sflow_245.nexthop.dst_mask", "sflow_245.nexthop.src_mask"
	rows := tsharkFields(t, dgs, collectorPort, fIdx, fNH, fDst, fSrc)
	var tsNH, tsDst []string
	for _, r := range rows {
		tsNH = append(tsNH, r[fNH]...)
		tsDst = append(tsDst, r[fDst]...)
	}
	var want []string
	for _, dg := range dgs {
		for _, s := range dg.our.Samples {
			if fs, ok := s.(*sflow.FlowSample); ok {
				for _, rec := range fs.Records {
					if er, ok := rec.(*sflow.ExtendedRouter); ok {
						want = append(want, er.NextHop.String()+"/"+strconv.Itoa(int(er.DstMaskLen)))
					}
				}
			}
		}
	}
	if len(tsNH) != len(want) || len(tsDst) != len(want) {
		t.Errorf("tshark reads %d next hops and %d masks, our decoder %d extended_router", len(tsNH), len(tsDst), len(want))
	} else {
		for i := range want {
			if got := tsNH[i] + "/" + tsDst[i]; got != want[i] {
				t.Errorf("tshark extended_router %d: %s, ours %s", i, got, want[i])
				break
			}
		}
	}
}

// sameRoute reports whether two states name the same route (a state the
// routes come back to).
func sameRoute(a, b routeState) bool {
	return a.routed == b.routed && a.nextHop == b.nextHop && a.dstMask == b.dstMask && a.srcMask == b.srcMask
}

func compareRouters[T comparable](t *testing.T, who string, got, want []T, str func(T) string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s reads %d samples of test frames, our decoder %d", who, len(got), len(want))
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s sample %d: %s, ours %s", who, i, str(got[i]), str(want[i]))
			return
		}
	}
}

// flowRouter is a flow sample's data source, header and extended_router
// as our decoder reads them.
type flowRouter struct {
	source uint32
	header *sflow.SampledHeader
	router *sflow.ExtendedRouter
}

// flowSamplesOfRecords returns every flow sample of a port in dgs, in
// order, with its header and extended_router.
func flowSamplesOfRecords(dgs []datagram) []flowRouter {
	var out []flowRouter
	for _, dg := range dgs {
		for _, s := range dg.our.Samples {
			fs, ok := s.(*sflow.FlowSample)
			if !ok || fs.Source.Type != sflow.SourceIfIndex {
				continue
			}
			f := flowRouter{source: fs.Source.Index}
			for _, rec := range fs.Records {
				switch v := rec.(type) {
				case *sflow.SampledHeader:
					f.header = v
				case *sflow.ExtendedRouter:
					f.router = v
				}
			}
			out = append(out, f)
		}
	}
	return out
}

// checkNoRouter is TestExtendedRouter on a kernel without the FIB
// generation (why): no sample of a test frame carries extended_router,
// and the samples that asked the FIB are counted no_generation.
func checkNoRouter(t *testing.T, lab *netlab.Lab, dgs []datagram, total uint64, why error) {
	t.Helper()
	n := 0
	for _, f := range flowSamplesOfRecords(dgs) {
		num, ok := frameNumber(f.header)
		if !ok || num > total {
			continue
		}
		n++
		if f.router != nil {
			t.Errorf("frame %d carries extended_router although the kernel cannot tell the FIB generation (%v)", num, why)
		}
	}
	m, err := fetchMetrics(lab)
	if err != nil {
		t.Fatal(err)
	}
	noGen := m.sumWith("sflowswitchd_extended_router_total", `result="no_generation"`, "")
	t.Logf("without the FIB generation (%v): %d samples of test frames, none with extended_router; no_generation %d", why, n, noGen)
	if n == 0 || noGen == 0 {
		t.Errorf("%d samples of test frames, %d counted no_generation: want both above 0", n, noGen)
	}
}
