// Package pslab builds the small namespace labs of the psample tests: a
// network namespace named sfps-<pid>-<n> with veth pairs (both ends in
// it), frames sent from a raw socket, tc run there, everything removed
// at the test's end (also on failure).
package pslab

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
)

var seq atomic.Int32

// Lab is one namespace.
type Lab struct {
	NS string
}

// New creates the namespace (root needed: testskip.Root first).
func New(t testing.TB) *Lab {
	t.Helper()
	l := &Lab{NS: fmt.Sprintf("sfps-%d-%d", os.Getpid(), seq.Add(1))}
	if out, err := exec.Command("ip", "netns", "add", l.NS).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", l.NS, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", l.NS).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", l.NS, err, out)
		}
	})
	l.IP(t, "link", "set", "lo", "up")
	// No IPv6 on the lab's links: no router solicitation or DAD frame
	// among the ones a test counts.
	l.MustCmd(t, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	return l
}

// IP runs ip -n NS args.
func (l *Lab) IP(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", l.NS}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s %s: %v: %s", l.NS, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Cmd runs a command in the namespace and returns its output and error.
func (l *Lab) Cmd(name string, args ...string) (string, error) {
	out, err := exec.Command("nsenter", append([]string{"--net=" + netnsutil.Path(l.NS), name}, args...)...).CombinedOutput()
	return string(out), err
}

// MustCmd is Cmd failing t on error.
func (l *Lab) MustCmd(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := l.Cmd(name, args...)
	if err != nil {
		t.Fatalf("%s %s in %s: %v: %s", name, strings.Join(args, " "), l.NS, err, out)
	}
	return out
}

// Veth adds the veth pair a–b, both up, and returns their ifindexes.
func (l *Lab) Veth(t testing.TB, a, b string) (int, int) {
	t.Helper()
	l.IP(t, "link", "add", a, "type", "veth", "peer", "name", b)
	l.IP(t, "link", "set", a, "up")
	l.IP(t, "link", "set", b, "up")
	return l.Index(t, a), l.Index(t, b)
}

// Index is the ifindex of link name.
func (l *Lab) Index(t testing.TB, name string) int {
	t.Helper()
	var idx int
	l.Do(t, func() error {
		i, err := net.InterfaceByName(name)
		if err != nil {
			return err
		}
		idx = i.Index
		return nil
	})
	return idx
}

// Do runs fn on a thread in the namespace.
func (l *Lab) Do(t testing.TB, fn func() error) {
	t.Helper()
	if err := netnsutil.DoNamed(l.NS, fn); err != nil {
		t.Fatalf("in %s: %v", l.NS, err)
	}
}

// Send writes frames out of port ifname (a raw packet socket in the
// namespace), one write each, and fails t on a refused write.
func (l *Lab) Send(t testing.TB, ifname string, frames [][]byte) {
	t.Helper()
	idx := l.Index(t, ifname)
	l.Do(t, func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrLinklayer{Ifindex: idx}
		if err := unix.Bind(fd, sa); err != nil {
			return fmt.Errorf("bind: %w", err)
		}
		for i, f := range frames {
			for {
				_, err := unix.Write(fd, f)
				if err == unix.ENOBUFS || err == unix.EAGAIN {
					continue // the device queue is full: again
				}
				if err != nil {
					return fmt.Errorf("frame %d: %w", i, err)
				}
				break
			}
		}
		return nil
	})
}
