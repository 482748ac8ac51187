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
// ours. A GROUP_SEQ gap shows in the drops field; pools are the port's
// own rx counter.
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
	if len(got) != 3 {
		st := p.ReaderStats(0)
		t.Fatalf("%d flow samples of port %d, want 3 (received %d malformed %d foreign %d lost %d; agent %+v)", len(got), i0, conn.Received.Load(), conn.Malformed.Load(), st.Foreign.Load(), st.Lost.Load(), r.a.Stats(0))
	}
	type want struct {
		queue, depth, delay []byte // raw bodies; nil: record absent
		drops               uint32
	}
	be := func(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
	wants := []want{
		{queue: be(5), depth: be(123456), delay: be(789), drops: 0},
		{delay: be(0xffffffff), drops: 2},
		{queue: be(0), depth: be(0xffffffff), drops: 2},
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
