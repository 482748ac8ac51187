package source

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/agent"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/dataplane/forwarding"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// TestReaderConverts (root, netlab): a port configured through Dataplane
// at rate 1 delivers every frame host 1 sends, through the worker's
// reader.Source, as an agent.PacketSample carrying the frame's ingress
// ifindex, length, kernel rate, sampling CPU with its pool at the frame,
// and first bytes; PortPool counts the frames; Wake makes a waiting read
// return.
func TestReaderConverts(t *testing.T) {
	lab := netlab.New(t, 2)
	var dp *dataplane.Dataplane
	if err := lab.Do(lab.Switch, func() error {
		var err error
		dp, err = dataplane.Open(dataplane.Config{Workers: 1, MaxPorts: 4})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dp.Close(); err != nil {
			t.Error(err)
		}
	})
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	a := BPF{DP: dp}
	if err := a.SetPort(p1, agent.PortSampling{KernelRate: 1, HeaderBytes: 64, Worker: 0}); err != nil {
		t.Fatal(err)
	}
	readers, err := BPFReaders(dp, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := readers[0]
	if _, ok := r.(agent.Waker); !ok {
		t.Fatal("Reader is not an agent.Waker")
	}

	const k = 50
	frames := make([][]byte, k)
	for i := range frames {
		frames[i] = netlab.UDPFrame(lab.HostMACs[0], lab.HostMACs[1], netip.AddrPortFrom(lab.HostAddrs[0], 40000),
			netip.AddrPortFrom(lab.HostAddrs[1], uint16(7000+i)), bytes.Repeat([]byte{byte(i)}, 100))
	}
	lab.SendFrames(t, 0, frames)
	var got []agent.PacketSample
	for deadline := time.Now().Add(5 * time.Second); len(got) < k && time.Now().Before(deadline); {
		_, err := r.ReadSamples(time.Now().Add(50*time.Millisecond), func(ps *agent.PacketSample) {
			c := *ps
			c.Header = bytes.Clone(ps.Header)
			got = append(got, c)
		})
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal(err)
		}
	}
	mine := 0
	var lastPool uint64
	for _, ps := range got {
		if ps.IfIndex != p1 || ps.KernelRate != 1 || ps.CPUPool == 0 {
			t.Errorf("sample %+v: want ifindex %d, kernel rate 1, a CPU pool", ps, p1)
			continue
		}
		for i, f := range frames {
			if bytes.Equal(ps.Header, f[:64]) {
				mine++
				if ps.FrameLen != uint32(len(f)) {
					t.Errorf("frame %d: length %d, want %d", i, ps.FrameLen, len(f))
				}
			}
		}
		if ps.CPU == got[0].CPU && ps.CPUPool <= lastPool {
			t.Errorf("CPU %d pool went from %d to %d", ps.CPU, lastPool, ps.CPUPool)
		}
		if ps.CPU == got[0].CPU {
			lastPool = ps.CPUPool
		}
	}
	if mine != k {
		t.Errorf("%d of the %d frames sampled with their header (%d samples)", mine, k, len(got))
	}
	if pool, drops := a.PortPool(p1); pool < k || drops != 0 {
		t.Errorf("PortPool = %d, %d; want >= %d frames, no drops", pool, drops, k)
	}

	done := make(chan error, 1)
	go func() {
		_, err := r.ReadSamples(time.Now().Add(time.Minute), func(*agent.PacketSample) {})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := r.(agent.Waker).Wake(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("woken read: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wake did not end the read")
	}
	if err := a.RemovePort(p1); err != nil {
		t.Fatal(err)
	}
	if err := a.RemovePort(p1); err != nil {
		t.Errorf("removing a port twice: %v", err)
	}
}

// TestTunnelQuery: a ring record of a tunnel device's frame becomes the
// worker's TunnelQuery: port, direction and length always; the outer
// addresses, id and TOS only with the kernel's metadata (SampleTunnel),
// IPv4 from the first 4 bytes, IPv6 whole.
func TestTunnelQuery(t *testing.T) {
	var m bpf.SamplerSampleMeta
	m.Tunnel.Family = unix.AF_INET
	copy(m.Tunnel.Src[:], []byte{198, 18, 1, 2})
	copy(m.Tunnel.Dst[:], []byte{198, 18, 1, 1})
	m.Tunnel.Id, m.Tunnel.Tos = 4242, 0xb8
	rs := reader.RawSample{IfIndex: 9, FrameLen: 60, Flags: reader.SampleTunnelPort | reader.SampleTunnel, Meta: &m}
	var q forwarding.TunnelQuery
	tunnelQuery(&q, &rs)
	want := forwarding.TunnelQuery{Port: 9, FrameLen: 60, Known: true, Src: netip.MustParseAddr("198.18.1.2"),
		Dst: netip.MustParseAddr("198.18.1.1"), ID: 4242, TOS: 0xb8}
	if q != want {
		t.Errorf("IPv4: %+v, want %+v", q, want)
	}
	m.Tunnel.Family = unix.AF_INET6
	m.Tunnel.Src = netip.MustParseAddr("fd00:5f::2").As16()
	m.Tunnel.Dst = netip.MustParseAddr("fd00:5f::1").As16()
	rs.Flags |= reader.SampleEgress
	tunnelQuery(&q, &rs)
	want = forwarding.TunnelQuery{Port: 9, Egress: true, FrameLen: 60, Known: true, Src: netip.MustParseAddr("fd00:5f::2"),
		Dst: netip.MustParseAddr("fd00:5f::1"), ID: 4242, TOS: 0xb8}
	if q != want {
		t.Errorf("IPv6: %+v, want %+v", q, want)
	}
	rs.Flags &^= reader.SampleTunnel // a fixed device: no metadata
	tunnelQuery(&q, &rs)
	if want := (forwarding.TunnelQuery{Port: 9, Egress: true, FrameLen: 60}); q != want {
		t.Errorf("without metadata: %+v, want %+v", q, want)
	}
}
