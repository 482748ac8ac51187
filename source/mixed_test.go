package source

import (
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
