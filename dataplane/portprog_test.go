package dataplane

import (
	"testing"

	"github.com/sflowswitchd/sflowswitchd/dataplane/portstats"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// TestUpdatePortMode: the delivery mode is compiled into the port's own
// program, so UpdatePort swaps the program (BPF link update) when the mode
// changes. Monitor mode without AF_XDP sockets counts every sample as a
// drop; inline mode delivers them. Counters and the link survive the swap.
func TestUpdatePortMode(t *testing.T) {
	lab := netlab.New(t, 2)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4})
	p1 := lab.PortIndex(t, 0)
	c := startCollector(t, d, 0)
	defer c.stop(t)
	if err := d.AttachPort(p1, PortConfig{Rate: 1, Mode: ModeInline, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	mode := d.AttachMode(p1)
	send := func(start uint32) portstats.Counters {
		lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, start, 100, 32))
		pc, err := d.Stats().Ingress(p1)
		if err != nil {
			t.Fatal(err)
		}
		return pc
	}
	a := send(0)
	if a.Samples < 100 || a.Drops != 0 {
		t.Fatalf("inline: counters %+v after 100 frames", a)
	}
	if err := d.updatePort(p1, PortConfig{Rate: 1, Mode: ModeMonitor, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	b := send(100)
	if b.Pool-a.Pool < 100 || b.Drops-a.Drops != b.Samples-a.Samples {
		t.Errorf("monitor without sockets: %+v -> %+v, want every new sample dropped", a, b)
	}
	if err := d.updatePort(p1, PortConfig{Rate: 1, Mode: ModeInline, HeaderBytes: 64}); err != nil {
		t.Fatal(err)
	}
	e := send(200)
	if e.Pool-b.Pool < 100 || e.Drops != b.Drops {
		t.Errorf("back to inline: %+v -> %+v, want no new drops", b, e)
	}
	if m := d.AttachMode(p1); m != mode {
		t.Errorf("attach mode changed by the program swap: %q -> %q", mode, m)
	}
}
