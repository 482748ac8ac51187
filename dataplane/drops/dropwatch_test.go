package drops

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// openDropsFor opens the drop program for the lab's switch namespace.
func openDropsFor(t *testing.T, lab *netlab.Lab, limit uint32) *Drops {
	t.Helper()
	ino, err := NetnsInode("/run/netns/" + lab.Switch)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(Config{Netns: ino, Limit: limit, HeaderBytes: DefaultHeaderBytes})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// dropTally is what the notifications said, per kernel reason name.
type dropTally struct {
	n      map[string]int
	ports  map[string]map[[2]uint32]int // reason -> (in, out) -> notifications
	header map[string][]byte            // reason -> first header seen
	symbol map[string]string
}

// collectDrops reads notifications until none came for quiet.
func collectDrops(t *testing.T, d *Drops, quiet time.Duration) dropTally {
	t.Helper()
	tl := dropTally{n: map[string]int{}, ports: map[string]map[[2]uint32]int{}, header: map[string][]byte{}, symbol: map[string]string{}}
	var ev Event
	for {
		d.SetDeadline(time.Now().Add(quiet))
		_, err := d.Read(&ev, func(e *Event) {
			tl.n[e.ReasonName]++
			if tl.ports[e.ReasonName] == nil {
				tl.ports[e.ReasonName] = map[[2]uint32]int{}
			}
			tl.ports[e.ReasonName][[2]uint32{e.InIfIndex, e.OutIfIndex}]++
			if _, ok := tl.header[e.ReasonName]; !ok {
				tl.header[e.ReasonName] = bytes.Clone(e.Header)
				tl.symbol[e.ReasonName] = e.Symbol
			}
		})
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return tl
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// reasonCode returns the kernel code of a reason name.
func reasonCode(t *testing.T, d *Drops, name string) uint32 {
	t.Helper()
	for c, n := range d.reasons {
		if n == name {
			return c
		}
	}
	t.Fatalf("kernel has no drop reason %s", name)
	return 0
}

// TestDropNotifications: three real drop reasons in the switch namespace,
// under the limit: notifications per reason == the true count (nft rule
// counter, frames sent, qdisc drop counter) == the per-reason counter;
// ingress and egress ports are the right ones; the header is the packet's.
// Meanwhile a second lab (another namespace of ours) drops the same
// traffic, and none of it is notified or counted.
func TestDropNotifications(t *testing.T) {
	lab := netlab.New(t, 3)
	other := netlab.New(t, 3)
	dl := lab.SetupDrops(t)
	ol := other.SetupDrops(t)
	d := openDropsFor(t, lab, 1_000_000)

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

	tl := collectDrops(t, d, 500*time.Millisecond)
	acl, qdisc := dl.ACLDropped(t), dl.QdiscDropped(t)
	if acl != nACL || qdisc == 0 || qdisc >= nBurst {
		t.Fatalf("lab truth: nft counter %d (sent %d), qdisc drops %d of %d", acl, nACL, qdisc, nBurst)
	}
	if oa, oq := ol.ACLDropped(t), ol.QdiscDropped(t); oa != nACL || oq == 0 {
		t.Fatalf("the other namespace did not drop: nft %d, qdisc %d", oa, oq)
	}
	counts, err := d.ReasonCounts()
	if err != nil {
		t.Fatal(err)
	}
	p := func(i int) uint32 { return uint32(lab.PortIndex(t, i)) }
	aclReason := netlab.ACLDropReason(t)
	for _, c := range []struct {
		reason  string
		truth   uint64
		in, out uint32
	}{
		{aclReason, acl, p(0), 0},
		{"NO_SOCKET", nClosed, p(dl.RoutedIdx), 0},
		{"QDISC_DROP", qdisc, p(0), p(dl.ShapedIdx)},
	} {
		if got := uint64(tl.n[c.reason]); got != c.truth {
			t.Errorf("%s: %d notifications, true count %d (all: %v)", c.reason, got, c.truth, tl.n)
		}
		if got := counts[reasonCode(t, d, c.reason)]; got != c.truth {
			t.Errorf("%s: counter %d, true count %d", c.reason, got, c.truth)
		}
		if got := tl.ports[c.reason][[2]uint32{c.in, c.out}]; uint64(got) != c.truth {
			t.Errorf("%s: %d notifications with in=%d out=%d, want all %d: %v", c.reason, got, c.in, c.out, c.truth, tl.ports[c.reason])
		}
		t.Logf("%s: %d drops, function %q", c.reason, c.truth, tl.symbol[c.reason])
	}
	if h := tl.header[aclReason]; !bytes.Equal(h, dl.ACLFrames(1)[0]) {
		t.Errorf("%s header %x, want the frame sent %x", aclReason, h, dl.ACLFrames(1)[0])
	}
	if h := tl.header["QDISC_DROP"]; len(h) != DefaultHeaderBytes || !bytes.Equal(h, dl.OverflowFrames(1)[0][:DefaultHeaderBytes]) {
		t.Errorf("QDISC_DROP header %x, want the first 128 bytes of the frame", h)
	}
	total := 0
	for _, v := range tl.n {
		total += v
	}
	// The totals against what was read, once they hold together: a
	// stray drop of the switch's own (allowed below) may come after the
	// collection ended, between reading the counters and the stats (4
	// of them in the 6.1 VM under TCG).
	var st Stats
	var sum uint64
	for deadline := time.Now().Add(testutil.Scaled(5 * time.Second)); ; {
		if st, err = d.Stats(); err != nil {
			t.Fatal(err)
		}
		if counts, err = d.ReasonCounts(); err != nil {
			t.Fatal(err)
		}
		sum = 0
		for _, v := range counts {
			sum += v
		}
		if (st.Drops == sum && st.Notified == uint64(total)) || time.Now().After(deadline) {
			break
		}
		for _, v := range collectDrops(t, d, 200*time.Millisecond).n {
			total += v
		}
	}
	if st.Drops != sum || st.Notified != uint64(total) || st.Suppressed != 0 || st.RingFull != 0 || st.Uncounted != 0 {
		t.Errorf("stats %+v; per-reason sum %d, notifications read %d", st, sum, total)
	}
	// Only this lab's drops: everything counted is this lab's three kinds
	// (plus nothing else the switch may drop on its own).
	if want := acl + nClosed + qdisc; st.Drops < want || st.Drops > want+5 {
		t.Errorf("counted %d drops, this namespace made %d (other namespace's leaking in?)", st.Drops, want)
	}
	ports, err := d.PortCounts()
	if err != nil {
		t.Fatal(err)
	}
	if ports[p(0)] < acl || ports[p(dl.RoutedIdx)] != nClosed || ports[p(dl.ShapedIdx)] != qdisc {
		t.Errorf("per-port counts %v: want p1>=%d, p2=%d, p3=%d", ports, acl, nClosed, qdisc)
	}
}

// TestDropLimit: above the limit, notifications + suppressed == the true
// count, the per-reason counter is exact, and no more than the limit is
// notified per second.
func TestDropLimit(t *testing.T) {
	lab := netlab.New(t, 3)
	dl := lab.SetupDrops(t)
	d := openDropsFor(t, lab, DefaultLimit)
	const n = 2000
	start := time.Now()
	lab.SendFrames(t, 0, dl.ACLFrames(n))
	elapsed := time.Since(start)
	tl := collectDrops(t, d, 300*time.Millisecond)
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	counts, err := d.ReasonCounts()
	if err != nil {
		t.Fatal(err)
	}
	acl := dl.ACLDropped(t)
	if acl != n {
		t.Fatalf("nft counted %d of %d", acl, n)
	}
	aclReason := netlab.ACLDropReason(t)
	got := uint64(tl.n[aclReason])
	if counts[reasonCode(t, d, aclReason)] != acl {
		t.Errorf("per-reason counter %d, true %d", counts[reasonCode(t, d, aclReason)], acl)
	}
	if got+st.Suppressed+st.RingFull != st.Drops || st.Drops < acl {
		t.Errorf("notified %d + suppressed %d + ring full %d != drops %d (true ACL drops %d)", got, st.Suppressed, st.RingFull, st.Drops, acl)
	}
	if max := uint64(DefaultLimit) * uint64(elapsed/time.Second+2); got > max || got == 0 {
		t.Errorf("%d notifications in %v with a limit of %d/s", got, elapsed, DefaultLimit)
	}
	t.Logf("%d drops in %v: %d notified, %d suppressed", acl, elapsed, got, st.Suppressed)

	// Configure: limit 0 counts without notifying.
	if err := d.Configure(Config{Limit: 0, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	lab.SendFrames(t, 0, dl.ACLFrames(10))
	if tl := collectDrops(t, d, 200*time.Millisecond); len(tl.n) != 0 {
		t.Errorf("limit 0 notified %v", tl.n)
	}
	st2, _ := d.Stats()
	if st2.Drops-st.Drops < 10 || st2.Suppressed-st.Suppressed != st2.Drops-st.Drops {
		t.Errorf("limit 0: stats %+v after %+v", st2, st)
	}
}

// dropRecord is one notification as the header tests keep it.
type dropRecord struct {
	reason   string
	in, out  uint32
	frameLen uint32
	proto    uint32
	paged    uint32
	header   []byte
}

// collectRecords reads notifications until none came for quiet.
func collectRecords(t *testing.T, d *Drops, quiet time.Duration) []dropRecord {
	t.Helper()
	var recs []dropRecord
	var ev Event
	for {
		d.SetDeadline(time.Now().Add(quiet))
		_, err := d.Read(&ev, func(e *Event) {
			recs = append(recs, dropRecord{reason: e.ReasonName, in: e.InIfIndex, out: e.OutIfIndex, frameLen: e.FrameLen,
				proto: e.HeaderProto, paged: e.PagedLen, header: bytes.Clone(e.Header)})
		})
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return recs
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// patterned returns n payload bytes that differ from case to case.
func patterned(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = seed + byte(i*7)
	}
	return p
}

// forwardedIPv4 is frame as the kernel holds it at the inet forward hook:
// ip_forward decrements the TTL (and updates the header checksum) before
// the hook runs.
func forwardedIPv4(frame []byte) []byte {
	f := bytes.Clone(frame)
	ip := f[14:34]
	ip[8]--
	ip[10], ip[11] = 0, 0
	var s uint32
	for i := 0; i < len(ip); i += 2 {
		s += uint32(ip[i])<<8 | uint32(ip[i+1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(s))
	return f
}

// netfilterReason reports whether a kernel reason name is an nftables
// drop: NETFILTER_DROP, or NOT_SPECIFIED where the kernel has no reason
// for it (netlab.ACLDropReason; the inet family's hook gives
// NETFILTER_DROP since 5.19, the bridge family's prerouting since 6.3).
func netfilterReason(r string) bool { return r == "NETFILTER_DROP" || r == "NOT_SPECIFIED" }

// TestDropHeaders: a notification carries the dropped frame's
// first HeaderBytes bytes from its MAC header and its length, byte for
// byte, whatever the skb's layout. Frames from a packet socket are sent
// two ways: written (the whole frame in the skb's linear area) and from a
// transmit ring as trafgen does (only the Ethernet header linear, the rest
// in page fragments: PagedLen > 0 at the drop is checked). They are
// dropped
//   - bridged between two veth ports, by an nftables rule in the bridge
//     forward chain (the case that arrived with 34 bytes, Ethernet + IPv4,
//     before: the linear area only);
//   - routed between two veth ports, by a rule in the inet forward chain
//     (the header as the kernel holds it there: TTL already decremented);
//
// and TCP through the stack: a client's segments (GSO, payload in page
// fragments) to a server in the switch namespace, dropped in the inet
// input chain, compared with the same segments captured as they left the
// client. Every notification of every case is compared, not one.
func TestDropHeaders(t *testing.T) {
	lab := netlab.New(t, 4)
	dl := lab.SetupDrops(t)
	d := openDropsFor(t, lab, 1_000_000)
	p := func(i int) uint32 { return uint32(lab.PortIndex(t, i)) }

	type frameCase struct {
		name    string
		frame   []byte // as sent
		want    []byte // the frame as the kernel holds it at the drop
		send    func(t testing.TB, host int, frames [][]byte)
		host    int
		in, out uint32
		paged   bool // the skb must have had paged data at the drop
	}
	const k = 10
	var cases []frameCase
	for i, sz := range []int{18, 258} { // 60- and 300-byte frames
		bridged := func(name string, seed byte, send func(testing.TB, int, [][]byte), paged bool) frameCase {
			f := dl.ForwardFrames(1, uint16(40100+len(cases)), patterned(sz+len(cases), seed))[0]
			return frameCase{name: name, frame: f, want: f, send: send, host: 0, in: p(0), out: p(dl.ShapedIdx), paged: paged}
		}
		routed := func(name string, seed byte, send func(testing.TB, int, [][]byte), paged bool) frameCase {
			f := dl.RoutedFrames(1, uint16(40100+len(cases)), patterned(sz+len(cases), seed))[0]
			return frameCase{name: name, frame: f, want: forwardedIPv4(f), send: send, host: dl.RoutedIdx, in: p(dl.RoutedIdx), paged: paged}
		}
		seed := byte(i * 16)
		cases = append(cases, bridged(fmt.Sprintf("bridged, tx ring, %d bytes", 42+sz+len(cases)), seed+1, lab.SendFramesTxRing, true))
		cases = append(cases, bridged(fmt.Sprintf("bridged, write, %d bytes", 42+sz+len(cases)), seed+2, lab.SendFrames, false))
		cases = append(cases, routed(fmt.Sprintf("routed, tx ring, %d bytes", 42+sz+len(cases)), seed+3, lab.SendFramesTxRing, true))
		cases = append(cases, routed(fmt.Sprintf("routed, write, %d bytes", 42+sz+len(cases)), seed+4, lab.SendFrames, false))
	}
	for _, c := range cases {
		c.send(t, c.host, repeat(c.frame, k))
	}
	recs := collectRecords(t, d, 500*time.Millisecond)
	if got := dl.RuleDropped(t, "bridge", "acl_fwd") + dl.RuleDropped(t, "inet", "acl_fwd"); got != uint64(k*len(cases)) {
		t.Fatalf("nft counted %d forward drops, sent %d", got, k*len(cases))
	}
	checkFrames := func(recs []dropRecord, cases []frameCase, n int) {
		t.Helper()
		for _, c := range cases {
			// The notifications of this case: their first 34 bytes
			// (Ethernet, IPv4 with its length) are the case's; the 34
			// bytes were there even when the rest was missing.
			var got, right, paged int
			wantHdr := c.want[:min(n, len(c.want))]
			for _, r := range recs {
				if len(r.header) < 34 || !bytes.Equal(r.header[:34], c.want[:34]) {
					continue
				}
				got++
				if r.paged > 0 {
					paged++
				}
				if bytes.Equal(r.header, wantHdr) && r.frameLen == uint32(len(c.want)) && r.proto == 1 &&
					r.in == c.in && r.out == c.out && netfilterReason(r.reason) {
					right++
				} else if right == got-1 {
					t.Errorf("%s: notification %s in %d out %d, frame_len %d, proto %d, paged %d, header (%d bytes)\n%x\nwant in %d out %d, frame_len %d, header (%d bytes)\n%x",
						c.name, r.reason, r.in, r.out, r.frameLen, r.proto, r.paged, len(r.header), r.header, c.in, c.out, len(c.want), len(wantHdr), wantHdr)
				}
			}
			if got != k || right != got {
				t.Errorf("%s: %d notifications (%d right), sent %d", c.name, got, right, k)
			}
			if c.paged && paged != got {
				t.Errorf("%s: %d of %d notifications had paged data (skb data_len > 0), want all", c.name, paged, got)
			}
			t.Logf("%s: %d notifications, %d right, %d paged, header %d of %d bytes", c.name, got, right, paged, len(wantHdr), len(c.want))
		}
	}
	checkFrames(recs, cases, DefaultHeaderBytes)

	// Other sizes: the whole 256 bytes, and fewer than the frame's headers.
	for _, n := range []int{MaxHeaderBytes, 40} {
		if err := d.Configure(Config{Limit: 1_000_000, HeaderBytes: n}); err != nil {
			t.Fatal(err)
		}
		big := dl.ForwardFrames(1, 40200, patterned(958, byte(n)))[0] // 1000 bytes
		cs := []frameCase{{name: fmt.Sprintf("bridged, tx ring, 1000 bytes, header %d", n), frame: big, want: big, host: 0, in: p(0), out: p(dl.ShapedIdx), paged: true}}
		lab.SendFramesTxRing(t, 0, repeat(big, k))
		checkFrames(collectRecords(t, d, 300*time.Millisecond), cs, n)
	}
	if err := d.Configure(Config{Limit: 1_000_000, HeaderBytes: DefaultHeaderBytes}); err != nil {
		t.Fatal(err)
	}

	t.Run("tcp", func(t *testing.T) { testDropHeadersTCP(t, lab, dl, d) })
	t.Run("tcp-output", func(t *testing.T) { testDropHeadersTCPOut(t, lab, dl, d) })

	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.RingFull != 0 || st.BufferLost != 0 || st.Suppressed != 0 || st.Notified != st.Drops {
		t.Errorf("stats %+v: want every drop notified", st)
	}
}

// testDropHeadersTCP: a TCP client in the routed host sends 256 KiB to a
// server on the switch's address; its data segments (longer than 200
// bytes) are dropped in the switch's inet input chain. veth passes the
// client's GSO segments whole (headers linear, payload in page
// fragments), so the notifications are of nonlinear skbs of up to 64 KiB.
// Each notification's header must equal the first 128 bytes of a segment
// captured as it left the client (same sequence number), and its
// frame_len that segment's length.
func testDropHeadersTCP(t *testing.T, lab *netlab.Lab, dl *netlab.DropLab, d *Drops) {
	capt := lab.Capture(t, lab.Hosts[dl.RoutedIdx], "eth0")
	var ln net.Listener
	if err := lab.Do(lab.Switch, func() error {
		var err error
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(dl.SwitchAddr, netlab.DropTCPPort).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	var conn net.Conn
	if err := lab.Do(lab.Hosts[dl.RoutedIdx], func() error {
		var err error
		conn, err = net.DialTimeout("tcp4", netip.AddrPortFrom(dl.SwitchAddr, netlab.DropTCPPort).String(), 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	stream := patterned(256<<10, 99)
	go func() { _, _ = conn.Write(stream) }() // blocks: nothing gets through
	// The first flight and its retransmissions (RTO 200 ms, doubling),
	// then an abort (RST, no linger): no segment is sent after it, so the
	// nft counter read below is final.
	time.Sleep(1200 * time.Millisecond)
	if err := conn.(*net.TCPConn).SetLinger(0); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	recs := collectRecords(t, d, 500*time.Millisecond)

	// The client's outgoing segments, by sequence number.
	sent := map[uint32][][]byte{}
	for _, f := range capt.Queued(t) {
		if !f.Outgoing {
			continue
		}
		if seq, ok := tcpSeq(f.Data, netlab.DropTCPPort); ok {
			sent[seq] = append(sent[seq], f.Data)
		}
	}
	var got, right, paged int
	for _, r := range recs {
		seq, ok := tcpSeq(r.header, netlab.DropTCPPort)
		if !ok {
			continue
		}
		got++
		if r.paged > 0 {
			paged++
		}
		match := false
		for _, f := range sent[seq] {
			n := min(DefaultHeaderBytes, len(f))
			// frame_len: the segment's length as its IPv4 total length
			// says (the capture buffer may cut a 64 KiB segment).
			if bytes.Equal(r.header, f[:n]) && r.frameLen == 14+uint32(binary.BigEndian.Uint16(f[16:18])) {
				match = true
			}
		}
		if match && netfilterReason(r.reason) && r.in == uint32(lab.PortIndex(t, dl.RoutedIdx)) && r.out == 0 {
			right++
		} else if right == got-1 {
			t.Errorf("TCP notification %s in %d out %d frame_len %d paged %d seq %d header\n%x\nmatches none of the %d segments sent with that sequence number",
				r.reason, r.in, r.out, r.frameLen, r.paged, seq, r.header, len(sent[seq]))
		}
	}
	truth := dl.RuleDropped(t, "inet", "acl_in")
	t.Logf("TCP: %d segments dropped (nft), %d notifications, %d right, %d paged", truth, got, right, paged)
	if got == 0 || right != got || uint64(got) != truth {
		t.Errorf("TCP: %d notifications (%d right), nft dropped %d", got, right, truth)
	}
	if paged == 0 {
		t.Errorf("TCP: no notification of a paged skb")
	}
}

// testDropHeadersTCPOut: a server in the switch namespace sends 256 KiB
// to a client in the routed host; its data segments (GSO, payload in page
// fragments) are dropped in the switch's inet output chain, before the
// neighbour layer gives them a MAC header: the notification's header
// starts at the IPv4 header (header_proto 11) and its frame_len is the
// IPv4 total length. Nothing of them reaches a wire, so each header is
// compared with what the server sent: addresses, protocol and ports, the
// IPv4 total length, and the payload bytes, which must be the stream's
// bytes at the segment's sequence number (relative to the server's
// initial sequence number, from the SYN-ACK the client received).
func testDropHeadersTCPOut(t *testing.T, lab *netlab.Lab, dl *netlab.DropLab, d *Drops) {
	capt := lab.Capture(t, lab.Hosts[dl.RoutedIdx], "eth0")
	var ln net.Listener
	addr := netip.AddrPortFrom(dl.SwitchAddr, netlab.DropTCPOutPort)
	if err := lab.Do(lab.Switch, func() error {
		var err error
		ln, err = net.Listen("tcp4", addr.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stream := patterned(256<<10, 77)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
		_, _ = c.Write(stream) // blocks: nothing gets through
	}()
	var conn net.Conn
	if err := lab.Do(lab.Hosts[dl.RoutedIdx], func() error {
		var err error
		conn, err = net.DialTimeout("tcp4", addr.String(), 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	srv, ok := <-accepted
	if !ok {
		t.Fatal("no connection accepted")
	}
	time.Sleep(1200 * time.Millisecond) // first flight and retransmissions
	if err := srv.(*net.TCPConn).SetLinger(0); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	recs := collectRecords(t, d, 500*time.Millisecond)

	// The server's initial sequence number, from its SYN-ACK.
	var isn uint32
	found := false
	for _, f := range capt.Queued(t) {
		if f.Outgoing || len(f.Data) < 14+20+20 || binary.BigEndian.Uint16(f.Data[12:14]) != 0x0800 || f.Data[23] != 6 {
			continue
		}
		tcp := f.Data[14+int(f.Data[14]&0x0f)*4:]
		if binary.BigEndian.Uint16(tcp[0:2]) == netlab.DropTCPOutPort && tcp[13]&0x12 == 0x12 { // SYN+ACK
			isn, found = binary.BigEndian.Uint32(tcp[4:8]), true
		}
	}
	if !found {
		t.Fatal("the client saw no SYN-ACK")
	}
	var got, right, paged int
	sa, ha := dl.SwitchAddr.As4(), dl.HostAddr.As4()
	for _, r := range recs {
		h := r.header
		if r.proto != 11 || len(h) < 40 || h[9] != 6 {
			continue
		}
		ihl := int(h[0]&0x0f) * 4
		if len(h) < ihl+20 || binary.BigEndian.Uint16(h[ihl:]) != netlab.DropTCPOutPort {
			continue
		}
		got++
		if r.paged > 0 {
			paged++
		}
		tcp := h[ihl:]
		off := int(tcp[12]>>4) * 4
		seq := binary.BigEndian.Uint32(tcp[4:8])
		pos := int(seq - isn - 1) // stream offset of the segment's first byte
		payload := h[min(ihl+off, len(h)):]
		ok := h[0] == 0x45 && bytes.Equal(h[12:16], sa[:]) && bytes.Equal(h[16:20], ha[:]) &&
			uint32(binary.BigEndian.Uint16(h[2:4])) == r.frameLen && len(h) == min(DefaultHeaderBytes, int(r.frameLen)) &&
			pos >= 0 && pos+len(payload) <= len(stream) && bytes.Equal(payload, stream[pos:pos+len(payload)]) && len(payload) > 0 &&
			netfilterReason(r.reason) && r.in == 0 && r.out == 0
		if ok {
			right++
		} else if right == got-1 {
			t.Errorf("TCP output notification %s in %d out %d frame_len %d paged %d, stream offset %d, header\n%x",
				r.reason, r.in, r.out, r.frameLen, r.paged, pos, h)
		}
	}
	truth := dl.RuleDropped(t, "inet", "acl_out")
	t.Logf("TCP output: %d segments dropped (nft), %d notifications, %d right, %d paged", truth, got, right, paged)
	if got == 0 || right != got || uint64(got) != truth {
		t.Errorf("TCP output: %d notifications (%d right), nft dropped %d", got, right, truth)
	}
	if paged == 0 {
		t.Errorf("TCP output: no notification of a paged skb")
	}
}

// tcpSeq returns the sequence number of an Ethernet/IPv4/TCP frame to
// dport (at least its TCP header present).
func tcpSeq(f []byte, dport uint16) (uint32, bool) {
	if len(f) < 34 || binary.BigEndian.Uint16(f[12:14]) != 0x0800 || f[23] != 6 {
		return 0, false
	}
	tcp := 14 + int(f[14]&0x0f)*4
	if len(f) < tcp+20 || binary.BigEndian.Uint16(f[tcp+2:]) != dport {
		return 0, false
	}
	return binary.BigEndian.Uint32(f[tcp+4:]), true
}

// repeat returns n copies of frame (the same slice).
func repeat(frame []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = frame
	}
	return out
}
