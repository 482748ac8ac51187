package psample

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pslab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// readAll reads samples until none comes for idle.
func readAll(t *testing.T, lab *pslab.Lab, c *Conn, idle time.Duration, fn func(*Sample)) {
	t.Helper()
	for {
		_, err := c.Read(time.Now().Add(idle), fn)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestActSampleStream: act_sample at 1 in 1 on a port's ingress sends
// every frame, numbered without a gap, with the port, the length, the rate
// and the frame's first bytes (trunc); at egress, the port is the output.
func TestActSampleStream(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	i0, i1 := lab.Veth(t, "sfps0", "sfps1")
	var o *Owner
	var c *Conn
	lab.Do(t, func() (err error) {
		if o, err = NewOwner(); err != nil {
			return err
		}
		if err := o.Install(Rule{IfIndex: i0, Rate: 1, Group: 11, TruncSize: 40}); err != nil {
			return err
		}
		if err := o.Install(Rule{IfIndex: i1, Egress: true, Rate: 1, Group: 12}); err != nil {
			return err
		}
		c, err = Open(ConnConfig{})
		return err
	})
	defer func() {
		lab.Do(t, func() error { return errors.Join(o.Remove(i0, false), o.Remove(i1, true), o.Close()) })
	}()
	defer c.Close()
	const n = 500
	fs := frames(n)
	lab.Send(t, "sfps1", fs)
	var in, out []Sample
	readAll(t, lab, c, testutil.Scaled(300*time.Millisecond), func(s *Sample) {
		cp := *s
		cp.Data = bytes.Clone(s.Data)
		switch s.Group {
		case 11:
			in = append(in, cp)
		case 12:
			out = append(out, cp)
		}
	})
	if len(in) != n || len(out) != n {
		t.Fatalf("%d ingress and %d egress samples, want %d each", len(in), len(out), n)
	}
	// The netlink intake numbers the samples (GROUP_SEQ); the tap's have
	// no number (its losses are counted, TestTapRingFull).
	seq := c.Intake() == IntakeNetlink
	for i, s := range in {
		if (seq && s.Seq != in[0].Seq+uint32(i)) || s.IIfIndex != uint32(i0) || s.Has&HasOIf != 0 || s.Rate != 1 ||
			s.OrigSize != uint32(len(fs[0])) || !bytes.Equal(s.Data, fs[0][:40]) {
			t.Fatalf("ingress sample %d: %+v", i, s)
		}
	}
	for i, s := range out {
		// Sent by this host: no input port (skb_iif 0), output the port.
		if (seq && s.Seq != out[0].Seq+uint32(i)) || s.OIfIndex != uint32(i1) || s.IIfIndex != 0 || !bytes.Equal(s.Data, fs[0]) {
			t.Fatalf("egress sample %d: %+v", i, s)
		}
	}
	if c.Overruns.Load() != 0 {
		t.Errorf("%d overruns", c.Overruns.Load())
	}
}

// TestActSampleOverrun: a socket whose buffer overflows reports ENOBUFS,
// and the GROUP_SEQ gaps account for every sample it lost: received +
// lost = sent, exactly.
func TestActSampleOverrun(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	i0, _ := lab.Veth(t, "sfps0", "sfps1")
	var o *Owner
	var c *Conn
	lab.Do(t, func() (err error) {
		if o, err = NewOwner(); err != nil {
			return err
		}
		if err := o.Install(Rule{IfIndex: i0, Rate: 1, Group: 21, TruncSize: 64}); err != nil {
			return err
		}
		// The smallest buffer the kernel allows: a few samples (the
		// netlink intake's; the tap's ring: TestTapRingFull).
		c, err = Open(ConnConfig{RcvBuf: 1, Intake: IntakeNetlink})
		return err
	})
	defer func() { lab.Do(t, func() error { return errors.Join(o.Remove(i0, false), o.Close()) }) }()
	defer c.Close()
	const n = 2000
	lab.Send(t, "sfps1", frames(n))
	var q Seq
	received := 0
	first, last := uint32(0), uint32(0)
	read := func(s *Sample) {
		if received == 0 {
			first = s.Seq
		}
		last = s.Seq
		q.Observe(s.Seq)
		received++
	}
	readAll(t, lab, c, testutil.Scaled(300*time.Millisecond), read)
	// A loss shows at the next sample of the group: one more frame, once
	// the socket has room again, reveals the samples lost at the end.
	lab.Send(t, "sfps1", frames(1))
	readAll(t, lab, c, testutil.Scaled(300*time.Millisecond), read)
	// The socket is quiet: the numbers the reordering window still misses
	// are lost (Settle, as the readers do). The first sample of a new
	// group is numbered 0: the samples before the first one read were
	// lost too.
	q.Settle()
	lost := q.Lost + uint64(first)
	t.Logf("sent %d, received %d, lost %d (gaps), overruns %d, last seq %d", n+1, received, lost, c.Overruns.Load(), last)
	if uint64(received)+lost != n+1 || last != n {
		t.Errorf("received %d + lost %d != sent %d (last seq %d)", received, lost, n+1, last)
	}
	if lost == 0 || c.Overruns.Load() == 0 {
		t.Errorf("no overrun with a minimal buffer: lost %d, overruns %d", lost, c.Overruns.Load())
	}
}
