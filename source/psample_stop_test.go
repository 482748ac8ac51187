package source

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane/psample"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pslab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// gatedReader is a worker's psample reader whose first read waits for
// the test (release) and reads nothing: the samples sent meanwhile stay
// queued in the socket, as they are when a stop comes while the worker is
// busy.
type gatedReader struct {
	*PsampleReader
	release chan struct{}
	waited  bool
}

func (g *gatedReader) ReadSamples(deadline time.Time, fn func(*agent.PacketSample)) (int, error) {
	if !g.waited {
		g.waited = true
		<-g.release
		return 0, os.ErrDeadlineExceeded
	}
	return g.PsampleReader.ReadSamples(deadline, fn)
}

// TestPsampleQueuedAtStop: the samples still queued in the psample socket
// when the workers stop (SIGTERM, SIGUSR2) are read and sent before the
// datagrams are flushed; those that come after the workers stopped,
// until the socket is closed, are counted in their ports' drops (and the
// readers' Unsent). Listen-only with one worker (the socket's queue) and
// with two (the first worker's socket dispatching to the other's queue):
// samples sent + counted unsent = samples made, exactly.
func TestPsampleQueuedAtStop(t *testing.T) {
	testskip.Root(t)
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers%d", workers), func(t *testing.T) { queuedAtStop(t, workers) })
	}
}

func queuedAtStop(t *testing.T, workers int) {
	lab := pslab.New(t)
	i0, i1 := lab.Veth(t, "sfps0", "sfps1")
	fam := psample.Family{ID: 0x7ff0}
	var p *Psample
	lab.Do(t, func() (err error) {
		p, err = newPsample(PsampleConfig{Workers: workers, ListenGroup: 7}, func() (*psample.Conn, error) {
			return psample.OpenSynthetic(psample.ConnConfig{}, fam)
		})
		return err
	})
	col := newCollector(t)
	a := agent.New(agent.Options{Workers: workers, Source: p})
	release := make(chan struct{})
	var readers []agent.SampleReader
	for _, r := range p.readers {
		readers = append(readers, &gatedReader{PsampleReader: r, release: release})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx, readers); close(done) }()
	stopped := false
	defer func() {
		if !stopped {
			close(release)
			cancel()
			<-done
			_ = netnsutil.DoNamed(lab.NS, p.Close)
		}
	}()
	ports := []int{i0, i1}[:workers]
	cfg := agent.Config{AgentAddress: netip.MustParseAddr("198.18.0.9"), Receivers: []agent.ReceiverConfig{{Index: 1, Address: col.addr()}}}
	for _, idx := range ports {
		cfg.Samplers = append(cfg.Samplers, agent.SamplerConfig{IfIndex: uint32(idx), Instance: 1, Receiver: 1, Rate: 10, HeaderBytes: 128})
	}
	lab.Do(t, func() error { return a.Apply(cfg) })
	if workers == 2 && a.WorkerOf(sflow.DataSource{Index: uint32(i0)}) == a.WorkerOf(sflow.DataSource{Index: uint32(i1)}) {
		t.Fatalf("ports %d and %d of one worker", i0, i1)
	}
	pid, err := p.readers[0].conn.Load().PortID()
	if err != nil {
		t.Fatal(err)
	}
	var fd nlSender
	lab.Do(t, func() (err error) { fd, err = netlinkSender(pid); return err })
	defer fd.Close()
	frame := udpFrames(1)[0]
	seq := uint32(0)
	sent := map[int]int{}
	send := func(n int) {
		t.Helper()
		for range n {
			port := ports[int(seq)%len(ports)]
			m := psample.AppendMessage(nil, fam.ID, &psample.Sample{Has: psample.HasIIf, IIfIndex: uint32(port), Rate: 10,
				OrigSize: uint32(len(frame)), Group: 7, Seq: seq, Data: frame})
			if err := fd.send(m); err != nil {
				t.Fatal(err)
			}
			seq++
			sent[port]++
		}
	}
	// Queued while the workers are busy; then the stop.
	const queued, late = 600, 40
	send(queued)
	cancel()
	close(release)
	<-done
	// After the workers stopped, before the socket is closed.
	send(late)
	pps := p.table.Load().ports
	if err := netnsutil.DoNamed(lab.NS, p.Close); err != nil {
		t.Fatal(err)
	}
	stopped = true
	var unsent uint64
	for w := range workers {
		unsent += p.ReaderStats(w).Unsent.Load()
	}
	deadline := time.Now().Add(testutil.Scaled(3 * time.Second))
	for col.count() < queued+late-int(unsent) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	got := col.samples(t)
	total := 0
	for _, idx := range ports {
		ss := got[uint32(idx)]
		drops := pps[uint32(idx)].dropsA.Load()
		t.Logf("port %d: made %d, sent %d, counted unsent %d", idx, sent[idx], len(ss), drops)
		if len(ss)+int(drops) != sent[idx] {
			t.Errorf("port %d: %d samples sent + %d counted in drops, want the %d made", idx, len(ss), drops, sent[idx])
		}
		for _, s := range ss {
			if s.g.Drops != 0 {
				t.Errorf("port %d: a sample sent says %d drops, none were lost before it", idx, s.g.Drops)
				break
			}
		}
		total += len(ss)
	}
	if total != queued || unsent != late {
		t.Errorf("%d samples sent and %d counted unsent; want the %d queued at the stop sent and the %d after it counted", total, unsent, queued, late)
	}
	if total+int(unsent) != queued+late {
		t.Errorf("%d sent + %d unsent != %d made", total, unsent, queued+late)
	}
}

// TestPsampleFollowerBackpressure: a follower worker slower than the
// socket (here: busy until released) makes the first worker's reader
// leave the samples in the socket's buffer rather than overfill the
// follower's queue: 5000 samples of the follower's port, more than its
// queue holds, all sent, none counted lost.
func TestPsampleFollowerBackpressure(t *testing.T) {
	testskip.Root(t)
	lab := pslab.New(t)
	i0, i1 := lab.Veth(t, "sfps0", "sfps1")
	fam := psample.Family{ID: 0x7ff0}
	var p *Psample
	lab.Do(t, func() (err error) {
		p, err = newPsample(PsampleConfig{Workers: 2, ListenGroup: 7}, func() (*psample.Conn, error) {
			return psample.OpenSynthetic(psample.ConnConfig{}, fam)
		})
		return err
	})
	col := newCollector(t)
	a := agent.New(agent.Options{Workers: 2, Source: p})
	release := make(chan struct{})
	readers := []agent.SampleReader{p.readers[0], &gatedReader{PsampleReader: p.readers[1], release: release}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx, readers); close(done) }()
	released := false
	defer func() {
		if !released {
			close(release)
		}
		cancel()
		<-done
		_ = netnsutil.DoNamed(lab.NS, p.Close)
	}()
	cfg := agent.Config{AgentAddress: netip.MustParseAddr("198.18.0.9"), Receivers: []agent.ReceiverConfig{{Index: 1, Address: col.addr()}}}
	for _, idx := range []int{i0, i1} {
		cfg.Samplers = append(cfg.Samplers, agent.SamplerConfig{IfIndex: uint32(idx), Instance: 1, Receiver: 1, Rate: 10, HeaderBytes: 128})
	}
	lab.Do(t, func() error { return a.Apply(cfg) })
	port := i1
	if a.WorkerOf(sflow.DataSource{Index: uint32(i0)}) == 1 {
		port = i0
	}
	if a.WorkerOf(sflow.DataSource{Index: uint32(port)}) != 1 {
		t.Fatalf("no port of worker 1")
	}
	pid, err := p.readers[0].conn.Load().PortID()
	if err != nil {
		t.Fatal(err)
	}
	var fd nlSender
	lab.Do(t, func() (err error) { fd, err = netlinkSender(pid); return err })
	defer fd.Close()
	frame := udpFrames(1)[0]
	const n = 5000
	for i := range n {
		m := psample.AppendMessage(nil, fam.ID, &psample.Sample{Has: psample.HasIIf, IIfIndex: uint32(port), Rate: 10,
			OrigSize: uint32(len(frame)), Group: 7, Seq: uint32(i), Data: frame})
		if err := fd.send(m); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(testutil.Scaled(300 * time.Millisecond)) // the first reader reads what its follower's queue takes
	close(release)
	released = true
	// What the worker took (its flow samples: the collector's socket may
	// drop a burst in a VM, where net.core.rmem_max caps its buffer).
	deadline := time.Now().Add(testutil.Scaled(10 * time.Second))
	for a.Stats(1).FlowSamples.Load() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	flows := a.Stats(1).FlowSamples.Load()
	pp := p.table.Load().ports[uint32(port)]
	t.Logf("%d samples made for worker 1's port, %d flow samples made of them, %d counted lost, socket overruns %d", n, flows, pp.dropsA.Load(), p.ReaderStats(0).Overruns.Load())
	if flows != n || pp.dropsA.Load() != 0 {
		t.Errorf("%d flow samples and %d counted lost of %d samples; want all made into flow samples", flows, pp.dropsA.Load(), n)
	}
}
