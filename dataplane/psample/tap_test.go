package psample

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pslab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// numberedFrames are n UDP frames of 142 bytes whose payload starts with
// their index (big endian, 2 bytes), the rest of it distinct per frame
// too.
func numberedFrames(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		p := make([]byte, 100)
		p[0], p[1] = byte(i>>8), byte(i)
		for j := 2; j < len(p); j++ {
			p[j] = byte(i*7 + j)
		}
		out[i] = netlab.UDPFrame(net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2},
			netip.MustParseAddrPort("198.18.0.1:1000"), netip.MustParseAddrPort("198.18.0.2:2000"), p)
	}
	return out
}

// frameIndex is the index numberedFrames put in a sample's frame (its
// UDP payload at offset 42), or -1 when the sample does not reach it.
func frameIndex(s *Sample) int {
	if len(s.Data) < 44 {
		return -1
	}
	return int(s.Data[42])<<8 | int(s.Data[43])
}

// openTapOnly opens a Conn with the tap, failing the test where it cannot
// attach (the kernels the VMs run, Debian 12 and 13, allow it).
func openTapOnly(t *testing.T, cfg ConnConfig) (*Conn, error) {
	t.Helper()
	cfg.Intake = IntakeTap
	return Open(cfg)
}

// TestTapMatchesNetlink: the tap and a netlink socket, open at once in
// one namespace, receive the same samples: for every frame sent, at
// ingress (group 31, 1 in 1, truncated to 60 bytes) and at egress (group
// 32, 1 in 1, untruncated), the same group, rate, ports, length,
// protocol and header bytes, and those bytes are the frame's as sent.
func TestTapMatchesNetlink(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	i0, i1 := lab.Veth(t, "sfps0", "sfps1")
	var o *Owner
	var tc, nc *Conn
	lab.Do(t, func() (err error) {
		if o, err = NewOwner(); err != nil {
			return err
		}
		if err := o.Install(Rule{IfIndex: i0, Rate: 1, Group: 31, TruncSize: 60}); err != nil {
			return err
		}
		if err := o.Install(Rule{IfIndex: i1, Egress: true, Rate: 1, Group: 32}); err != nil {
			return err
		}
		if tc, err = openTapOnly(t, ConnConfig{}); err != nil {
			return err
		}
		nc, err = Open(ConnConfig{Intake: IntakeNetlink})
		return err
	})
	defer func() {
		lab.Do(t, func() error { return errors.Join(o.Remove(i0, false), o.Remove(i1, true), o.Close()) })
	}()
	defer tc.Close()
	defer nc.Close()
	if tc.Intake() != IntakeTap || nc.Intake() != IntakeNetlink {
		t.Fatalf("intakes %v and %v", tc.Intake(), nc.Intake())
	}
	const n = 300
	fs := numberedFrames(n)
	lab.Send(t, "sfps1", fs)
	collect := func(c *Conn) map[uint32]map[int]Sample {
		got := map[uint32]map[int]Sample{31: {}, 32: {}}
		readAll(t, lab, c, testutil.Scaled(300*time.Millisecond), func(s *Sample) {
			i := frameIndex(s)
			g := got[s.Group]
			if g == nil || i < 0 || i >= n {
				t.Errorf("%v: a sample of group %d, frame %d: %+v", c.Intake(), s.Group, i, s)
				return
			}
			if _, dup := g[i]; dup {
				t.Errorf("%v: group %d: frame %d twice", c.Intake(), s.Group, i)
			}
			cp := *s
			cp.Data = bytes.Clone(s.Data)
			g[i] = cp
		})
		return got
	}
	tap, nl := collect(tc), collect(nc)
	for g, want := range map[uint32]struct {
		in, out uint32
		bytes   int
	}{31: {uint32(i0), 0, 60}, 32: {0, uint32(i1), len(fs[0])}} {
		if len(tap[g]) != n || len(nl[g]) != n {
			t.Fatalf("group %d: %d samples from the tap, %d from netlink, want %d each", g, len(tap[g]), len(nl[g]), n)
		}
		for i := 0; i < n; i++ {
			ts, ns := tap[g][i], nl[g][i]
			if ts.IIfIndex != want.in || ts.OIfIndex != want.out || ts.Rate != 1 || ts.OrigSize != uint32(len(fs[i])) ||
				ts.Proto != 0x0800 || ts.Truncated || !bytes.Equal(ts.Data, fs[i][:want.bytes]) {
				t.Fatalf("group %d frame %d: tap sample %+v, want in %d out %d rate 1 length %d, the frame's first %d bytes",
					g, i, ts, want.in, want.out, len(fs[i]), want.bytes)
			}
			if ts.IIfIndex != ns.IIfIndex || ts.OIfIndex != ns.OIfIndex || ts.Rate != ns.Rate || ts.OrigSize != ns.OrigSize ||
				ts.Proto != ns.Proto || !bytes.Equal(ts.Data, ns.Data) || ts.Has&^HasSeq&^HasTimestamp != ns.Has&^HasSeq&^HasTimestamp {
				t.Fatalf("group %d frame %d: tap %+v, netlink %+v", g, i, ts, ns)
			}
		}
	}
	st, err := tc.TapStats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Seen != 2*n || st.Delivered != 2*n || st.Lost != 0 || tc.TapLost.Load() != 0 {
		t.Errorf("tap counters %+v, lost %d; want %d seen and delivered, none lost", st, tc.TapLost.Load(), 2*n)
	}
}

// TestTapRingFull: a tap whose ring holds a few dozen records, under a
// burst at 1 in 1: every sample the kernel took is either read or counted
// lost, for its group (OnLost), exactly: read + lost = frames sent, and
// the program's own counters agree.
func TestTapRingFull(t *testing.T) {
	needActSample(t)
	lab := pslab.New(t)
	i0, _ := lab.Veth(t, "sfps0", "sfps1")
	var o *Owner
	var c *Conn
	lab.Do(t, func() (err error) {
		if o, err = NewOwner(); err != nil {
			return err
		}
		if err := o.Install(Rule{IfIndex: i0, Rate: 1, Group: 41, TruncSize: 64}); err != nil {
			return err
		}
		c, err = openTapOnly(t, ConnConfig{TapRingBytes: os.Getpagesize()})
		return err
	})
	defer func() { lab.Do(t, func() error { return errors.Join(o.Remove(i0, false), o.Close()) }) }()
	defer c.Close()
	lost := map[uint32]uint64{}
	c.OnLost = func(g uint32, n uint64) { lost[g] += n }
	const n = 2000
	fs := numberedFrames(n + 1)
	lab.Send(t, "sfps1", fs[:n])
	received := 0
	read := func(s *Sample) {
		received++
		if i := frameIndex(s); i < 0 || i > n || !bytes.Equal(s.Data, fs[i][:64]) || s.Group != 41 {
			t.Errorf("sample %+v: not frame %d's first 64 bytes", s, i)
		}
	}
	readAll(t, lab, c, testutil.Scaled(300*time.Millisecond), read)
	lab.Send(t, "sfps1", fs[n:])
	readAll(t, lab, c, testutil.Scaled(300*time.Millisecond), read)
	st, err := c.TapStats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %d, read %d, lost %v; tap counters %+v", n+1, received, lost, st)
	if uint64(received)+lost[41] != n+1 || len(lost) != 1 || c.TapLost.Load() != lost[41] {
		t.Errorf("read %d + lost %v != sent %d (TapLost %d)", received, lost, n+1, c.TapLost.Load())
	}
	if lost[41] == 0 {
		t.Error("nothing lost with a one-page ring")
	}
	if st.Seen != n+1 || st.Delivered != uint64(received) || st.Lost != lost[41] {
		t.Errorf("tap counters %+v; want seen %d, delivered %d, lost %d", st, n+1, received, lost[41])
	}
}

// TestTapHoldsModule: while the tap is attached the psample module is
// held (its reference count is higher: `modprobe -r psample` fails), and
// closing the tap lets it go.
func TestTapHoldsModule(t *testing.T) {
	needActSample(t)
	if _, err := os.Stat("/sys/module/psample/refcnt"); err != nil {
		testskip.Feature(t, notModule{err}, "psample as a module")
	}
	refs := func() int {
		b, err := os.ReadFile("/sys/module/psample/refcnt")
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := refs()
	c, err := openTapOnly(t, ConnConfig{})
	if err != nil {
		t.Fatal(err)
	}
	held := refs()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	after := refs()
	t.Logf("psample references: %d before, %d attached, %d after", before, held, after)
	if held <= before || after != before {
		t.Errorf("psample references %d before, %d attached, %d after: want more while attached, as many after", before, held, after)
	}
}

// notModule is the probe of a psample built into the kernel (no module,
// no reference count).
type notModule struct{ err error }

func (n notModule) Unavailable(string) error {
	return fmt.Errorf("psample is built into the kernel: %w", n.err)
}
