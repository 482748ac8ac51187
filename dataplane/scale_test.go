package dataplane

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// addVethAt creates a veth pair name/name+"p" inside the lab's switch
// namespace (both ends there), name at ifindex idx, and returns idx.
func addVethAt(t testing.TB, lab *netlab.Lab, name string, idx int) int {
	t.Helper()
	h, err := netns.GetFromName(lab.Switch)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	la := netlink.NewLinkAttrs()
	la.Name, la.Index = name, idx
	if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: name + "p"}); err != nil {
		t.Fatalf("creating veth %s at ifindex %d: %v", name, idx, err)
	}
	for _, n := range []string{name, name + "p"} {
		l, err := nl.LinkByName(n)
		if err == nil {
			err = nl.LinkSetUp(l)
		}
		if err != nil {
			t.Fatalf("setting %s up: %v", n, err)
		}
	}
	if got := lab.LinkIndex(lab.Switch, name); got != idx {
		t.Fatalf("%s has ifindex %d, want %d", name, got, idx)
	}
	return idx
}

// TestLargeIfIndex: ports whose ifindex is 65536 or more (any 32-bit value
// the kernel gives) are attached and sampled like the others (they
// used to be refused), through the program's hash map.
func TestLargeIfIndex(t *testing.T) {
	lab := netlab.New(t, 1)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4})
	p1 := lab.PortIndex(t, 0)
	indexes := []int{
		addVethAt(t, lab, "big0", MaxIfIndex),
		addVethAt(t, lab, "big1", 1<<24+7),
		addVethAt(t, lab, "big2", math.MaxInt32),
	}
	for _, idx := range append([]int{p1}, indexes...) {
		if err := d.AttachPort(idx, PortConfig{Rate: 1, HeaderBytes: 64}); err != nil {
			t.Fatalf("AttachPort(%d): %v", idx, err)
		}
	}
	r, err := d.Source(0)
	if err != nil {
		t.Fatal(err)
	}
	frame := seqFrames(lab, 0, noHostMAC, 0, 1, 22)[0]
	for k, idx := range append([]int{p1}, indexes...) {
		runs := uint32(10 + k)
		ctx := xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: uint32(idx)}
		prog := portProg(t, d, idx) // each port runs its own instance
		if err := lab.Do(lab.Switch, func() error {
			ret, _, err := testRun(prog, frame, &ctx, runs)
			if err == nil && ret != 2 {
				err = fmt.Errorf("returned %d, want XDP_PASS", ret)
			}
			return err
		}); err != nil {
			t.Fatalf("ifindex %d: %v", idx, err)
		}
		c, err := d.Stats().Ingress(idx)
		if err != nil {
			t.Fatal(err)
		}
		if c.Pool != uint64(runs) || c.Samples != uint64(runs) || c.Drops != 0 {
			t.Errorf("ifindex %d: counters %+v after %d frames at rate 1", idx, c, runs)
		}
		got := map[uint32]int{}
		for n := 0; n < int(runs); {
			k, err := r.Read(time.Now().Add(5*time.Second), func(s *reader.RawSample) { got[s.IfIndex]++ })
			if err != nil {
				t.Fatal(err)
			}
			n += k
		}
		if len(got) != 1 || got[uint32(idx)] != int(runs) {
			t.Errorf("ifindex %d: samples by ifindex %v, want %d", idx, got, runs)
		}
	}
	// Detach clears the hash entry: the port is no longer counted.
	if err := d.DetachPort(indexes[0]); err != nil {
		t.Fatal(err)
	}
	var n int
	var cfg bpf.SamplerPortConfig
	err = d.objs.PortConfigsHigh.Lookup(uint32(indexes[0]), &cfg)
	switch {
	case err == nil:
		n++
	case !errors.Is(err, ebpf.ErrKeyNotExist):
		t.Fatalf("lookup in port_configs_high: %v", err)
	}
	if n != 0 {
		t.Errorf("config of detached ifindex %d still in port_configs_high", indexes[0])
	}
}
