package decode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readAllUDP returns every datagram a pcapReader yields from file.
func readAllUDP(t *testing.T, file string, port uint16) []capturedDatagram {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := newPcapReader(f, port)
	if err != nil {
		t.Fatal(err)
	}
	var out []capturedDatagram
	for {
		d, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("after %d datagrams: %v", len(out), err)
		}
		c := *d
		c.Payload = append([]byte(nil), d.Payload...)
		out = append(out, c)
	}
}

// hexDump formats packets as the od-style dump text2pcap reads.
func hexDump(packets [][]byte) string {
	var s strings.Builder
	for _, p := range packets {
		for off := 0; off < len(p); off += 16 {
			fmt.Fprintf(&s, "%06x ", off)
			for _, c := range p[off:min(off+16, len(p))] {
				fmt.Fprintf(&s, " %02x", c)
			}
			s.WriteString("\n")
		}
		s.WriteString("\n")
	}
	return s.String()
}

// TestPcapReaderText2pcap reads captures written by Wireshark's text2pcap,
// an independent writer, in each file format and link layer it offers.
func TestPcapReaderText2pcap(t *testing.T) {
	text2pcap, err := exec.LookPath("text2pcap")
	if err != nil {
		t.Fatalf("text2pcap (Debian package wireshark-common) is needed: %v", err)
	}
	payloads := [][]byte{readTestdata(t, "flow_core.bin"), readTestdata(t, "counters_if.bin"), readTestdata(t, "truncated.bin")}
	dir := t.TempDir()
	dump := filepath.Join(dir, "dump.txt")
	if err := os.WriteFile(dump, []byte(hexDump(payloads)), 0o644); err != nil {
		t.Fatal(err)
	}
	v4 := []string{"-4", "198.18.0.1,198.18.0.2"}
	v6 := []string{"-6", "2001:db8::1,2001:db8::2"}
	cases := []struct {
		name string
		args []string
		ip   []string
	}{
		{"pcap ethernet ipv4", []string{"-F", "pcap"}, v4},
		{"nanosecond pcap ethernet ipv4", []string{"-F", "nsecpcap"}, v4},
		{"pcapng ethernet ipv6", []string{"-F", "pcapng"}, v6},
		{"pcap raw ipv4", []string{"-F", "pcap", "-l", "101"}, v4},
		{"pcapng raw ipv6", []string{"-F", "pcapng", "-l", "101"}, v6},
		{"pcap linktype ipv4", []string{"-F", "pcap", "-l", "228"}, v4},
		{"pcapng linktype ipv6", []string{"-F", "pcapng", "-l", "229"}, v6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			args := append(append(append([]string{"-q"}, tc.args...), tc.ip...), "-u", "50000,6343", dump, out)
			if msg, err := exec.Command(text2pcap, args...).CombinedOutput(); err != nil {
				t.Fatalf("text2pcap %v: %v\n%s", args, err, msg)
			}
			got := readAllUDP(t, out, 6343)
			if len(got) != len(payloads) {
				t.Fatalf("%d datagrams, want %d", len(got), len(payloads))
			}
			src, dst, _ := strings.Cut(tc.ip[1], ",")
			for i, d := range got {
				if !bytes.Equal(d.Payload, payloads[i]) || d.Truncated {
					t.Errorf("datagram %d: payload %d bytes (truncated %v), want %d", i, len(d.Payload), d.Truncated, len(payloads[i]))
				}
				if d.Frame != i+1 {
					t.Errorf("datagram %d: frame %d", i, d.Frame)
				}
				if d.Source.String() != netip.AddrPortFrom(netip.MustParseAddr(src), 50000).String() ||
					d.Destination.String() != netip.AddrPortFrom(netip.MustParseAddr(dst), 6343).String() {
					t.Errorf("datagram %d: %v -> %v", i, d.Source, d.Destination)
				}
			}
			if other := readAllUDP(t, out, 6344); len(other) != 0 {
				t.Errorf("port filter: %d datagrams to 6344", len(other))
			}
		})
	}
}

// Frame builders for the hand-made captures.

func ipv4UDP(src, dst string, sport, dport uint16, payload []byte, fragFlags uint16) []byte {
	ip := []byte{0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0}
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	binary.BigEndian.PutUint16(ip[6:], fragFlags)
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	ip = append(append(ip, s[:]...), d[:]...)
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	return append(ip, udpSegment(sport, dport, payload)...)
}

func udpSegment(sport, dport uint16, payload []byte) []byte {
	u := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	return append(u, payload...)
}

// ipv6UDP builds an IPv6 packet with a hop-by-hop options header (8 bytes
// of PadN) before the UDP header, so the extension header walk is tested.
func ipv6UDP(src, dst string, sport, dport uint16, payload []byte) []byte {
	hbh := []byte{17, 0, 1, 4, 0, 0, 0, 0} // next header UDP, length 0, PadN(4)
	seg := udpSegment(sport, dport, payload)
	ip := []byte{0x60, 0, 0, 0, 0, 0, 0 /* hop-by-hop */, 64}
	binary.BigEndian.PutUint16(ip[4:], uint16(len(hbh)+len(seg)))
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	ip = append(append(ip, s[:]...), d[:]...)
	return append(append(ip, hbh...), seg...)
}

func ethFrame(etherType uint16, vlans []uint16, l3 []byte) []byte {
	f := []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1}
	for _, v := range vlans {
		f = binary.BigEndian.AppendUint16(f, 0x8100)
		f = binary.BigEndian.AppendUint16(f, v)
	}
	f = binary.BigEndian.AppendUint16(f, etherType)
	f = append(f, l3...)
	for len(f) < 60 { // minimum frame: padding the IP length must cut off
		f = append(f, 0xee)
	}
	return f
}

// stackTags inserts VLAN tags (pairs of TPID, TCI) after the MACs of an
// Ethernet frame.
func stackTags(f []byte, tags ...uint16) []byte {
	out := append([]byte(nil), f[:12]...)
	for _, w := range tags {
		out = binary.BigEndian.AppendUint16(out, w)
	}
	return append(out, f[12:]...)
}

func sll(etherType uint16, l3 []byte) []byte {
	h := []byte{0, 0, 0, 1, 0, 6, 0x02, 0, 0, 0, 0, 1, 0, 0} // host, ARPHRD_ETHER, 6-byte address
	return append(binary.BigEndian.AppendUint16(h, etherType), l3...)
}

func sll2(etherType uint16, l3 []byte) []byte {
	h := binary.BigEndian.AppendUint16(nil, etherType)
	h = append(h, 0, 0, 0, 0, 0, 7, 0, 1, 0, 6, 0x02, 0, 0, 0, 0, 1, 0, 0) // reserved, ifindex 7, ARPHRD_ETHER, host, 6
	return append(h, l3...)
}

// capturedFrame is one frame for the capture writers: data, the
// interface (pcapng) and how many bytes of it were captured.
type capturedFrame struct {
	data  []byte
	iface uint32
	snap  int // 0: all
}

func (f capturedFrame) captured() []byte {
	if f.snap > 0 && f.snap < len(f.data) {
		return f.data[:f.snap]
	}
	return f.data
}

var captureEpoch = time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)

// classicPcap writes frames as a classic pcap file of one link type.
func classicPcap(order binary.AppendByteOrder, nsec bool, linkType uint32, frames []capturedFrame) []byte {
	magic := uint32(0xa1b2c3d4)
	if nsec {
		magic = 0xa1b23c4d
	}
	p := order.AppendUint32(nil, magic)
	p = order.AppendUint16(p, 2)
	p = order.AppendUint16(p, 4)
	p = order.AppendUint32(p, 0)
	p = order.AppendUint32(p, 0)
	p = order.AppendUint32(p, 65535)
	p = order.AppendUint32(p, linkType)
	for i, f := range frames {
		ts := captureEpoch.Add(time.Duration(i) * time.Second)
		frac := uint32(ts.Nanosecond() / 1000)
		if nsec {
			frac = uint32(ts.Nanosecond())
		}
		p = order.AppendUint32(p, uint32(ts.Unix()))
		p = order.AppendUint32(p, frac)
		p = order.AppendUint32(p, uint32(len(f.captured())))
		p = order.AppendUint32(p, uint32(len(f.data)))
		p = append(p, f.captured()...)
	}
	return p
}

// pcapngFile writes a pcapng section with one interface per link type
// (the second with if_tsresol 10^-9) and the frames as enhanced packet
// blocks, then an unknown block that must be skipped.
func pcapngFile(order binary.AppendByteOrder, linkTypes []uint32, frames []capturedFrame) []byte {
	block := func(p []byte, typ uint32, body []byte) []byte {
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
		p = order.AppendUint32(p, typ)
		p = order.AppendUint32(p, uint32(12+len(body)))
		p = append(p, body...)
		return order.AppendUint32(p, uint32(12+len(body)))
	}
	shb := order.AppendUint32(nil, 0x1A2B3C4D)
	shb = order.AppendUint16(shb, 1)
	shb = order.AppendUint16(shb, 0)
	shb = order.AppendUint64(shb, 0xffffffffffffffff)
	p := block(nil, 0x0A0D0D0A, shb)
	for i, lt := range linkTypes {
		idb := order.AppendUint16(nil, uint16(lt))
		idb = order.AppendUint16(idb, 0)
		idb = order.AppendUint32(idb, 0)
		if i == 1 {
			idb = order.AppendUint16(idb, 9) // if_tsresol
			idb = order.AppendUint16(idb, 1)
			idb = append(idb, 9, 0, 0, 0)
		}
		idb = order.AppendUint32(idb, 0) // opt_endofopt
		p = block(p, 1, idb)
	}
	for i, f := range frames {
		ts := captureEpoch.Add(time.Duration(i) * time.Second)
		units := uint64(ts.UnixMicro())
		if f.iface == 1 {
			units = uint64(ts.UnixNano())
		}
		epb := order.AppendUint32(nil, f.iface)
		epb = order.AppendUint32(epb, uint32(units>>32))
		epb = order.AppendUint32(epb, uint32(units))
		epb = order.AppendUint32(epb, uint32(len(f.captured())))
		epb = order.AppendUint32(epb, uint32(len(f.data)))
		epb = append(epb, f.captured()...)
		p = block(p, 6, epb)
	}
	// An unknown block type, to be skipped. It goes last because tshark
	// counts it as a frame, which would shift the frame numbers compared.
	return block(p, 0x0BAD, []byte{1, 2, 3, 4})
}

// tsharkUDPPayloads returns, per frame number, the UDP payload (hex) that
// tshark decodes from a capture file.
func tsharkUDPPayloads(t *testing.T, file string) map[int]string {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Fatalf("tshark is needed: %v", err)
	}
	cmd := exec.Command(tshark, "-n", "-r", file, "-T", "fields", "-e", "frame.number", "-e", "udp.payload")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v: %s", err, stderr.String())
	}
	res := map[int]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		num, payload, _ := strings.Cut(line, "\t")
		n, err := strconv.Atoi(num)
		if err != nil {
			t.Fatalf("tshark line %q", line)
		}
		if payload != "" {
			res[n] = strings.ReplaceAll(payload, ":", "")
		}
	}
	return res
}

// TestPcapReaderLinkLayers reads hand-made captures in every supported
// format and link layer, with frames the reader must skip (other port,
// TCP, IPv4 fragments) and one cut by the snapshot length. tshark reads
// the same files as an independent check of the fixtures: every datagram
// we return must carry the payload tshark decodes for that frame.
func TestPcapReaderLinkLayers(t *testing.T) {
	p1, p2, p3 := readTestdata(t, "flow_core.bin"), readTestdata(t, "counters_if.bin"), []byte{0, 0, 0, 5}
	v4 := func(payload []byte) []byte { return ipv4UDP("198.18.0.1", "198.18.0.2", 50000, 6343, payload, 0) }
	v6 := func(payload []byte) []byte { return ipv6UDP("2001:db8::1", "2001:db8::2", 50001, 6343, payload) }
	otherPort := ipv4UDP("198.18.0.1", "198.18.0.2", 50000, 53, p1, 0)
	fragment := ipv4UDP("198.18.0.1", "198.18.0.2", 50000, 6343, p1, 0x2000) // more fragments
	tcp := v4(p1)
	tcp[9] = 6

	type want struct {
		frame     int
		payload   []byte
		src       string
		truncated bool
	}
	ethFrames := []capturedFrame{
		{data: ethFrame(0x0800, nil, v4(p1))},
		{data: ethFrame(0x0800, []uint16{100}, v4(p3))}, // VLAN tag, Ethernet padding
		{data: ethFrame(0x86DD, []uint16{10, 20}, v6(p2))},
		{data: ethFrame(0x0800, nil, otherPort)},
		{data: ethFrame(0x0800, nil, fragment)},
		{data: ethFrame(0x0800, nil, tcp)},
		{data: ethFrame(0x0800, nil, v4(p2)), snap: 14 + 20 + 8 + 100},
		{data: stackTags(ethFrame(0x0800, nil, v4(p3)), 0x88a8, 7, 0x9100, 8, 0x8100, 9)}, // S-tag, 0x9100 tag, C-tag
	}
	ethWant := []want{
		{1, p1, "198.18.0.1:50000", false},
		{2, p3, "198.18.0.1:50000", false},
		{3, p2, "[2001:db8::1]:50001", false},
		{7, p2[:100], "198.18.0.1:50000", true},
		{8, p3, "198.18.0.1:50000", false},
	}
	cookedWant := []want{{1, p1, "198.18.0.1:50000", false}, {2, p2, "[2001:db8::1]:50001", false}, {3, p3, "198.18.0.1:50000", false}}
	sllFrames := []capturedFrame{{data: sll(0x0800, v4(p1))}, {data: sll(0x86DD, v6(p2))}, {data: sll(0x8100, append([]byte{0, 5, 8, 0}, v4(p3)...))}}
	sll2Frames := []capturedFrame{{data: sll2(0x0800, v4(p1))}, {data: sll2(0x86DD, v6(p2))}, {data: sll2(0x0800, v4(p3))}}
	rawFrames := []capturedFrame{{data: v4(p1)}, {data: v6(p2)}, {data: v4(p3)}}
	// pcapng with two interfaces of different link types and resolutions.
	mixedFrames := []capturedFrame{{data: sll2(0x0800, v4(p1)), iface: 1}, {data: ethFrame(0x86DD, nil, v6(p2))}, {data: sll2(0x0800, v4(p3)), iface: 1}}

	cases := []struct {
		name  string
		file  []byte
		nsec  bool
		wants []want
	}{
		{"pcap le ethernet", classicPcap(binary.LittleEndian, false, linkTypeEthernet, ethFrames), false, ethWant},
		{"pcap be nsec ethernet", classicPcap(binary.BigEndian, true, linkTypeEthernet, ethFrames), true, ethWant},
		{"pcap sll", classicPcap(binary.LittleEndian, false, linkTypeLinuxSLL, sllFrames), false, cookedWant},
		{"pcap sll2", classicPcap(binary.LittleEndian, false, linkTypeLinuxSL2, sll2Frames), false, cookedWant},
		{"pcap raw", classicPcap(binary.LittleEndian, false, linkTypeRaw, rawFrames), false, cookedWant},
		{"pcapng le ethernet", pcapngFile(binary.LittleEndian, []uint32{linkTypeEthernet}, ethFrames), false, ethWant},
		{"pcapng be sll", pcapngFile(binary.BigEndian, []uint32{linkTypeLinuxSLL}, sllFrames), false, cookedWant},
		{"pcapng two interfaces", pcapngFile(binary.LittleEndian, []uint32{linkTypeEthernet, linkTypeLinuxSL2}, mixedFrames), true, cookedWant},
	}
	dir := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := os.WriteFile(file, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			got := readAllUDP(t, file, 6343)
			if len(got) != len(tc.wants) {
				t.Fatalf("%d datagrams, want %d", len(got), len(tc.wants))
			}
			ref := tsharkUDPPayloads(t, file)
			for i, w := range tc.wants {
				d := got[i]
				if d.Frame != w.frame || !bytes.Equal(d.Payload, w.payload) || d.Source.String() != w.src || d.Truncated != w.truncated {
					t.Errorf("datagram %d: frame %d from %v, %d bytes, truncated %v; want frame %d from %s, %d bytes, truncated %v",
						i, d.Frame, d.Source, len(d.Payload), d.Truncated, w.frame, w.src, len(w.payload), w.truncated)
				}
				if ref[d.Frame] != fmt.Sprintf("%x", d.Payload) {
					t.Errorf("frame %d: tshark reads payload %q, we %x", d.Frame, ref[d.Frame], d.Payload)
				}
				wantTime := captureEpoch.Add(time.Duration(w.frame-1) * time.Second)
				if !tc.nsec && !strings.HasPrefix(tc.name, "pcapng") {
					wantTime = wantTime.Truncate(time.Microsecond)
				}
				if tc.name == "pcapng two interfaces" && w.frame == 2 {
					wantTime = wantTime.Truncate(time.Microsecond) // interface 0 is in µs
				}
				if !d.Time.Equal(wantTime) {
					t.Errorf("datagram %d: time %v, want %v", i, d.Time, wantTime)
				}
			}
		})
	}
}

func TestPcapReaderRejectsCorruptFiles(t *testing.T) {
	good := classicPcap(binary.LittleEndian, false, linkTypeEthernet, []capturedFrame{{data: ethFrame(0x0800, nil, ipv4UDP("198.18.0.1", "198.18.0.2", 1, 6343, []byte{1, 2, 3, 4}, 0))}})
	goodNG := pcapngFile(binary.LittleEndian, []uint32{linkTypeEthernet}, []capturedFrame{{data: ethFrame(0x0800, nil, ipv4UDP("198.18.0.1", "198.18.0.2", 1, 6343, []byte{1, 2, 3, 4}, 0))}})
	hugeLen := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(hugeLen[24+8:], 0xfffffff0)
	badLinkType := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(badLinkType[20:], 147)
	cases := []struct {
		name    string
		file    []byte
		atOpen  bool
		wantErr error
	}{
		{"empty file", nil, true, errCaptureFormat},
		{"not a capture", []byte("hello, world, not a capture file"), true, errCaptureFormat},
		{"unsupported link type", badLinkType, true, errCaptureFormat},
		{"pcap cut in a packet", good[:len(good)-3], false, io.ErrUnexpectedEOF},
		{"pcap huge captured length", hugeLen, false, errCaptureFormat},
		{"pcapng cut in a block", goodNG[:len(goodNG)-6], false, io.ErrUnexpectedEOF},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := newPcapReader(bytes.NewReader(tc.file), 6343)
			if tc.atOpen {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("open: %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for {
				_, err = r.Next()
				if err != nil {
					break
				}
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// FuzzPcapReader checks that no capture file makes the reader panic or
// loop.
func FuzzPcapReader(f *testing.F) {
	frame := ethFrame(0x0800, []uint16{5}, ipv4UDP("198.18.0.1", "198.18.0.2", 1, 6343, []byte{1, 2, 3, 4}, 0))
	f.Add(classicPcap(binary.LittleEndian, false, linkTypeEthernet, []capturedFrame{{data: frame}}))
	f.Add(pcapngFile(binary.BigEndian, []uint32{linkTypeEthernet, linkTypeLinuxSL2}, []capturedFrame{{data: frame}, {data: sll2(0x86DD, ipv6UDP("2001:db8::1", "2001:db8::2", 1, 6343, []byte{9}))}}))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := newPcapReader(bytes.NewReader(in), 6343)
		if err != nil {
			return
		}
		for i := 0; ; i++ {
			d, err := r.Next()
			if err != nil {
				return
			}
			if d.Destination.Port() != 6343 || i > len(in) {
				t.Fatalf("datagram %d to %v", i, d.Destination)
			}
		}
	})
}
