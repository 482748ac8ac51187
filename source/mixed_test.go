package source

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/dataplane/psample"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pslab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// TestMixed: hook auto on a switch with ports that offload tc. Mixed sends
// the port that offloads to psample and the other to the BPF sampler (TC
// on veth); one worker's MixedReader delivers both, and a psample sample
// cuts short the worker's wait on its BPF source at once. The psample side
// reads synthesized messages (this kernel may lack psample; no veth
// offloads tc): the routing and the wait are what is tested here, the
// psample path itself in TestPsample*.
func TestMixed(t *testing.T) {
	testskip.Root(t)
	lab := pslab.New(t)
	bpfPort, _ := lab.Veth(t, "sfps0", "sfps1")
	asicPort, _ := lab.Veth(t, "sfps2", "sfps3")
	fam := psample.Family{ID: 0x7ff0}
	var dp *dataplane.Dataplane
	var p *Psample
	var conn *psample.Conn
	lab.Do(t, func() (err error) {
		if dp, err = dataplane.Open(dataplane.Config{Workers: 1, MaxPorts: 4}); err != nil {
			return err
		}
		p, err = newPsample(PsampleConfig{Workers: 1, ListenGroup: 7}, func() (*psample.Conn, error) {
			conn, err = psample.OpenSynthetic(psample.ConnConfig{}, fam)
			return conn, err
		})
		return err
	})
	t.Cleanup(func() { lab.Do(t, p.Close); lab.Do(t, dp.Close) })
	m := NewMixed(BPF{DP: dp}, p, func(idx uint32) bool { return idx == uint32(asicPort) })
	for _, idx := range []int{bpfPort, asicPort} {
		if err := m.SetPort(uint32(idx), agent.PortSampling{KernelRate: 1, Rate: 1, HeaderBytes: 64}); err != nil {
			t.Fatal(err)
		}
	}
	if !m.UsesPsample(uint32(asicPort)) || m.UsesPsample(uint32(bpfPort)) || !p.has(uint32(asicPort)) {
		t.Fatalf("routing: asic port on psample %v, BPF port on psample %v", m.UsesPsample(uint32(asicPort)), m.UsesPsample(uint32(bpfPort)))
	}
	brs, err := BPFReaders(dp, 1)
	if err != nil {
		t.Fatal(err)
	}
	mr := NewMixedReader(brs[0].(*BPFReader), p.readers[0])
	defer mr.Close()
	got := map[uint32]int{}
	fn := func(ps *agent.PacketSample) { got[ps.IfIndex]++ }

	// A psample sample while the worker waits on the BPF source.
	var fd nlSender
	pid, err := conn.PortID()
	if err != nil {
		t.Fatal(err)
	}
	lab.Do(t, func() (err error) { fd, err = netlinkSender(pid); return err })
	defer fd.Close()
	go func() {
		time.Sleep(300 * time.Millisecond)
		m := psample.AppendMessage(nil, fam.ID, &psample.Sample{Has: psample.HasIIf, IIfIndex: uint32(asicPort), Rate: 1, OrigSize: 60,
			Group: 7, Data: make([]byte, 60)})
		if err := fd.send(m); err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	for got[uint32(asicPort)] == 0 && time.Since(start) < 5*time.Second {
		if _, err := mr.ReadSamples(start.Add(5*time.Second), fn); err != nil {
			break
		}
	}
	if waited := time.Since(start); got[uint32(asicPort)] != 1 || waited > 2*time.Second {
		t.Fatalf("psample sample: %d after %v (a wait on the BPF source must end at once)", got[uint32(asicPort)], waited)
	}
	// BPF samples through the same reader.
	lab.Send(t, "sfps1", udpFrames(20))
	for deadline := time.Now().Add(3 * time.Second); got[uint32(bpfPort)] < 20 && time.Now().Before(deadline); {
		_, _ = mr.ReadSamples(time.Now().Add(100*time.Millisecond), fn)
	}
	if got[uint32(bpfPort)] != 20 {
		t.Errorf("BPF port: %d samples of 20 frames", got[uint32(bpfPort)])
	}
	if pool, _ := m.PortPool(uint32(bpfPort)); pool != 20 {
		t.Errorf("BPF port's pool through Mixed: %d, want 20", pool)
	}
	if err := m.RemovePort(uint32(asicPort)); err != nil || p.has(uint32(asicPort)) {
		t.Errorf("RemovePort: %v, still in psample's table %v", err, p.has(uint32(asicPort)))
	}
}

// TestMixedFollower: with two workers the psample socket is the first
// worker's; a psample port of the second worker gets its samples through
// the second worker's MixedReader (the first reader's queue to it), which
// a sample wakes at once from its wait on its own BPF source.
func TestMixedFollower(t *testing.T) {
	testskip.Root(t)
	lab := pslab.New(t)
	asicPort, _ := lab.Veth(t, "sfps2", "sfps3")
	fam := psample.Family{ID: 0x7ff0}
	var dp *dataplane.Dataplane
	var p *Psample
	var conn *psample.Conn
	opened := 0
	lab.Do(t, func() (err error) {
		if dp, err = dataplane.Open(dataplane.Config{Workers: 2, MaxPorts: 4}); err != nil {
			return err
		}
		p, err = newPsample(PsampleConfig{Workers: 2, ListenGroup: 7}, func() (*psample.Conn, error) {
			opened++
			conn, err = psample.OpenSynthetic(psample.ConnConfig{}, fam)
			return conn, err
		})
		return err
	})
	t.Cleanup(func() { lab.Do(t, p.Close); lab.Do(t, dp.Close) })
	if opened != 1 {
		t.Fatalf("%d psample sockets for 2 workers, want 1", opened)
	}
	m := NewMixed(BPF{DP: dp}, p, func(idx uint32) bool { return idx == uint32(asicPort) })
	if err := m.SetPort(uint32(asicPort), agent.PortSampling{KernelRate: 1, Rate: 1, HeaderBytes: 64, Worker: 1}); err != nil {
		t.Fatal(err)
	}
	brs, err := BPFReaders(dp, 2)
	if err != nil {
		t.Fatal(err)
	}
	rs := MixedReaders(brs, p)
	for _, r := range rs {
		defer r.(*MixedReader).Close()
	}
	var got [2]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = r.ReadSamples(time.Now().Add(5*time.Second), func(ps *agent.PacketSample) {
					if ps.IfIndex == uint32(asicPort) {
						got[w].Add(1)
					}
				})
			}
		}()
	}
	defer func() {
		close(stop)
		for _, r := range rs {
			_ = r.(agent.Waker).Wake()
		}
		wg.Wait()
	}()
	var fd nlSender
	pid, err := conn.PortID()
	if err != nil {
		t.Fatal(err)
	}
	lab.Do(t, func() (err error) { fd, err = netlinkSender(pid); return err })
	defer fd.Close()
	time.Sleep(300 * time.Millisecond) // both readers wait on their BPF sources
	start := time.Now()
	for i := range 3 {
		msg := psample.AppendMessage(nil, fam.ID, &psample.Sample{Has: psample.HasIIf, IIfIndex: uint32(asicPort), Rate: 1, OrigSize: 60,
			Group: 7, Seq: uint32(i), Data: make([]byte, 60)})
		if err := fd.send(msg); err != nil {
			t.Fatal(err)
		}
	}
	for got[1].Load() < 3 && time.Since(start) < 5*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if waited := time.Since(start); got[1].Load() != 3 || got[0].Load() != 0 || waited > 2*time.Second {
		t.Fatalf("the second worker's psample port: %d samples to it, %d to the first worker, after %v; want 3 and 0 at once", got[1].Load(), got[0].Load(), waited)
	}
}
