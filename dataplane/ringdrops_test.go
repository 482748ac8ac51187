package dataplane

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/afxdp"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// TestRingFullDropsCounted: with a one-page ring that nobody reads during a
// flood, most samples cannot be delivered. Every one of them must be
// counted (sflow_version_5.txt flow_sample.drops): delivered + drops ==
// samples taken, exactly.
func TestRingFullDropsCounted(t *testing.T) {
	lab := netlab.New(t, 2)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, RingBytes: os.Getpagesize()})
	p1 := lab.PortIndex(t, 0)
	if err := d.AttachPort(p1, PortConfig{Rate: 1, Mode: ModeInline, HeaderBytes: 128}); err != nil {
		t.Fatal(err)
	}
	const k = 20000
	lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, 0, k, 32))

	pc, err := d.Stats().Ingress(p1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.Source(0)
	if err != nil {
		t.Fatal(err)
	}
	delivered := 0
	deadline := time.Now().Add(300 * time.Millisecond)
	for {
		n, err := r.Read(deadline, func(*reader.RawSample) {})
		delivered += n
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	after, err := d.Stats().Ingress(p1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pool %d, samples %d, drops %d, delivered %d", pc.Pool, pc.Samples, pc.Drops, delivered)
	if after != pc {
		t.Errorf("counters moved after the flood: %+v -> %+v", pc, after)
	}
	if pc.Pool < k || pc.Samples != pc.Pool {
		t.Errorf("pool %d, samples %d; want samples == pool >= %d at rate 1", pc.Pool, pc.Samples, k)
	}
	if uint64(delivered)+pc.Drops != pc.Samples {
		t.Errorf("delivered %d + drops %d = %d, want samples %d", delivered, pc.Drops, uint64(delivered)+pc.Drops, pc.Samples)
	}
	if pc.Drops == 0 || delivered == 0 {
		t.Errorf("want both drops (%d) and deliveries (%d) with a one-page ring", pc.Drops, delivered)
	}
}

// TestMonitorAFXDP: a monitor-mode port redirects its sampled frames into
// the AF_XDP sockets of its RX queues (one per queue, keys from XSKMap.Key),
// drops all other frames, and accounts for every sampled frame: received
// by a socket, or counted as a drop by the sampler or the socket.
func TestMonitorAFXDP(t *testing.T) {
	lab := netlab.New(t, 2)
	d := openIn(t, lab, Config{Workers: 1, MaxPorts: 4, MaxQueues: 8})
	p1 := lab.PortIndex(t, 0)
	if err := d.AttachPort(p1, PortConfig{Rate: 4, Mode: ModeMonitor, HeaderBytes: 128}); err != nil {
		t.Fatal(err)
	}
	// One socket per real RX queue: bind fails (EINVAL) past the last one.
	// (netlink's IFLA_NUM_RX_QUEUES is the allocated count, which may be
	// larger, and /sys of the namespace is not mounted here.)
	var socks []*afxdp.Socket
	for q := 0; q < 8; q++ {
		var s *afxdp.Socket
		err := lab.Do(lab.Switch, func() error {
			var err error
			s, err = afxdp.Open(p1, q, afxdp.Options{})
			return err
		})
		if q > 0 && errors.Is(err, unix.EINVAL) {
			break
		}
		if err != nil {
			t.Fatalf("AF_XDP socket on p1 queue %d: %v", q, err)
		}
		t.Cleanup(func() { s.Close() })
		x, err := d.XSKMap(p1)
		if err != nil {
			t.Fatal(err)
		}
		key, err := x.Key(q)
		if err != nil {
			t.Fatal(err)
		}
		if err := x.Set(key, s.FD()); err != nil {
			t.Fatal(err)
		}
		socks = append(socks, s)
	}
	t.Logf("%d AF_XDP sockets on p1", len(socks))
	capt := lab.Capture(t, lab.Hosts[1], "eth0")

	const k = 4000
	frames := make([][]byte, 0, k)
	for i := 0; i < k; i++ {
		frames = append(frames, seqFrames(lab, 0, lab.HostMACs[1], uint32(i), 1, 16+(i*53)%1400)[0])
	}
	// Receive concurrently: the sockets' rings (2048) are smaller than the
	// expected ~1000 samples only by a margin, and frames must be checked.
	got := map[uint32]bool{}
	altered := 0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		recv := func(f []byte) {
			seq, ok := frameSeq(f)
			if !ok || seq >= k {
				return
			}
			if !bytes.Equal(f, frames[seq]) {
				altered++
			}
			got[seq] = true
		}
		for {
			idle := true
			for _, s := range socks {
				n, err := s.Receive(recv)
				if err != nil {
					t.Errorf("Receive: %v", err)
					return
				}
				if n > 0 {
					idle = false
				}
			}
			if idle {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}
	}()
	lab.SendFrames(t, 0, frames)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-done

	pc, err := d.Stats().Ingress(p1)
	if err != nil {
		t.Fatal(err)
	}
	var sockDrops uint64
	for _, s := range socks {
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		sockDrops += st.RxDropped + st.RxRingFull
	}
	t.Logf("counters %+v, received %d, socket drops %d, altered %d", pc, len(got), sockDrops, altered)
	if pc.Pool < k {
		t.Errorf("pool %d < %d", pc.Pool, k)
	}
	if uint64(len(got))+pc.Drops+sockDrops != pc.Samples {
		t.Errorf("received %d + sampler drops %d + socket drops %d != samples %d", len(got), pc.Drops, sockDrops, pc.Samples)
	}
	if len(got) == 0 || altered != 0 {
		t.Errorf("received %d sampled frames, %d altered", len(got), altered)
	}
	// Monitor ports carry a copy of traffic: nothing is forwarded.
	for _, f := range capt.Queued(t) {
		if _, ok := frameSeq(f.Data); ok {
			t.Errorf("host 2 received a test frame from a monitor port")
			break
		}
	}
}
