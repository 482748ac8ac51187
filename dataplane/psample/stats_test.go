package psample

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pslab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// frames are n UDP frames from sfps1's side to sfps0's.
func frames(n int) [][]byte {
	f := netlab.UDPFrame(net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2},
		netip.MustParseAddrPort("198.18.0.1:1000"), netip.MustParseAddrPort("198.18.0.2:2000"), make([]byte, 18))
	out := make([][]byte, n)
	for i := range out {
		out[i] = f
	}
	return out
}

// TestStatsReader: RTM_GETSTATS gives the port's packet counters as the
// kernel counts them (what ip -s link shows), sent and received, and a
// port that does not exist is ErrNoPort.
func TestStatsReader(t *testing.T) {
	testskip.Root(t)
	lab := pslab.New(t)
	i0, i1 := lab.Veth(t, "sfps0", "sfps1")
	var before0, before1, after0, after1 PortCounts
	var r *StatsReader
	lab.Do(t, func() (err error) {
		r, err = NewStatsReader()
		if err != nil {
			return err
		}
		if before0, err = r.Read(uint32(i0)); err != nil {
			return err
		}
		before1, err = r.Read(uint32(i1))
		return err
	})
	defer r.Close()
	lab.Send(t, "sfps1", frames(1000))
	var errGone error
	lab.Do(t, func() (err error) {
		if after0, err = r.Read(uint32(i0)); err != nil {
			return err
		}
		if after1, err = r.Read(uint32(i1)); err != nil {
			return err
		}
		_, errGone = r.Read(1 << 30)
		return nil
	})
	if d := after0.RxPackets - before0.RxPackets; d != 1000 {
		t.Errorf("sfps0 received %d, want 1000", d)
	}
	if d := after1.TxPackets - before1.TxPackets; d != 1000 {
		t.Errorf("sfps1 sent %d, want 1000", d)
	}
	if !errors.Is(errGone, ErrNoPort) {
		t.Errorf("a port that does not exist: %v, want ErrNoPort", errGone)
	}
	var allocs float64
	lab.Do(t, func() error {
		allocs = testing.AllocsPerRun(100, func() { _, _ = r.Read(uint32(i0)) })
		return nil
	})
	if allocs != 0 {
		t.Errorf("%v allocations per read", allocs)
	}
}

// TestTCOffloadVeth: a veth port does not offload tc (the rules are then
// installed in software).
func TestTCOffloadVeth(t *testing.T) {
	testskip.Root(t)
	lab := pslab.New(t)
	lab.Veth(t, "sfps0", "sfps1")
	lab.Do(t, func() error {
		on, err := TCOffload("sfps0")
		if err != nil {
			return err
		}
		if on {
			t.Error("veth reports hw-tc-offload on")
		}
		return nil
	})
	// The answer agrees with ethtool's, where ethtool is installed.
	if out, err := lab.Cmd("ethtool", "-k", "sfps0"); err == nil {
		if !strings.Contains(out, "hw-tc-offload: off") {
			t.Errorf("ethtool -k sfps0 says:\n%s", out)
		}
	}
}
