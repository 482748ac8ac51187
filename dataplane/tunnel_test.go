package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/dataplane/forwarding"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// tunnelCases are the tunnels the sampler reports: VXLAN with a fixed VNI
// and remote and in collect_md mode (external), over IPv4 and IPv6, and
// Ethernet over GRE (gretap, ip6gretap), fixed and collect_md.
var tunnelCases = []struct {
	name string
	tun  netlab.Tunnel
	hook Hook // ingress hook (auto: TC for a tunnel device)
}{
	{"vxlan-fixed-v4", netlab.Tunnel{Kind: "vxlan", VNI: 4242, Port: 4789}, HookAuto},
	{"vxlan-fdb-v4", netlab.Tunnel{Kind: "vxlan", VNI: 4141, Port: 4789, FDB: true}, HookAuto},
	// XDP (generic mode on a VXLAN device) cannot read tunnel metadata:
	// a fixed device's records come from its configuration all the same.
	{"vxlan-fixed-v4-xdp", netlab.Tunnel{Kind: "vxlan", VNI: 4040, Port: 4789}, HookXDP},
	{"vxlan-external-v4", netlab.Tunnel{Kind: "vxlan", VNI: 4343, Port: 4789, External: true}, HookAuto},
	{"vxlan-fixed-v6", netlab.Tunnel{Kind: "vxlan", VNI: 4444, Port: 4789, IPv6: true}, HookAuto},
	{"vxlan-external-v6", netlab.Tunnel{Kind: "vxlan", VNI: 4545, Port: 4789, IPv6: true, External: true}, HookAuto},
	{"gretap-fixed", netlab.Tunnel{Kind: "gretap", VNI: 77}, HookAuto},
	{"gretap-external", netlab.Tunnel{Kind: "gretap", VNI: 78, External: true}, HookAuto},
	{"ip6gretap-fixed", netlab.Tunnel{Kind: "ip6gretap"}, HookAuto},
}

// TestTunnelSamples: a tunnel device of the switch sampled both ways at
// rate 1 while the host pings the switch's overlay address through the
// tunnel. Every echo request is sampled at the device's ingress
// (decapsulated) and every reply at its egress (to be encapsulated), and
//   - on a collect_md device the record carries the kernel's tunnel
//     metadata (reader.SampleTunnel): outer source and destination as on the
//     wire (the host's underlay address and the switch's at ingress, the
//     other way round at egress) and the VNI or key;
//   - on a fixed device it carries none, and the forwarding table's copy
//     of the device's configuration and FDB gives the same (vxlan-fdb:
//     the remote of the host's MAC, not the default one);
//   - a route's encap names no outer source: the metadata's is
//     unspecified at egress, and the table gives the address the route
//     to the remote chooses;
//   - either way forwarding.Table.Tunnel makes the records sFlow sends:
//     extended_ipv4/ipv6_tunnel_ingress or _egress with those addresses,
//     protocol 17 (and the device's UDP port) or 47, and
//     extended_vni_ingress / _egress with the VNI for VXLAN.
func TestTunnelSamples(t *testing.T) {
	for _, c := range tunnelCases {
		t.Run(c.name, func(t *testing.T) { testTunnelSamples(t, c.tun, c.hook) })
	}
}

func testTunnelSamples(t *testing.T, tun netlab.Tunnel, hook Hook) {
	lab := netlab.New(t, 1)
	testskip.Feature(t, lab.TunnelKinds(), tun.Kind)
	tun.Name = "sftnvx0"
	lab.AddTunnel(t, &tun)
	port := lab.LinkIndex(lab.Switch, tun.Name)
	d := openAuto(t, lab, Config{Workers: 1, MaxPorts: 4, Hook: hook})
	if err := d.AttachPort(port, PortConfig{Rate: 1, HeaderBytes: 128, Direction: sflow.DirectionBoth}); err != nil {
		t.Fatal(err)
	}
	// A VXLAN device has no native XDP: generic mode under HookXDP.
	m := d.AttachMode(port)
	if tc := m == AttachTCX || m == AttachClsact; tc != (hook == HookAuto) || (!tc && m != AttachGeneric) {
		t.Errorf("ingress attached as %q with hook %v", m, hook)
	}
	ns, err := netns.GetFromName(lab.Switch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	tbl := forwarding.New(ns, testLogger(t))
	if err := tbl.Refresh(); err != nil {
		t.Fatal(err)
	}

	c := startMetaCollector(t, d, 0)
	const k = 5
	lab.PingTunnel(t, &tun, k)
	got, _ := c.waitFor(2*k, 5*time.Second)
	time.Sleep(100 * time.Millisecond)
	got, metas := c.waitFor(len(got)+1, 0)
	c.stop(t)

	var requests, replies int
	var sc forwarding.TunnelRecords
	for i, s := range got {
		typ, ok := icmpEchoType(s.Header)
		if !ok {
			continue
		}
		egress := s.Flags&reader.SampleEgress != 0
		switch {
		case typ == 8 && !egress:
			requests++
		case typ == 0 && egress:
			replies++
		default:
			t.Errorf("ICMP type %d sampled with egress %v", typ, egress)
			continue
		}
		if s.Flags&reader.SampleTunnelPort == 0 {
			t.Errorf("sample %d: no reader.SampleTunnelPort on a %s device", i, tun.Kind)
		}
		// Outer source and destination as on the wire.
		src, dst := tun.HostOuter, tun.SwitchOuter
		if egress {
			src, dst = dst, src
		}
		m := &metas[i]
		if tun.External {
			if s.Flags&reader.SampleTunnel == 0 {
				t.Errorf("sample %d (egress %v): no tunnel metadata on a collect_md device", i, egress)
				continue
			}
			gs, gd := metaAddrs(m)
			// A route's encap without src leaves the outer source to the
			// route: unspecified in the metadata at egress.
			wantSrc := src
			if egress {
				wantSrc = netip.IPv4Unspecified()
				if tun.IPv6 {
					wantSrc = netip.IPv6Unspecified()
				}
			}
			if gs != wantSrc || gd != dst || m.Tunnel.Id != tun.VNI {
				t.Errorf("sample %d (egress %v): metadata %v -> %v id %d, want %v -> %v id %d", i, egress, gs, gd, m.Tunnel.Id, wantSrc, dst, tun.VNI)
			}
		} else if s.Flags&reader.SampleTunnel != 0 {
			t.Errorf("sample %d: tunnel metadata on a fixed device", i)
		}

		// The records sFlow sends.
		q := forwarding.TunnelQuery{Port: s.IfIndex, Egress: egress, FrameLen: s.FrameLen}
		if s.Flags&reader.SampleTunnel != 0 {
			q.Known = true
			q.Src, q.Dst = metaAddrs(m)
			q.ID, q.TOS = m.Tunnel.Id, m.Tunnel.Tos
		}
		ip, vni := tbl.Tunnel(&q, s.Header, &sc)
		checkTunnelRecords(t, tun, egress, s.FrameLen, ip, vni, src, dst)
	}
	if requests != k || replies != k {
		t.Errorf("%d echo requests sampled at ingress, %d replies at egress; want %d each (%d samples)", requests, replies, k, len(got))
	}
}

// checkTunnelRecords checks the records Tunnel made for one sample.
func checkTunnelRecords(t *testing.T, tun netlab.Tunnel, egress bool, frameLen uint32, ip, vni sflow.Record, src, dst netip.Addr) {
	t.Helper()
	proto, dport, encap := uint32(17), uint32(tun.Port), uint32(16)
	if tun.Kind != "vxlan" {
		proto, dport, encap = 47, 0, 4
		if tun.VNI != 0 {
			encap += 4
		}
	}
	var h sflow.SampledIPv4
	var h6 sflow.SampledIPv6
	var wantFormat sflow.DataFormat
	switch {
	case !tun.IPv6 && egress:
		wantFormat = sflow.FormatExtendedIPv4TunnelEgress
	case !tun.IPv6:
		wantFormat = sflow.FormatExtendedIPv4TunnelIngress
	case egress:
		wantFormat = sflow.FormatExtendedIPv6TunnelEgress
	default:
		wantFormat = sflow.FormatExtendedIPv6TunnelIngress
	}
	if ip == nil {
		t.Errorf("egress %v: no IP tunnel record", egress)
		return
	}
	if ip.Format() != wantFormat {
		t.Errorf("egress %v: record %s, want format %v", egress, ip.Name(), wantFormat)
		return
	}
	switch r := ip.(type) {
	case *sflow.ExtendedIPv4TunnelEgress:
		h = r.Header
	case *sflow.ExtendedIPv4TunnelIngress:
		h = r.Header
	case *sflow.ExtendedIPv6TunnelEgress:
		h6 = r.Header
	case *sflow.ExtendedIPv6TunnelIngress:
		h6 = r.Header
	}
	if tun.IPv6 {
		h = sflow.SampledIPv4{Length: h6.Length, Protocol: h6.Protocol, SrcIP: h6.SrcIP, DstIP: h6.DstIP, SrcPort: h6.SrcPort, DstPort: h6.DstPort}
		encap += 20 // 40-byte header
	}
	want := sflow.SampledIPv4{Length: frameLen + 20 + encap, Protocol: proto, SrcIP: src, DstIP: dst, DstPort: dport}
	if h != want {
		t.Errorf("egress %v: %s %+v, want %+v", egress, ip.Name(), h, want)
	}
	switch {
	case tun.Kind != "vxlan":
		if vni != nil {
			t.Errorf("a VNI record (%s) for %s", vni.Name(), tun.Kind)
		}
	case vni == nil:
		t.Errorf("egress %v: no VNI record", egress)
	default:
		var got uint32
		switch r := vni.(type) {
		case *sflow.ExtendedVNIEgress:
			got = r.VNI
			if !egress {
				t.Errorf("extended_vni_egress on an ingress sample")
			}
		case *sflow.ExtendedVNIIngress:
			got = r.VNI
			if egress {
				t.Errorf("extended_vni_ingress on an egress sample")
			}
		}
		if got != tun.VNI {
			t.Errorf("egress %v: VNI %d, want %d", egress, got, tun.VNI)
		}
	}
}

// metaAddrs are a ring record's outer addresses.
func metaAddrs(m *bpf.SamplerSampleMeta) (src, dst netip.Addr) {
	tn := &m.Tunnel
	switch tn.Family {
	case unix.AF_INET:
		return netip.AddrFrom4([4]byte(tn.Src[:4])), netip.AddrFrom4([4]byte(tn.Dst[:4]))
	case unix.AF_INET6:
		return netip.AddrFrom16(tn.Src), netip.AddrFrom16(tn.Dst)
	}
	return netip.Addr{}, netip.Addr{}
}

// icmpEchoType is the ICMP type of an Ethernet frame carrying an IPv4
// ICMP echo request (8) or reply (0).
func icmpEchoType(h []byte) (uint8, bool) {
	if len(h) < 14+20+1 || h[12] != 0x08 || h[13] != 0x00 || h[14]>>4 != 4 || h[23] != 1 {
		return 0, false
	}
	t := h[14+int(h[14]&0xf)*4]
	return t, t == 0 || t == 8
}

// BenchmarkTCSamplerRate1: every frame sampled by a port's TC ingress
// sampler (a 128-byte header into a ring drained by a concurrent
// reader), run with BPF_PROG_TEST_RUN on a 64-byte frame: the sampled
// path of a plain port. BenchmarkTCSamplerRate1Tunnel is the same port
// configured as a VXLAN device: what the tunnel block adds to a sampled
// frame (the kind read, bpf_skb_get_tunnel_key, which finds no metadata
// on a test run's skb: the cost of a fixed tunnel's frame; with metadata
// it also copies the key). An unsampled frame never reaches either.
func BenchmarkTCSamplerRate1(b *testing.B) { benchTCRate1(b, PortPlain) }

// BenchmarkTCSamplerRate1Tunnel: see BenchmarkTCSamplerRate1.
func BenchmarkTCSamplerRate1Tunnel(b *testing.B) { benchTCRate1(b, PortVXLAN) }

func benchTCRate1(b *testing.B, kind PortKind) {
	lab := netlab.New(b, 1)
	d := openAuto(b, lab, Config{Workers: 1, MaxPorts: 2, RingBytes: 64 << 20, Hook: HookTC})
	p1 := lab.LinkIndex(lab.Switch, "p1")
	attach(PortConfig{Rate: 1, HeaderBytes: 128, Kind: kind})(b, d, p1)
	r, err := d.Source(0)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for {
			if _, err := r.Read(time.Now().Add(20*time.Millisecond), func(*reader.RawSample) {}); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				return
			}
		}
	}()
	d.mu.Lock()
	prog := d.ports[p1].prog
	d.mu.Unlock()
	frame := seqFrames(lab, 0, noHostMAC, 0, 1, 22)[0] // 64 bytes
	var per time.Duration
	b.ResetTimer()
	err = lab.Do(lab.Switch, func() error {
		ret, dur, err := prog.Benchmark(frame, b.N, nil)
		if err == nil && ret != 0xffffffff { // TC_ACT_UNSPEC (-1)
			err = fmt.Errorf("returned %d, want TC_ACT_UNSPEC", int32(ret))
		}
		per = dur
		return err
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	c, err := d.Stats().Ingress(p1)
	if err != nil {
		b.Fatal(err)
	}
	if c.Samples == 0 {
		b.Fatalf("no frame sampled: %+v", c)
	}
	b.ReportMetric(float64(per.Nanoseconds()), "kernel-ns/pkt")
}
