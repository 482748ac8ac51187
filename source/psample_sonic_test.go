package source

import (
	"sync"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/psample"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pslab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// tablePool is a PortCounters read from a table the test sets, as SONiC
// mode's reads COUNTERS_DB's.
type tablePool struct {
	mu sync.Mutex
	c  map[uint32]psample.PortCounts
}

func (p *tablePool) Read(idx uint32) (psample.PortCounts, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.c[idx]
	if !ok {
		return c, psample.ErrNoPort
	}
	return c, nil
}

func (p *tablePool) set(idx uint32, rx, tx uint64) {
	p.mu.Lock()
	p.c[idx] = psample.PortCounts{RxPackets: rx, TxPackets: tx}
	p.mu.Unlock()
}

// TestPsampleSonicGroups: SONiC's listen-only mode reads group 1 as
// ingress and group 2 as egress samples, numbers ports with the agent's
// index (PortMap: SONiC's ifIndex), and takes the pools from Pool (the
// ASIC's counters), never backwards.
func TestPsampleSonicGroups(t *testing.T) {
	testskip.Root(t)
	lab := pslab.New(t)
	i0, i1 := lab.Veth(t, "sops0", "sops1")
	const s0, s1 = 5, 9 // the ports' SONiC ifIndex
	fam := psample.Family{ID: 0x7ff1}
	pool := &tablePool{c: map[uint32]psample.PortCounts{s0: {RxPackets: 1000, TxPackets: 50}, s1: {RxPackets: 10, TxPackets: 2000}}}
	portMap := func(k uint32) (uint32, bool) {
		switch int(k) {
		case i0:
			return s0, true
		case i1:
			return s1, true
		}
		return 0, false
	}
	var p *Psample
	var conn *psample.Conn
	lab.Do(t, func() (err error) {
		p, err = newPsample(PsampleConfig{Workers: 1, IngressGroup: 1, EgressGroup: 2, Pool: pool, PortMap: portMap}, func() (*psample.Conn, error) {
			conn, err = psample.OpenSynthetic(psample.ConnConfig{}, fam)
			return conn, err
		})
		return err
	})
	r := startAgent(t, lab, p, 1)
	r.apply(t, map[int]uint32{s0: 1000, s1: 1000}, map[uint32]sflow.Direction{s0: sflow.DirectionBoth, s1: sflow.DirectionBoth})
	pool.set(s0, 1300, 80) // 300 in, 30 out since sampling began
	pool.set(s1, 10, 2500) // 500 out
	pid, err := conn.PortID()
	if err != nil {
		t.Fatal(err)
	}
	var fd nlSender
	lab.Do(t, func() (err error) { fd, err = netlinkSender(pid); return err })
	defer fd.Close()
	frame := udpFrames(1)[0]
	n := uint32(len(frame))
	msgs := []psample.Sample{
		// Ingress at port 0, rate 4096 (SONiC sets it per port).
		{Has: psample.HasIIf, IIfIndex: uint32(i0), Rate: 4096, OrigSize: n, Group: 1, Seq: 0, Data: frame},
		// Egress: in at port 0, out at port 1.
		{Has: psample.HasIIf | psample.HasOIf, IIfIndex: uint32(i0), OIfIndex: uint32(i1), Rate: 2048, OrigSize: n, Group: 2, Seq: 0, Data: frame},
		// A port that is not SONiC's (not in PortMap): not reported.
		{Has: psample.HasIIf, IIfIndex: 1, Rate: 4096, OrigSize: n, Group: 1, Seq: 1, Data: frame},
		// Another group: not SONiC's.
		{Has: psample.HasIIf, IIfIndex: uint32(i0), Rate: 4096, OrigSize: n, Group: 3, Seq: 0, Data: frame},
	}
	for i := range msgs {
		if err := fd.send(psample.AppendMessage(nil, fam.ID, &msgs[i])); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(testutil.Scaled(5 * time.Second))
	var got map[uint32][]flowSample
	for time.Now().Before(deadline) {
		if got = r.col.samples(t); len(got[s0]) == 1 && len(got[s1]) == 1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(got[s0]) != 1 || len(got[s1]) != 1 || len(got) != 2 {
		t.Fatalf("samples by data source: %d at %d, %d at %d, %d sources; want one each", len(got[s0]), s0, len(got[s1]), s1, len(got))
	}
	in, eg := got[s0][0].g, got[s1][0].g
	if in.SamplingRate != 4096 || in.Input != s0 || in.SamplePool != 330 || in.Drops != 0 {
		t.Errorf("ingress sample: rate %d input %d pool %d drops %d; want 4096 %d 330 0", in.SamplingRate, in.Input, in.SamplePool, in.Drops, s0)
	}
	if eg.SamplingRate != 2048 || eg.Input != s0 || eg.Output != s1 || eg.SamplePool != 500 {
		t.Errorf("egress sample: rate %d input %d output %d pool %d; want 2048 %d %d 500", eg.SamplingRate, eg.Input, eg.Output, eg.SamplePool, s0, s1)
	}
	if st := p.ReaderStats(0); st.Foreign.Load() != 2 || st.Lost.Load() != 0 {
		t.Errorf("foreign %d lost %d, want 2 and 0", st.Foreign.Load(), st.Lost.Load())
	}
}
