package gen

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// newLabGen builds a 2-port lab and a generator in host 1 sending to host
// 2 through the switch's bridge, with GRO on p1 (the veth's NAPI).
func newLabGen(t *testing.T, cfg Config) (*netlab.Lab, *Generator) {
	t.Helper()
	l := netlab.New(t, 2)
	if err := EnableNAPI(l.Switch, "p1"); err != nil {
		t.Fatal(err)
	}
	cfg.Namespace, cfg.Device = l.Hosts[0], "eth0"
	cfg.SrcMAC, cfg.DstMAC = l.HostMACs[0], l.HostMACs[1]
	cfg.Src, cfg.Dst = l.HostAddrs[0], l.HostAddrs[1]
	cfg.DstPort = 7000
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	return l, g
}

// TestFrames: every frame host 2 receives is the one the cycles say, in
// order: its length (frame by frame through the IMIX cycle), its flow's
// UDP source port, the IPv4 and UDP lengths that go with the length, a
// valid IPv4 header checksum, the template's addresses and payload.
func TestFrames(t *testing.T) {
	const flows = 7 // coprime with len(IMIX): every length meets every flow
	l, g := newLabGen(t, Config{Sizes: IMIX, Flows: flows, SrcPort: 20000, CPU: -1})
	capt := l.Capture(t, l.Hosts[1], "eth0")
	n := 3 * len(IMIX) * flows
	// Paced: a capture socket on a busy machine keeps up with this.
	if err := g.Send(context.Background(), uint64(n), 20000); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	err := capt.Collect(2*time.Second, func(f netlab.Frame) bool {
		// The generator's frames: IPv4, UDP, to port 7000. Anything else
		// is the lab's own (an IGMP report of a namespace, say).
		d := f.Data
		if f.Outgoing || len(d) < 42 || binary.BigEndian.Uint16(d[12:14]) != 0x0800 || d[23] != 17 || binary.BigEndian.Uint16(d[36:38]) != 7000 {
			t.Logf("not the generator's: % x", d)
			return true
		}
		got = append(got, d)
		return len(got) < n
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("host 2 received %d frames, want %d", len(got), n)
	}
	tmpl := g.Template()
	for i, f := range got {
		wantLen := IMIX[i%len(IMIX)]
		if len(f) != wantLen {
			t.Fatalf("frame %d: %d bytes, want %d: % x", i, len(f), wantLen, f)
		}
		ip, udp := f[14:34], f[34:42]
		if tl := binary.BigEndian.Uint16(ip[2:4]); int(tl) != wantLen-14 {
			t.Errorf("frame %d: IPv4 total length %d, want %d", i, tl, wantLen-14)
		}
		if s := csum(ip); s != 0xffff && s != 0 {
			t.Errorf("frame %d: IPv4 header checksum does not verify (sum %#x)", i, s)
		}
		if sp := binary.BigEndian.Uint16(udp[0:2]); int(sp) != 20000+i%flows {
			t.Errorf("frame %d: UDP source port %d, want %d", i, sp, 20000+i%flows)
		}
		if ul := binary.BigEndian.Uint16(udp[4:6]); int(ul) != wantLen-34 {
			t.Errorf("frame %d: UDP length %d, want %d", i, ul, wantLen-34)
		}
		if string(f[:14]) != string(tmpl[:14]) || string(ip[12:20]) != string(tmpl[26:34]) ||
			string(udp[2:4]) != string(tmpl[36:38]) || string(f[42:]) != string(tmpl[42:wantLen]) {
			t.Errorf("frame %d: addresses, destination port or payload differ from the template", i)
		}
	}
	c, err := g.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.Runs != uint64(n) || c.Sent != uint64(n) || c.Dropped != 0 || c.Bad != 0 {
		t.Errorf("counters %+v, want %d runs, all sent", c, n)
	}
}

// csum is the 16-bit one's complement sum of b (RFC 1071), folded.
func csum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// TestExactCount: unpaced, an odd number of frames in chunks smaller than
// the total: the program ran exactly n times, every frame was either
// accepted or refused by the veth, the switch port received exactly the
// accepted ones (rx_packets, and their bytes: rx_bytes) and counted the
// refused ones as rx_dropped.
func TestExactCount(t *testing.T) {
	n := uint64(1_000_003)
	if testing.Short() {
		n = 100_003
	}
	l, g := newLabGen(t, Config{Sizes: IMIX, Flows: 1000, Chunk: 50_000, CPU: -1})
	a := l.LinkStats(t, l.Switch, "p1")
	start := time.Now()
	if err := g.Send(context.Background(), n, 0); err != nil {
		t.Fatal(err)
	}
	sec := time.Since(start).Seconds()
	c, err := g.Counters()
	if err != nil {
		t.Fatal(err)
	}
	// The frames sent are still on their way through veth's receive
	// path when Send returns: read p1 until its counts hold still.
	b := l.LinkStats(t, l.Switch, "p1")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		nb := l.LinkStats(t, l.Switch, "p1")
		if nb == b {
			break
		}
		b = nb
	}
	t.Logf("%d frames in %.2f s (%.0f frames/s): %+v", n, sec, float64(n)/sec, c)
	if c.Runs != n || c.Redirected != n || c.Bad != 0 || c.Errors != 0 {
		t.Fatalf("counters %+v: want %d runs, all redirected", c, n)
	}
	if c.Sent+c.Dropped != n {
		t.Errorf("sent %d + dropped %d != %d redirected", c.Sent, c.Dropped, n)
	}
	if rx := b.RxPackets - a.RxPackets; rx != c.Sent {
		t.Errorf("p1 rx_packets grew by %d, the generator sent %d", rx, c.Sent)
	}
	if d := b.RxDropped - a.RxDropped; d != c.Dropped {
		t.Errorf("p1 rx_dropped grew by %d, the generator counted %d refused", d, c.Dropped)
	}
	if c.Dropped == 0 {
		if rb := b.RxBytes - a.RxBytes; rb != c.Bytes {
			t.Errorf("p1 rx_bytes grew by %d, the generator sent %d bytes", rb, c.Bytes)
		}
	}
	// The IMIX mix over the whole cycles sent, and the rest.
	var want uint64
	for i := uint64(0); i < n; i++ {
		want += uint64(IMIX[i%uint64(len(IMIX))])
	}
	if c.Bytes != want {
		t.Errorf("redirected %d bytes, the IMIX cycle over %d frames is %d", c.Bytes, n, want)
	}
}

func TestConfigErrors(t *testing.T) {
	base := func() Config {
		return Config{Namespace: "x", Device: "eth0", SrcMAC: netlab.HostMAC(1), DstMAC: netlab.HostMAC(2),
			Src: netlab.HostAddr(1), Dst: netlab.HostAddr(2)}
	}
	for _, c := range []struct {
		name string
		mod  func(*Config)
	}{
		{"no namespace", func(c *Config) { c.Namespace = "" }},
		{"no MAC", func(c *Config) { c.SrcMAC = nil }},
		{"short frame", func(c *Config) { c.Sizes = []int{59} }},
		{"long frame", func(c *Config) { c.Sizes = []int{1515} }},
		{"too many sizes", func(c *Config) { c.Sizes = make([]int, MaxSizes+1) }},
		{"too many flows", func(c *Config) { c.Flows = MaxFlows + 1 }},
		{"ports past 65535", func(c *Config) { c.SrcPort, c.Flows = 65000, 1000 }},
		{"batch", func(c *Config) { c.BatchSize = 257 }},
	} {
		cfg := base()
		c.mod(&cfg)
		if err := cfg.normalize(); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	cfg := base()
	if err := cfg.normalize(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cfg.Sizes) != "[60]" || cfg.Flows != 1 || cfg.SrcPort != 10000 || cfg.Chunk != 1<<16 {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestMain(m *testing.M) {
	os.Exit(m.Run())
}
