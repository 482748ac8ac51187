// Package netlab builds throw-away network labs in network namespaces for
// integration tests and benchmarks, on top of test/lab/lab.sh.
//
// A lab is a switch namespace (PREFIX-sw) with a Linux bridge br0 and veth
// ports p1..pN, one host namespace per port (PREFIX-hI, eth0
// 198.18.0.(10+I)/24) and a collector namespace (PREFIX-col, eth0
// 198.19.255.2/30) reached from the switch over mgmt0 (198.19.255.1/30).
// Nothing is created in the namespace the test runs in. See test/lab/lab.sh for
// the exact topology (MAC addresses, permanent neighbour entries, IPv6 off).
package netlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// Lab is one running lab. Slices are indexed by host index: Hosts[i] is the
// namespace behind switch port Ports[i], with address HostAddrs[i] and MAC
// HostMACs[i]. Right after New, Ports[i] is "p(i+1)"; AddPort appends and
// DelPort removes entries, so after DelPort the index and the port number
// differ (use the port name). AddPort and DelPort must not run concurrently
// with each other or with readers of these slices.
type Lab struct {
	Prefix    string             // name prefix of every namespace of the lab
	Switch    string             // namespace of the switch, PREFIX-sw
	Collector string             // namespace of the collector, PREFIX-col
	Hosts     []string           // PREFIX-hI, Hosts[i] is behind Ports[i]
	Ports     []string           // "pI" in the switch namespace
	HostAddrs []netip.Addr       // 198.18.0.(10+I)
	HostMACs  []net.HardwareAddr // 02:00:00:00:HH:LL, HHLL = decimal digits of 10+I

	AgentAddr     netip.Addr // 198.19.255.1 on mgmt0 in the switch namespace
	CollectorAddr netip.Addr // 198.19.255.2 on eth0 in the collector namespace

	script string // absolute path of lab.sh
}

// RequireRoot skips the test unless it runs as root; under CI it fails
// it instead (testskip.Root).
func RequireRoot(t testing.TB) {
	t.Helper()
	testskip.Root(t)
}

// labSeq numbers the labs of this process; with the PID it makes prefixes
// unique among concurrently running test binaries.
var labSeq atomic.Uint32

// newPrefix returns "t" + 5 base-36 digits of the PID (up to 60 million,
// above Linux's largest pid_max of 2^22) + 2 base-36 digits of a
// per-process counter (wrapping after 1296 labs, long gone by then):
// 8 characters, the longest prefix lab.sh accepts. Prefixes of this form
// are reserved for netlab: see removeStaleLabs.
func newPrefix() string {
	pid := strconv.FormatUint(uint64(os.Getpid()), 36)
	seq := strconv.FormatUint(uint64(labSeq.Add(1))%(36*36), 36)
	return "t" + leftPad(pid, 5) + leftPad(seq, 2)
}

// labNamespace matches the namespaces of labs made by New.
var labNamespace = regexp.MustCompile(`^t([0-9a-z]{5})[0-9a-z]{2}-(sw|col|peer|h[0-9]+)$`)

var staleOnce sync.Once

// removeStaleLabs removes, once per process, the labs New made in test
// processes that have died without their cleanup (a test timeout panics
// past t.Cleanup): namespaces named like newPrefix's whose PID no longer
// runs. A lab of a live process is never touched.
func removeStaleLabs(t testing.TB, script string) {
	staleOnce.Do(func() {
		entries, err := os.ReadDir("/run/netns")
		if err != nil {
			return // no namespaces at all
		}
		done := map[string]bool{}
		for _, e := range entries {
			m := labNamespace.FindStringSubmatch(e.Name())
			if m == nil {
				continue
			}
			prefix := e.Name()[:8]
			pid, err := strconv.ParseUint(m[1], 36, 32)
			if done[prefix] || err != nil || int(pid) == os.Getpid() {
				continue
			}
			done[prefix] = true
			if err := syscall.Kill(int(pid), 0); !errors.Is(err, syscall.ESRCH) {
				continue // alive (or not ours to judge)
			}
			out, err := exec.Command(script, "down", prefix).CombinedOutput()
			if err != nil {
				t.Logf("netlab: removing stale lab %s of dead process %d: %v\n%s", prefix, pid, err, out)
				continue
			}
			t.Logf("netlab: removed stale lab %s of dead process %d", prefix, pid)
		}
	})
}

func leftPad(s string, n int) string {
	if len(s) >= n {
		return s
	}
	return strings.Repeat("0", n-len(s)) + s
}

// findScript locates test/lab/lab.sh: $SFLOWSWITCHD_LAB_SH if set, else the
// test/lab/lab.sh next to the first go.mod that has one, walking up from the
// working directory (go test runs in the package directory, inside the
// repository; bench/ is a module of its own, without a test/lab/).
func findScript() (string, error) {
	if p := os.Getenv("SFLOWSWITCHD_LAB_SH"); p != "" {
		return filepath.Abs(p)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("netlab: find lab.sh: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "test", "lab", "lab.sh")
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("netlab: find lab.sh: no test/lab/lab.sh beside a go.mod above the working directory (set SFLOWSWITCHD_LAB_SH)")
		}
		dir = parent
	}
}

// newLabOwned returns a lab value under a fresh prefix, with stale labs of
// dead processes removed, and registers the removal of everything under
// the prefix in t.Cleanup (also when the test fails). It skips or fails
// like RequireRoot when not root.
func newLabOwned(t testing.TB) *Lab {
	t.Helper()
	RequireRoot(t)
	script, err := findScript()
	if err != nil {
		t.Fatal(err)
	}
	l := newLabValue(script)
	removeStaleLabs(t, script)
	// The prefix contains our PID, so a lab with this prefix can only be a
	// leftover of a dead process that had the same PID: remove it.
	if out, err := l.script1("down", l.Prefix); err != nil {
		t.Fatalf("netlab: lab.sh down %s: %v\n%s", l.Prefix, err, out)
	}
	t.Cleanup(func() {
		if out, err := l.script1("down", l.Prefix); err != nil {
			t.Errorf("netlab: lab.sh down %s: %v\n%s", l.Prefix, err, out)
		}
	})
	return l
}

// New builds a lab with nports ports under a fresh prefix and removes it in
// t.Cleanup, also when the test fails. It skips or fails like RequireRoot
// when not root.
func New(t testing.TB, nports int) *Lab {
	t.Helper()
	l := newLabOwned(t)
	if out, err := l.script1("up", l.Prefix, strconv.Itoa(nports)); err != nil {
		t.Fatalf("netlab: lab.sh up %s %d: %v\n%s", l.Prefix, nports, err, out)
	}
	for i := 1; i <= nports; i++ {
		l.appendPort(i)
	}
	return l
}

// newLabValue returns a Lab under a fresh prefix (nothing created yet).
func newLabValue(script string) *Lab {
	l := &Lab{
		Prefix:        newPrefix(),
		AgentAddr:     netip.AddrFrom4([4]byte{198, 19, 255, 1}),
		CollectorAddr: netip.AddrFrom4([4]byte{198, 19, 255, 2}),
		script:        script,
	}
	l.Switch = l.Prefix + "-sw"
	l.Collector = l.Prefix + "-col"
	return l
}

func (l *Lab) script1(args ...string) ([]byte, error) {
	return exec.Command(l.script, args...).CombinedOutput()
}

// appendPort records port pI and host PREFIX-hI in the slices.
func (l *Lab) appendPort(i int) {
	l.Hosts = append(l.Hosts, fmt.Sprintf("%s-h%d", l.Prefix, i))
	l.Ports = append(l.Ports, fmt.Sprintf("p%d", i))
	l.HostAddrs = append(l.HostAddrs, HostAddr(i))
	l.HostMACs = append(l.HostMACs, HostMAC(i))
}

// HostAddr is the address lab.sh gives host I (port pI): 198.18.0.(10+I).
func HostAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + i)})
}

// HostMAC is the MAC lab.sh gives host I's eth0: 02:00:00:00:HH:LL where
// HHLL are the decimal digits of 10+I (host 1: 02:00:00:00:00:11).
func HostMAC(i int) net.HardwareAddr {
	n := 10 + i
	return net.HardwareAddr{0x02, 0, 0, 0, bcd(n / 100), bcd(n % 100)}
}

// PortMAC is the MAC lab.sh gives switch port pI: 02:00:00:01:HH:LL.
func PortMAC(i int) net.HardwareAddr {
	n := 10 + i
	return net.HardwareAddr{0x02, 0, 0, 1, bcd(n / 100), bcd(n % 100)}
}

// bcd packs two decimal digits (0..99) into one byte, so they print as the
// same digits in hex.
func bcd(n int) byte { return byte(n/10)<<4 | byte(n%10) }

// Run runs name with args in namespace ns (netnsutil.Command: nsenter
// --net, which keeps /sys and pinned BPF objects visible) and returns the
// combined output.
func (l *Lab) Run(ns string, name string, args ...string) ([]byte, error) {
	out, err := netnsutil.Command(context.Background(), ns, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("netlab: run %s in %s: %w", name, ns, err)
	}
	return out, nil
}

// Do runs fn on a locked OS thread switched into namespace ns and switches
// the thread back afterwards (netnsutil.DoNamed). Sockets fn opens stay in
// ns after Do returns. Goroutines started by fn do NOT run in ns. fn runs
// on its own goroutine, so it must not call t.Fatal; a panic in fn is
// re-raised in the caller.
func (l *Lab) Do(ns string, fn func() error) error {
	if err := netnsutil.DoNamed(ns, fn); err != nil {
		return fmt.Errorf("netlab: %w", err)
	}
	return nil
}

// Start starts name with args in the background in namespace ns and kills
// it (by PID, SIGKILL) in t.Cleanup. The process gets SIGKILL as well if the
// test binary dies first. Its combined output is logged when the test
// failed. Callers may Wait on the returned command themselves.
func (l *Lab) Start(t testing.TB, ns string, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := netnsutil.Command(context.Background(), ns, name, args...)
	out := &syncBuffer{}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("netlab: start %s in %s: %v", name, ns, err)
	}
	t.Cleanup(func() {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("netlab: kill %s (pid %d): %v", name, cmd.Process.Pid, err)
		}
		_ = cmd.Wait() // exit status is "killed" by design, or the caller already waited
		if t.Failed() {
			t.Logf("netlab: output of %s in %s (pid %d):\n%s", name, ns, cmd.Process.Pid, out.String())
		}
	})
	return cmd
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a child's
// stdout and stderr copiers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// AddPort hot-plugs a new port and host (lab.sh addport) and returns its
// number I: port "pI", host PREFIX-hI, appended to the slices. I is one more
// than the highest port number in use.
func (l *Lab) AddPort(t testing.TB) int {
	t.Helper()
	next := 1
	for _, p := range l.Ports {
		if n, err := strconv.Atoi(strings.TrimPrefix(p, "p")); err == nil && n >= next {
			next = n + 1
		}
	}
	if out, err := l.script1("addport", l.Prefix, strconv.Itoa(next)); err != nil {
		t.Fatalf("netlab: lab.sh addport %s %d: %v\n%s", l.Prefix, next, err, out)
	}
	l.appendPort(next)
	return next
}

// DelPort removes port pI and host PREFIX-hI (lab.sh delport) and their
// entries in the slices.
func (l *Lab) DelPort(t testing.TB, i int) {
	t.Helper()
	k := slices.Index(l.Ports, fmt.Sprintf("p%d", i))
	if k < 0 {
		t.Fatalf("netlab: DelPort(%d): lab %s has no port p%d", i, l.Prefix, i)
	}
	if out, err := l.script1("delport", l.Prefix, strconv.Itoa(i)); err != nil {
		t.Fatalf("netlab: lab.sh delport %s %d: %v\n%s", l.Prefix, i, err, out)
	}
	l.Hosts = slices.Delete(l.Hosts, k, k+1)
	l.Ports = slices.Delete(l.Ports, k, k+1)
	l.HostAddrs = slices.Delete(l.HostAddrs, k, k+1)
	l.HostMACs = slices.Delete(l.HostMACs, k, k+1)
}

// LinkIndex returns the ifindex of link name inside namespace ns, or 0
// (never a valid ifindex) if the namespace or link does not exist.
func (l *Lab) LinkIndex(ns, name string) int {
	link, err := netnsutil.Link(ns, name)
	if err != nil {
		return 0
	}
	return link.Attrs().Index
}

// NsHandle opens a handle on network namespace name (a lab's), closed in
// t.Cleanup.
func NsHandle(t testing.TB, name string) netns.NsHandle {
	t.Helper()
	h, err := netns.GetFromName(name)
	if err != nil {
		t.Fatalf("open namespace %s: %v", name, err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// SysfsRead reads /sys/class/net/NAME/FILE as the kernel shows it to the
// namespace: `ip netns exec` mounts a /sys of that namespace.
func SysfsRead(t testing.TB, ns, name, file string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/sys/class/net/"+name+"/"+file).Output()
	if err != nil {
		return "" // EINVAL: the driver does not know
	}
	return strings.TrimSpace(string(out))
}

// SysfsSpeed is the speed in Mb/s sysfs gives for the switch port name
// (0: unknown).
func (l *Lab) SysfsSpeed(t testing.TB, name string) uint64 {
	t.Helper()
	s, err := strconv.ParseInt(SysfsRead(t, l.Switch, name, "speed"), 10, 64)
	if err != nil || s < 0 {
		return 0
	}
	return uint64(s)
}

// PortIndex returns the ifindex of the switch's port Ports[i], failing
// the test when it does not exist.
func (l *Lab) PortIndex(t testing.TB, i int) int {
	t.Helper()
	idx := l.LinkIndex(l.Switch, l.Ports[i])
	if idx == 0 {
		t.Fatalf("no ifindex for %s in %s", l.Ports[i], l.Switch)
	}
	return idx
}

// SendFrames writes frames, complete Ethernet frames without FCS, out of
// eth0 of host Hosts[hostIdx] (0-based: 0 is PREFIX-h1 in a fresh lab)
// through an AF_PACKET socket opened inside that namespace, and returns
// when all are written. Nothing else is sent: no ARP, no ND. The test fails
// if a write fails or if the veth dropped any frame (its tx_dropped rose),
// so exactly len(frames) frames reach the switch port.
//
// Mind what the frames provoke: a UDP frame to a host's own MAC and address
// on a port nobody listens on makes that host answer with ICMP port
// unreachable. Use a listener, or a destination MAC no host owns.
func (l *Lab) SendFrames(t testing.TB, hostIdx int, frames [][]byte) {
	t.Helper()
	l.sendFrames(t, hostIdx, -1, frames)
}

// SendFramesOnCPU is SendFrames from a thread bound to CPU cpu: a veth
// hands a frame to its peer on the sending CPU (the peer's NAPI poll or
// the CPU's backlog is scheduled there), so the switch port counts and
// samples these frames on cpu, unless its poll is still running elsewhere.
func (l *Lab) SendFramesOnCPU(t testing.TB, hostIdx, cpu int, frames [][]byte) {
	t.Helper()
	l.sendFrames(t, hostIdx, cpu, frames)
}

func (l *Lab) sendFrames(t testing.TB, hostIdx, cpu int, frames [][]byte) {
	t.Helper()
	if hostIdx < 0 || hostIdx >= len(l.Hosts) {
		t.Fatalf("netlab: SendFrames: host index %d out of range [0,%d)", hostIdx, len(l.Hosts))
	}
	ns := l.Hosts[hostIdx]
	err := l.Do(ns, func() error {
		if cpu >= 0 {
			// The thread is locked to this function (Do); its CPU set is
			// given back before it returns to the runtime.
			var was, set unix.CPUSet
			if err := unix.SchedGetaffinity(0, &was); err != nil {
				return fmt.Errorf("CPU affinity: %w", err)
			}
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				return fmt.Errorf("binding to CPU %d: %w", cpu, err)
			}
			defer func() { _ = unix.SchedSetaffinity(0, &was) }()
		}
		// A handle of the host's namespace, where this thread is: no
		// socket in the switch's namespace, whose drops tests count (a
		// netlink socket closed with an unread ACK queued is a drop
		// there, NOT_SPECIFIED before Linux 6.3).
		h, err := netlink.NewHandle()
		if err != nil {
			return fmt.Errorf("netlink: %w", err)
		}
		defer h.Close()
		link, err := h.LinkByName("eth0")
		if err != nil {
			return fmt.Errorf("find eth0: %w", err)
		}
		before := txDropped(link)
		taken := txPackets(link)
		fd, err := rawSocket(link.Attrs().Index)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for i := 0; i < len(frames); i += sendChunk {
			chunk := frames[i:min(i+sendChunk, len(frames))]
			if err := writeFrames(fd, chunk, i); err != nil {
				return err
			}
			if taken, err = waitTaken(h, taken, uint64(len(chunk))); err != nil {
				return err
			}
		}
		link, err = h.LinkByName("eth0")
		if err != nil {
			return fmt.Errorf("find eth0: %w", err)
		}
		if after := txDropped(link); after != before {
			return fmt.Errorf("eth0 dropped %d of %d frames (tx_dropped %d -> %d)", after-before, len(frames), before, after)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("netlab: SendFrames from %s: %v", ns, err)
	}
}

// sendChunk is how many frames SendFrames writes before it waits for the
// switch port to take them (eth0's tx_packets). The port's veth receives
// through a 256-entry ring (NAPI mode: an XDP program or GRO on it) or
// the 1000-frame backlog; a frame that finds it full is dropped (the
// sender's tx_dropped). Linux only holds the sender back (qdisc
// backpressure, 6.16) when the sending veth has a qdisc, which a lab's
// has not. On a fast machine the port keeps up with one write per frame;
// under software emulation (the 6.1 and 6.12 test VMs) or load it does
// not: 7233 of 20000 frames were dropped there.
const sendChunk = 64

// txPackets is a veth's tx_packets: the frames its peer took, which in
// NAPI mode means taken off the peer's ring by its receive path (the
// peer's xdp_packets), otherwise handed to the peer's backlog.
func txPackets(link netlink.Link) uint64 {
	if s := link.Attrs().Statistics; s != nil {
		return s.TxPackets
	}
	return 0
}

// waitTaken waits until eth0's peer, the switch port, has taken n more
// frames than taken (eth0's tx_packets then), and returns that count. It
// gives up after 10 s without error: the tx_dropped check then says
// whether frames were lost.
func waitTaken(h *netlink.Handle, taken, n uint64) (uint64, error) {
	deadline := time.Now().Add(10 * time.Second)
	pause := 20 * time.Microsecond
	for {
		link, err := h.LinkByName("eth0")
		if err != nil {
			return 0, fmt.Errorf("find eth0: %w", err)
		}
		now := txPackets(link)
		if now-taken >= n || time.Now().After(deadline) {
			return now, nil
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
}

func txDropped(link netlink.Link) uint64 {
	if s := link.Attrs().Statistics; s != nil {
		return s.TxDropped
	}
	return 0
}

// sendRaw writes every frame out of ifindex with a raw packet socket bound
// with protocol 0, so the socket never receives anything.
func sendRaw(ifindex int, frames [][]byte) error {
	fd, err := rawSocket(ifindex)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return writeFrames(fd, frames, 0)
}

// rawSocket opens a raw packet socket bound to ifindex with protocol 0 (it
// never receives). Binding takes an RCU grace period: open one per burst,
// not per chunk.
func rawSocket(ifindex int) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open AF_PACKET socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind AF_PACKET socket to ifindex %d: %w", ifindex, err)
	}
	return fd, nil
}

// writeFrames writes frames on fd, one write each, retrying while the
// socket is out of buffers; first numbers the frames in errors.
func writeFrames(fd int, frames [][]byte, first int) error {
	for i, f := range frames {
		for {
			n, err := unix.Write(fd, f)
			if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				runtime.Gosched()
				continue
			}
			if err != nil {
				return fmt.Errorf("write frame %d (%d bytes): %w", first+i, len(f), err)
			}
			if n != len(f) {
				return fmt.Errorf("write frame %d: wrote %d of %d bytes", first+i, n, len(f))
			}
			break
		}
	}
	return nil
}
