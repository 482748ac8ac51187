package source

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"net"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/agent/persist"
	"github.com/sflowswitchd/sflowswitchd/dataplane/psample"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pslab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// collector is a UDP listener on loopback keeping every datagram.
type collector struct{ *testutil.Collector }

func newCollector(t testing.TB) *collector { return &collector{testutil.NewCollector(t)} }

// count is the number of samples received, from the datagrams' headers
// (IPv4 agent address: the sample count at offset 24), cheap enough for
// a CPU measurement's collector.
func (c *collector) count() int {
	n := 0
	for _, b := range c.Datagrams() {
		if len(b) >= 28 {
			n += int(binary.BigEndian.Uint32(b[24:28]))
		}
	}
	return n
}

func (c *collector) addr() netip.AddrPort { return c.Addr() }

// flowSample is one flow sample as goflow2 and our decoder read it.
type flowSample struct {
	g    goflow.FlowSample
	ours *sflow.FlowSample
}

// samples decodes every datagram with goflow2 (the independent decoder)
// and ours, and returns the flow samples by data source.
func (c *collector) samples(t *testing.T) map[uint32][]flowSample {
	t.Helper()
	dgs := c.Datagrams()
	out := map[uint32][]flowSample{}
	for i, b := range dgs {
		var gp goflow.Packet
		if err := goflow.DecodeMessageVersion(bytes.NewBuffer(b), &gp); err != nil {
			t.Fatalf("goflow2 rejects datagram %d: %v", i, err)
		}
		d, err := sflow.Decode(b)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if len(d.Samples) != len(gp.Samples) {
			t.Fatalf("datagram %d: %d samples, goflow2 %d", i, len(d.Samples), len(gp.Samples))
		}
		for j, s := range gp.Samples {
			g, ok := s.(goflow.FlowSample)
			if !ok {
				continue
			}
			fs, ok := d.Samples[j].(*sflow.FlowSample)
			if !ok {
				t.Fatalf("datagram %d sample %d: goflow2 flow sample, ours %T", i, j, d.Samples[j])
			}
			out[g.Header.SourceIdValue] = append(out[g.Header.SourceIdValue], flowSample{g, fs})
		}
	}
	return out
}

// run is an agent fed by a Psample, in lab's namespace.
type run struct {
	lab    *pslab.Lab
	p      *Psample
	a      *agent.Agent
	col    *collector
	cancel context.CancelFunc
	done   chan struct{}
}

// startAgent runs an agent with workers on p's readers; apply configures
// it (in the lab's namespace: the rules go there).
func startAgent(t *testing.T, lab *pslab.Lab, p *Psample, workers int) *run {
	t.Helper()
	r := &run{lab: lab, p: p, col: newCollector(t), done: make(chan struct{})}
	r.a = agent.New(agent.Options{Workers: workers, Source: p})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.a.Run(ctx, p.Readers()); close(r.done) }()
	t.Cleanup(r.stop)
	return r
}

func (r *run) apply(t *testing.T, rates map[int]uint32, dirs map[uint32]sflow.Direction) {
	t.Helper()
	cfg := agent.Config{AgentAddress: netip.MustParseAddr("198.18.0.9"),
		Receivers:  []agent.ReceiverConfig{{Index: 1, Address: r.col.addr()}},
		Directions: dirs}
	for idx, rate := range rates {
		cfg.Samplers = append(cfg.Samplers, agent.SamplerConfig{IfIndex: uint32(idx), Instance: 1, Receiver: 1, Rate: rate, HeaderBytes: 128})
	}
	r.lab.Do(t, func() error { return r.a.Apply(cfg) })
}

// stop ends the agent (its datagrams flushed) and closes p (its rules
// removed, in the lab's namespace).
func (r *run) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
	r.cancel = nil
	if err := netnsutil.DoNamed(r.lab.NS, r.p.Close); err != nil {
		panic(err) // Cleanup has no t here; a rule left behind must not pass silently
	}
}

// udpFrames are n frames from 198.18.0.1 to 198.18.0.2.
func udpFrames(n int) [][]byte {
	f := netlab.UDPFrame(net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2},
		netip.MustParseAddrPort("198.18.0.1:1000"), netip.MustParseAddrPort("198.18.0.2:2000"), make([]byte, 18))
	out := make([][]byte, n)
	for i := range out {
		out[i] = f
	}
	return out
}

// TestPsampleASICRecords: what only an ASIC reports (OUT_TC, OUT_TC_OCC,
// LATENCY) becomes extended_egress_queue, extended_queue and
// extended_transit. Messages in the kernel's layout are sent to the
// reader's real socket (no kernel produces these attributes in software)
// and go the whole way: parser, listen-only Psample, worker, datagram;
// goflow2 reads the datagrams (1036 decoded, 1039/1040 kept raw), with
// ours. A GROUP_SEQ gap shows in the drops field once the socket has gone
// quiet (the missing numbers cannot be reordered messages still on their
// way: psample.Seq.Settle), in the next sample; pools are the port's own
// rx counter.
func TestPsampleASICRecords(t *testing.T) {
	testskip.Root(t)
	lab := pslab.New(t)
	i0, _ := lab.Veth(t, "sfps0", "sfps1")
	fam := psample.Family{ID: 0x7ff0}
	var p *Psample
	var conn *psample.Conn
	lab.Do(t, func() (err error) {
		p, err = newPsample(PsampleConfig{Workers: 1, ListenGroup: 7}, func() (*psample.Conn, error) {
			conn, err = psample.OpenSynthetic(psample.ConnConfig{}, fam)
			return conn, err
		})
		return err
	})
	r := startAgent(t, lab, p, 1)
	r.apply(t, map[int]uint32{i0: 1000}, nil)
	lab.Send(t, "sfps1", udpFrames(300)) // the pool: 300 packets received since sampling began

	pid, err := conn.PortID()
	if err != nil {
		t.Fatal(err)
	}
	var fd nlSender
	lab.Do(t, func() (err error) { fd, err = netlinkSender(pid); return err }) // port ids are per namespace
	defer fd.Close()
	frame := udpFrames(1)[0]
	msgs := []psample.Sample{
		{Has: psample.HasIIf | psample.HasOutTC | psample.HasOutTCOcc | psample.HasLatency, IIfIndex: uint32(i0), Rate: 1000,
			OrigSize: uint32(len(frame)), Group: 7, Seq: 0, OutTC: 5, OutTCOcc: 123456, Latency: 789, Data: frame},
		// Seq 1 and 2 lost; latency over 32 bits saturates; no OUT_TC:
		// no 1036, so no 1040 either (sflow_transit.txt).
		{Has: psample.HasIIf | psample.HasOutTCOcc | psample.HasLatency, IIfIndex: uint32(i0), Rate: 1000,
			OrigSize: uint32(len(frame)), Group: 7, Seq: 3, OutTCOcc: 99, Latency: 1 << 33, Data: frame},
		// Another group: not read in listen-only mode for group 7.
		{Has: psample.HasIIf, IIfIndex: uint32(i0), Rate: 1000, OrigSize: 60, Group: 8, Seq: 0, Data: frame},
		// Egress queue alone, a big depth saturating 32 bits.
		{Has: psample.HasIIf | psample.HasOutTC | psample.HasOutTCOcc, IIfIndex: uint32(i0), Rate: 1000,
			OrigSize: uint32(len(frame)), Group: 7, Seq: 4, OutTC: 0, OutTCOcc: 1 << 40, Data: frame},
	}
	// After the socket went quiet: 1 and 2 are lost, in this one's drops.
	later := psample.Sample{Has: psample.HasIIf, IIfIndex: uint32(i0), Rate: 1000, OrigSize: uint32(len(frame)), Group: 7, Seq: 5, Data: frame}
	for i := range msgs {
		if err := fd.send(psample.AppendMessage(nil, fam.ID, &msgs[i])); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(testutil.Scaled(5 * time.Second))
	var got []flowSample
	for time.Now().Before(deadline) {
		if got = r.col.samples(t)[uint32(i0)]; len(got) == 3 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if err := fd.send(psample.AppendMessage(nil, fam.ID, &later)); err != nil {
		t.Fatal(err)
	}
	for time.Now().Before(deadline) {
		if got = r.col.samples(t)[uint32(i0)]; len(got) == 4 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(got) != 4 {
		st := p.ReaderStats(0)
		t.Fatalf("%d flow samples of port %d, want 4 (received %d malformed %d foreign %d lost %d; agent %+v)", len(got), i0, conn.Received.Load(), conn.Malformed.Load(), st.Foreign.Load(), st.Lost.Load(), r.a.Stats(0))
	}
	type want struct {
		queue, depth, delay []byte // raw bodies; nil: record absent
		drops               uint32
	}
	be := func(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
	wants := []want{
		{queue: be(5), depth: be(123456), delay: be(789), drops: 0},
		{delay: be(0xffffffff), drops: 0},
		{queue: be(0), depth: be(0xffffffff), drops: 0},
		{drops: 2},
	}
	for i, s := range got {
		w := wants[i]
		g := s.g
		if g.SamplingRate != 1000 || g.Input != uint32(i0) || g.Drops != w.drops || g.SamplePool != 300 {
			t.Errorf("sample %d: rate %d input %d drops %d pool %d, want 1000 %d %d 300", i, g.SamplingRate, g.Input, g.Drops, g.SamplePool, i0, w.drops)
		}
		bodies := map[uint32][]byte{}
		for _, rec := range g.Records {
			switch d := rec.Data.(type) {
			case goflow.EgressQueue:
				bodies[1036] = be(d.Queue)
			case goflow.RawRecord:
				bodies[rec.Header.DataFormat] = d.Data
			case goflow.SampledHeader:
				if !bytes.Equal(d.HeaderData, frame) || d.FrameLength != uint32(len(frame))+4 {
					t.Errorf("sample %d: header %+v", i, d)
				}
			}
		}
		for format, body := range map[uint32][]byte{1036: w.queue, 1040: w.depth, 1039: w.delay} {
			if !bytes.Equal(bodies[format], body) {
				t.Errorf("sample %d: record %d body %x (goflow2), want %x", i, format, bodies[format], body)
			}
		}
		// Our decoder reads the same values.
		for _, rec := range s.ours.Records {
			switch x := rec.(type) {
			case *sflow.ExtendedEgressQueue:
				if !bytes.Equal(be(x.Queue), w.queue) {
					t.Errorf("sample %d: our 1036 %d", i, x.Queue)
				}
			case *sflow.ExtendedQueue:
				if !bytes.Equal(be(x.Depth), w.depth) {
					t.Errorf("sample %d: our 1040 %d", i, x.Depth)
				}
			case *sflow.ExtendedTransit:
				if !bytes.Equal(be(x.Delay), w.delay) {
					t.Errorf("sample %d: our 1039 %d", i, x.Delay)
				}
			}
		}
	}
	st := p.ReaderStats(0)
	if st.Lost.Load() != 2 || st.Foreign.Load() != 1 {
		t.Errorf("reader: lost %d foreign %d, want 2 and 1", st.Lost.Load(), st.Foreign.Load())
	}
	// The samples the port's rules took, for the backoff: 4 read, 2 lost;
	// reported in rules mode only (listen-only: the rules are not ours).
	if n := p.table.Load().ports[uint32(i0)].takenA.Load(); n != 6 {
		t.Errorf("samples taken %d, want 6", n)
	}
	if _, ok := p.PortSamples(uint32(i0)); ok {
		t.Errorf("PortSamples in listen-only mode: reported, want none")
	}
}

// nlSender is a netlink socket connected to a port id: it sends the
// kernel's message layout there, as the kernel would multicast it.
type nlSender struct{ fd int }

func (s nlSender) send(b []byte) error {
	_, err := unix.Write(s.fd, b)
	return err
}

func (s nlSender) Close() error { return unix.Close(s.fd) }

func netlinkSender(pid uint32) (nlSender, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return nlSender{-1}, err
	}
	if err := unix.Connect(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: pid}); err != nil {
		unix.Close(fd)
		return nlSender{-1}, err
	}
	return nlSender{fd}, nil
}

// binomialOK reports whether k samples of n packets at 1 in rate are
// within 5 standard deviations of n/rate.
func binomialOK(k, n int, rate uint32) (bool, float64, float64) {
	p := 1 / float64(rate)
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	return math.Abs(float64(k)-mean) <= 5*sd+0.5, mean, sd
}

// needActSample loads psample and act_sample where they are modules and
// skips t when the kernel has either not (testskip.Feature).
func needActSample(t testing.TB) {
	t.Helper()
	testskip.Root(t)
	_ = exec.Command("modprobe", "-q", "psample").Run()
	_ = exec.Command("modprobe", "-q", "act_sample").Run()
	testskip.Feature(t, probe{}, "psample")
	testskip.Feature(t, probe{}, "act_sample")
}

type probe struct{}

func (probe) Unavailable(name string) error {
	if name == "psample" {
		return psample.ProbePsample()
	}
	if name == "act_sample" {
		return psample.ProbeActSample()
	}
	return errors.New("unknown feature " + name)
}

// TestPsamplePoolCountsInstalledRules: a port configured both ways whose
// egress rule the kernel refused (mlxsw Spectrum-1 samples ingress only)
// is sampled at ingress only, and its pool counts only the frames it
// receives: frames it sends could not have been sampled. The refusal is
// played by the port's counted directions as install sets them.
func TestPsamplePoolCountsInstalledRules(t *testing.T) {
	testskip.Root(t)
	lab := pslab.New(t)
	_, i1 := lab.Veth(t, "sfps0", "sfps1")
	var r *PsampleReader
	pp := &psPort{ifindex: uint32(i1), dir: sflow.DirectionBoth}
	pp.counted.Store(uint32(sflow.DirectionIngress)) // as install leaves it when the egress rule is refused
	lab.Do(t, func() (err error) {
		st, err := psample.NewStatsReader()
		if err != nil {
			return err
		}
		t.Cleanup(func() { st.Close() })
		r = &PsampleReader{stats: st, Stats: &PsampleReaderStats{}}
		pp.raw, err = st.Read(uint32(i1))
		return err
	})
	lab.Send(t, "sfps1", udpFrames(50)) // sent by sfps1
	lab.Send(t, "sfps0", udpFrames(7))  // received by sfps1
	lab.Do(t, func() error { r.readPool(pp, 1); return nil })
	if got := pp.poolA.Load(); got != 7 {
		t.Errorf("pool %d, want the 7 frames received (not the 50 sent: no egress rule)", got)
	}
}

// TestPsamplePoolsAcrossPrograms: a psample port's pool and drops live in
// the agent's state: the program that takes over (an upgrade in place, a
// crash restart: the same state) continues them from what the earlier one
// counted, over the frames counted from its own start, rather than from
// 0 while the port's sequence numbers and uptime continue. A port no
// longer sampled forgets them (the agent keeps them in its base).
func TestPsamplePoolsAcrossPrograms(t *testing.T) {
	testskip.Root(t)
	lab := pslab.New(t)
	i0, _ := lab.Veth(t, "sfps0", "sfps1")
	mem := make([]byte, persist.Words(64)*8)
	fam := psample.Family{ID: 0x7ff0}
	program := func() (*Psample, *psPort) {
		st, err := persist.Open(mem)
		if err != nil {
			t.Fatal(err)
		}
		var p *Psample
		lab.Do(t, func() (err error) {
			p, err = newPsample(PsampleConfig{Workers: 1, ListenGroup: 7, State: st}, func() (*psample.Conn, error) {
				return psample.OpenSynthetic(psample.ConnConfig{}, fam)
			})
			if err != nil {
				return err
			}
			return p.SetPort(uint32(i0), agent.PortSampling{Rate: 100, HeaderBytes: 64})
		})
		return p, p.ports[uint32(i0)]
	}
	count := func(p *Psample, pp *psPort, frames int) {
		lab.Send(t, "sfps1", udpFrames(frames)) // received by sfps0
		lab.Do(t, func() error { p.readers[0].readPool(pp, pp.gen+1); return nil })
	}
	p1, pp1 := program()
	count(p1, pp1, 40)
	pp1.addDrops(3)
	if pool, drops := p1.PortPool(uint32(i0)); pool != 40 || drops != 3 {
		t.Fatalf("first program: pool %d drops %d, want 40 and 3", pool, drops)
	}
	lab.Do(t, p1.Close)

	lab.Send(t, "sfps1", udpFrames(5)) // while no program reads: not sampled
	p2, pp2 := program()
	if pool, drops := p2.PortPool(uint32(i0)); pool != 40 || drops != 3 {
		t.Errorf("next program at start: pool %d drops %d, want the 40 and 3 counted before", pool, drops)
	}
	count(p2, pp2, 10)
	if pool, _ := p2.PortPool(uint32(i0)); pool != 50 {
		t.Errorf("next program: pool %d, want 40 + 10", pool)
	}
	lab.Do(t, func() error { return p2.RemovePort(uint32(i0)) })
	lab.Do(t, p2.Close)
	p3, _ := program()
	if pool, drops := p3.PortPool(uint32(i0)); pool != 0 || drops != 0 {
		t.Errorf("after the port was removed: pool %d drops %d, want 0 (kept in the agent's base)", pool, drops)
	}
	lab.Do(t, p3.Close)
}

// TestPsampleGroupsLargeIfIndex: rules-mode groups are distinct for every
// port, also for ifindexes of 2^23 and more, whose bits the base's 24 do
// not hold (2^23 + 5 would share 5's groups); a pair handed out to such a
// port is given back when it is no longer sampled.
func TestPsampleGroupsLargeIfIndex(t *testing.T) {
	p := &Psample{cfg: PsampleConfig{GroupBase: DefaultGroupBase}}
	seen := map[uint32]uint32{}
	for _, idx := range []uint32{1, 5, 1<<23 - 1, 1 << 23, 1<<23 + 5, 1<<31 - 1, 0xffffffff} {
		for _, eg := range []bool{false, true} {
			g := p.groupFor(idx, eg)
			if other, dup := seen[g]; dup {
				t.Errorf("ifindex %d (egress %v) has group %#x, as ifindex %d", idx, eg, g, other)
			}
			seen[g] = idx
			if again := p.groupFor(idx, eg); again != g {
				t.Errorf("ifindex %d: group %#x, then %#x", idx, g, again)
			}
			if eg != (g&1 == 1) {
				t.Errorf("ifindex %d: group %#x for egress %v", idx, g, eg)
			}
		}
	}
	g := p.groupFor(1<<23+5, false)
	p.freeGroups(1<<23 + 5)
	if got := p.groupFor(1<<30, false); got != g {
		t.Errorf("a pair given back is handed out again: %#x, want %#x", got, g)
	}
}

// TestPsampleNoMACHeader: a device without a MAC header (here a tun
// device, ARPHRD_NONE, on which act_sample pushes none) hands psample its
// packets from the network header: their sampled_header is IPv4 or IPv6
// (by PSAMPLE_ATTR_PROTO, else by the IP version), its frame_length the
// packet's length without an FCS, nothing stripped, and no VLAN read from
// it; an Ethernet port's samples stay Ethernet. Read by goflow2 and ours.
func TestPsampleNoMACHeader(t *testing.T) {
	testskip.Root(t)
	lab := pslab.New(t)
	i0, _ := lab.Veth(t, "sfps0", "sfps1")
	lab.IP(t, "tuntap", "add", "dev", "sfpt0", "mode", "tun")
	lab.IP(t, "link", "set", "sfpt0", "up")
	tun := lab.Index(t, "sfpt0")
	fam := psample.Family{ID: 0x7ff0}
	var p *Psample
	var conn *psample.Conn
	lab.Do(t, func() (err error) {
		p, err = newPsample(PsampleConfig{Workers: 1, ListenGroup: 7}, func() (*psample.Conn, error) {
			conn, err = psample.OpenSynthetic(psample.ConnConfig{}, fam)
			return conn, err
		})
		return err
	})
	r := startAgent(t, lab, p, 1)
	r.apply(t, map[int]uint32{i0: 10, tun: 10}, nil)
	pid, err := conn.PortID()
	if err != nil {
		t.Fatal(err)
	}
	var fd nlSender
	lab.Do(t, func() (err error) { fd, err = netlinkSender(pid); return err })
	defer fd.Close()
	frame := udpFrames(1)[0] // a tagless Ethernet frame
	ip4 := frame[14:]
	ip6 := append([]byte{0x60, 0, 0, 0, 0, 8, 17, 64}, make([]byte, 40)...)
	msgs := []psample.Sample{
		{Has: psample.HasIIf | psample.HasProto, IIfIndex: uint32(tun), Rate: 10, OrigSize: uint32(len(ip4)), Group: 7, Seq: 0, Proto: 0x0800, Data: ip4},
		{Has: psample.HasIIf, IIfIndex: uint32(tun), Rate: 10, OrigSize: uint32(len(ip6)), Group: 7, Seq: 1, Data: ip6}, // no PROTO (Linux < 5.13)
		{Has: psample.HasIIf | psample.HasProto, IIfIndex: uint32(i0), Rate: 10, OrigSize: uint32(len(frame)), Group: 7, Seq: 2, Proto: 0x0800, Data: frame},
	}
	for i := range msgs {
		if err := fd.send(psample.AppendMessage(nil, fam.ID, &msgs[i])); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(testutil.Scaled(5 * time.Second))
	var got map[uint32][]flowSample
	for time.Now().Before(deadline) {
		if got = r.col.samples(t); len(got[uint32(tun)]) == 2 && len(got[uint32(i0)]) == 1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(got[uint32(tun)]) != 2 || len(got[uint32(i0)]) != 1 {
		t.Fatalf("flow samples: %d of the tun device, %d of the veth; want 2 and 1", len(got[uint32(tun)]), len(got[uint32(i0)]))
	}
	check := func(s flowSample, proto sflow.HeaderProtocol, length, stripped uint32, data []byte) {
		t.Helper()
		var ours *sflow.SampledHeader
		for _, rec := range s.ours.Records {
			switch x := rec.(type) {
			case *sflow.SampledHeader:
				ours = x
			case *sflow.ExtendedSwitch:
				t.Errorf("an extended_switch read from a %v header", proto)
			}
		}
		if ours == nil || ours.Protocol != proto || ours.FrameLength != length || ours.Stripped != stripped || !bytes.Equal(ours.Header, data) {
			t.Errorf("sampled_header %+v, want protocol %v, frame_length %d, stripped %d", ours, proto, length, stripped)
		}
		for _, rec := range s.g.Records {
			if h, ok := rec.Data.(goflow.SampledHeader); ok && (h.Protocol != uint32(proto) || h.FrameLength != length) {
				t.Errorf("goflow2: sampled_header protocol %d frame_length %d, want %d and %d", h.Protocol, h.FrameLength, proto, length)
			}
		}
	}
	check(got[uint32(tun)][0], sflow.HeaderProtocolIPv4, uint32(len(ip4)), 0, ip4)
	check(got[uint32(tun)][1], sflow.HeaderProtocolIPv6, uint32(len(ip6)), 0, ip6)
	check(got[uint32(i0)][0], sflow.HeaderProtocolEthernet, uint32(len(frame))+4, 4, frame)
}

// TestPsampleGroupMadeAnew: a group freed and made again (its rules
// removed and installed, a module reload) numbers its samples from 0
// again. After 2^31 and more samples, a step from there to 0 looks like
// a gap of nearly 2^31 to the numbers alone; the kernel's DEL_GROUP and
// NEW_GROUP announcements on psample's "config" group restart the
// sequence instead: no sample lost, one restart.
func TestPsampleGroupMadeAnew(t *testing.T) {
	testskip.Root(t)
	lab := pslab.New(t)
	i0, _ := lab.Veth(t, "sfps0", "sfps1")
	fam := psample.Family{ID: 0x7ff0}
	var p *Psample
	var conn *psample.Conn
	lab.Do(t, func() (err error) {
		p, err = newPsample(PsampleConfig{Workers: 1, ListenGroup: 7}, func() (*psample.Conn, error) {
			conn, err = psample.OpenSynthetic(psample.ConnConfig{}, fam)
			return conn, err
		})
		return err
	})
	r := startAgent(t, lab, p, 1)
	r.apply(t, map[int]uint32{i0: 10}, nil)
	pid, err := conn.PortID()
	if err != nil {
		t.Fatal(err)
	}
	var fd nlSender
	lab.Do(t, func() (err error) { fd, err = netlinkSender(pid); return err })
	defer fd.Close()
	frame := udpFrames(1)[0]
	sample := func(seq uint32) []byte {
		return psample.AppendMessage(nil, fam.ID, &psample.Sample{Has: psample.HasIIf, IIfIndex: uint32(i0), Rate: 10,
			OrigSize: uint32(len(frame)), Group: 7, Seq: seq, Data: frame})
	}
	msgs := [][]byte{sample(1<<31 + 5), sample(1<<31 + 6),
		psample.AppendGroupMessage(nil, fam.ID, 7, false), psample.AppendGroupMessage(nil, fam.ID, 7, true),
		sample(0), sample(1), sample(2)}
	for _, m := range msgs {
		if err := fd.send(m); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(testutil.Scaled(5 * time.Second))
	var got []flowSample
	for time.Now().Before(deadline) {
		if got = r.col.samples(t)[uint32(i0)]; len(got) == 5 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(testutil.Scaled(1200 * time.Millisecond)) // a quiet read: the window settles
	st := p.ReaderStats(0)
	if len(got) != 5 || st.Lost.Load() != 0 || st.Restarts.Load() != 1 {
		t.Errorf("%d samples, lost %d, restarts %d; want 5, 0, 1", len(got), st.Lost.Load(), st.Restarts.Load())
	}
	for i, s := range got {
		if s.g.Drops != 0 {
			t.Errorf("sample %d: drops %d, want 0", i, s.g.Drops)
		}
	}
	// The family's config group is joined with its packets group.
	if f, err := psample.GetFamily(); err == nil && f.Config == 0 {
		t.Errorf("family %+v: no config group", f)
	}
}

// TestPsampleListenOnlyOneSocket: listen-only with two workers reads the
// group through one socket (the first worker's), which hands the other
// worker's samples to it; the group's gap is charged once, to the port
// of the sample after it, whichever worker's: the drops fields add up to
// the samples lost, not to a loss per socket.
func TestPsampleListenOnlyOneSocket(t *testing.T) {
	testskip.Root(t)
	lab := pslab.New(t)
	i0, i1 := lab.Veth(t, "sfps0", "sfps1")
	fam := psample.Family{ID: 0x7ff0}
	var p *Psample
	opened := 0
	lab.Do(t, func() (err error) {
		p, err = newPsample(PsampleConfig{Workers: 2, ListenGroup: 7}, func() (*psample.Conn, error) {
			opened++
			return psample.OpenSynthetic(psample.ConnConfig{}, fam)
		})
		return err
	})
	if opened != 1 {
		t.Fatalf("%d sockets opened for the group, want 1", opened)
	}
	r := startAgent(t, lab, p, 2)
	r.apply(t, map[int]uint32{i0: 10, i1: 10}, nil)
	if r.a.WorkerOf(sflow.DataSource{Index: uint32(i0)}) == r.a.WorkerOf(sflow.DataSource{Index: uint32(i1)}) {
		t.Fatalf("ports %d and %d of one worker", i0, i1)
	}
	pid, err := p.readers[0].conn.PortID()
	if err != nil {
		t.Fatal(err)
	}
	var fd nlSender
	lab.Do(t, func() (err error) { fd, err = netlinkSender(pid); return err })
	defer fd.Close()
	frame := udpFrames(1)[0]
	send := func(port int, seq uint32) {
		t.Helper()
		m := psample.AppendMessage(nil, fam.ID, &psample.Sample{Has: psample.HasIIf, IIfIndex: uint32(port), Rate: 10,
			OrigSize: uint32(len(frame)), Group: 7, Seq: seq, Data: frame})
		if err := fd.send(m); err != nil {
			t.Fatal(err)
		}
	}
	send(i0, 0)
	send(i1, 1)
	send(i0, 3) // 2 lost
	send(i1, 4)
	time.Sleep(testutil.Scaled(1500 * time.Millisecond)) // the socket goes quiet: 2 counted lost
	send(i1, 5)
	deadline := time.Now().Add(testutil.Scaled(5 * time.Second))
	var got map[uint32][]flowSample
	for time.Now().Before(deadline) {
		if got = r.col.samples(t); len(got[uint32(i0)]) == 2 && len(got[uint32(i1)]) == 3 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	a, b := got[uint32(i0)], got[uint32(i1)]
	if len(a) != 2 || len(b) != 3 {
		t.Fatalf("samples: %d of port %d, %d of port %d; want 2 and 3", len(a), i0, len(b), i1)
	}
	drops := a[len(a)-1].g.Drops + b[len(b)-1].g.Drops
	lost := p.ReaderStats(0).Lost.Load() + p.ReaderStats(1).Lost.Load()
	if drops != 1 || lost != 1 {
		t.Errorf("drops fields %d + %d, readers lost %d; want 1 in all (one sample lost)", a[len(a)-1].g.Drops, b[len(b)-1].g.Drops, lost)
	}
}
