// Package instancelock keeps one sflowswitchd per network namespace.
//
// The lock is a listening unix socket bound to a name in the abstract
// socket namespace (unix(7), "Abstract sockets"). Linux keeps one abstract
// namespace per network namespace, so the name is the namespace's own,
// whatever the file systems (pin directory, state directory) the daemons
// use; the kernel frees it when the last descriptor of the socket closes,
// so a crash or SIGKILL leaves no stale lock. A second daemon that finds
// the name taken connects to it and learns the holder's PID from the
// connection's peer credentials (SO_PEERCRED: the listener's PID as of
// listen(2)), so the refusal names the running daemon.
//
// An upgrade in place execs the new program in the same process: the
// descriptor is kept open across the exec (Handover) and the PID stays
// the same, so the lock never passes out of the process.
package instancelock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultName is the abstract socket name the daemon locks.
const DefaultName = "sflowswitchd"

// Lock is the held lock of this network namespace.
type Lock struct {
	ln   *net.UnixListener
	f    *os.File // a descriptor of the socket that outlives ln (Handover)
	name string
	done chan struct{}
}

// HeldError is Take's refusal while another process holds the lock.
type HeldError struct {
	// Name is the abstract socket name.
	Name string
	// PID is the holder's process ID; 0 when it could not be read.
	PID int
	// UID is the holder's user ID (valid when PID is not 0).
	UID int
}

func (e *HeldError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("another sflowswitchd runs in this network namespace (abstract socket @%s is taken; its PID could not be read)", e.Name)
	}
	return fmt.Sprintf("another sflowswitchd runs in this network namespace: PID %d (uid %d, abstract socket @%s); "+
		"one agent per namespace: two would share the agent address and the sub-agent IDs", e.PID, e.UID, e.Name)
}

// Take takes the lock named name (DefaultName) in the calling thread's
// network namespace, or takes over the descriptor fd handed over by the
// previous program of this process (fd >= 0: an upgrade in place). A lock
// held by another process is refused with a *HeldError.
func Take(name string, fd int) (*Lock, error) {
	if fd >= 0 {
		unix.CloseOnExec(fd)
		sa, err := unix.Getsockname(fd)
		if u, ok := sa.(*unix.SockaddrUnix); err != nil || !ok || u.Name != "@"+name {
			unix.Close(fd)
			return nil, fmt.Errorf("instance lock: the handed-over descriptor %d is not @%s (%v)", fd, name, err)
		}
		f := os.NewFile(uintptr(fd), "@"+name)
		ln, err := net.FileListener(f) // a descriptor of its own
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("instance lock: the handed-over descriptor: %w", err)
		}
		return serve(ln.(*net.UnixListener), f, name), nil
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: "@" + name, Net: "unix"})
	if err != nil {
		if errors.Is(err, unix.EADDRINUSE) {
			return nil, holder(name)
		}
		return nil, fmt.Errorf("instance lock @%s: %w", name, err)
	}
	f, err := ln.File()
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("instance lock @%s: %w", name, err)
	}
	return serve(ln, f, name), nil
}

// serve accepts and closes the connections of processes asking who holds
// the lock (they read the peer credentials), so that the backlog never
// fills.
func serve(ln *net.UnixListener, f *os.File, name string) *Lock {
	l := &Lock{ln: ln, f: f, name: name, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				time.Sleep(100 * time.Millisecond) // out of descriptors: the next asker waits
				continue
			}
			c.Close()
		}
	}()
	return l
}

// holder returns the refusal naming the process that holds name.
func holder(name string) error {
	e := &HeldError{Name: name}
	c, err := net.DialTimeout("unix", "@"+name, 2*time.Second)
	if err != nil {
		return e
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return e
	}
	_ = raw.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			e.PID, e.UID = int(cred.Pid), int(cred.Uid)
		}
	})
	return e
}

// Handover stops answering and returns a descriptor of the socket for
// the exec of an upgrade in place (the caller keeps it open across the
// exec); the lock stays with the process. The Lock must stay referenced
// until the exec (the descriptor's *os.File would close it when
// collected).
func (l *Lock) Handover() int {
	l.ln.Close()
	<-l.done
	return int(l.f.Fd())
}

// Close releases the lock.
func (l *Lock) Close() error {
	err := l.ln.Close()
	<-l.done
	return errors.Join(err, l.f.Close())
}

// Describe is the lock as logged: the name and this process's PID.
func (l *Lock) Describe() string { return "@" + l.name + " pid " + strconv.Itoa(os.Getpid()) }
