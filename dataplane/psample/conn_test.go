package psample

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// synthFamily is a family id no kernel family has (ids are given from
// GENL_MIN_ID 0x10 up, a few dozen on a machine).
var synthFamily = Family{ID: 0x7ff0}

// sender is a netlink socket connected to a Conn: it sends the kernel's
// message layout to it, as the kernel would multicast it.
func sender(t *testing.T, c *Conn) int {
	t.Helper()
	pid, err := c.PortID()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Connect(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: pid}); err != nil {
		t.Fatal(err)
	}
	return fd
}

// TestConnSynthetic: messages in the kernel's layout reach Read through
// the real socket, recvmmsg and parser, in order, in batches, without an
// allocation per sample; Wake cuts a wait short.
func TestConnSynthetic(t *testing.T) {
	testskip.Root(t)
	c, err := OpenSynthetic(ConnConfig{Batch: 8}, synthFamily)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fd := sender(t, c)
	const n = 100
	for i := 0; i < n; i++ {
		m := AppendMessage(nil, synthFamily.ID, &Sample{Has: HasIIf, IIfIndex: 4, Rate: 10, OrigSize: 64, Group: 2, Seq: uint32(i),
			Data: []byte{byte(i), 1, 2, 3}})
		if _, err := unix.Write(fd, m); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	var seqs []uint32
	for len(seqs) < n {
		got, err := c.Read(time.Now().Add(2*time.Second), func(s *Sample) {
			if s.IIfIndex != 4 || s.Rate != 10 || s.Group != 2 || len(s.Data) != 4 || s.Data[0] != byte(s.Seq) {
				t.Errorf("sample %+v", s)
			}
			seqs = append(seqs, s.Seq)
		})
		if err != nil {
			t.Fatalf("after %d samples: %d, %v", len(seqs), got, err)
		}
	}
	for i, s := range seqs {
		if s != uint32(i) {
			t.Fatalf("sample %d has seq %d", i, s)
		}
	}
	// Nothing queued: a wait until the deadline, or Wake.
	start := time.Now()
	if _, err := c.Read(start.Add(50*time.Millisecond), func(*Sample) {}); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("empty read: %v", err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		if err := c.Wake(); err != nil {
			t.Error(err)
		}
	}()
	start = time.Now()
	if _, err := c.Read(start.Add(10*time.Second), func(*Sample) {}); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("woken read: %v after %v", err, time.Since(start))
	}
	// No allocation per sample: 8 messages sent and read per run.
	msg := AppendMessage(nil, synthFamily.ID, &Sample{Rate: 1, Group: 2, Data: make([]byte, 128)})
	allocs := testing.AllocsPerRun(50, func() {
		for i := 0; i < 8; i++ {
			if _, err := unix.Write(fd, msg); err != nil {
				t.Fatal(err)
			}
		}
		for got := 0; got < 8; {
			k, err := c.Read(time.Now().Add(time.Second), func(*Sample) {})
			if err != nil {
				t.Fatal(err)
			}
			got += k
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per 8 samples", allocs)
	}
	if c.Malformed.Load() != 0 {
		t.Errorf("%d malformed", c.Malformed.Load())
	}
}
