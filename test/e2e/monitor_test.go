package e2e

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// Integration test of the monitor path through the real daemon binary
// (root, netlab): sFlow datagrams are decoded with goflow2, an independent
// decoder.

// monMagic marks the test's frames ("MONI").
const monMagic = 0x4d4f_4e49

// monFrame builds frame number seq from host 1 to host 2's MAC, to an
// address no host owns (host 2 would drop it at layer 3, but count it in
// rx_packets). Lengths vary from 60 to ~1000 bytes.
func monFrame(lab *netlab.Lab, seq uint32) []byte {
	p := make([]byte, 16+int(seq*37)%900)
	binary.BigEndian.PutUint32(p[0:], monMagic)
	binary.BigEndian.PutUint32(p[4:], seq)
	for i := 8; i < len(p); i++ {
		p[i] = byte(int(seq) + i)
	}
	src := netip.AddrPortFrom(lab.HostAddrs[0], 40001)
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 0, 251}), 9)
	return netlab.UDPFrame(lab.HostMACs[0], lab.HostMACs[1], src, dst, p)
}

// monSeq returns the number of a test frame from its sampled header.
func monSeq(h []byte) (uint32, bool) {
	const off = 14 + 20 + 8
	if len(h) < off+8 || binary.BigEndian.Uint32(h[off:]) != monMagic {
		return 0, false
	}
	return binary.BigEndian.Uint32(h[off+4:]), true
}

// monSample is one flow sample of a test frame as goflow2 decoded it.
type monSample struct {
	seq                uint32
	input, rate, pool  uint32
	drops, frameLength uint32
	header             []byte
}

// monCollector receives sFlow datagrams in the collector namespace.
type monCollector struct {
	conn *net.UDPConn
	mu   sync.Mutex
	got  []monSample
	errs []error
}

func listenSFlow(t *testing.T, lab *netlab.Lab, ifindex uint32) *monCollector {
	t.Helper()
	c := &monCollector{}
	err := lab.Do(lab.Collector, func() error {
		var err error
		c.conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lab.CollectorAddr, 6343)))
		return err
	})
	if err != nil {
		t.Fatalf("collector: %v", err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		c.conn.Close()
		<-done
	})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, err := c.conn.Read(buf)
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					c.addErr(err)
				}
				return
			}
			var pkt goflow.Packet
			if err := goflow.DecodeMessageVersion(bytes.NewBuffer(bytes.Clone(buf[:n])), &pkt); err != nil {
				c.addErr(fmt.Errorf("goflow2: %w", err))
				continue
			}
			c.add(pkt, ifindex)
		}
	}()
	return c
}

func (c *monCollector) addErr(err error) {
	c.mu.Lock()
	c.errs = append(c.errs, err)
	c.mu.Unlock()
}

// add keeps the flow samples of ifindex that carry a test frame.
func (c *monCollector) add(pkt goflow.Packet, ifindex uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range pkt.Samples {
		fs, ok := s.(goflow.FlowSample)
		if !ok || fs.Header.SourceIdType != 0 || fs.Header.SourceIdValue != ifindex {
			continue
		}
		for _, r := range fs.Records {
			h, ok := r.Data.(goflow.SampledHeader)
			if !ok {
				continue
			}
			seq, ok := monSeq(h.HeaderData)
			if !ok {
				continue
			}
			// HeaderData holds the XDR padding too; OriginalLength is
			// the header's length (sflow_version_5.txt, sampled_header).
			if h.OriginalLength > uint32(len(h.HeaderData)) {
				c.errs = append(c.errs, fmt.Errorf("goflow2: header length %d > %d bytes", h.OriginalLength, len(h.HeaderData)))
				continue
			}
			c.got = append(c.got, monSample{seq: seq, input: fs.Input, rate: fs.SamplingRate, pool: fs.SamplePool,
				drops: fs.Drops, frameLength: h.FrameLength, header: bytes.Clone(h.HeaderData[:h.OriginalLength])})
		}
	}
}

func (c *monCollector) samples() []monSample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]monSample(nil), c.got...)
}

// TestDaemonMonitorPort runs the daemon with p1 as a monitor port (and p2
// inline) at rate 1: every frame host 1 sends into p1 arrives at the
// collector as a flow sample of p1 whose header is the frame's first
// bytes, and no frame is forwarded to host 2. When p1 is unplugged, the
// daemon keeps running.
func TestDaemonMonitorPort(t *testing.T) {
	lab := netlab.New(t, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	col := listenSFlow(t, lab, p1)
	cmd := lab.Start(t, lab.Switch, daemonBin, "-collector", lab.CollectorAddr.String()+":6343",
		"-sampling", "1", "-ports", "p2", "-monitor-ports", "p1", "-polling", "0", "-log-level", "debug")
	log := func() string {
		if s, ok := cmd.Stdout.(fmt.Stringer); ok {
			return s.String()
		}
		return ""
	}

	// Probe frames (numbers from 1<<30) until p1's samples flow: the
	// daemon has attached p1, opened its sockets and its worker reads them.
	const probeBase = 1 << 30
	probes := uint32(0)
	for deadline := time.Now().Add(testutil.Scaled(20 * time.Second)); ; probes++ {
		if len(col.samples()) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sample of p1 (ifindex %d) after %d probe frames\n%s", p1, probes, log())
		}
		lab.SendFrames(t, 0, [][]byte{monFrame(lab, probeBase+probes)})
		time.Sleep(100 * time.Millisecond)
	}

	// Probes sent before the port was attached were forwarded; from now
	// on nothing may be.
	capt := lab.Capture(t, lab.Hosts[1], "eth0")
	rx2 := lab.RxPackets(t, lab.Hosts[1], "eth0")
	const k = 300
	frames := make([][]byte, k)
	for i := range frames {
		frames[i] = monFrame(lab, uint32(i))
	}
	lab.SendFrames(t, 0, frames)
	seen := map[uint32]int{}
	var mine []monSample
	for deadline := time.Now().Add(testutil.Scaled(10 * time.Second)); len(seen) < k && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		mine, seen = mine[:0], map[uint32]int{}
		for _, s := range col.samples() {
			if s.seq < k {
				mine = append(mine, s)
				seen[s.seq]++
			}
		}
	}
	time.Sleep(300 * time.Millisecond) // a late duplicate or a forwarded frame would show now
	t.Logf("%d probe frames, %d samples of the %d test frames", probes+1, len(mine), k)

	if len(seen) != k || len(mine) != k {
		t.Errorf("%d distinct test frames in %d samples, want each of the %d once\n%s", len(seen), len(mine), k, log())
	}
	var lastPool uint32
	for _, s := range mine {
		f := frames[s.seq]
		want := f[:min(len(f), 128)]
		// Probes sampled between the attachment and the sockets' install
		// are counted drops; during the test nothing more may be lost.
		if !bytes.Equal(s.header, want) || s.frameLength != uint32(len(f))+4 || s.input != p1 || s.rate != 1 || s.drops != mine[0].drops {
			t.Errorf("frame %d: header %d bytes (equal %v), frame_length %d, input %d, rate %d, drops %d; want %d bytes, %d, %d, 1, %d",
				s.seq, len(s.header), bytes.Equal(s.header, want), s.frameLength, s.input, s.rate, s.drops, len(want), len(f)+4, p1, mine[0].drops)
		}
		if s.pool < lastPool {
			t.Errorf("sample_pool went back from %d to %d", lastPool, s.pool)
		}
		lastPool = s.pool
	}
	// Host 2 may receive the lab bridge's own frames (IGMP reports of
	// br0), but nothing from host 1; its rx_packets grow by exactly what
	// it captured.
	grew := lab.RxPackets(t, lab.Hosts[1], "eth0") - rx2
	fromHost1, other := 0, uint64(0)
	for _, f := range capt.Queued(t) {
		if len(f.Data) >= 12 && bytes.Equal(f.Data[6:12], lab.HostMACs[0]) {
			fromHost1++
		} else {
			other++
		}
	}
	if fromHost1 != 0 || grew != other {
		t.Errorf("host 2: rx_packets grew by %d; captured %d frames from host 1 (monitor port forwarded) and %d others", grew, fromHost1, other)
	}

	// Hot-unplug the monitor port: the daemon unbinds and detaches it,
	// its worker closes the sockets, and it keeps running.
	lab.DelPort(t, 1)
	time.Sleep(1500 * time.Millisecond) // port event, reconfiguration, one worker tick
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)); err != nil || bytes.Contains(st, []byte(") Z ")) {
		t.Errorf("daemon gone after the monitor port was removed (%v)\n%s", err, log())
	}
	if strings.Contains(log(), "panic") || strings.Contains(log(), "closing the AF_XDP sockets") {
		t.Errorf("daemon log after the monitor port was removed:\n%s", log())
	}

	col.mu.Lock()
	for _, err := range col.errs {
		t.Errorf("collector: %v", err)
	}
	col.mu.Unlock()
}
