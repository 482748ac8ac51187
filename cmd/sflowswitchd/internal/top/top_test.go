package top

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// topTestEthernet builds an Ethernet frame: MACs, optional 802.1Q tag
// (vlan >= 0), EtherType and payload.
func topTestEthernet(src, dst string, vlan int, etherType uint16, payload []byte) []byte {
	s, _ := net.ParseMAC(src)
	d, _ := net.ParseMAC(dst)
	b := append(append([]byte{}, d...), s...)
	if vlan >= 0 {
		b = binary.BigEndian.AppendUint16(b, 0x8100)
		b = binary.BigEndian.AppendUint16(b, uint16(vlan))
	}
	b = binary.BigEndian.AppendUint16(b, etherType)
	return append(b, payload...)
}

// topTestIPv4 builds an IPv4 header (IHL 5, checksum not filled in: the
// parser does not check it) followed by transport bytes.
func topTestIPv4(proto byte, src, dst string, fragOffset uint16, transport []byte) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(transport)))
	binary.BigEndian.PutUint16(h[6:], fragOffset)
	h[8] = 64
	h[9] = proto
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	return append(h, transport...)
}

// topTestIPv6 builds an IPv6 header with next header nh followed by rest.
func topTestIPv6(nh byte, src, dst string, rest []byte) []byte {
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(rest)))
	h[6] = nh
	h[7] = 64
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	copy(h[8:], s[:])
	copy(h[24:], d[:])
	return append(h, rest...)
}

// topTestPorts is the first 8 bytes of a UDP/TCP header.
func topTestPorts(sport, dport uint16) []byte {
	b := binary.BigEndian.AppendUint16(nil, sport)
	b = binary.BigEndian.AppendUint16(b, dport)
	return append(b, 0, 8, 0, 0)
}

func TestTopParseEthernet(t *testing.T) {
	const h1, h2 = "02:00:00:00:00:11", "02:00:00:00:00:12"
	hopByHop := append([]byte{6, 0, 1, 4, 0, 0, 0, 0}, topTestPorts(443, 50000)...) // next=TCP, 8 bytes
	tests := []struct {
		name  string
		frame []byte
		ok    bool
		want  string // proto|src|dst|vlan
	}{
		{"ipv4 udp", topTestEthernet(h1, h2, -1, 0x0800, topTestIPv4(17, "198.18.0.11", "198.18.0.12", 0, topTestPorts(5001, 7))),
			true, "udp|198.18.0.11:5001|198.18.0.12:7|-1"},
		{"ipv4 tcp vlan", topTestEthernet(h1, h2, 42, 0x0800, topTestIPv4(6, "198.18.0.11", "198.18.0.12", 0, topTestPorts(40000, 80))),
			true, "tcp|198.18.0.11:40000|198.18.0.12:80|42"},
		{"ipv4 icmp echo", topTestEthernet(h1, h2, -1, 0x0800, topTestIPv4(1, "198.18.0.11", "198.18.0.12", 0, []byte{8, 0, 0, 0})),
			true, "icmp 8/0|198.18.0.11|198.18.0.12|-1"},
		// A non-first fragment has no transport header: no ports.
		{"ipv4 fragment", topTestEthernet(h1, h2, -1, 0x0800, topTestIPv4(17, "198.18.0.11", "198.18.0.12", 185, topTestPorts(1, 2))),
			true, "udp|198.18.0.11|198.18.0.12|-1"},
		{"ipv6 tcp after hop-by-hop", topTestEthernet(h1, h2, -1, 0x86dd, topTestIPv6(0, "2001:db8::1", "2001:db8::2", hopByHop)),
			true, "tcp|[2001:db8::1]:443|[2001:db8::2]:50000|-1"},
		{"ipv6 truncated in extension", topTestEthernet(h1, h2, 7, 0x86dd, topTestIPv6(0, "2001:db8::1", "2001:db8::2", hopByHop[:4])),
			true, "ip0|2001:db8::1|2001:db8::2|7"},
		{"arp", topTestEthernet(h1, h2, -1, 0x0806, make([]byte, 28)), true, "arp|-|-|-1"},
		{"ipv4 truncated", topTestEthernet(h1, h2, -1, 0x0800, make([]byte, 10)), true, "ipv4?|-|-|-1"},
		{"short ethernet", []byte{1, 2, 3}, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, ok := parseEthernet(tc.frame)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if got := net.HardwareAddr(k.srcMAC[:]).String(); got != h1 {
				t.Errorf("src mac %s, want %s", got, h1)
			}
			if got := net.HardwareAddr(k.dstMAC[:]).String(); got != h2 {
				t.Errorf("dst mac %s, want %s", got, h2)
			}
			p, s, d := k.describe()
			if got := strings.Join([]string{p, s, d, strconv.Itoa(k.vlan)}, "|"); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// topTestDatagrams returns encoded datagrams of one agent with two
// sub-agents, and the number of datagrams. Sub-agent 0 skips sequence
// number 3 (one lost datagram). Port ifIndex 3 is sampled 1-in-1000:
// 5 samples of a UDP flow (1000-byte frames, VLAN 10) and 2 of a TCP one.
func topTestDatagrams(t *testing.T) [][]byte {
	t.Helper()
	agent := netip.MustParseAddr("198.19.255.1")
	udp := topTestEthernet("02:00:00:00:00:11", "02:00:00:00:00:12", 10, 0x0800,
		topTestIPv4(17, "198.18.0.11", "198.18.0.12", 0, topTestPorts(5001, 9000)))
	tcp := topTestEthernet("02:00:00:00:00:13", "02:00:00:00:00:14", -1, 0x0800,
		topTestIPv4(6, "198.18.0.13", "198.18.0.14", 0, topTestPorts(40000, 8000)))
	flow := func(seq, pool uint32, frame []byte, length uint32) *sflow.FlowSample {
		return &sflow.FlowSample{
			SequenceNumber: seq, Source: sflow.DataSource{Type: sflow.SourceIfIndex, Index: 3},
			SamplingRate: 1000, SamplePool: pool, Drops: 2, Input: sflow.IfIndex(3), Output: sflow.IfIndex(4),
			Records: []sflow.Record{&sflow.SampledHeader{Protocol: sflow.HeaderProtocolEthernet, FrameLength: length, Stripped: 4, Header: frame}},
		}
	}
	ifc := &sflow.IfCounters{IfIndex: 3, IfType: 6, IfSpeed: 10_000_000_000, IfDirection: sflow.IfDirectionFullDuplex,
		IfStatus: sflow.IfStatusBits(true, true), IfInOctets: 123456, IfInUcastPkts: 100, IfOutOctets: 654321, IfOutUcastPkts: 200}
	// Multicast and broadcast counts unavailable: the packet columns sum what is there.
	ifc.IfInMulticastPkts, ifc.IfInBroadcastPkts = sflow.CounterUnavailable32, 7
	ifc.IfOutMulticastPkts, ifc.IfOutBroadcastPkts = sflow.CounterUnavailable32, sflow.CounterUnavailable32
	ifc.IfOutDiscards = sflow.CounterUnavailable32
	host := []sflow.Record{
		&sflow.HostDescr{Hostname: "labswitch", OSName: sflow.OSNameLinux, OSRelease: "6.18"},
		&sflow.HostCPU{LoadOne: 0.5, LoadFive: 0.25, LoadFifteen: 0.125, CPUNum: 2, CPUUser: 1000, CPUIdle: 9000},
		&sflow.HostMemory{MemTotal: 4 << 30, MemFree: 1 << 30},
		&sflow.HostNetIO{BytesIn: 2048, PktsIn: 20, BytesOut: 4096, PacketsOut: 40},
	}
	host2 := []sflow.Record{&sflow.HostCPU{LoadOne: 0.5, LoadFive: 0.25, LoadFifteen: 0.125, CPUNum: 2, CPUUser: 1300, CPUIdle: 9700}}
	physical := sflow.DataSource{Type: sflow.SourceEntPhysicalEntry, Index: 1}
	dgs := []*sflow.Datagram{
		{AgentAddress: agent, SubAgentID: 0, SequenceNumber: 1, Uptime: 5000, Samples: []sflow.Sample{
			flow(1, 1000, udp, 1000), flow(2, 2000, udp, 1000), flow(3, 3000, tcp, 64)}},
		{AgentAddress: agent, SubAgentID: 0, SequenceNumber: 2, Uptime: 6000, Samples: []sflow.Sample{
			flow(4, 4000, udp, 1000), flow(5, 5000, tcp, 64),
			&sflow.CounterSample{SequenceNumber: 1, Source: sflow.DataSource{Type: sflow.SourceIfIndex, Index: 3}, Records: []sflow.Record{ifc, &sflow.PortName{PortName: "swp3"}}}}},
		{AgentAddress: agent, SubAgentID: 0, SequenceNumber: 4, Uptime: 7000, Samples: []sflow.Sample{
			flow(6, 6000, udp, 1000), flow(7, 7000, udp, 1000)}},
		{AgentAddress: agent, SubAgentID: 1, SequenceNumber: 1, Uptime: 7000, Samples: []sflow.Sample{
			&sflow.CounterSample{SequenceNumber: 1, Source: physical, Records: host}}},
		{AgentAddress: agent, SubAgentID: 1, SequenceNumber: 2, Uptime: 8000, Samples: []sflow.Sample{
			&sflow.CounterSample{SequenceNumber: 2, Source: physical, Records: host2}}},
	}
	var out [][]byte
	for _, d := range dgs {
		out = append(out, d.AppendXDR(nil))
	}
	// A malformed one: version 5 header cut short.
	out = append(out, []byte{0, 0, 0, 5, 0, 0, 0, 1, 198, 19})
	return out
}

// topSend sends datagrams over loopback UDP to addr.
func topSend(t *testing.T, addr net.Addr, dgs [][]byte) {
	t.Helper()
	c, err := net.Dial("udp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, d := range dgs {
		if _, err := c.Write(d); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
}

// topSection returns the data rows of the table that follows the line
// starting with title (the table header excluded), split into cells on runs
// of two or more spaces.
func topSection(t *testing.T, screen, title string) [][]string {
	t.Helper()
	lines := strings.Split(screen, "\n")
	split := regexp.MustCompile(`\s{2,}`)
	for i, l := range lines {
		if !strings.HasPrefix(l, title) {
			continue
		}
		var rows [][]string
		for _, r := range lines[i+2:] {
			if r == "" {
				break
			}
			rows = append(rows, split.Split(strings.TrimSpace(r), -1))
		}
		return rows
	}
	t.Fatalf("no section %q in:\n%s", title, screen)
	return nil
}

func TestTopSummaryOverUDP(t *testing.T) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dgs := topTestDatagrams(t)
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- serve(context.Background(), conn, options{interval: time.Hour, once: true, count: len(dgs), flows: 10}, &out)
	}()
	topSend(t, conn.LocalAddr(), dgs)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		conn.Close()
		t.Fatal("top did not stop after -count datagrams")
	}
	screen := out.String()
	t.Log("\n" + screen)
	if n := strings.Count(screen, "final summary"); n != 1 {
		t.Errorf("%d final summaries, want 1 (and no frames with -once)", n)
	}
	if strings.Contains(screen, "frame at") {
		t.Error("-once printed a periodic frame")
	}
	for _, want := range []string{"datagrams 6 ", "malformed 1 ", "samples: flow 7, counters 3, drops 0, other 0",
		"sampling rates in use by the agents: 1-in-1000\n", "last malformed: "} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q", want)
		}
	}

	agents := topSection(t, screen, "AGENTS")
	if len(agents) != 2 {
		t.Fatalf("agents rows %q, want 2", agents)
	}
	// agent, sub-agent, from, datagrams, lost, restarts, last seq, uptime
	if a := agents[0]; a[0] != "198.19.255.1" || a[1] != "0" || a[3] != "3" || a[4] != "1" || a[5] != "0" || a[6] != "4" || a[7] != "7s" {
		t.Errorf("sub-agent 0 row %q", a)
	}
	if a := agents[1]; a[1] != "1" || a[3] != "2" || a[4] != "0" {
		t.Errorf("sub-agent 1 row %q", a)
	}

	sources := topSection(t, screen, "FLOW SAMPLES")
	// agent, source, samples, rate, sample_pool, pool frames, drops, lost samples, est. frames, est. bytes
	want := []string{"198.19.255.1", "ifIndex 3", "7", "1-in-1000", "7000", "6000", "2", "0", "7000"}
	if len(sources) != 1 || strings.Join(sources[0][:9], "|") != strings.Join(want, "|") {
		t.Errorf("flow sample rows %q, want one starting %q", sources, want)
	}
	// 5 x 1000 x 1000 bytes + 2 x 1000 x 64 bytes = 5128000 B = 4.9 MiB
	if got := sources[0][9]; got != "4.9MiB" {
		t.Errorf("est. bytes %q, want 4.9MiB", got)
	}

	flows := topSection(t, screen, "TOP FLOWS")
	if len(flows) != 2 {
		t.Fatalf("flow rows %q, want 2", flows)
	}
	wantTop := []string{"02:00:00:00:00:11", "02:00:00:00:00:12", "10", "udp", "198.18.0.11:5001", "198.18.0.12:9000", "5", "5000", "4.8MiB"}
	if strings.Join(flows[0], "|") != strings.Join(wantTop, "|") {
		t.Errorf("top flow %q, want %q", flows[0], wantTop)
	}
	if f := flows[1]; f[3] != "tcp" || f[4] != "198.18.0.13:40000" || f[7] != "2000" {
		t.Errorf("second flow %q", f)
	}

	ifc := topSection(t, screen, "INTERFACE COUNTERS")
	wantIf := []string{"198.19.255.1", "ifIndex 3", "3 (swp3)", "10G", "up/up", "123456", "107", "654321", "200", "0/0", "-/0"}
	if len(ifc) != 1 || strings.Join(ifc[0], "|") != strings.Join(wantIf, "|") {
		t.Errorf("if_counters rows %q, want %q", ifc, wantIf)
	}

	hosts := topSection(t, screen, "HOST COUNTERS")
	// cpu busy from the two host_cpu records: 300 busy of 1000 ms.
	wantHost := []string{"198.19.255.1", "entPhysical 1", "labswitch", "linux 6.18", "2", "0.50/0.25/0.12", "30.0%", "4.0GiB", "1.0GiB", "2.0KiB 20 pkts", "4.0KiB 40 pkts"}
	if len(hosts) != 1 || strings.Join(hosts[0], "|") != strings.Join(wantHost, "|") {
		t.Errorf("host rows %q, want %q", hosts, wantHost)
	}
}

func TestTopFramesUntilDuration(t *testing.T) {
	for _, terminal := range []bool{false, true} {
		conn, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		// Queued in the socket before top starts reading.
		topSend(t, conn.LocalAddr(), topTestDatagrams(t))
		var out bytes.Buffer
		start := time.Now()
		// A 10 ms interval in a 550 ms run: at least two frames even
		// when the loop gets the CPU late on a loaded machine (with
		// 100 ms, a loop starved for 450 ms under -race beside other
		// jobs found its tick and the deadline ready at once, and drew
		// one frame).
		o := options{interval: 10 * time.Millisecond, duration: 550 * time.Millisecond, flows: 1, terminal: terminal}
		if err := serve(context.Background(), conn, o, &out); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < o.duration {
			t.Errorf("stopped after %v, before -duration %v", el, o.duration)
		}
		screen := out.String()
		clears := strings.Count(screen, "\x1b[H\x1b[2J")
		frames := strings.Count(screen, "===== sflowswitchd top: frame at")
		if terminal {
			if clears < 2 || frames != 0 {
				t.Errorf("terminal: %d screen clears, %d frame separators; want >= 2 and 0", clears, frames)
			}
		} else if clears != 0 || frames < 2 {
			t.Errorf("not a terminal: %d screen clears, %d frame separators; want 0 and >= 2", clears, frames)
		}
		final := screen[strings.LastIndex(screen, "final summary"):]
		if !strings.Contains(final, "datagrams 6 ") || !strings.Contains(final, "malformed 1 ") {
			t.Errorf("final summary lacks the counts:\n%s", final)
		}
		if rows := topSection(t, final, "TOP FLOWS"); len(rows) != 1 || rows[0][4] != "198.18.0.11:5001" {
			t.Errorf("-flows 1: top flow rows %q", rows)
		}
	}
}

func TestTopFlags(t *testing.T) {
	for _, args := range [][]string{{"-interval", "0"}, {"-duration", "-1s"}, {"-count", "-2"}, {"-flows", "0"}, {"-sort", "pkts"}, {"extra"}, {"-nosuchflag"}} {
		var stdout, stderr bytes.Buffer
		if rc := Run(args, &stdout, &stderr); rc != 2 {
			t.Errorf("Run(%q) = %d, want 2 (stderr %q)", args, rc, stderr.String())
		}
	}
	// A full run through the flags: nothing received, a summary at -duration.
	var stdout, stderr bytes.Buffer
	if rc := Run([]string{"-listen", "127.0.0.1:0", "-duration", "200ms", "-once"}, &stdout, &stderr); rc != 0 {
		t.Fatalf("Run = %d, stderr %q", rc, stderr.String())
	}
	if s := stdout.String(); !strings.Contains(s, "final summary") || !strings.Contains(s, "datagrams 0 ") || !strings.Contains(s, "(none yet)") {
		t.Errorf("summary of an idle run:\n%s", s)
	}
}

func TestTopSequenceAndPoolWrap(t *testing.T) {
	st := newState("test", time.Now())
	from := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	agent := netip.MustParseAddr("198.19.255.1")
	add := func(seq, flowSeq, pool uint32) {
		d := &sflow.Datagram{AgentAddress: agent, SequenceNumber: seq, Samples: []sflow.Sample{&sflow.FlowSample{
			SequenceNumber: flowSeq, Source: sflow.DataSource{Index: 9}, SamplingRate: 100, SamplePool: pool}}}
		st.add(d.AppendXDR(nil), from, time.Now())
	}
	add(0xfffffffe, 0xfffffffe, 0xffffff00)
	add(0xffffffff, 0xffffffff, 0xffffff80)
	add(1, 1, 0x100) // datagram 0 and flow sample 0 missing, pool wrapped
	add(1, 2, 0x180) // the same datagram sequence number again: a restart
	a := st.agents[agentKey{agent, 0}]
	if a.datagrams != 4 || a.lost != 1 || a.restarts != 1 {
		t.Errorf("agent: datagrams %d lost %d restarts %d, want 4 1 1", a.datagrams, a.lost, a.restarts)
	}
	s := st.sources[sourceKey{agent, sflow.DataSource{Index: 9}}]
	if s.samples != 4 || s.seqLost != 1 || s.poolFrames != 0x280 || s.estFrames != 400 {
		t.Errorf("source: samples %d lost %d pool frames %#x est %d, want 4 1 0x280 400", s.samples, s.seqLost, s.poolFrames, s.estFrames)
	}
	// Samples without a sampled_header are counted as unparsed.
	if st.unparsed != 4 || len(st.flows) != 0 {
		t.Errorf("unparsed %d, flows %d; want 4, 0", st.unparsed, len(st.flows))
	}
}

func TestTopFormatting(t *testing.T) {
	un := sflow.CounterUnavailable32
	for _, tc := range []struct{ got, want string }{
		{fmtPkts(un, un, un), "-"},
		{fmtPkts(1, un, 2), "3"},
		{fmtSpeed(0), "unknown"},
		{fmtSpeed(10_000_000_000), "10G"},
		{fmtSpeed(100_000_000), "100M"},
		{fmtSpeed(1_500_000_001), "1500000001"},
		{fmtStatus(sflow.IfStatusBits(true, false)), "up/down"},
		{fmtBytes(1023), "1023B"},
		{fmtBytes(1536), "1.5KiB"},
		{fmtBytes(sflow.CounterUnavailable64), "-"},
		{fmtLoad(sflow.HostCPULoadUnknown), "-"},
		{sourceName(sflow.DataSource{Type: 7, Index: 1}), "7:1"},
		{addrString(netip.Addr{}), "unknown"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	// CPU busy from counter differences, across a uint32 wrap of cpu_idle.
	prev := &sflow.HostCPU{CPUUser: 100, CPUIdle: 0xffffff00}
	cur := &sflow.HostCPU{CPUUser: 300, CPUIdle: 0x100}
	if got := cpuUtil(prev, cur); got < 28.08 || got > 28.10 { // 200 busy of 200+512 ms
		t.Errorf("cpu busy %.2f%%, want 28.09%%", got)
	}
	if got := cpuUtil(nil, cur); got != -1 {
		t.Errorf("cpu busy without a previous record %v, want -1", got)
	}
}

func TestTopSortFlows(t *testing.T) {
	st := newState("test", time.Now())
	from := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	small := topTestEthernet("02:00:00:00:00:11", "02:00:00:00:00:12", -1, 0x0800, topTestIPv4(17, "198.18.0.11", "198.18.0.12", 0, topTestPorts(1, 2)))
	big := topTestEthernet("02:00:00:00:00:13", "02:00:00:00:00:14", -1, 0x0800, topTestIPv4(6, "198.18.0.13", "198.18.0.14", 0, topTestPorts(3, 4)))
	var samples []sflow.Sample
	for i, f := range []struct {
		frame  []byte
		length uint32
	}{{small, 64}, {small, 64}, {small, 64}, {big, 1500}} {
		samples = append(samples, &sflow.FlowSample{SequenceNumber: uint32(i), SamplingRate: 10, Records: []sflow.Record{
			&sflow.SampledHeader{Protocol: sflow.HeaderProtocolEthernet, FrameLength: f.length, Header: f.frame}}})
	}
	d := &sflow.Datagram{AgentAddress: netip.MustParseAddr("198.19.255.1"), SequenceNumber: 1, Samples: samples}
	st.add(d.AppendXDR(nil), from, time.Now())
	for _, tc := range []struct {
		byBytes bool
		title   string
		first   string
	}{{false, "TOP FLOWS by estimated frames", "198.18.0.11:1"}, {true, "TOP FLOWS by estimated bytes", "198.18.0.13:3"}} {
		var b strings.Builder
		st.render(&b, time.Now(), 1, tc.byBytes)
		rows := topSection(t, b.String(), tc.title)
		if len(rows) != 1 || rows[0][4] != tc.first {
			t.Errorf("byBytes %v: rows %q, want one with source %s", tc.byBytes, rows, tc.first)
		}
	}
}
