package instancelock

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// testName is a lock name of this test process: it never meets a daemon
// running on the machine.
func testName(t *testing.T) string {
	return fmt.Sprintf("op-instancelock-test-%d-%s", os.Getpid(), t.Name())
}

// TestSecondRefused: a second Take in the same network namespace is
// refused with the holder's PID; after Close the name is free again.
func TestSecondRefused(t *testing.T) {
	name := testName(t)
	l, err := Take(name, -1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Take(name, -1)
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("second Take: %v, want a HeldError", err)
	}
	if held.PID != os.Getpid() || held.UID != os.Getuid() {
		t.Errorf("holder PID %d uid %d, want %d %d", held.PID, held.UID, os.Getpid(), os.Getuid())
	}
	if want := fmt.Sprintf("PID %d", os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("refusal %q does not name %q", err, want)
	}
	// Asked many times (more than the backlog): every asker is answered.
	for i := 0; i < 50; i++ {
		if _, err := Take(name, -1); !errors.As(err, &held) || held.PID != os.Getpid() {
			t.Fatalf("ask %d: %v", i, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := Take(name, -1)
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	l2.Close()
}

// TestOtherNamespace: a lock in another network namespace is another
// lock.
func TestOtherNamespace(t *testing.T) {
	name := testName(t)
	l, err := Take(name, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the thread ends with the goroutine: never unlocked
		if _, err := netns.New(); err != nil {
			errc <- err
			return
		}
		l2, err := Take(name, -1)
		if err != nil {
			errc <- fmt.Errorf("in a new namespace: %w", err)
			return
		}
		_, err = Take(name, -1) // and in that namespace, one only
		var held *HeldError
		if !errors.As(err, &held) {
			errc <- fmt.Errorf("second in the new namespace: %v", err)
			return
		}
		errc <- l2.Close()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestHandover: the descriptor handed over is the lock, taken over
// without a moment free; a descriptor of another socket is refused.
func TestHandover(t *testing.T) {
	name := testName(t)
	l, err := Take(name, -1)
	if err != nil {
		t.Fatal(err)
	}
	fd := l.Handover()
	var held *HeldError
	if _, err := Take(name, -1); !errors.As(err, &held) {
		t.Fatalf("while handed over: %v, want held", err)
	}
	dup, err := unix.Dup(fd) // the exec'ed program's copy
	if err != nil {
		t.Fatal(err)
	}
	l.f.Close() // the previous program's copy goes with its exec
	l2, err := Take(name, dup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Take(name, -1); !errors.As(err, &held) || held.PID != os.Getpid() {
		t.Fatalf("after the handover: %v, want held by this process", err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	other, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Take(name, other); err == nil {
		t.Fatal("a descriptor of another socket was taken as the lock")
	}
}
