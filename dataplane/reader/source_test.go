package reader

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Unit tests of Source (no root): the ring and the sockets are
// replaced by queues that signal readiness through an eventfd, as the real
// ring buffer map and AF_XDP sockets do through poll.

// fakeQueue holds frames and an eventfd that is readable while it is not
// empty.
type fakeQueue struct {
	t      *testing.T
	fd     int
	mu     sync.Mutex
	frames [][]byte
	ifidx  uint32
	rate   uint32
	s      RawSample
	buf    [8]byte
}

func newFakeQueue(t *testing.T, ifindex uint32) *fakeQueue {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &fakeQueue{t: t, fd: fd, ifidx: ifindex}
}

func (q *fakeQueue) push(frames ...[]byte) {
	q.mu.Lock()
	q.frames = append(q.frames, frames...)
	q.mu.Unlock()
	var one [8]byte
	one[0] = 1 // little-endian 1 (amd64/arm64 test machines)
	if _, err := unix.Write(q.fd, one[:]); err != nil {
		q.t.Errorf("eventfd write: %v", err)
	}
}

// take delivers every queued frame (no allocation once the queue exists).
func (q *fakeQueue) take(fn func(*RawSample)) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, _ = unix.Read(q.fd, q.buf[:]) // reset readiness; EAGAIN when already clear
	for _, f := range q.frames {
		q.s = RawSample{IfIndex: q.ifidx, FrameLen: uint32(len(f)) + 1000, Rate: q.rate, Header: f}
		fn(&q.s)
	}
	n := len(q.frames)
	q.frames = q.frames[:0]
	return n
}

// fakeRing is a ringBatcher.
type fakeRing struct {
	*fakeQueue
}

func (r *fakeRing) batch(fn func(*RawSample)) (int, bool, error) {
	return r.take(fn), false, nil
}

// fakeSockets is a monitorSockets that fails the test if it is used after
// Close.
type fakeSockets struct {
	*fakeQueue
	drops    atomic.Uint64
	closed   atomic.Bool
	closes   atomic.Int32
	unbinds  atomic.Int32
	misuse   atomic.Int32
	inUse    atomic.Int32
	receives atomic.Int64
}

func (f *fakeSockets) Receive(fn func(*RawSample)) (int, error) {
	f.inUse.Add(1)
	defer f.inUse.Add(-1)
	if f.closed.Load() {
		f.misuse.Add(1)
	}
	f.receives.Add(1)
	return f.take(fn), nil
}
func (f *fakeSockets) FDs() []int { return []int{f.fd} }
func (f *fakeSockets) Drops() (uint64, error) {
	if f.closed.Load() {
		f.misuse.Add(1)
	}
	return f.drops.Load(), nil
}
func (f *fakeSockets) Unbind() error { f.unbinds.Add(1); return nil }
func (f *fakeSockets) Close() error {
	if f.inUse.Load() != 0 {
		f.misuse.Add(1)
	}
	f.closed.Store(true)
	f.closes.Add(1)
	return nil
}

func newTestSource(t *testing.T) (*Source, *fakeRing) {
	t.Helper()
	ring := &fakeRing{fakeQueue: newFakeQueue(t, 1)}
	s, err := newSource(ring, ring.fd, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, ring
}

func newMonitor(t *testing.T, ifindex uint32) (*MonitorPort, *fakeSockets) {
	f := &fakeSockets{fakeQueue: newFakeQueue(t, ifindex)}
	return &MonitorPort{ifindex: ifindex, sockets: f, fds: f.FDs()}, f
}

type got struct {
	ifindex  uint32
	frameLen uint32
	rate     uint32
	header   string
}

func collect(out *[]got) func(*RawSample) {
	return func(ps *RawSample) {
		*out = append(*out, got{ps.IfIndex, ps.FrameLen, ps.Rate, string(ps.Header)})
	}
}

// TestSourceBoth: one batch holds the ring's and the sockets'
// samples, converted field by field.
func TestSourceBoth(t *testing.T) {
	s, ring := newTestSource(t)
	ring.rate = 8
	p, f := newMonitor(t, 7)
	if err := s.Add(p); err != nil {
		t.Fatal(err)
	}
	ring.push([]byte("r1"), []byte("r2"))
	f.push([]byte("m1"), []byte("m2"), []byte("m3"))
	var out []got
	n, err := s.Read(time.Now().Add(5*time.Second), collect(&out))
	if err != nil || n != 5 {
		t.Fatalf("Read = %d, %v; want 5 samples", n, err)
	}
	want := []got{{1, 1002, 8, "r1"}, {1, 1002, 8, "r2"}, {7, 1002, 0, "m1"}, {7, 1002, 0, "m2"}, {7, 1002, 0, "m3"}}
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("sample %d = %+v, want %+v", i, out[i], want[i])
		}
	}
}

// TestSourceDeadline: with nothing anywhere, Read waits until
// the deadline and reports os.ErrDeadlineExceeded.
func TestSourceDeadline(t *testing.T) {
	s, _ := newTestSource(t)
	p, _ := newMonitor(t, 7)
	if err := s.Add(p); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(50 * time.Millisecond)
	n, err := s.Read(deadline, func(*RawSample) { t.Error("sample out of nowhere") })
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Read = %d, %v; want 0, deadline exceeded", n, err)
	}
	if time.Now().Before(deadline) {
		t.Errorf("returned before the deadline")
	}
}

// TestSourceWakes: a blocked worker is woken by frames arriving on
// the ring, on a socket it polls, and by a monitor port added while it
// waits (whose queued frames it then reads), long before its deadline.
func TestSourceWakes(t *testing.T) {
	s, ring := newTestSource(t)
	p1, f1 := newMonitor(t, 7)
	if err := s.Add(p1); err != nil {
		t.Fatal(err)
	}
	p2, f2 := newMonitor(t, 8)
	for _, c := range []struct {
		name string
		act  func()
		want uint32
	}{
		{"ring", func() { ring.push([]byte("r")) }, 1},
		{"socket", func() { f1.push([]byte("a")) }, 7},
		{"new monitor port", func() {
			f2.push([]byte("b"))
			if err := s.Add(p2); err != nil {
				t.Error(err)
			}
		}, 8},
	} {
		done := make(chan []got, 1)
		go func() {
			var out []got
			_, err := s.Read(time.Now().Add(time.Minute), collect(&out))
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			done <- out
		}()
		time.Sleep(20 * time.Millisecond) // let it block in poll
		c.act()
		select {
		case out := <-done:
			if len(out) != 1 || out[0].ifindex != c.want {
				t.Errorf("%s: got %+v, want one sample of ifindex %d", c.name, out, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: worker not woken", c.name)
		}
	}
}

// TestSourceWake: Wake makes a waiting Read return at once
// with nothing and no error (agent.Waker, through source), so the worker can apply a new
// configuration; the next call waits again.
func TestSourceWake(t *testing.T) {
	s, _ := newTestSource(t)
	done := make(chan error, 1)
	go func() {
		n, err := s.Read(time.Now().Add(time.Minute), func(*RawSample) { t.Error("sample out of nowhere") })
		if err == nil && n != 0 {
			err = errors.New("samples out of nowhere")
		}
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := s.Wake(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("woken Read: %v, want 0 samples and no error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wake did not wake the reader")
	}
	n, err := s.Read(time.Now().Add(30*time.Millisecond), func(*RawSample) {})
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("after the wake: Read = %d, %v; want to wait until the deadline", n, err)
	}
}

// TestSourceRemove: removing a port leaves its sockets open until
// the worker's next batch, which closes them and no longer reads them;
// frames still queued for the removed port are not delivered.
func TestSourceRemove(t *testing.T) {
	s, _ := newTestSource(t)
	p, f := newMonitor(t, 7)
	if err := s.Add(p); err != nil {
		t.Fatal(err)
	}
	f.push([]byte("x"))
	var out []got
	if n, err := s.Read(time.Now().Add(time.Second), collect(&out)); n != 1 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	if err := s.Remove(p); err != nil {
		t.Fatal(err)
	}
	if f.closes.Load() != 0 {
		t.Fatal("remove closed the sockets on the control goroutine")
	}
	f.push([]byte("late"))
	receives := f.receives.Load()
	n, err := s.Read(time.Now().Add(20*time.Millisecond), collect(&out))
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("after remove: Read = %d, %v", n, err)
	}
	if f.closes.Load() != 1 || f.receives.Load() != receives || f.misuse.Load() != 0 {
		t.Errorf("closes %d, receives after remove %d, misuse %d; want 1, 0, 0", f.closes.Load(), f.receives.Load()-receives, f.misuse.Load())
	}
}

// TestSourceChurn: ports added and removed by a control goroutine
// while the worker reads: no socket is read or closed while in use or
// used after Close, every removed socket is closed exactly once, and
// every frame of a port that stays is delivered. Run with -race.
func TestSourceChurn(t *testing.T) {
	s, _ := newTestSource(t)
	stay, fs := newMonitor(t, 99)
	if err := s.Add(stay); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var delivered atomic.Int64
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err := s.Read(time.Now().Add(5*time.Millisecond), func(ps *RawSample) {
				if ps.IfIndex == 99 {
					delivered.Add(1)
				}
			})
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Error(err)
				return
			}
		}
	}()
	var all []*fakeSockets
	const rounds = 300
	for i := 0; i < rounds; i++ {
		p, f := newMonitor(t, uint32(i+1000))
		all = append(all, f)
		f.push([]byte("f"))
		fs.push([]byte("s"))
		if err := s.Add(p); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			time.Sleep(time.Millisecond)
		}
		if err := s.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); delivered.Load() < rounds && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	<-workerDone
	// One more batch after the last remove closes what is still retired.
	if _, err := s.Read(time.Now(), func(*RawSample) {}); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal(err)
	}
	if delivered.Load() != rounds {
		t.Errorf("delivered %d frames of the staying port, want %d", delivered.Load(), rounds)
	}
	for i, f := range all {
		if f.closes.Load() != 1 || f.misuse.Load() != 0 {
			t.Fatalf("port %d: closed %d times, %d uses after close or closes in use", i, f.closes.Load(), f.misuse.Load())
		}
	}
	if fs.misuse.Load() != 0 || fs.closes.Load() != 0 {
		t.Errorf("staying port: misuse %d, closes %d", fs.misuse.Load(), fs.closes.Load())
	}
}

// TestSourceDropsCached: the sockets' drops are read by the worker
// and published for PortPool without a system call on its side.
func TestSourceDropsCached(t *testing.T) {
	s, _ := newTestSource(t)
	p, f := newMonitor(t, 7)
	f.drops.Store(42)
	if err := s.Add(p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(time.Now(), func(*RawSample) {}); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal(err)
	}
	if d := p.drops.Load(); d != 42 {
		t.Errorf("cached drops %d, want 42 after the first batch with the port", d)
	}
}

// TestSourceNoAlloc: a batch from the ring and a socket allocates
// nothing.
func TestSourceNoAlloc(t *testing.T) {
	s, ring := newTestSource(t)
	p, f := newMonitor(t, 7)
	if err := s.Add(p); err != nil {
		t.Fatal(err)
	}
	frame := bytes.Repeat([]byte{1}, 64)
	ring.frames = make([][]byte, 0, 8)
	f.frames = make([][]byte, 0, 8)
	n := 0
	fn := func(*RawSample) { n++ }
	deadline := time.Now().Add(time.Hour)
	allocs := testing.AllocsPerRun(100, func() {
		ring.frames = append(ring.frames, frame, frame)
		f.frames = append(f.frames, frame, frame, frame)
		if _, err := s.Read(deadline, fn); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 || n != 5*101 {
		t.Errorf("%.1f allocations per batch, %d samples; want 0 and %d", allocs, n, 5*101)
	}
}

// TestSocketDrops: a monitor port reports what its worker last read from
// its sockets' drop counters; an inline or unknown port reports none.
func TestSocketDrops(t *testing.T) {
	var m MonitorPorts
	if got := m.SocketDrops(7); got != 0 {
		t.Errorf("no port ever: drops %d, want 0", got)
	}
	m.ports = map[uint32]*MonitorPort{}
	m.publish()
	if got := m.SocketDrops(7); got != 0 {
		t.Errorf("no monitor port: drops %d, want 0", got)
	}
	p := &MonitorPort{ifindex: 7}
	p.drops.Store(42)
	m.ports[7] = p
	m.publish()
	if got := m.SocketDrops(7); got != 42 {
		t.Errorf("monitor port: drops %d, want 42", got)
	}
	if got := m.SocketDrops(8); got != 0 {
		t.Errorf("other port: drops %d, want 0", got)
	}
}
