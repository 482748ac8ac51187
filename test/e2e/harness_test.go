package e2e

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// metricsAddr is where every test daemon serves metrics, inside its own
// switch namespace (so labs never collide on it).
const metricsAddr = "127.0.0.1:9116"

// daemon is a running sflowswitchd in a lab's switch namespace.
type daemon struct {
	cmd *exec.Cmd
	out fmt.Stringer // combined stdout/stderr as captured by netlab.Start
}

// startDaemon runs the daemon binary with args in the switch namespace;
// netlab kills it by PID at cleanup. nsenter --net does not fork, so the
// PID is the daemon's own and signals reach it directly.
func startDaemon(t testing.TB, lab *netlab.Lab, args ...string) *daemon {
	t.Helper()
	return startDaemonBin(t, lab, daemonBin, args...)
}

// startDaemonBin is startDaemon with the daemon binary at bin.
func startDaemonBin(t testing.TB, lab *netlab.Lab, bin string, args ...string) *daemon {
	t.Helper()
	args = append([]string{"-metrics", metricsAddr}, hermetic(t, -1, args)...)
	cmd := lab.Start(t, lab.Switch, bin, args...)
	out, ok := cmd.Stdout.(fmt.Stringer)
	if !ok {
		t.Fatalf("netlab.Start no longer captures output in a Stringer (%T)", cmd.Stdout)
	}
	// Runs before netlab's cleanup kills the daemon (cleanups are LIFO).
	t.Cleanup(func() {
		if t.Failed() {
			logLossDiagnostics(t, lab)
		}
	})
	return &daemon{cmd: cmd, out: out}
}

// hermetic adds to the daemon's args what keeps it off the machine's
// global state, unless the test set it: its own state directory (a fresh
// one, owned by uid when uid >= 0) instead of /var/lib/sflowswitchd, no
// AgentX master instead of the machine's /var/agentx/master, and nothing
// pinned instead of /sys/fs/bpf/sflowswitchd. A test
// that wants either passes the flag itself (a flag overrides the -config
// file: a test whose file sets agentx passes -agentx too).
func hermetic(t testing.TB, uid int, args []string) []string {
	t.Helper()
	has := func(flag string) bool {
		for _, a := range args {
			if a == flag || strings.HasPrefix(a, flag+"=") {
				return true
			}
		}
		return false
	}
	if !has("-state-dir") {
		dir, err := os.MkdirTemp("", "sflowswitchd-state-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if uid >= 0 {
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			state := filepath.Join(dir, "state")
			if err := os.Mkdir(state, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(state, uid, uid); err != nil {
				t.Fatal(err)
			}
			dir = state
		}
		args = append(args, "-state-dir", dir)
	}
	if !has("-agentx") {
		args = append(args, "-agentx", "off")
	}
	if !has("-pin-dir") {
		// The default, /sys/fs/bpf/sflowswitchd, is the machine's: a test
		// that pins passes a bpffs of its own (internal/testkit/pinfs).
		args = append(args, "-pin-dir", "off")
	}
	return args
}

// log returns what the daemon printed so far.
func (d *daemon) log() string { return d.out.String() }

// signal sends sig to the daemon.
func (d *daemon) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to daemon: %v\n%s", sig, err, d.log())
	}
}

// stop sends SIGSTOP to the daemon and returns once every thread of it
// is stopped: a thread must run to stop, which on a loaded machine can
// take a while after kill(2) returned.
func (d *daemon) stop(t testing.TB) {
	t.Helper()
	d.signal(t, syscall.SIGSTOP)
	task := fmt.Sprintf("/proc/%d/task", d.cmd.Process.Pid)
	deadline := time.Now().Add(testutil.Scaled(10 * time.Second))
	for {
		tids, err := os.ReadDir(task)
		if err != nil {
			t.Fatalf("threads of the daemon: %v", err)
		}
		running := 0
		for _, tid := range tids {
			b, err := os.ReadFile(filepath.Join(task, tid.Name(), "stat"))
			if err != nil {
				continue // thread gone
			}
			// The state is the field after the parenthesised command.
			s := string(b)
			if i := strings.LastIndexByte(s, ')'); i < 0 || len(s) < i+3 || (s[i+2] != 'T' && s[i+2] != 't') {
				running++
			}
		}
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d threads of the daemon not stopped 10 s after SIGSTOP", running, len(tids))
		}
		time.Sleep(time.Millisecond)
	}
}

// alive reports whether the daemon process still exists (not reaped, not
// a zombie).
func (d *daemon) alive() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if err != nil {
		return false
	}
	// Field 3 (after the parenthesised command) is the state.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] != 'Z'
}

// waitExit waits up to timeout for the daemon to exit and returns its
// exit code (-1 if killed by a signal).
func (d *daemon) waitExit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("waiting for the daemon: %v", err)
		}
		return d.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("daemon did not exit within %v\n%s", timeout, d.log())
		return 0
	}
}

// waitReady waits until the daemon has attached a sampler to every port in
// ports and reports them in its metrics, then one more worker tick: a
// worker picks up a new configuration between ring reads, which wait at
// most until its next 1 s tick. Frames sent earlier could be counted in the
// pool but not sampled.
func (d *daemon) waitReady(t testing.TB, lab *netlab.Lab, ports ...string) {
	t.Helper()
	deadline := time.Now().Add(testutil.Scaled(10 * time.Second))
	for {
		missing := ""
		for _, p := range ports {
			if !samplerAttached(t, lab, p) {
				missing = p + " (no sampler attached)"
				break
			}
		}
		if missing == "" {
			m, err := fetchMetrics(lab)
			if err != nil {
				missing = "metrics: " + err.Error()
			} else {
				for _, p := range ports {
					if _, ok := m.get("sflowswitchd_port_sampling_rate", `port="`+p+`"`); !ok {
						missing = p + " (not in metrics)"
						break
					}
				}
			}
		}
		if missing == "" {
			break
		}
		if !d.alive() || time.Now().After(deadline) {
			t.Fatalf("daemon not ready: %s\n%s", missing, d.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1200 * time.Millisecond)
}

// inNS runs fn with a netlink handle of namespace ns.
func inNS(ns string, fn func(h *netlink.Handle) error) error {
	h, err := netnsutil.Netlink(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	return fn(h)
}

// samplerAttached reports whether a sampler is attached to link name in the
// switch namespace (false if the link is gone), as the daemon attached it
// on this kernel: an XDP program, the TC sampler at TCX ingress, or its
// cls_bpf filter on a clsact qdisc (dataplane.KernelAttachment; TCX is
// asked only where the kernel has it).
func samplerAttached(t testing.TB, lab *netlab.Lab, name string) bool {
	t.Helper()
	return samplerAttachment(t, lab, name) != ""
}

// samplerAttachment is how the sampler is attached to link name in the
// switch namespace (dataplane.AttachNative, AttachGeneric, AttachTCX,
// AttachClsact): the ingress sampler's, else the egress sampler's; ""
// when neither is or the link is gone.
func samplerAttachment(t testing.TB, lab *netlab.Lab, name string) string {
	t.Helper()
	mode := ""
	err := lab.Do(lab.Switch, func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			var nf netlink.LinkNotFoundError
			if errors.As(err, &nf) {
				return nil
			}
			return err
		}
		mode, err = dataplane.KernelAttachment(l.Attrs().Index)
		if err == nil && mode == "" {
			// A port sampled at egress only (-direction egress).
			mode, err = dataplane.KernelAttachmentEgress(l.Attrs().Index)
		}
		return err
	})
	if err != nil {
		t.Fatalf("sampler state of %s: %v", name, err)
	}
	return mode
}

// metrics is a parsed Prometheus text exposition.
type metrics []string

// fetchMetrics GETs /metrics from the daemon inside the switch namespace.
// The TCP socket is created on the thread netlab.Do switched into the
// namespace (an http.Client would dial from another goroutine, outside it).
func fetchMetrics(lab *netlab.Lab) (metrics, error) {
	var conn net.Conn
	err := lab.Do(lab.Switch, func() error {
		var err error
		conn, err = net.DialTimeout("tcp", metricsAddr, 2*time.Second)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial metrics: %w", err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(testutil.Scaled(5 * time.Second))); err != nil {
		return nil, err
	}
	req, err := http.NewRequest("GET", "http://"+metricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if err := req.Write(conn); err != nil {
		return nil, fmt.Errorf("send metrics request: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return nil, fmt.Errorf("read metrics response: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: HTTP %s", resp.Status)
	}
	var m metrics
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			m = append(m, line)
		}
	}
	return m, sc.Err()
}

// get returns the value of the first series of metric name whose labels
// contain label (empty: any).
func (m metrics) get(name, label string) (uint64, bool) {
	for _, line := range m {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
			continue
		}
		v, err := metricValue(line[strings.LastIndexByte(line, ' ')+1:])
		if err == nil {
			return v, true
		}
	}
	return 0, false
}

// metricValue parses a sample value of the text exposition: client_golang
// writes floats, large counters in exponent form (1.2345678e+07).
func metricValue(s string) (uint64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("metric value %q: not a count", s)
	}
	return uint64(v), nil
}

// sumWith adds the series of metric name whose labels contain both l1
// and l2.
func (m metrics) sumWith(name, l1, l2 string) uint64 {
	var s uint64
	for _, line := range m {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, l1) && strings.Contains(line, l2) {
			v, _ := metricValue(line[strings.LastIndexByte(line, ' ')+1:])
			s += v
		}
	}
	return s
}

// scalar returns the value of metric name, which has no labels.
func (m metrics) scalar(name string) uint64 {
	for _, line := range m {
		if strings.HasPrefix(line, name+" ") {
			v, _ := metricValue(line[len(name)+1:])
			return v
		}
	}
	return 0
}

// sum adds every series of metric name.
func (m metrics) sum(name string) uint64 {
	var s uint64
	for _, line := range m {
		if strings.HasPrefix(line, name+"{") {
			v, _ := metricValue(line[strings.LastIndexByte(line, ' ')+1:])
			s += v
		}
	}
	return s
}

// datagram is one received sFlow datagram, decoded by us and by goflow2.
type datagram struct {
	at  time.Time
	raw []byte
	our *sflow.Datagram
	gf  goflow.Packet
}

// collector is a UDP listener in the collector namespace.
type collector struct {
	port uint16
	conn *net.UDPConn
	done chan struct{}

	mu   sync.Mutex
	dgs  []datagram
	errs []error
}

// listen opens a collector on the lab's collector address and port. Its
// receive buffer is forced large so that a burst of datagrams is never
// lost in the test's own socket.
func listen(t *testing.T, lab *netlab.Lab, port uint16) *collector {
	t.Helper()
	c := &collector{port: port, done: make(chan struct{})}
	c.conn = collectorSocket(t, lab, port)
	go c.read()
	t.Cleanup(c.close)
	return c
}

func (c *collector) read() {
	defer close(c.done)
	buf := make([]byte, 65536)
	for {
		n, err := c.conn.Read(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				c.mu.Lock()
				c.errs = append(c.errs, fmt.Errorf("collector %d: read: %w", c.port, err))
				c.mu.Unlock()
			}
			return
		}
		dg := datagram{at: time.Now(), raw: bytes.Clone(buf[:n])}
		our, oerr := sflow.Decode(dg.raw)
		gerr := goflow.DecodeMessageVersion(bytes.NewBuffer(bytes.Clone(dg.raw)), &dg.gf)
		dg.our = our
		c.mu.Lock()
		if oerr != nil {
			c.errs = append(c.errs, fmt.Errorf("collector %d: our decoder: %w", c.port, oerr))
		}
		if gerr != nil && !onlyCustomSamples(our) { // goflow2 knows no rtmetric/rtflow
			c.errs = append(c.errs, fmt.Errorf("collector %d: goflow2: %w", c.port, gerr))
		}
		if oerr == nil {
			c.dgs = append(c.dgs, dg)
		}
		c.mu.Unlock()
	}
}

// close stops the listener; its port then answers with ICMP port
// unreachable.
func (c *collector) close() {
	c.conn.Close()
	<-c.done
}

// snapshot returns the datagrams received so far and fails the test on
// any decode error of either decoder.
func (c *collector) snapshot(t testing.TB) []datagram {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, err := range c.errs {
		t.Error(err)
	}
	c.errs = nil
	return append([]datagram(nil), c.dgs...)
}

// waitFor polls the received datagrams until cond holds or timeout.
func (c *collector) waitFor(t *testing.T, timeout time.Duration, what string, cond func([]datagram) bool) []datagram {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		dgs := c.snapshot(t)
		if cond(dgs) {
			return dgs
		}
		if time.Now().After(deadline) {
			t.Fatalf("collector %d: timed out after %v waiting for %s (%d datagrams)", c.port, timeout, what, len(dgs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// accounted is the daemon's packet-sample accounting, from its metrics
// and what the test's collectors received.
type accounted struct {
	selected, kernelDrops, read uint64 // kernel: every port; agent: every worker
	encoded, lost, received     uint64 // flow samples of ports: encoded, lost in sending, received
}

// done reports whether every sample is where it can be counted: read by
// the agent or dropped in the kernel, and (unless kernelOnly) received or
// counted lost.
func (a accounted) done(kernelOnly bool) bool {
	return a.read+a.kernelDrops == a.selected && (kernelOnly || a.received+a.lost == a.encoded)
}

// waitAccounted waits until the daemon's own accounting says that every
// packet sample is where a test can count it: the agent read every sample
// the kernel selected on any port, or the kernel counted it as dropped
// (ring full, no AF_XDP socket, socket full), and every flow sample the
// workers encoded was received (received: the flow samples of ports the
// test's collectors got, from every receiver the daemon has) or counted
// as lost in sending. The state must hold on two polls 100 ms apart, so
// that frames still on their way through the kernel are not missed.
// Unlike a quiet period, it does not depend on when the workers' ticks
// read and flush (a worker reads a ring below its wake-up mark, and sends
// the datagram being filled, at its one-second tick, which a loaded
// machine delays). With received nil it waits for the kernel part only.
func waitAccounted(t testing.TB, lab *netlab.Lab, received func() uint64) accounted {
	t.Helper()
	var prev, a accounted
	deadline := time.Now().Add(testutil.Scaled(20 * time.Second))
	for i := 0; ; i++ {
		m, err := fetchMetrics(lab)
		if err != nil {
			t.Fatal(err)
		}
		a = accounted{
			selected: m.sum("sflowswitchd_port_kernel_samples_total") + m.sum("sflowswitchd_port_egress_kernel_samples_total"),
			kernelDrops: m.sum("sflowswitchd_port_kernel_drops_total") + m.sum("sflowswitchd_port_afxdp_drops_total") +
				m.sum("sflowswitchd_port_egress_kernel_drops_total"),
			read:    m.sum("sflowswitchd_kernel_samples_total"),
			encoded: m.sum("sflowswitchd_flow_samples_total"),
			lost:    m.sumWith("sflowswitchd_samples_dropped_total", `reason="send_error"`, ""),
		}
		if received != nil {
			a.received = received()
		}
		if i > 0 && a.done(received == nil) && a == prev {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: kernel selected %d, agent read %d + kernel drops %d; flow samples encoded %d, received %d + lost in sending %d",
				a.selected, a.read, a.kernelDrops, a.encoded, a.received, a.lost)
		}
		prev = a
		time.Sleep(100 * time.Millisecond)
	}
}

// portFlows counts the flow samples of ports (data source type 0) in dgs.
func portFlows(dgs []datagram) uint64 {
	var n uint64
	for _, f := range flowSamplesOf(dgs, 0) {
		if f.source.Type == sflow.SourceIfIndex {
			n++
		}
	}
	return n
}

// waitDelivered is waitAccounted for the daemon's receivers c and others
// (collectors of this package, closed ones included: what they received
// before they closed still counts) and returns c's datagrams.
func (c *collector) waitDelivered(t testing.TB, lab *netlab.Lab, others ...*collector) []datagram {
	t.Helper()
	waitAccounted(t, lab, func() uint64 {
		n := portFlows(c.snapshot(t))
		for _, o := range others {
			n += portFlows(o.snapshot(t))
		}
		return n
	})
	return c.snapshot(t)
}

// waitQuiet waits until at least 1.3 s after since (the 1 s flush) and until
// no new flow sample of ifindex arrived for 1.3 s, then returns everything
// received.
func (c *collector) waitQuiet(t *testing.T, since time.Time, ifindex uint32) []datagram {
	t.Helper()
	const quiet = 1300 * time.Millisecond
	deadline := time.Now().Add(testutil.Scaled(15 * time.Second))
	for {
		time.Sleep(100 * time.Millisecond)
		dgs := c.snapshot(t)
		last := since
		for _, dg := range dgs {
			if dg.at.After(last) && len(flowSamplesOf([]datagram{dg}, ifindex)) > 0 {
				last = dg.at
			}
		}
		if time.Since(last) >= quiet {
			return dgs
		}
		if time.Now().After(deadline) {
			t.Fatalf("collector %d: flow samples of %d keep arriving 15 s after the traffic", c.port, ifindex)
		}
	}
}

// flowRec is one flow sample as our decoder read it.
type flowRec struct {
	at       time.Time
	subAgent uint32
	seq      uint32
	source   sflow.DataSource
	rate     uint32
	pool     uint32
	drops    uint32
	input    uint32
	output   sflow.Interface
	header   *sflow.SampledHeader
}

// flowSamplesOf returns the flow samples of data source 0:ifindex in
// arrival order (ifindex 0: every flow sample).
func flowSamplesOf(dgs []datagram, ifindex uint32) []flowRec {
	var out []flowRec
	for _, dg := range dgs {
		for _, s := range dg.our.Samples {
			fs, ok := s.(*sflow.FlowSample)
			if !ok || (ifindex != 0 && (fs.Source.Type != sflow.SourceIfIndex || fs.Source.Index != ifindex)) {
				continue
			}
			r := flowRec{at: dg.at, subAgent: dg.our.SubAgentID, seq: fs.SequenceNumber, source: fs.Source,
				rate: fs.SamplingRate, pool: fs.SamplePool, drops: fs.Drops, input: fs.Input.Value, output: fs.Output}
			for _, rec := range fs.Records {
				if h, ok := rec.(*sflow.SampledHeader); ok {
					r.header = h
				}
			}
			out = append(out, r)
		}
	}
	return out
}

// counterRec is one counter sample as our decoder read it.
type counterRec struct {
	at       time.Time
	subAgent uint32
	seq      uint32
	source   sflow.DataSource
	records  []sflow.Record
}

// counterSamplesOf returns the counter samples of data source ds in
// arrival order.
func counterSamplesOf(dgs []datagram, ds sflow.DataSource) []counterRec {
	var out []counterRec
	for _, dg := range dgs {
		for _, s := range dg.our.Samples {
			cs, ok := s.(*sflow.CounterSample)
			if !ok || cs.Source != ds {
				continue
			}
			out = append(out, counterRec{at: dg.at, subAgent: dg.our.SubAgentID, seq: cs.SequenceNumber, source: cs.Source, records: cs.Records})
		}
	}
	return out
}

// checkDatagramSequences checks that datagram sequence numbers run from 1
// without a gap or duplicate for every (agent, sub_agent_id) (spec
// sample_datagram_v5: the sequence is per sub-agent).
func checkDatagramSequences(t *testing.T, dgs []datagram) {
	t.Helper()
	type key struct {
		agent netip.Addr
		sub   uint32
	}
	seqs := map[key][]uint32{}
	for _, dg := range dgs {
		k := key{dg.our.AgentAddress, dg.our.SubAgentID}
		seqs[k] = append(seqs[k], dg.our.SequenceNumber)
	}
	for k, s := range seqs {
		if err := contiguousFrom1(s); err != nil {
			t.Errorf("datagram sequence of agent %s sub-agent %d: %v", k.agent, k.sub, err)
		}
	}
}

// contiguousFrom1 checks that s, in any order, is exactly 1..len(s).
func contiguousFrom1(s []uint32) error {
	c := append([]uint32(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	for i, v := range c {
		if v != uint32(i+1) {
			return fmt.Errorf("%d values, sorted value %d is %d, want %d (gap or duplicate)", len(c), i, v, i+1)
		}
	}
	return nil
}

// checkSampleSequences checks that flow and counter sample sequence
// numbers are contiguous from 1 per data source, and that every data
// source is reported by exactly one sub-agent (spec section 4.1, sub-agents
// own disjoint data sources).
func checkSampleSequences(t *testing.T, dgs []datagram) {
	t.Helper()
	type key struct {
		flow bool
		ds   sflow.DataSource
	}
	seqs := map[key][]uint32{}
	subs := map[sflow.DataSource]map[uint32]bool{}
	for _, dg := range dgs {
		for _, s := range dg.our.Samples {
			var k key
			var seq uint32
			switch s := s.(type) {
			case *sflow.FlowSample:
				k, seq = key{true, s.Source}, s.SequenceNumber
			case *sflow.CounterSample:
				k, seq = key{false, s.Source}, s.SequenceNumber
			default:
				continue
			}
			seqs[k] = append(seqs[k], seq)
			if subs[k.ds] == nil {
				subs[k.ds] = map[uint32]bool{}
			}
			subs[k.ds][dg.our.SubAgentID] = true
		}
	}
	for k, s := range seqs {
		kind := "counter"
		if k.flow {
			kind = "flow"
		}
		if err := contiguousFrom1(s); err != nil {
			t.Errorf("%s sample sequence of data source %s: %v", kind, k.ds, err)
		}
	}
	for ds, m := range subs {
		if len(m) != 1 {
			t.Errorf("data source %s reported by %d sub-agents %v, want exactly one", ds, len(m), m)
		}
	}
}

// withinSigmas checks that n is within k standard deviations of the mean
// of a binomial(trials, p) count.
func withinSigmas(n, trials int, p, k float64) (float64, float64, bool) {
	mean := float64(trials) * p
	sd := math.Sqrt(float64(trials) * p * (1 - p))
	return mean, sd, math.Abs(float64(n)-mean) <= k*sd
}

// frameTag marks the test frames' payload.
const frameTag = 0x5346 // "SF"

// testFrames builds count distinct frames from host index src of the lab
// to host index dst's IPv4 address, numbered first, first+1, ... in their
// payload (8 bytes number, 8 bytes send time, 2 bytes tag), with varying
// UDP ports. Each frame is 60 bytes, the Ethernet minimum without FCS.
//
// The destination MAC is the sender's own: the bridge learns it on the
// ingress port from the first frame and then drops every frame there
// (never forwarded back out of the port it came from). p1 receives and
// samples every frame, and nothing else moves: no flood into the other
// hosts' (shared, per-CPU) receive backlogs, no host answering with ICMP.
func testFrames(lab *netlab.Lab, src, dst int, first uint64, count int) [][]byte {
	return numberedFrames(lab, src, dst, lab.HostMACs[src], first, count)
}

// floodFrames are testFrames to a MAC no host owns: the bridge floods
// them out of every other port.
func floodFrames(lab *netlab.Lab, src, dst int, first uint64, count int) [][]byte {
	return numberedFrames(lab, src, dst, net.HardwareAddr{0x02, 0, 0, 0, 0xee, 0xee}, first, count)
}

func numberedFrames(lab *netlab.Lab, src, dst int, dstMAC net.HardwareAddr, first uint64, count int) [][]byte {
	frames := make([][]byte, count)
	payload := make([]byte, 18)
	now := uint64(time.Now().UnixNano())
	for i := range frames {
		n := first + uint64(i)
		binary.BigEndian.PutUint64(payload[0:], n)
		binary.BigEndian.PutUint64(payload[8:], now)
		binary.BigEndian.PutUint16(payload[16:], frameTag)
		frames[i] = netlab.UDPFrame(lab.HostMACs[src], dstMAC,
			netip.AddrPortFrom(lab.HostAddrs[src], uint16(10000+n%50000)),
			netip.AddrPortFrom(lab.HostAddrs[dst], 9), payload)
	}
	return frames
}

// sendNumbered sends count frames from host src numbered first.. in chunks
// (so a million frames never sit in memory at once).
func sendNumbered(t testing.TB, lab *netlab.Lab, src, dst int, first uint64, count int) {
	t.Helper()
	const chunk = 100000
	for done := 0; done < count; done += chunk {
		n := min(chunk, count-done)
		lab.SendFrames(t, src, testFrames(lab, src, dst, first+uint64(done), n))
	}
}

// frameNumber extracts the number of a test frame from a sampled header
// (Ethernet 14 + IPv4 20 + UDP 8, then the payload).
func frameNumber(h *sflow.SampledHeader) (uint64, bool) {
	const off = 14 + 20 + 8
	if h == nil || len(h.Header) < off+18 || binary.BigEndian.Uint16(h.Header[off+16:]) != frameTag {
		return 0, false
	}
	return binary.BigEndian.Uint64(h.Header[off:]), true
}

// frameSentAt extracts the send time stamped in a test frame's payload.
func frameSentAt(h *sflow.SampledHeader) time.Time {
	const off = 14 + 20 + 8 + 8
	return time.Unix(0, int64(binary.BigEndian.Uint64(h.Header[off:])))
}

// goflowFlows returns goflow2's view of the flow samples of ifindex: for
// each, the sequence number, rate and pool.
func goflowFlows(dgs []datagram, ifindex uint32) (seqs, rates, pools []uint32) {
	for _, dg := range dgs {
		for _, s := range dg.gf.Samples {
			switch fs := s.(type) {
			case goflow.FlowSample:
				if fs.Header.SourceIdType == 0 && fs.Header.SourceIdValue == ifindex {
					seqs, rates, pools = append(seqs, fs.Header.SampleSequenceNumber), append(rates, fs.SamplingRate), append(pools, fs.SamplePool)
				}
			case goflow.ExpandedFlowSample:
				if fs.Header.SourceIdType == 0 && fs.Header.SourceIdValue == ifindex {
					seqs, rates, pools = append(seqs, fs.Header.SampleSequenceNumber), append(rates, fs.SamplingRate), append(pools, fs.SamplePool)
				}
			}
		}
	}
	return seqs, rates, pools
}

// tsharkFields writes dgs to a pcap, runs tshark on it with the sFlow
// dissector on port and returns, per packet, the values of each field
// (every occurrence, in order).
func tsharkFields(t *testing.T, dgs []datagram, port uint16, fields ...string) []map[string][]string {
	t.Helper()
	frames := make([]testutil.PcapFrame, len(dgs))
	for i, dg := range dgs {
		frames[i] = testutil.UDPPcapFrame(dg.at, dg.raw, port)
		if frames[i].Frame == nil {
			t.Fatalf("datagram of %d bytes does not fit a frame", len(dg.raw))
		}
	}
	return testutil.TsharkFields(t, frames, port, fields...)
}

// tsharkFlows returns tshark's view of the flow samples of ifindex
// (compact or expanded source): sequence numbers, rates and pools.
func tsharkFlows(t *testing.T, dgs []datagram, port uint16, ifindex uint32) (seqs, rates, pools []uint32) {
	t.Helper()
	const (
		fIndex = "sflow.flow_sample.index"
		fSeq   = "sflow.flow_sample.sequence_number"
		fRate  = "sflow.flow_sample.sampling_rate"
		fPool  = "sflow.flow_sample.sample_pool"
	)
	rows := tsharkFields(t, dgs, port, fIndex, fSeq, fRate, fPool)
	want := strconv.FormatUint(uint64(ifindex), 10)
	for i, r := range rows {
		n := len(r[fSeq])
		if len(r[fIndex]) != n || len(r[fRate]) != n || len(r[fPool]) != n {
			t.Fatalf("tshark packet %d: %d sequence numbers but %d indexes, %d rates, %d pools", i+1, n, len(r[fIndex]), len(r[fRate]), len(r[fPool]))
		}
		for j := 0; j < n; j++ {
			if r[fIndex][j] != want {
				continue
			}
			seqs = append(seqs, parseU32(t, r[fSeq][j]))
			rates = append(rates, parseU32(t, r[fRate][j]))
			pools = append(pools, parseU32(t, r[fPool][j]))
		}
	}
	return seqs, rates, pools
}

func parseU32(t *testing.T, s string) uint32 {
	t.Helper()
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		t.Fatalf("tshark value %q: %v", s, err)
	}
	return uint32(v)
}

// checkIndependentDecoders checks that goflow2 and tshark see exactly the
// flow samples of ifindex our decoder sees: same count, sequence numbers,
// rates and pools, in the same order.
func checkIndependentDecoders(t *testing.T, dgs []datagram, port uint16, ifindex uint32) {
	t.Helper()
	ours := flowSamplesOf(dgs, ifindex)
	seqs, rates, pools := make([]uint32, len(ours)), make([]uint32, len(ours)), make([]uint32, len(ours))
	for i, f := range ours {
		seqs[i], rates[i], pools[i] = f.seq, f.rate, f.pool
	}
	compare := func(who string, s, r, p []uint32) {
		if len(s) != len(seqs) {
			t.Errorf("%s sees %d flow samples of ifindex %d, our decoder %d", who, len(s), ifindex, len(seqs))
			return
		}
		for i := range s {
			if s[i] != seqs[i] || r[i] != rates[i] || p[i] != pools[i] {
				t.Errorf("%s flow sample %d of ifindex %d: seq/rate/pool %d/%d/%d, our decoder %d/%d/%d",
					who, i, ifindex, s[i], r[i], p[i], seqs[i], rates[i], pools[i])
				return
			}
		}
	}
	gs, gr, gp := goflowFlows(dgs, ifindex)
	compare("goflow2", gs, gr, gp)
	ts, tr, tp := tsharkFlows(t, dgs, port, ifindex)
	compare("tshark", ts, tr, tp)
}

// logLossDiagnostics logs where datagrams could have been lost: the
// daemon's send errors and the drop counters of the management link.
func logLossDiagnostics(t testing.TB, lab *netlab.Lab) {
	t.Helper()
	if m, err := fetchMetrics(lab); err == nil {
		t.Logf("daemon: send errors %d, datagrams sent %d, samples unsent/too large/unknown port %d",
			m.sum("sflowswitchd_send_errors_total"), m.sum("sflowswitchd_datagrams_sent_total"), m.sum("sflowswitchd_samples_dropped_total"))
	}
	mg := lab.LinkStats(t, lab.Switch, "mgmt0")
	t.Logf("mgmt0: tx packets %d dropped %d errors %d", mg.TxPackets, mg.TxDropped, mg.TxErrors)
	err := inNS(lab.Collector, func(h *netlink.Handle) error {
		l, err := h.LinkByName("eth0")
		if err == nil && l.Attrs().Statistics != nil {
			s := l.Attrs().Statistics
			t.Logf("collector eth0: rx packets %d dropped %d errors %d", s.RxPackets, s.RxDropped, s.RxErrors)
		}
		return err
	})
	if err != nil {
		t.Logf("collector eth0 statistics: %v", err)
	}
	if b, err := os.ReadFile("/proc/net/softnet_stat"); err == nil {
		t.Logf("softnet_stat (2nd column: backlog drops):\n%s", b)
	}
}

// collectorSocket opens a UDP socket on the lab collector's address and
// port, in the collector namespace, with a 32 MiB receive buffer so that
// bursts of datagrams are not lost in the test's own socket.
func collectorSocket(t testing.TB, lab *netlab.Lab, port uint16) *net.UDPConn {
	t.Helper()
	var conn *net.UDPConn
	err := lab.Do(lab.Collector, func() error {
		var err error
		conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lab.CollectorAddr, port)))
		if err != nil {
			return err
		}
		raw, err := conn.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
		}); err != nil {
			return err
		}
		return serr
	})
	if err != nil {
		t.Fatalf("collector on port %d: %v", port, err)
	}
	return conn
}
