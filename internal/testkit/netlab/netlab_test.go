package netlab

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// rootLinks lists the link names of the test's own namespace.
func rootLinks(t *testing.T) map[string]bool {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatalf("list links: %v", err)
	}
	names := map[string]bool{}
	for _, l := range links {
		names[l.Attrs().Name] = true
	}
	return names
}

func namespaces(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/run/netns")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("list /run/netns: %v", err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestLab(t *testing.T) {
	RequireRoot(t)
	before := rootLinks(t)
	var prefix string

	t.Run("lab", func(t *testing.T) {
		l := New(t, 3)
		prefix = l.Prefix
		if len(l.Prefix) > 8 {
			t.Errorf("prefix %q longer than 8 characters", l.Prefix)
		}
		for _, ns := range append([]string{l.Switch, l.Collector}, l.Hosts...) {
			if _, err := os.Stat("/run/netns/" + ns); err != nil {
				t.Errorf("namespace %s missing: %v", ns, err)
			}
		}
		for i, p := range l.Ports {
			if l.LinkIndex(l.Switch, p) == 0 {
				t.Errorf("switch port %s missing", p)
			}
			out, err := l.Run(l.Hosts[i], "ip", "-br", "addr", "show", "eth0")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(string(out), l.HostAddrs[i].String()+"/24") {
				t.Errorf("%s eth0: want %s/24, got %q", l.Hosts[i], l.HostAddrs[i], out)
			}
			out, err = l.Run(l.Hosts[i], "ip", "-br", "link", "show", "eth0")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(string(out), l.HostMACs[i].String()) {
				t.Errorf("%s eth0: want MAC %s, got %q", l.Hosts[i], l.HostMACs[i], out)
			}
		}

		// Host 1 -> host 2 through br0, and switch -> collector over mgmt0.
		if err := l.Ping(0, l.HostAddrs[1], 2*time.Second); err != nil {
			t.Fatal(err)
		}
		out, err := l.Run(l.Switch, "ip", "-br", "addr", "show", "mgmt0")
		if err != nil || !strings.Contains(string(out), l.AgentAddr.String()+"/30") {
			t.Errorf("mgmt0: want %s/30, got %q (%v)", l.AgentAddr, out, err)
		}

		// K frames from host 1 to a UDP listener on host 2: the switch port p1
		// receives exactly K, and host 2's kernel, which checks the IPv4 and
		// UDP checksums, delivers exactly K datagrams.
		const k = 100
		var conn net.PacketConn
		if err := l.Do(l.Hosts[1], func() error {
			var err error
			conn, err = net.ListenPacket("udp4", netip.AddrPortFrom(l.HostAddrs[1], 6343).String())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		frames := make([][]byte, k)
		for i := range frames {
			payload := []byte(fmt.Sprintf("frame %03d", i))
			frames[i] = UDPFrame(l.HostMACs[0], l.HostMACs[1],
				netip.AddrPortFrom(l.HostAddrs[0], 40000), netip.AddrPortFrom(l.HostAddrs[1], 6343), payload)
		}
		rx0 := l.RxPackets(t, l.Switch, "p1")
		l.SendFrames(t, 0, frames)
		if got := l.RxPackets(t, l.Switch, "p1") - rx0; got != k {
			t.Errorf("p1 rx_packets rose by %d, want %d", got, k)
		}
		buf := make([]byte, 2048)
		for i := 0; i < k; i++ {
			if err := conn.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
				t.Fatal(err)
			}
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				t.Fatalf("datagram %d of %d: %v", i, k, err)
			}
			if want := fmt.Sprintf("frame %03d", i); string(buf[:n]) != want {
				t.Errorf("datagram %d: got %q want %q", i, buf[:n], want)
			}
			if want := netip.AddrPortFrom(l.HostAddrs[0], 40000).String(); from.String() != want {
				t.Errorf("datagram %d from %s, want %s", i, from, want)
			}
		}

		// Hot-plug port 4, use it, remove it.
		n := l.AddPort(t)
		if n != 4 || l.Ports[3] != "p4" || l.Hosts[3] != l.Prefix+"-h4" {
			t.Fatalf("AddPort: got %d, ports %v hosts %v", n, l.Ports, l.Hosts)
		}
		if l.LinkIndex(l.Switch, "p4") == 0 {
			t.Fatal("p4 missing after AddPort")
		}
		if err := l.Ping(3, l.HostAddrs[0], 2*time.Second); err != nil {
			t.Fatalf("ping from hot-plugged host: %v", err)
		}
		l.DelPort(t, 4)
		if l.LinkIndex(l.Switch, "p4") != 0 {
			t.Error("p4 still there after DelPort")
		}
		if _, err := os.Stat("/run/netns/" + l.Prefix + "-h4"); err == nil {
			t.Error("host namespace h4 still there after DelPort")
		}
		if len(l.Ports) != 3 {
			t.Errorf("ports after DelPort: %v", l.Ports)
		}
	})

	// The subtest's cleanup has run: nothing of the lab may remain, and no
	// lab link may have appeared in our own namespace.
	if prefix == "" {
		t.Fatal("lab was not created")
	}
	for _, ns := range namespaces(t) {
		if strings.HasPrefix(ns, prefix+"-") {
			t.Errorf("namespace %s left after cleanup", ns)
		}
	}
	labLink := regexp.MustCompile(`^(p[0-9]+|eth0|mgmt0|br0)$`)
	for name := range rootLinks(t) {
		if !before[name] && (labLink.MatchString(name) || strings.HasPrefix(name, prefix)) {
			t.Errorf("link %s appeared in the test's own namespace", name)
		}
	}
}

func TestStartKillsProcess(t *testing.T) {
	RequireRoot(t)
	l := New(t, 1)
	var pid int
	t.Run("start", func(t *testing.T) {
		c := l.Start(t, l.Hosts[0], "sleep", "60")
		pid = c.Process.Pid
		out, err := l.Run(l.Hosts[0], "readlink", "/proc/self/ns/net")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		// The process starts as nsenter in the test's namespace and
		// enters the lab's just before exec: wait for that moment.
		want := strings.TrimSpace(string(out))
		var child string
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			child, err = os.Readlink(fmt.Sprintf("/proc/%d/ns/net", c.Process.Pid))
			if err != nil {
				t.Fatal(err)
			}
			if child == want || time.Now().After(deadline) {
				break
			}
		}
		if child != want {
			t.Errorf("started process in %s, want %s", child, want)
		}
	})
	// Cleanup of the subtest killed and reaped it.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d still exists after cleanup (kill 0: %v)", pid, err)
	}
}

func TestUDPFrame(t *testing.T) {
	src, dst := net.HardwareAddr{2, 0, 0, 0, 0, 0x11}, net.HardwareAddr{2, 0, 0, 0, 0, 0x12}
	// Header checksum of this IPv4 header computed by hand:
	// 4500 0024 0000 0000 4011 xxxx c612 000b c612 000c
	// sum = 4500+0024+4011+c612+000b+c612+000c = 0x21170 -> 0x1172, ~ = 0xee8d.
	f := UDPFrame(src, dst, netip.MustParseAddrPort("198.18.0.11:1"), netip.MustParseAddrPort("198.18.0.12:2"), []byte("abcdefgh"))
	if len(f) != 14+20+8+8 {
		t.Fatalf("length %d", len(f))
	}
	if !bytes.Equal(f[0:6], dst) || !bytes.Equal(f[6:12], src) || f[12] != 0x08 || f[13] != 0 {
		t.Errorf("ethernet header % x", f[:14])
	}
	if f[24] != 0xee || f[25] != 0x8d {
		t.Errorf("IPv4 header checksum %02x%02x, want ee8d", f[24], f[25])
	}
	if UDPFrame(src, dst, netip.MustParseAddrPort("198.18.0.11:1"), netip.MustParseAddrPort("[2001:db8::1]:2"), nil) != nil {
		t.Error("mixed families: want nil")
	}
	if f6 := UDPFrame(src, dst, netip.MustParseAddrPort("[2001:db8::1]:1"), netip.MustParseAddrPort("[2001:db8::2]:2"), nil); len(f6) != 14+40+8 || f6[12] != 0x86 {
		t.Errorf("IPv6 frame % x", f6)
	}
}

// TestRemoveStaleLabs: a lab whose owner PID cannot exist is removed, a lab
// of a live process (PID 1) is kept.
func TestRemoveStaleLabs(t *testing.T) {
	RequireRoot(t)
	script, err := findScript()
	if err != nil {
		t.Fatal(err)
	}
	// The last two characters come from our PID so concurrent runs differ.
	tag := leftPad(strconv.FormatUint(uint64(os.Getpid())%(36*36), 36), 2)
	dead := "tzzzzz" + tag // PID 60466175 > any pid_max
	alive := "t00001" + tag
	for _, p := range []string{dead, alive} {
		t.Cleanup(func() { _ = exec.Command(script, "down", p).Run() })
		if out, err := exec.Command(script, "up", p, "1").CombinedOutput(); err != nil {
			t.Fatalf("lab.sh up %s: %v\n%s", p, err, out)
		}
	}
	staleOnce = sync.Once{}
	removeStaleLabs(t, script)
	if _, err := os.Stat("/run/netns/" + dead + "-sw"); err == nil {
		t.Errorf("stale lab %s not removed", dead)
	}
	for _, ns := range []string{"-sw", "-col", "-h1"} {
		if _, err := os.Stat("/run/netns/" + alive + ns); err != nil {
			t.Errorf("lab of live process: %v", err)
		}
	}
}
