package agent

import (
	"context"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent/persist"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// memDrops is an in-memory DropSource: batches of notifications handed to
// ReadDrops one batch per call, and a kernel loss count.
type memDrops struct {
	mu      sync.Mutex
	batches [][]DropNotification
	lost    uint64
	wake    chan struct{}
	closed  bool
}

func newMemDrops() *memDrops { return &memDrops{wake: make(chan struct{}, 1)} }

func (m *memDrops) push(lost uint64, b ...DropNotification) {
	m.mu.Lock()
	m.batches = append(m.batches, b)
	m.lost = lost
	m.mu.Unlock()
	m.Wake()
}

// ReadDrops delivers the oldest batch, or waits for a Wake and returns 0.
func (m *memDrops) ReadDrops(fn func(*DropNotification)) (int, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return 0, os.ErrClosed
	}
	if len(m.batches) > 0 {
		b := m.batches[0]
		m.batches = m.batches[1:]
		m.mu.Unlock()
		for i := range b {
			fn(&b[i])
		}
		return len(b), nil
	}
	m.mu.Unlock()
	<-m.wake
	return 0, nil
}

func (m *memDrops) Wake() error {
	select {
	case m.wake <- struct{}{}:
	default:
	}
	return nil
}

func (m *memDrops) Lost() (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lost, nil
}

// TestDropReporter: notifications become discarded_packet samples of
// data source 0:0 from the reporter's sub-agent, with the host agent's
// reason code, the records in order, and drops = kernel losses + those
// that arrived before any receiver; after a new source (off and on), the
// sequence numbers and the drops field continue.
func TestDropReporter(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	got := make(chan *sflow.Datagram, 16)
	go func() {
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			d, err := sflow.Decode(buf[:n])
			if err != nil {
				t.Errorf("decode: %v", err)
				continue
			}
			got <- d
		}
	}()
	r := NewDropReporter(3, nil)
	src := newMemDrops()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx, src); close(done) }()

	hdr := make([]byte, 60)
	// Before any receiver: counted, not sent.
	src.push(0, DropNotification{ReasonName: "NO_SOCKET", In: 4, HeaderProto: sflow.HeaderProtocolEthernet, Header: hdr, FrameLen: 60})
	time.Sleep(50 * time.Millisecond)
	r.SetReceivers(netip.MustParseAddr("198.18.0.1"), []ReceiverConfig{{Index: 1, Address: netip.MustParseAddrPort(pc.LocalAddr().String())}})
	time.Sleep(50 * time.Millisecond)
	src.push(10,
		DropNotification{ReasonName: "NETFILTER_DROP", Symbol: "nft_do_chain", In: 4, HeaderProto: sflow.HeaderProtocolEthernet, Header: hdr, FrameLen: 60},
		DropNotification{ReasonName: "QDISC_DROP", Symbol: "__dev_queue_xmit", In: 4, Out: 6, Queue: 2, QueueKnown: true, HeaderProto: sflow.HeaderProtocolEthernet, Header: hdr, FrameLen: 1000},
		DropNotification{ReasonName: "SOMETHING_NEW", In: 5})
	d := recvDatagram(t, got)
	if d.SubAgentID != 3 || d.SequenceNumber != 1 || len(d.Samples) != 3 {
		t.Fatalf("datagram sub-agent %d seq %d with %d samples", d.SubAgentID, d.SequenceNumber, len(d.Samples))
	}
	want := []struct {
		seq, drops, in, out uint32
		reason              sflow.DropReason
		formats             []sflow.DataFormat
	}{
		{1, 11, 4, 0, sflow.DropACL, []sflow.DataFormat{sflow.FormatSampledHeader, sflow.FormatExtendedFunction, sflow.FormatExtendedLinuxDropReason}},
		{2, 11, 4, 6, sflow.DropTrafficShaping, []sflow.DataFormat{sflow.FormatSampledHeader, sflow.FormatExtendedEgressQueue, sflow.FormatExtendedFunction, sflow.FormatExtendedLinuxDropReason}},
		{3, 11, 5, 0, sflow.DropUnknown, []sflow.DataFormat{sflow.FormatExtendedLinuxDropReason}},
	}
	for i, w := range want {
		s := d.Samples[i].(*sflow.DiscardedPacket)
		if s.SequenceNumber != w.seq || s.Drops != w.drops || s.Input != w.in || s.Output != w.out || s.Reason != w.reason || s.Source != (sflow.DataSource{}) {
			t.Errorf("sample %d: %+v, want %+v", i, s, w)
		}
		var f []sflow.DataFormat
		for _, rec := range s.Records {
			f = append(f, rec.Format())
		}
		if len(f) != len(w.formats) {
			t.Errorf("sample %d records %v, want %v", i, f, w.formats)
		}
	}
	if h := d.Samples[1].(*sflow.DiscardedPacket).Records[0].(*sflow.SampledHeader); h.FrameLength != 1004 || h.Stripped != 4 || len(h.Header) != 60 {
		t.Errorf("sampled_header %+v", h)
	}
	if l := d.Samples[2].(*sflow.DiscardedPacket).Records[0].(*sflow.ExtendedLinuxDropReason); l.Reason != "SOMETHING_NEW" {
		t.Errorf("linux reason %q", l.Reason)
	}
	// A new source (notifications off and on): sequences continue, the
	// first source's 10 losses stay in the drops field.
	cancel()
	<-done
	src2 := newMemDrops()
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go r.Run(ctx2, src2)
	time.Sleep(50 * time.Millisecond)
	src2.push(2, DropNotification{ReasonName: "NO_SOCKET", In: 4})
	d = recvDatagram(t, got)
	s := d.Samples[0].(*sflow.DiscardedPacket)
	if d.SequenceNumber != 2 || s.SequenceNumber != 4 || s.Drops != 13 || s.Reason != sflow.DropPortUnreachable {
		t.Errorf("after a new source: datagram seq %d, sample %+v; want datagram 2, sample 4, drops 1+10+2", d.SequenceNumber, s)
	}
	if n := r.Stats().Notifications.Load(); n != 4 {
		t.Errorf("%d notifications counted, want 4", n)
	}
	if n := r.Stats().Unsent.Load(); n != 1 {
		t.Errorf("%d unsent, want 1", n)
	}
	// The reporter's datagrams are in the agent's per-collector counters
	// once its set is registered: the two datagrams the collector got.
	a := New(Options{Workers: 1, Source: newFakeDataplane()})
	a.AddCollectorSet(&r.Stats().Collectors)
	// The sender counts right after its send returns, which may be just
	// after the collector has read the datagram.
	cs := a.CollectorStats()
	for end := time.Now().Add(time.Second); time.Now().Before(end) && (len(cs) != 1 || cs[0].Datagrams < 2); {
		time.Sleep(10 * time.Millisecond)
		cs = a.CollectorStats()
	}
	if len(cs) != 1 || cs[0].Receiver != 1 || cs[0].Datagrams != 2 || cs[0].SendErrors != 0 {
		t.Errorf("per-collector stats %+v, want receiver 1 with the 2 datagrams sent", cs)
	}
}

func recvDatagram(t *testing.T, ch chan *sflow.Datagram) *sflow.Datagram {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(2 * time.Second):
		t.Fatal("no datagram")
		return nil
	}
}

// TestDropReasonTable: every name maps to a spec reason, the host agent's
// examples from sflow_drops.md hold, and unknown names are unknown.
func TestDropReasonTable(t *testing.T) {
	for name, want := range map[string]sflow.DropReason{
		"NO_SOCKET": sflow.DropPortUnreachable, "NETFILTER_DROP": sflow.DropACL, "TCP_CSUM": sflow.DropTCPParsing,
		"UDP_CSUM": sflow.DropUDPParsing, "IP_CSUM": sflow.DropIP1Parsing, "IP_INHDR": sflow.DropIP1Parsing,
		"OTHERHOST": sflow.DropDstHostUnknown, "NOT_SPECIFIED": sflow.DropUnknown, "QDISC_DROP": sflow.DropTrafficShaping,
		"NEIGH_FAILED": sflow.DropUnresolvedNeigh, "A_REASON_OF_2030": sflow.DropUnknown,
	} {
		if got := DropReasonCode(name); got != want {
			t.Errorf("%s -> %s, want %s", name, got, want)
		}
	}
}

// TestDropReporterAcrossPrograms: the drops field of discarded_packet
// continues across an upgrade or a crash restart, as its sequence number
// does: the next program's reporter, on the same agent state, starts its
// losses from the last field reported (10 lost before, 2 after: 12).
func TestDropReporterAcrossPrograms(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	got := make(chan *sflow.Datagram, 16)
	go func() {
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if d, err := sflow.Decode(buf[:n]); err == nil {
				got <- d
			}
		}
	}()
	mem := make([]byte, persist.Words(16)*8)
	program := func(lost uint64) *sflow.DiscardedPacket {
		st, err := persist.Open(mem)
		if err != nil {
			t.Fatal(err)
		}
		r := NewDropReporter(3, nil)
		r.SetState(st)
		r.SetReceivers(netip.MustParseAddr("198.18.0.1"), []ReceiverConfig{{Index: 1, Address: netip.MustParseAddrPort(pc.LocalAddr().String())}})
		src := newMemDrops()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.Run(ctx, src); close(done) }()
		src.push(lost, DropNotification{ReasonName: "NO_SOCKET", In: 4})
		d := recvDatagram(t, got)
		cancel()
		<-done
		return d.Samples[0].(*sflow.DiscardedPacket)
	}
	if s := program(10); s.SequenceNumber != 1 || s.Drops != 10 {
		t.Fatalf("first program: sample %d drops %d, want 1 and 10", s.SequenceNumber, s.Drops)
	}
	if s := program(2); s.SequenceNumber != 2 || s.Drops != 12 {
		t.Errorf("next program: sample %d drops %d, want 2 and 10 + 2", s.SequenceNumber, s.Drops)
	}
}

// memProgram is memDrops with a kernel program that outlives the process
// (DropProgram).
type memProgram struct {
	*memDrops
	id       uint32
	notified uint64
	adopted  bool
	replaced []ReplacedDropProgram
}

func (m *memProgram) DropProgram() DropProgramInfo {
	return DropProgramInfo{ID: m.id, Notified: m.notified, Adopted: m.adopted, Replaced: m.replaced}
}

// TestDropReporterAdoptedProgram: a kernel program pinned across
// processes keeps its counts, so the process that takes it over must not
// add its losses to the drops field as last reported (they are in it):
// it continues from the losses the counts do not hold, plus the
// notifications the program wrote to the dead process's buffers that
// nobody read. First process: 2 notifications read, 3 lost; killed with
// 4 more written to its buffers, unread; 5 lost in the gap (no buffers).
// The next process's first sample has drops 3 + 5 + 4 = 12 (before, 3 +
// 8 = 11: the first 3 twice, the 4 unread not at all). A third process,
// after an upgrade that read everything (notified = read), goes on with
// no unread. A process with a program of another build, which replaced
// the pinned one, carries that one's final losses and unread
// notifications over.
func TestDropReporterAdoptedProgram(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	got := make(chan *sflow.Datagram, 16)
	go func() {
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if d, err := sflow.Decode(buf[:n]); err == nil {
				got <- d
			}
		}
	}()
	mem := make([]byte, persist.Words(16)*8)
	process := func(src *memProgram, lost uint64, n int) []*sflow.DiscardedPacket {
		st, err := persist.Open(mem)
		if err != nil {
			t.Fatal(err)
		}
		r := NewDropReporter(3, nil)
		r.SetState(st)
		r.SetReceivers(netip.MustParseAddr("198.18.0.1"), []ReceiverConfig{{Index: 1, Address: netip.MustParseAddrPort(pc.LocalAddr().String())}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.Run(ctx, src); close(done) }()
		b := make([]DropNotification, n)
		for i := range b {
			b[i] = DropNotification{ReasonName: "NO_SOCKET", In: 4}
		}
		src.push(lost, b...)
		var out []*sflow.DiscardedPacket
		for len(out) < n {
			for _, s := range recvDatagram(t, got).Samples {
				out = append(out, s.(*sflow.DiscardedPacket))
			}
		}
		cancel()
		<-done
		return out
	}
	s := process(&memProgram{memDrops: newMemDrops(), id: 42}, 3, 2)
	if s[1].SequenceNumber != 2 || s[1].Drops != 3 {
		t.Fatalf("first process: sample %d drops %d, want 2 and 3", s[1].SequenceNumber, s[1].Drops)
	}
	s = process(&memProgram{memDrops: newMemDrops(), id: 42, notified: 2 + 4, adopted: true}, 3+5, 1)
	if s[0].SequenceNumber != 3 || s[0].Drops != 12 {
		t.Errorf("after the crash: sample %d drops %d, want 3 and 3 + 5 + 4 unread = 12", s[0].SequenceNumber, s[0].Drops)
	}
	s = process(&memProgram{memDrops: newMemDrops(), id: 42, notified: 7, adopted: true}, 8+1, 1)
	if s[0].SequenceNumber != 4 || s[0].Drops != 13 {
		t.Errorf("after the upgrade: sample %d drops %d, want 4 and 4 unread + 9 = 13", s[0].SequenceNumber, s[0].Drops)
	}
	// A new build: program 42 replaced by 77 after a crash. 42's final
	// losses are 9 + 6 (the gap); it wrote 10 notifications, 8 of them
	// read: the 4 unread at the first crash, 15 lost, 2 unread, and 77's
	// own 2.
	s = process(&memProgram{memDrops: newMemDrops(), id: 77, replaced: []ReplacedDropProgram{{ID: 5}, {ID: 42, Notified: 10, Lost: 15}}}, 2, 1)
	if s[0].SequenceNumber != 5 || s[0].Drops != 23 {
		t.Errorf("a program of another build: sample %d drops %d, want 5 and 4 + 15 + 2 unread + 2 = 23", s[0].SequenceNumber, s[0].Drops)
	}
	s = process(&memProgram{memDrops: newMemDrops(), id: 78}, 1, 1)
	if s[0].SequenceNumber != 6 || s[0].Drops != 24 {
		t.Errorf("a program of its own: sample %d drops %d, want 6 and 23 + 1 = 24", s[0].SequenceNumber, s[0].Drops)
	}
}
