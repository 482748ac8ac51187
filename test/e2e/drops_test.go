package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"
	protoproducer "github.com/netsampler/goflow2/v2/producer/proto"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// dropRec is one discarded_packet sample as our decoder read it.
type dropRec struct {
	subAgent uint32
	dgSeq    uint32
	s        *sflow.DiscardedPacket
	linux    string // extended_linux_drop_reason
	symbol   string // extended_function
	queue    *sflow.ExtendedEgressQueue
	header   *sflow.SampledHeader
}

func dropSamplesOf(dgs []datagram) []dropRec {
	var out []dropRec
	for _, dg := range dgs {
		for _, s := range dg.our.Samples {
			dp, ok := s.(*sflow.DiscardedPacket)
			if !ok {
				continue
			}
			r := dropRec{subAgent: dg.our.SubAgentID, dgSeq: dg.our.SequenceNumber, s: dp}
			for _, rec := range dp.Records {
				switch rec := rec.(type) {
				case *sflow.ExtendedLinuxDropReason:
					r.linux = rec.Reason
				case *sflow.ExtendedFunction:
					r.symbol = rec.Symbol
				case *sflow.ExtendedEgressQueue:
					r.queue = rec
				case *sflow.SampledHeader:
					r.header = rec
				}
			}
			out = append(out, r)
		}
	}
	return out
}

// goflowDropCount counts the discarded_packet samples goflow2 read.
func goflowDropCount(dgs []datagram) int {
	n := 0
	for _, dg := range dgs {
		for _, s := range dg.gf.Samples {
			if _, ok := s.(goflow.DropSample); ok {
				n++
			}
		}
	}
	return n
}

// waitDropsQuiet waits until no discarded_packet sample arrived for 1 s.
func waitDropsQuiet(t *testing.T, col *collector) []datagram {
	t.Helper()
	last, n := time.Now(), -1
	deadline := time.Now().Add(testutil.Scaled(20 * time.Second))
	for {
		time.Sleep(100 * time.Millisecond)
		dgs := col.snapshot(t)
		if m := len(dropSamplesOf(dgs)); m != n {
			n, last = m, time.Now()
		}
		if time.Since(last) >= time.Second {
			return dgs
		}
		if time.Now().After(deadline) {
			t.Fatalf("discarded_packet samples keep arriving")
		}
	}
}

// TestDrops runs the daemon (drop notifications on by default) in a lab
// whose switch drops for three real reasons (nftables rule, UDP to a
// closed port of the switch's own address, tbf queue overflow), while a
// second lab drops the same traffic in its own namespace.
//
// Under the limit (drops_limit 100000 from the config file): per reason,
// the discarded_packet samples equal the true count (nft counter, frames
// sent, qdisc drop counter) and so do the per-reason metrics; input is the
// port the packet came in on, output the shaped port for its queue drops;
// reason codes follow the host agent's table (acl, port_unreachable,
// traffic_shaping); goflow2 reads the same samples.
//
// Then drops_limit 100 and SIGHUP, and 3000 ACL drops in a burst:
// notifications + the drops field == the true count, and the per-reason
// metric still equals the nft counter.
func TestDrops(t *testing.T) {
	lab := newLab(t, 3)
	other := netlab.New(t, 3)
	dl := lab.SetupDrops(t)
	ol := other.SetupDrops(t)
	col := listen(t, lab, collectorPort)
	conf := filepath.Join(t.TempDir(), "sflowswitchd.conf")
	writeConf := func(limit int, mode ...string) {
		t.Helper()
		on := "on"
		if len(mode) > 0 {
			on = mode[0]
		}
		body := fmt.Sprintf("sampling = 1000\npolling = 0\nports = [\"p1\"]\ndrops = %q\ndrops_limit = %d\ndrops_header_bytes = 128\n\n[[collector]]\naddress = \"%s:%d\"\n",
			on, limit, lab.CollectorAddr, collectorPort)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeConf(100000)
	d := startDaemon(t, lab, "-config", conf)
	d.waitReady(t, lab, "p1")
	idx := func(i int) uint32 { return uint32(lab.LinkIndex(lab.Switch, lab.Ports[i])) }

	const nACL, nClosed, nBurst = 60, 40, 150
	send := func(l *netlab.Lab, x *netlab.DropLab) {
		l.SendFrames(t, 0, x.ACLFrames(nACL))
		l.SendFrames(t, x.RoutedIdx, x.ClosedPortFrames(nClosed))
		l.SendFrames(t, 0, x.OverflowFrames(nBurst))
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); send(other, ol) }()
	send(lab, dl)
	wg.Wait()
	dgs := waitDropsQuiet(t, col)
	acl, qdisc := dl.ACLDropped(t), dl.QdiscDropped(t)
	if oa, oq := ol.ACLDropped(t), ol.QdiscDropped(t); oa != nACL || oq == 0 {
		t.Fatalf("the other namespace did not drop: nft %d, qdisc %d", oa, oq)
	}
	recs := dropSamplesOf(dgs)
	m := mustFetchMetrics(t, lab)
	if v, ok := m.value("sflowswitchd_drop_function_names"); !ok || v != 1 {
		t.Errorf("sflowswitchd_drop_function_names = %d, %v; want 1 (root reads /proc/kallsyms)", v, ok)
	}
	// The nftables drops' reason as this kernel gives it (NOT_SPECIFIED,
	// sFlow unknown, before 6.3: netlab.ACLDropReason).
	aclReason, aclCode := netlab.ACLDropReason(t), sflow.DropACL
	// catchAll: the kernel (6.1) gives the ACL drops NOT_SPECIFIED, which
	// it also gives other drops of the namespace: a netlink socket closed
	// with a reply unread (skb_queue_purge, no device), a TCP segment of a
	// closed metrics connection on lo (tcp_v4_rcv). There the ACL's drops
	// are told apart by where they came in (p1) and what they carry; the
	// others are counted aside and logged, and the reason's counter is
	// accounted against all of its notifications.
	catchAll := aclReason == "NOT_SPECIFIED"
	if catchAll {
		aclCode = sflow.DropUnknown
	}
	// notACL: a sample of the ACL's reason that is another drop of the
	// namespace (only where that reason is the catch-all).
	p1 := idx(0)
	notACL := func(r dropRec) bool { return catchAll && r.linux == aclReason && r.s.Input != p1 }
	otherNotSpecified := map[string]int{}
	for _, c := range []struct {
		linux   string
		code    sflow.DropReason
		truth   uint64
		in, out uint32
		frame   []byte // the frame sent
	}{
		{aclReason, aclCode, acl, idx(0), 0, dl.ACLFrames(1)[0]},
		{"NO_SOCKET", sflow.DropPortUnreachable, nClosed, idx(dl.RoutedIdx), 0, dl.ClosedPortFrames(1)[0]},
		{"QDISC_DROP", sflow.DropTrafficShaping, qdisc, idx(0), idx(dl.ShapedIdx), dl.OverflowFrames(1)[0]},
	} {
		var n, right, aside uint64
		for _, r := range recs {
			if r.linux != c.linux {
				continue
			}
			if c.linux == aclReason && notACL(r) {
				aside++
				otherNotSpecified[fmt.Sprintf("%s in %d", r.symbol, r.s.Input)]++
				continue
			}
			n++
			if r.s.Reason == c.code && r.s.Input == c.in && r.s.Output == c.out && r.s.Source == (sflow.DataSource{}) &&
				headerIs(r.header, c.frame, 128) && r.symbol != "" && (c.out == 0) == (r.queue == nil) {
				right++
			} else if right == n-1 {
				t.Errorf("%s sample %+v (queue %v, symbol %q, header %+v), want reason %d in %d out %d, header the first 128 bytes of\n%x",
					c.linux, r.s, r.queue, r.symbol, r.header, c.code, c.in, c.out, c.frame)
			}
		}
		if n != c.truth || right != n {
			t.Errorf("%s: %d discarded_packet samples (%d right), true count %d", c.linux, n, right, c.truth)
		}
		v, ok := m.get("sflowswitchd_switch_dropped_packets_total", `reason="`+c.linux+`"`)
		if c.linux == aclReason && catchAll {
			// The reason's counter: the ACL's drops and the others, each
			// notified (drops_limit 100000) or in the drops field.
			lost := uint64(0)
			if len(recs) > 0 {
				lost = uint64(recs[len(recs)-1].s.Drops)
			}
			if !ok || v < c.truth+aside || v > c.truth+aside+lost {
				t.Errorf("metric sflowswitchd_switch_dropped_packets_total{reason=%q} = %d (%v), want the %d ACL drops + %d other %s drops notified (+ at most %d not notified)",
					c.linux, v, ok, c.truth, aside, c.linux, lost)
			}
			t.Logf("%s (this kernel's catch-all): %d ACL drops (came in on p1), %d other drops of the namespace %v; counter %d", c.linux, c.truth, aside, otherNotSpecified, v)
		} else if !ok || v != c.truth {
			t.Errorf("metric sflowswitchd_switch_dropped_packets_total{reason=%q} = %d (%v), true count %d", c.linux, v, ok, c.truth)
		}
		t.Logf("%s: %d drops, %d samples", c.linux, c.truth, n)
	}
	if g := goflowDropCount(dgs); g != len(recs) {
		t.Errorf("goflow2 read %d discarded_packet samples, we %d", g, len(recs))
	}
	// The drop sub-agent: one, after the workers; sequences from 1.
	seqs := map[uint32][]uint32{}
	for _, r := range recs {
		seqs[r.subAgent] = append(seqs[r.subAgent], r.s.SequenceNumber)
	}
	if len(seqs) != 1 {
		t.Errorf("discarded_packet samples from sub-agents %v, want one", seqs)
	}
	for sub, s := range seqs {
		if err := contiguousFrom1(s); err != nil {
			t.Errorf("discarded_packet sequence of sub-agent %d: %v", sub, err)
		}
	}
	checkDatagramSequences(t, dgs)

	// Frames from a packet socket's transmit ring (trafgen's way: only
	// the Ethernet header in the skb's linear area), bridged from p1 to p3
	// and dropped by the bridge forward chain's rule: the samples carry
	// the whole 60-byte frame (34 bytes, no UDP header, before),
	// and an independent decoder reads the UDP ports from them.
	before := len(recs)
	const nFwd = 20
	fwd := dl.ForwardFrames(1, fwdSrcPort, make([]byte, 18))[0]
	lab.SendFramesTxRing(t, 0, dl.ForwardFrames(nFwd, fwdSrcPort, make([]byte, 18)))
	dgs = waitDropsQuiet(t, col)
	recs = dropSamplesOf(dgs)
	// The reason: NETFILTER_DROP (acl), or NOT_SPECIFIED (unknown) on a
	// kernel that gives no reason for it (as the prerouting drops above).
	// Other drops of the namespace meanwhile (a few QUEUE_PURGE of its
	// loopback sockets) are left aside.
	var fwdN, fwdRight int
	fwdReason := ""
	others := map[string]int{}
	for _, r := range recs[before:] {
		code, ok := map[string]sflow.DropReason{"NETFILTER_DROP": sflow.DropACL, "NOT_SPECIFIED": sflow.DropUnknown}[r.linux]
		if !ok || notACL(r) {
			others[r.linux]++
			continue
		}
		fwdN++
		if (fwdReason == "" || r.linux == fwdReason) && r.s.Reason == code && r.s.Input == idx(0) && r.s.Output == idx(dl.ShapedIdx) &&
			headerIs(r.header, fwd, 128) {
			fwdRight++
			fwdReason = r.linux
		} else if fwdRight == fwdN-1 {
			t.Errorf("bridge forward drop: sample %+v (%s), header %+v; want reason acl or unknown, in %d out %d, header\n%x",
				r.s, r.linux, r.header, idx(0), idx(dl.ShapedIdx), fwd)
		}
	}
	t.Logf("bridge forward drops of a transmit ring's frames: %d samples (%s), %d right; other reasons meanwhile %v", fwdN, fwdReason, fwdRight, others)
	if got := dl.RuleDropped(t, "bridge", "acl_fwd"); fwdN != nFwd || fwdRight != nFwd || got != nFwd {
		t.Errorf("bridge forward drops: %d right samples of %d, nft counted %d, sent %d", fwdRight, fwdN, got, nFwd)
	}
	checkDropDecoded(t, dgs, fwdSrcPort, netlab.DropForwardPort)

	// Above the limit.
	writeConf(100)
	d.signal(t, syscall.SIGHUP)
	time.Sleep(500 * time.Millisecond)
	before = len(recs)
	lastDrops := func(rs []dropRec) uint32 { return rs[len(rs)-1].s.Drops }
	const flood = 3000
	lab.SendFrames(t, 0, dl.ACLFrames(flood))
	// One more drop in a fresh second carries the final drops count.
	time.Sleep(1100 * time.Millisecond)
	lab.SendFrames(t, 0, dl.ACLFrames(1))
	dgs = waitDropsQuiet(t, col)
	recs = dropSamplesOf(dgs)
	m = mustFetchMetrics(t, lab)
	total, _ := m.value("sflowswitchd_switch_dropped_packets_counted_total")
	// Every notification since the start (no send error, checked below)
	// plus the last drops field must be every drop counted since the start.
	notified := uint64(len(recs))
	lost := uint64(lastDrops(recs))
	extra := map[string]int{}
	for _, r := range recs[before:] {
		if r.linux != aclReason {
			extra[r.linux]++
		}
	}
	t.Logf("above the limit: %d drops counted, %d notified, %d lost (drops field); other reasons %v", total, notified, lost, extra)
	if v, ok := m.get("sflowswitchd_collector_send_errors_total", ""); !ok || v != 0 {
		t.Errorf("%d drop datagrams not sent", v)
	}
	if notified+lost != total || total < flood+1 {
		t.Errorf("notifications %d + drops field %d != drops %d (sent %d)", notified, lost, total, flood+1)
	}
	if notified-uint64(before) > 3*100 {
		t.Errorf("%d notifications for %d drops with a limit of 100/s", notified, total)
	}
	acl = dl.ACLDropped(t)
	wantACL := acl
	if fwdReason == aclReason {
		wantACL += nFwd
	}
	if v, _ := m.get("sflowswitchd_switch_dropped_packets_total", `reason="`+aclReason+`"`); catchAll {
		// The reason counts other drops of the namespace too (above):
		// the ACL's exact count is p1's, where they came in (the forward
		// chain's drops count on their egress port); the reason's
		// counter holds them and the others notified since the start.
		aside := 0
		for _, r := range recs {
			if notACL(r) {
				aside++
			}
		}
		onP1, _ := m.get("sflowswitchd_port_switch_dropped_packets_total", fmt.Sprintf(`ifindex="%d"`, p1))
		if onP1 != acl || v < wantACL+uint64(aside) || acl != nACL+flood+1 {
			t.Errorf("port p1's drops %d, want the nft prerouting counter %d; metric %s %d, want at least %d ACL + %d other drops notified; sent %d",
				onP1, acl, aclReason, v, wantACL, aside, nACL+flood+1)
		}
		t.Logf("%s (catch-all): p1 %d drops, nft %d; counter %d: %d ACL + %d other drops notified + %d not notified",
			aclReason, onP1, acl, v, wantACL, aside, int64(v)-int64(wantACL)-int64(aside))
	} else if v != wantACL || acl != nACL+flood+1 {
		t.Errorf("metric %s %d, want %d (nft counters: prerouting %d, forward %d, reason %s); sent %d", aclReason, v, wantACL, acl, nFwd, fwdReason, nACL+flood+1)
	}

	// Off and on again (SIGHUP): the program is unloaded, then loaded
	// again, and notifications flow again to the same collector.
	writeConf(100, "off")
	d.signal(t, syscall.SIGHUP)
	if !waitDropsLoaded(t, lab, false) {
		t.Errorf("drops = \"off\" left the program loaded")
	}
	writeConf(100)
	d.signal(t, syscall.SIGHUP)
	if !waitDropsLoaded(t, lab, true) {
		t.Fatalf("drops on again: the program was not loaded\n%s", d.log())
	}
	lab.SendFrames(t, dl.RoutedIdx, dl.ClosedPortFrames(5))
	before = len(recs)
	dgs = waitDropsQuiet(t, col)
	recs = dropSamplesOf(dgs)
	n := 0
	for _, r := range recs[before:] {
		if r.linux == "NO_SOCKET" {
			n++
		}
	}
	if n != 5 {
		t.Errorf("after off and on: %d NO_SOCKET samples, want 5\n%s", n, d.log())
	}
	seqs = map[uint32][]uint32{}
	for _, r := range recs {
		seqs[r.subAgent] = append(seqs[r.subAgent], r.s.SequenceNumber)
	}
	for sub, s := range seqs {
		if err := contiguousFrom1(s); err != nil {
			t.Errorf("discarded_packet sequence of sub-agent %d after off/on: %v", sub, err)
		}
	}
	checkDatagramSequences(t, dgs)
}

// waitDropsLoaded waits up to 10 s for the drop program to be loaded (on)
// or unloaded (off) after a SIGHUP, as the metrics show it (the kernel
// counters are exported only while it is loaded), rather than for a fixed
// time: loading takes longer on a slow machine (1.6 s under emulation).
func waitDropsLoaded(t *testing.T, lab *netlab.Lab, on bool) bool {
	t.Helper()
	for end := time.Now().Add(testutil.Scaled(10 * time.Second)); ; {
		if _, loaded := mustFetchMetrics(t, lab).value("sflowswitchd_switch_dropped_packets_counted_total"); loaded == on {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fwdSrcPort is the UDP source port of TestDrops' bridge forward frames.
const fwdSrcPort = 40100

// headerIs reports whether a sampled_header record carries the first n
// bytes of frame as an Ethernet header of a frame of len(frame) bytes
// without its FCS (frame_length counts the FCS, stripped 4).
func headerIs(h *sflow.SampledHeader, frame []byte, n int) bool {
	return h != nil && h.Protocol == sflow.HeaderProtocolEthernet && h.Stripped == 4 &&
		h.FrameLength == uint32(len(frame))+4 && bytes.Equal(h.Header, frame[:min(n, len(frame))])
}

// checkDropDecoded reads the discarded_packet samples with independent
// decoders: goflow2 decodes each datagram and its sampled_header record,
// and its packet parser reads the dropped frame's UDP ports from the
// header; tshark (whose sFlow dissector, 4.0, does not know the
// discarded_packet format) dissects the header bytes goflow2 extracted as
// an Ethernet frame. Both must find UDP sport -> dport in every sample
// whose header goflow2 parsed as UDP to dport, and at least one.
func checkDropDecoded(t *testing.T, dgs []datagram, sport, dport uint16) {
	t.Helper()
	var frames []testutil.PcapFrame
	for _, dg := range dgs {
		for _, s := range dg.gf.Samples {
			ds, ok := s.(goflow.DropSample)
			if !ok {
				continue
			}
			for _, rec := range ds.Records {
				h, ok := rec.Data.(goflow.SampledHeader)
				if !ok {
					continue
				}
				var m protoproducer.ProtoProducerMessage
				if err := protoproducer.ParsePacket(&m, h.HeaderData, nil, nil); err != nil {
					t.Errorf("goflow2 cannot parse a dropped header %x: %v", h.HeaderData, err)
					continue
				}
				if m.Proto != 17 || m.DstPort != uint32(dport) {
					continue
				}
				if m.SrcPort != uint32(sport) || h.FrameLength != 64 {
					t.Errorf("goflow2: dropped frame UDP %d -> %d, frame_length %d; want %d -> %d, 64", m.SrcPort, m.DstPort, h.FrameLength, sport, dport)
				}
				if len(frames) == 0 {
					t.Logf("goflow2: discarded_packet seq %d, drops %d, input %d, output %d, reason %d; sampled_header protocol %d, frame_length %d, stripped %d, %d header bytes: UDP %s:%d -> %s:%d",
						ds.Header.SampleSequenceNumber, ds.Drops, ds.Input, ds.Output, ds.Reason, h.Protocol, h.FrameLength, h.Stripped, len(h.HeaderData),
						net.IP(m.SrcAddr), m.SrcPort, net.IP(m.DstAddr), m.DstPort)
				}
				frames = append(frames, testutil.PcapFrame{At: dg.at, Frame: h.HeaderData})
			}
		}
	}
	if len(frames) == 0 {
		t.Fatalf("goflow2 found no discarded_packet header of UDP to port %d", dport)
	}
	fields := []string{"eth.src", "eth.dst", "ip.src", "ip.dst", "udp.srcport", "udp.dstport", "frame.len"}
	res := testutil.TsharkFields(t, frames, 0, fields...)
	if len(res) != len(frames) {
		t.Fatalf("tshark decoded %d frames of %d", len(res), len(frames))
	}
	for i, r := range res {
		if i == 0 {
			var b strings.Builder
			for _, f := range fields {
				fmt.Fprintf(&b, " %s=%s", f, strings.Join(r[f], ","))
			}
			t.Logf("tshark, the first dropped header:%s", b.String())
		}
		if got := strings.Join(r["udp.srcport"], ",") + ">" + strings.Join(r["udp.dstport"], ","); got != fmt.Sprintf("%d>%d", sport, dport) {
			t.Errorf("tshark: dropped header %d has UDP ports %s, want %d>%d", i, got, sport, dport)
		}
	}
}
