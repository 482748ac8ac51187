package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// Test lab: two namespaces joined by one veth pair, both ends inside them
// (nsA/vethA sends, nsB/vethB runs XDP and the AF_XDP socket). Nothing is
// created in the root namespace.

// requireRoot skips without root, except under CI where that is a failure.
func requireRoot(t testing.TB) { netlab.RequireRoot(t) }

var pairSeq atomic.Uint32

// vethPair is a veth pair whose ends live in two test namespaces.
type vethPair struct {
	nsA, nsB   string // namespace names
	ifA, ifB   int    // ifindex of vethA in nsA and vethB in nsB
	devA, devB string
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// newVethPair creates nsA and nsB (names unique per process and call),
// disables IPv6 in both so the kernel sends no stray ND/MLD frames, and
// links them with vethA <-> vethB, both up, with the given MTU (0 keeps
// the default). The namespaces (and with them the veth pair and any XDP
// program on it) are deleted in t.Cleanup.
func newVethPair(t testing.TB, mtu int) *vethPair {
	t.Helper()
	prefix := fmt.Sprintf("afxdp%d-%d", os.Getpid(), pairSeq.Add(1))
	p := &vethPair{nsA: prefix + "a", nsB: prefix + "b", devA: "vethA", devB: "vethB"}
	for _, ns := range []string{p.nsA, p.nsB} {
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
			}
		})
		run(t, "nsenter", "--net="+netnsutil.Path(ns), "sysctl", "-q", "-w",
			"net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	}
	run(t, "ip", "-n", p.nsA, "link", "add", p.devA, "type", "veth", "peer", "name", p.devB, "netns", p.nsB)
	if mtu > 0 {
		run(t, "ip", "-n", p.nsA, "link", "set", p.devA, "mtu", fmt.Sprint(mtu))
		run(t, "ip", "-n", p.nsB, "link", "set", p.devB, "mtu", fmt.Sprint(mtu))
	}
	run(t, "ip", "-n", p.nsA, "link", "set", p.devA, "up")
	run(t, "ip", "-n", p.nsB, "link", "set", p.devB, "up")
	waitActive(t, p.nsA, p.devA)
	waitActive(t, p.nsB, p.devB)
	p.ifA = ifindexIn(t, p.nsA, p.devA)
	p.ifB = ifindexIn(t, p.nsB, p.devB)
	return p
}

// waitActive waits until dev in ns is operationally up with its qdisc
// attached (test/lab/lab.sh's wait_active): until the kernel's link watcher has
// run for a new link, a work item that needs the RTNL lock and so runs
// late while other namespaces are being dismantled, the link transmits
// through noop_qdisc, which drops every frame (QDISC_DROP). A burst sent
// right after `ip link set up` was lost whole that way whenever another
// test package deleted namespaces at the same time.
func waitActive(t testing.TB, ns, dev string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command("ip", "-n", ns, "-o", "link", "show", "dev", dev).CombinedOutput()
		if err != nil {
			t.Fatalf("ip -n %s link show %s: %v\n%s", ns, dev, err, out)
		}
		if strings.Contains(string(out), "state UP") && !strings.Contains(string(out), " qdisc noop ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s in %s not active after 30 s: %s", dev, ns, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ifindexIn(t testing.TB, ns, dev string) int {
	t.Helper()
	var idx int
	if err := netnsutil.DoNamed(ns, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		idx = ifi.Index
		return nil
	}); err != nil {
		t.Fatalf("ifindex of %s in %s: %v", dev, ns, err)
	}
	return idx
}

// xdpRedirect is the test's XDP program on vethB with its maps.
type xdpRedirect struct {
	prog *ebpf.Program
	xsks *ebpf.Map // XSKMAP, key = RX queue index
	seen *ebpf.Map // per-CPU u64: frames the program saw
}

// attachRedirect builds (no clang) and attaches, in native mode on the
// pair's vethB, an XDP program equivalent to:
//
//	seen[0]++ (per CPU)
//	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_ABORTED);
//
// The counter tells the tests exactly how many frames reached XDP, so
// kernel drops before XDP (veth's ptr_ring) cannot hide in the numbers.
func attachRedirect(t testing.TB, p *vethPair) *xdpRedirect {
	t.Helper()
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{Name: "xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: 64})
	if err != nil {
		t.Fatalf("create XSKMAP: %v", err)
	}
	t.Cleanup(func() { xsks.Close() })
	seen, err := ebpf.NewMap(&ebpf.MapSpec{Name: "seen", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatalf("create counter map: %v", err)
	}
	t.Cleanup(func() { seen.Close() })

	const rxQueueIndexOff = 16 // offsetof(struct xdp_md, rx_queue_index)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:    "xsk_redirect",
		Type:    ebpf.XDP,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Reg(asm.R6, asm.R1),
			asm.StoreImm(asm.RFP, -4, 0, asm.Word),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -4),
			asm.LoadMapPtr(asm.R1, seen.FD()),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "redirect"),
			asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
			asm.Add.Imm(asm.R1, 1),
			asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
			asm.LoadMem(asm.R2, asm.R6, rxQueueIndexOff, asm.Word).WithSymbol("redirect"),
			asm.LoadMapPtr(asm.R1, xsks.FD()),
			asm.Mov.Imm(asm.R3, 0), // XDP_ABORTED when no socket sits at that index
			asm.FnRedirectMap.Call(),
			asm.Return(),
		},
	})
	if err != nil {
		t.Fatalf("load XDP program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })

	var l link.Link
	if err := netnsutil.DoNamed(p.nsB, func() error {
		var err error
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: p.ifB, Flags: link.XDPDriverMode})
		return err
	}); err != nil {
		t.Fatalf("attach XDP (native) to %s in %s: %v", p.devB, p.nsB, err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("detach XDP: %v", err)
		}
	})
	return &xdpRedirect{prog: prog, xsks: xsks, seen: seen}
}

// openSocket opens a Socket on vethB queue 0 from inside nsB and
// registers it in the XSKMAP.
func openSocket(t testing.TB, p *vethPair, x *xdpRedirect, opts Options) *Socket {
	t.Helper()
	var s *Socket
	if err := netnsutil.DoNamed(p.nsB, func() error {
		var err error
		s, err = Open(p.ifB, 0, opts)
		return err
	}); err != nil {
		t.Fatalf("Open(%s, 0): %v", p.devB, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := x.xsks.Put(uint32(0), uint32(s.FD())); err != nil {
		t.Fatalf("XSKMAP put: %v", err)
	}
	return s
}

// seenCount sums the XDP program's per-CPU frame counter.
func (x *xdpRedirect) seenCount(t testing.TB) uint64 {
	t.Helper()
	var vals []uint64
	if err := x.seen.Lookup(uint32(0), &vals); err != nil {
		t.Fatalf("read XDP counter: %v", err)
	}
	var sum uint64
	for _, v := range vals {
		sum += v
	}
	return sum
}

// packetSender writes raw Ethernet frames out of vethA with an AF_PACKET
// socket created inside nsA (the socket keeps its namespace; it can then
// be used from any thread).
type packetSender struct{ fd int }

func newPacketSender(t testing.TB, p *vethPair) *packetSender {
	t.Helper()
	var fd int
	if err := netnsutil.DoNamed(p.nsA, func() error {
		var err error
		// Protocol 0: a send-only socket that never receives.
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socket(AF_PACKET): %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: p.ifA}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind AF_PACKET to %s: %w", p.devA, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &packetSender{fd: fd}
}

func (ps *packetSender) send(frame []byte) error {
	for {
		n, err := unix.Write(ps.fd, frame)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOBUFS) {
			continue
		}
		if err != nil {
			return fmt.Errorf("AF_PACKET write: %w", err)
		}
		if n != len(frame) {
			return fmt.Errorf("AF_PACKET short write %d of %d", n, len(frame))
		}
		return nil
	}
}

// sendPaced sends frames in bursts no larger than burst and waits after
// each burst until the XDP program has seen all frames sent so far, and,
// when received is not nil, until the receiver has counted them too. veth
// queues frames for its XDP NAPI in a 256-entry ptr_ring and drops when
// that is full; pacing keeps every frame on its way to the socket, so the
// tests know exactly how many frames XDP redirected, and waiting for the
// receiver keeps a descheduled receiver on a busy machine from turning
// into RX ring drops.
func sendPaced(t testing.TB, ps *packetSender, x *xdpRedirect, frames [][]byte, burst int, received *atomic.Int64) {
	t.Helper()
	base := x.seenCount(t)
	var rbase int64
	if received != nil {
		rbase = received.Load()
	}
	caughtUp := func(sent int) bool {
		if x.seenCount(t)-base < uint64(sent) {
			return false
		}
		return received == nil || received.Load()-rbase >= int64(sent)
	}
	for i := 0; i < len(frames); i += burst {
		end := min(i+burst, len(frames))
		for _, f := range frames[i:end] {
			if err := ps.send(f); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for !caughtUp(end) {
			if time.Now().After(deadline) {
				t.Fatalf("after 10s: XDP saw %d of %d frames sent", x.seenCount(t)-base, end)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	if got := x.seenCount(t) - base; got != uint64(len(frames)) {
		t.Fatalf("XDP saw %d frames, sent %d (stray traffic on the veth?)", got, len(frames))
	}
}

// testEtherType is IEEE 802 local experimental EtherType 1.
const testEtherType = 0x88b5

// testFrame builds frame number i: Ethernet header, then the index and a
// length both big-endian, then a byte pattern derived from i. Lengths vary
// from 60 to 1500 bytes so truncation or mixing up frames shows.
func testFrame(i int) []byte {
	return testFrameLen(i, 60+(i*373)%(1500-60+1))
}

// testFrameLen is testFrame with an explicit length n >= 22.
func testFrameLen(i, n int) []byte {
	f := make([]byte, n)
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 0x02})
	copy(f[6:12], []byte{0x02, 0, 0, 0, 0, 0x01})
	binary.BigEndian.PutUint16(f[12:14], testEtherType)
	binary.BigEndian.PutUint32(f[14:18], uint32(i))
	binary.BigEndian.PutUint32(f[18:22], uint32(n))
	for j := 22; j < n; j++ {
		f[j] = byte(i*7 + j)
	}
	return f
}

// frameIndex returns the index testFrame wrote into f, or -1.
func frameIndex(f []byte) int {
	if len(f) < 22 || binary.BigEndian.Uint16(f[12:14]) != testEtherType {
		return -1
	}
	return int(binary.BigEndian.Uint32(f[14:18]))
}
