package netnsutil_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// TestDo runs code in a lab namespace and checks that it saw that
// namespace (its bridge br0), that the caller did not, that sockets opened
// there stay there, and that a panic reaches the caller.
func TestDo(t *testing.T) {
	netlab.RequireRoot(t)
	lab := netlab.New(t, 1)

	sock := -1
	err := netnsutil.DoNamed(lab.Switch, func() error {
		if _, err := netlink.LinkByName("br0"); err != nil {
			return err
		}
		var err error
		sock, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		return err
	})
	if err != nil {
		t.Fatalf("DoNamed: %v", err)
	}
	defer unix.Close(sock)
	if _, err := netlink.LinkByName("br0"); err == nil {
		t.Fatal("the caller sees the lab's br0: its thread was left in the lab namespace")
	}
	// The socket's namespace (SIOCGSKNS) is the lab's switch namespace.
	nsfd, err := unix.IoctlRetInt(sock, unix.SIOCGSKNS)
	if err != nil {
		t.Fatalf("SIOCGSKNS: %v", err)
	}
	defer unix.Close(nsfd)
	sw, err := netns.GetFromName(lab.Switch)
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	if !netns.NsHandle(nsfd).Equal(sw) {
		t.Fatal("socket opened in DoNamed is not in the switch namespace")
	}

	fnErr := errors.New("fn failed")
	if err := netnsutil.DoNamed(lab.Switch, func() error { return fnErr }); !errors.Is(err, fnErr) {
		t.Fatalf("DoNamed returned %v, want fn's error", err)
	}
	if err := netnsutil.DoNamed(lab.Prefix+"-none", func() error { return nil }); err == nil {
		t.Fatal("DoNamed of a missing namespace succeeded")
	}
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Fatalf("recovered %v, want the panic of fn", v)
			}
		}()
		_ = netnsutil.DoNamed(lab.Switch, func() error { panic("boom") })
	}()

	out, err := netnsutil.Command(context.Background(), lab.Switch, "ip", "-br", "link", "show", "br0").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "br0") {
		t.Fatalf("Command: %v: %s", err, out)
	}
	nl, err := netnsutil.Netlink(lab.Switch)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	if _, err := nl.LinkByName("br0"); err != nil {
		t.Fatalf("Netlink handle does not see the lab's br0: %v", err)
	}
}

// TestDoOwnNamespaceNeedsNoSysAdmin drops CAP_SYS_ADMIN from one thread
// (capabilities are per thread) and checks that Do into the thread's own
// namespace runs fn on that very thread (no setns(2), no other thread),
// while setns into another namespace is refused there: the daemon, which only ever works in its own namespace, needs
// no CAP_SYS_ADMIN for it.
func TestDoOwnNamespaceNeedsNoSysAdmin(t *testing.T) {
	netlab.RequireRoot(t)
	lab := netlab.New(t, 1)
	other, err := netns.GetFromName(lab.Switch)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	type result struct{ own, foreign, setup error }
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread without CAP_SYS_ADMIN ends with the
		// goroutine.
		runtime.LockOSThread()
		if err := dropSysAdmin(); err != nil {
			done <- result{setup: err}
			return
		}
		own, err := netns.Get()
		if err != nil {
			done <- result{setup: err}
			return
		}
		defer own.Close()
		var r result
		// fn must run on this very thread (no other thread switched into
		// the namespace, no setns): the thread without CAP_SYS_ADMIN.
		tid, fnTid := unix.Gettid(), 0
		r.own = netnsutil.Do(own, func() error { fnTid = unix.Gettid(); return nil })
		if r.own == nil && fnTid != tid {
			r.own = fmt.Errorf("fn ran on thread %d, not on the caller's %d", fnTid, tid)
		}
		r.foreign = errForeign(other)
		done <- r
	}()
	r := <-done
	if r.setup != nil {
		t.Fatalf("setting up: %v", r.setup)
	}
	if r.own != nil {
		t.Fatalf("Do into the own namespace without CAP_SYS_ADMIN: %v", r.own)
	}
	if !errors.Is(r.foreign, unix.EPERM) {
		t.Fatalf("setns into another namespace without CAP_SYS_ADMIN: %v, want EPERM (the test thread kept the capability)", r.foreign)
	}
}

// errForeign tries setns into ns on the calling thread, as Do would on
// its own thread, and switches back.
func errForeign(ns netns.NsHandle) error {
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	if err := unix.Setns(int(ns), unix.CLONE_NEWNET); err != nil {
		return err
	}
	return netns.Set(orig)
}

// dropSysAdmin removes CAP_SYS_ADMIN from the calling thread's effective
// set.
func dropSysAdmin() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[unix.CAP_SYS_ADMIN/32].Effective &^= 1 << (unix.CAP_SYS_ADMIN % 32)
	return unix.Capset(&hdr, &data[0])
}
