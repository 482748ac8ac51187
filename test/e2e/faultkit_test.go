package e2e

// Helpers of the fault and soak suite (faults_test.go, soak_test.go): the
// Markdown report every fault adds a row to, the daemon's resource usage
// read from /proc and its BPF maps, a collector that only counts (a
// minutes-long flood must not fill the test's memory), and a traffic
// generator that runs until stopped.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// durationEnv returns the duration in environment variable name (`make
// soak` sets SOAK_DURATION and FLOOD_DURATION), or def.
func durationEnv(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive Go duration such as 30m", name, v)
	}
	return d
}

// faultRow is one fault tried and what was observed: a row of the table in
// test/e2e/README.md.
type faultRow struct {
	Fault    string
	Done     string // what the test did
	Observed string
	Recovery time.Duration // from the end of the fault to normal service (0: not applicable)
	PeakRSS  uint64        // daemon VmHWM, bytes
	Lost     uint64        // samples that did not reach the collector
	Reported uint64        // of them, counted in the daemon's metrics / sFlow drops
}

var faultReportMu sync.Mutex

// recordFault logs r and appends it as a Markdown table row to the file
// named by FAULT_REPORT (make soak creates it with the header); the test
// fails if the file cannot be written.
func recordFault(t *testing.T, r faultRow) {
	t.Helper()
	rec := "-"
	if r.Recovery > 0 {
		rec = fmt.Sprintf("%.2f s", r.Recovery.Seconds())
	}
	row := fmt.Sprintf("| %s | %s | %s | %s | %.1f MiB | %d | %d |\n", r.Fault, r.Done, r.Observed, rec,
		float64(r.PeakRSS)/(1<<20), r.Lost, r.Reported)
	t.Logf("fault report: %s", strings.TrimSpace(row))
	name := os.Getenv("FAULT_REPORT")
	if name == "" {
		return
	}
	faultReportMu.Lock()
	defer faultReportMu.Unlock()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("fault report: %v", err)
	}
	if _, err := f.WriteString(row); err != nil {
		f.Close()
		t.Fatalf("fault report: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("fault report: %v", err)
	}
}

// procUsage is a process's resource use.
type procUsage struct {
	RSS, HWM   uint64 // bytes
	FDs        int
	Threads    int
	MapEntries int // entries of every BPF map the process holds
	Maps       int
}

// usage reads pid's RSS, peak RSS, threads, open fds and the entries of
// the BPF maps among them (fdinfo map_id, then the map by ID).
func usage(t *testing.T, pid int) procUsage {
	t.Helper()
	var u procUsage
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("daemon status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			u.RSS = v << 10
		case "VmHWM:":
			u.HWM = v << 10
		case "Threads:":
			u.Threads = int(v)
		}
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("daemon fds: %v", err)
	}
	u.FDs = len(ents)
	seen := map[uint64]bool{}
	for _, e := range ents {
		info, err := os.ReadFile(filepath.Join(fmt.Sprintf("/proc/%d/fdinfo", pid), e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		for _, line := range strings.Split(string(info), "\n") {
			v, ok := strings.CutPrefix(line, "map_id:")
			if !ok {
				continue
			}
			id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err != nil || seen[id] {
				continue
			}
			seen[id] = true
			n, err := mapEntries(ebpf.MapID(id))
			if err != nil {
				continue // closed meanwhile
			}
			u.Maps++
			u.MapEntries += n
		}
	}
	return u
}

// mapEntries counts the keys of BPF map id (ring buffers and maps that
// cannot be iterated count 0).
func mapEntries(id ebpf.MapID) (int, error) {
	m, err := ebpf.NewMapFromID(id)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	switch m.Type() {
	case ebpf.RingBuf, ebpf.PerfEventArray, ebpf.XSKMap, ebpf.ProgramArray:
		return 0, nil
	}
	n := 0
	var key []byte
	next := make([]byte, m.KeySize())
	for {
		var err error
		if key == nil {
			err = m.NextKey(nil, next)
		} else {
			err = m.NextKey(key, next)
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
		key = append(key[:0], next...)
		if n > 1<<22 {
			return n, nil
		}
	}
}

// countingCollector counts what arrives without keeping datagrams: per
// data source the flow samples received and the highest sample sequence
// number, and per sub-agent the datagram sequence gaps.
type countingCollector struct {
	conn *net.UDPConn
	done chan struct{}

	mu        sync.Mutex
	flows     map[uint32]uint64 // by ifindex
	lastSeq   map[uint32]uint32 // highest flow sample sequence number, by ifindex
	lastDrops map[uint32]uint32 // drops field of that sample
	lastPool  map[uint32]uint32
	dgSeq     map[uint32]uint32 // last datagram sequence, by sub-agent
	dgGaps    uint64
	datagrams uint64
	errs      uint64
	firstAt   map[uint32]time.Time // first flow sample per ifindex after mark
	mark      time.Time
	uptimes   []uint32
}

func listenCounting(t testing.TB, lab *netlab.Lab, port uint16) *countingCollector {
	t.Helper()
	c := &countingCollector{done: make(chan struct{}), flows: map[uint32]uint64{}, lastSeq: map[uint32]uint32{},
		lastDrops: map[uint32]uint32{}, lastPool: map[uint32]uint32{}, dgSeq: map[uint32]uint32{}, firstAt: map[uint32]time.Time{}}
	c.conn = collectorSocket(t, lab, port)
	go c.read()
	t.Cleanup(func() { c.conn.Close(); <-c.done })
	return c
}

func (c *countingCollector) read() {
	defer close(c.done)
	buf := make([]byte, 65536)
	for {
		n, err := c.conn.Read(buf)
		if err != nil {
			return
		}
		now := time.Now()
		d, err := sflow.Decode(buf[:n])
		c.mu.Lock()
		if err != nil {
			c.errs++
			c.mu.Unlock()
			continue
		}
		c.datagrams++
		if last, ok := c.dgSeq[d.SubAgentID]; ok && d.SequenceNumber > last+1 {
			c.dgGaps += uint64(d.SequenceNumber - last - 1)
		}
		c.dgSeq[d.SubAgentID] = d.SequenceNumber
		if len(c.uptimes) < 100000 {
			c.uptimes = append(c.uptimes, d.Uptime)
		}
		for _, s := range d.Samples {
			fs, ok := s.(*sflow.FlowSample)
			if !ok || fs.Source.Type != sflow.SourceIfIndex {
				continue
			}
			idx := fs.Source.Index
			c.flows[idx]++
			if fs.SequenceNumber >= c.lastSeq[idx] {
				c.lastSeq[idx], c.lastDrops[idx], c.lastPool[idx] = fs.SequenceNumber, fs.Drops, fs.SamplePool
			}
			if _, ok := c.firstAt[idx]; !ok && !c.mark.IsZero() {
				c.firstAt[idx] = now
			}
		}
		c.mu.Unlock()
	}
}

// markNow forgets the first-sample times: firstSince then reports the first
// flow sample of a port received after this call.
func (c *countingCollector) markNow() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mark = time.Now()
	clear(c.firstAt)
	return c.mark
}

// firstSince waits up to timeout for a flow sample of ifindex received
// after the last markNow and returns when it arrived.
func (c *countingCollector) firstSince(ifindex uint32, timeout time.Duration) (time.Time, bool) {
	// A bound, scaled under emulation: a restarted daemon took 11 s to
	// sample under TCG (Debian 12 VM), 0.5 s here.
	deadline := time.Now().Add(testutil.Scaled(timeout))
	for {
		c.mu.Lock()
		at, ok := c.firstAt[ifindex]
		c.mu.Unlock()
		if ok {
			return at, true
		}
		if time.Now().After(deadline) {
			return time.Time{}, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flowsOf returns the flow samples of ifindex received so far.
func (c *countingCollector) flowsOf(ifindex uint32) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flows[ifindex]
}

func (c *countingCollector) totalFlows() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n uint64
	for _, v := range c.flows {
		n += v
	}
	return n
}

// waitDelivered is waitAccounted for a daemon whose only receiver is c.
func (c *countingCollector) waitDelivered(t testing.TB, lab *netlab.Lab) accounted {
	t.Helper()
	return waitAccounted(t, lab, c.totalFlows)
}

// waitQuiet waits until no flow sample arrived for quiet (at most 20 s:
// counter samples may keep coming).
func (c *countingCollector) waitQuiet(quiet time.Duration) {
	last, lastN := time.Now(), uint64(0)
	deadline := time.Now().Add(testutil.Scaled(20 * time.Second))
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if n := c.totalFlows(); n != lastN {
			last, lastN = time.Now(), n
		} else if time.Since(last) >= quiet {
			return
		}
	}
}

// traffic sends batches of numbered frames from host src until stopped;
// send errors (a host whose port was deleted) are counted, not fatal.
type traffic struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	sent   uint64
	errs   uint64
}

// startTraffic sends batch frames from host src every interval (the frames
// of testFrames: sampled on the ingress port, dropped by the bridge).
func startTraffic(lab *netlab.Lab, src, batch int, interval time.Duration) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{cancel: cancel, done: make(chan struct{})}
	ns := lab.Hosts[src]
	frames := testFrames(lab, src, src, 1, batch)
	go func() {
		defer close(tr.done)
		for ctx.Err() == nil {
			err := lab.Do(ns, func() error { return sendBatch(frames) })
			tr.mu.Lock()
			if err != nil {
				tr.errs++
			} else {
				tr.sent += uint64(len(frames))
			}
			tr.mu.Unlock()
			if interval > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(interval):
				}
			}
		}
	}()
	return tr
}

// stop stops the traffic and returns the frames sent.
func (tr *traffic) stop() uint64 {
	tr.cancel()
	<-tr.done
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.sent
}

// sendBatch writes frames out of eth0 of the current namespace.
func sendBatch(frames [][]byte) error {
	link, err := netlink.LinkByName("eth0")
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: link.Attrs().Index}); err != nil {
		return err
	}
	for _, f := range frames {
		for {
			_, err := unix.Write(fd, f)
			if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				time.Sleep(50 * time.Microsecond)
				continue
			}
			if err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// portCounters returns per port (by name) the sample pool, kernel samples
// and kernel drops from the daemon's metrics.
func portCounters(m metrics, port string) (pool, samples, drops uint64) {
	l := `port="` + port + `"`
	pool, _ = m.get("sflowswitchd_port_sample_pool_total", l)
	samples, _ = m.get("sflowswitchd_port_kernel_samples_total", l)
	drops, _ = m.get("sflowswitchd_port_kernel_drops_total", l)
	return
}
