// Package netnsutil runs code in a Linux network namespace: a function on
// an OS thread switched into the namespace (sockets it opens stay there
// for their whole life), or a command through nsenter. It is the one
// implementation of "run this in a network namespace" for the dataplane,
// the lab helpers and the benchmarks.
//
// Switching a thread's namespace (setns(2)) needs CAP_SYS_ADMIN. Do never
// switches when the target is the namespace the caller already runs in,
// so a daemon that manages its own namespace needs no such capability.
package netnsutil

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// dir is where `ip netns add` mounts named namespaces.
const dir = "/run/netns/"

// Path returns the mount path of named namespace name.
func Path(name string) string { return dir + name }

// Do runs fn in network namespace ns and returns its error. A handle that
// is not open (ns <= 0, as netns.None()) or names the caller's own
// namespace runs fn directly on the calling goroutine. Otherwise fn runs on
// its own goroutine, locked to an OS thread switched into ns and switched
// back afterwards: goroutines fn starts do NOT run in ns, fn must not call
// t.Fatal, and a panic in fn is raised again in the caller. If the thread
// cannot be switched back it stays locked, so the Go runtime ends it with
// the goroutine instead of reusing it in the wrong namespace.
func Do(ns netns.NsHandle, fn func() error) error {
	if ns <= 0 {
		return fn()
	}
	runtime.LockOSThread()
	cur, err := netns.Get()
	if err == nil {
		same := cur.Equal(ns)
		cur.Close()
		if same {
			defer runtime.UnlockOSThread()
			return fn()
		}
	}
	runtime.UnlockOSThread()

	type result struct {
		err      error
		panicked bool
		value    any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("open current network namespace: %w", err)}
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("enter network namespace: %w", err)}
			return
		}
		var res result
		func() {
			defer func() {
				if v := recover(); v != nil {
					res = result{panicked: true, value: v}
				}
			}()
			res.err = fn()
		}()
		if err := netns.Set(orig); err != nil {
			// The thread stays locked: it exits with this goroutine.
			done <- result{err: errors.Join(res.err, fmt.Errorf("leave network namespace: %w", err)), panicked: res.panicked, value: res.value}
			return
		}
		runtime.UnlockOSThread()
		done <- res
	}()
	res := <-done
	if res.panicked {
		panic(res.value)
	}
	return res.err
}

// DoNamed runs fn in the named namespace (mounted under dir), as Do.
func DoNamed(name string, fn func() error) error {
	h, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", name, err)
	}
	defer h.Close()
	if err := Do(h, fn); err != nil {
		return fmt.Errorf("in network namespace %s: %w", name, err)
	}
	return nil
}

// Enter switches the calling goroutine's thread into the named namespace
// for good: it locks the goroutine to its thread and never unlocks it, so
// the runtime discards the thread when the goroutine ends. For goroutines
// that live in a namespace (a benchmark's pinned sender or reader).
func Enter(name string) error {
	runtime.LockOSThread()
	h, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", name, err)
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		return fmt.Errorf("enter network namespace %s: %w", name, err)
	}
	return nil
}

// Netlink returns a netlink handle bound to the named namespace; the
// caller closes it.
func Netlink(name string) (*netlink.Handle, error) {
	h, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", name, err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		return nil, fmt.Errorf("netlink handle in network namespace %s: %w", name, err)
	}
	return nh, nil
}

// Link returns link name of the named namespace, with its attributes and
// 64-bit statistics as the kernel reported them.
func Link(ns, name string) (netlink.Link, error) {
	h, err := Netlink(ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	lk, err := h.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("link %s in network namespace %s: %w", name, ns, err)
	}
	return lk, nil
}

// Command returns a command that runs prog with args in the named
// namespace through nsenter --net, which (unlike `ip netns exec`) neither
// forks nor remounts /sys, so the PID is prog's and pinned BPF objects stay
// visible. ctx kills the command when it ends (exec.CommandContext).
func Command(ctx context.Context, name, prog string, args ...string) *exec.Cmd {
	argv := append([]string{"--net=" + Path(name), "--", prog}, args...)
	return exec.CommandContext(ctx, "nsenter", argv...)
}
