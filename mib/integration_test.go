package mib

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"
	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/sflowswitchd/sflowswitchd/internal/agentx"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// daemonBin is the sflowswitchd binary, built once by TestMain when the
// tests run as root (the only case in which the lab tests run).
var daemonBin string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		if os.Geteuid() == 0 {
			dir, err := os.MkdirTemp("", "mib-test-")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(dir)
			daemonBin = filepath.Join(dir, "sflowswitchd")
			out, err := exec.Command("go", "build", "-o", daemonBin, "github.com/sflowswitchd/sflowswitchd/cmd/sflowswitchd").CombinedOutput()
			if err != nil {
				fmt.Fprintf(os.Stderr, "building sflowswitchd: %v\n%s", err, out)
				return 1
			}
		}
		return m.Run()
	}())
}

// received is one datagram at the collector, decoded by goflow2 (an
// independent decoder).
type received struct {
	at  time.Time
	pkt goflow.Packet
}

// collector receives sFlow in the lab's collector namespace.
type collector struct {
	conn *net.UDPConn
	port int
	mu   sync.Mutex
	dgs  []received
	errs []error
}

func startCollector(t *testing.T, lab *netlab.Lab) *collector {
	t.Helper()
	c := &collector{}
	err := lab.Do(lab.Collector, func() error {
		conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: lab.CollectorAddr.AsSlice(), Port: 0})
		c.conn = conn
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c.port = c.conn.LocalAddr().(*net.UDPAddr).Port
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, _, err := c.conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			var p goflow.Packet
			derr := goflow.DecodeMessageVersion(bytes.NewBuffer(bytes.Clone(buf[:n])), &p)
			c.mu.Lock()
			if derr != nil {
				c.errs = append(c.errs, derr)
			} else {
				c.dgs = append(c.dgs, received{at: time.Now(), pkt: p})
			}
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		if err := c.conn.Close(); err != nil {
			t.Error(err)
		}
		<-done
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, err := range c.errs {
			t.Errorf("collector: goflow2 could not decode a datagram: %v", err)
		}
	})
	return c
}

// since returns the datagrams received at or after t.
func (c *collector) since(t time.Time) []received {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []received
	for _, d := range c.dgs {
		if !d.at.Before(t) {
			out = append(out, d)
		}
	}
	return out
}

// flowRates returns the sampling rate of every flow sample of ifindex
// received since t.
func (c *collector) flowRates(t time.Time, ifindex uint32) []uint32 {
	var rates []uint32
	for _, d := range c.since(t) {
		for _, s := range d.pkt.Samples {
			switch fs := s.(type) {
			case goflow.FlowSample:
				if fs.Header.SourceIdType == 0 && fs.Header.SourceIdValue == ifindex {
					rates = append(rates, fs.SamplingRate)
				}
			case goflow.ExpandedFlowSample:
				if fs.Header.SourceIdType == 0 && fs.Header.SourceIdValue == ifindex {
					rates = append(rates, fs.SamplingRate)
				}
			}
		}
	}
	return rates
}

// settledFlowRates waits until no flow sample of ifindex has arrived
// for 1.5 s (longer than a worker's 1 s flush tick) and returns the
// rates of those received since t, as flowRates; it gives up waiting
// after 30 s.
func (c *collector) settledFlowRates(t time.Time, ifindex uint32) []uint32 {
	deadline := time.Now().Add(30 * time.Second)
	n, still := -1, time.Now()
	for {
		rates := c.flowRates(t, ifindex)
		if len(rates) != n {
			n, still = len(rates), time.Now()
		}
		if len(rates) > 0 && time.Since(still) >= 1500*time.Millisecond || time.Now().After(deadline) {
			return rates
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// counterTimes returns the arrival times of the counter samples of
// ifindex received since t.
func (c *collector) counterTimes(t time.Time, ifindex uint32) []time.Time {
	var at []time.Time
	for _, d := range c.since(t) {
		for _, s := range d.pkt.Samples {
			if cs, ok := s.(goflow.CounterSample); ok && cs.Header.SourceIdType == 0 && cs.Header.SourceIdValue == ifindex {
				at = append(at, d.at)
			}
		}
	}
	return at
}

// frames returns n UDP frames from lab host 1 to host 2 (they enter the
// switch on p1).
func frames(lab *netlab.Lab, n int) [][]byte {
	f := netlab.UDPFrame(lab.HostMACs[0], lab.HostMACs[1], netip.AddrPortFrom(lab.HostAddrs[0], 40000),
		netip.AddrPortFrom(lab.HostAddrs[1], 9), make([]byte, 64))
	out := make([][]byte, n)
	for i := range out {
		out[i] = f
	}
	return out
}

// checkSampleCount checks that the number of samples of k frames at rate
// n is within 4 standard deviations of k/n (binomial, p = 1/n).
func checkSampleCount(t *testing.T, got, k, n int) {
	t.Helper()
	p := 1 / float64(n)
	mean, sd := float64(k)*p, math.Sqrt(float64(k)*p*(1-p))
	if math.Abs(float64(got)-mean) > 4*sd {
		t.Errorf("%d samples of %d frames at 1/%d, want %.0f ± %.0f (4 SD)", got, k, n, mean, 4*sd)
	} else {
		t.Logf("%d samples of %d frames at 1/%d (expected %.0f, SD %.1f)", got, k, n, mean, sd)
	}
}

// waitFor polls cond every 50 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// getVar reads one object through snmpd; it fails the test on a
// transport error.
func getVar(t *testing.T, g *gosnmp.GoSNMP, o agentx.OID) gosnmp.SnmpPDU {
	t.Helper()
	res, err := g.Get([]string{"." + o.String()})
	if err != nil {
		t.Fatalf("GET %s: %v", o, err)
	}
	return res.Variables[0]
}

func getInt(t *testing.T, g *gosnmp.GoSNMP, o agentx.OID) int64 {
	t.Helper()
	v := getVar(t, g, o)
	if v.Type != gosnmp.Integer {
		t.Fatalf("GET %s: %s, want Integer", o, v.Type)
	}
	return gosnmp.ToBigInt(v.Value).Int64()
}

// TestDaemonOverAgentX runs the real daemon in a lab switch namespace with
// no static receiver (-collector none), attached to a real snmpd that
// listens for SNMP on the host loopback and for AgentX on a unix socket in
// a temp dir (sockets in the file system are reachable from every network
// namespace), and configures it from SNMP managers: gosnmp and net-snmp's
// tools with the SFLOW-MIB loaded. The walk of 64 ports runs without a lab
// (TestSnmpdWalk64Ports): a 64-port lab takes longer to build than the
// whole package needs, and the walk exercises the MIB and AgentX only.
func TestDaemonOverAgentX(t *testing.T) {
	netlab.RequireRoot(t)
	lab := netlab.New(t, 2)
	s := newTestSnmpd(t)
	col := startCollector(t, lab)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	if p1 == 0 {
		t.Fatal("no p1 in the lab")
	}
	lab.Start(t, lab.Switch, daemonBin, "-agentx", "unix:"+s.SocketPath, "-ports", "p1,p2", "-collector", "none",
		"-workers", "1", "-agent-address", lab.AgentAddr.String(), "-state-dir", t.TempDir(), "-pin-dir", "off")
	g := s.Client(t, "private")
	g.Timeout, g.Retries = 500*time.Millisecond, 0

	// Registered, and the ports discovered: p1's sampler rows exist.
	// A bound, not a speed requirement: under software emulation (the
	// Linux 6.1 VM) the daemon alone takes 8 s to load its programs.
	if !waitFor(time.Minute, func() bool {
		res, err := g.Get([]string{"." + fsOID(colFsRate, p1, 1).String()})
		return err == nil && res.Variables[0].Type == gosnmp.Integer
	}) {
		t.Fatalf("daemon's MIB not reachable through snmpd within a minute; snmpd log:\n%s", s.Log())
	}
	g.Timeout, g.Retries = 2*time.Second, 1

	// Claim receiver 1 with net-snmp's snmpset and the MIB's names, as
	// docs/reference/mib.md shows: owner and timeout in one request.
	out, err := tool(s, "snmpset", "SFLOW-MIB::sFlowRcvrOwner.1", "s", "test-manager", "SFLOW-MIB::sFlowRcvrTimeout.1", "i", "300")
	if err != nil {
		t.Fatalf("snmpset claim: %v\n%s", err, out)
	}
	out, err = tool(s, "snmpset", "SFLOW-MIB::sFlowRcvrAddress.1", "x", "C6 13 FF 02",
		"SFLOW-MIB::sFlowRcvrPort.1", "i", strconv.Itoa(col.port))
	if err != nil {
		t.Fatalf("snmpset collector: %v\n%s", err, out)
	}
	// A second manager (its own session) cannot take it.
	g2 := s.Client(t, "private")
	if st, _ := snmpSet(t, g2, octets(rcvrOID(colRcvrOwner, 1), "intruder"), integer(rcvrOID(colRcvrTimeout, 1), 60)); st != agentx.InconsistentValue {
		t.Fatalf("second manager's claim: %s, want inconsistentValue", st)
	}
	// A multi-varbind SET with one bad varbind changes nothing.
	if st, idx := snmpSet(t, g, integer(fsOID(colFsReceiver, p1, 1), 1), integer(fsOID(colFsRate, p1, 1), 7),
		integer(fsOID(colFsHeader, p1, 1), -1)); st != agentx.WrongValue || idx != 3 {
		t.Fatalf("bad multi-varbind SET: %s at %d, want wrongValue at 3", st, idx)
	}
	if getInt(t, g, fsOID(colFsReceiver, p1, 1)) != 0 || getInt(t, g, fsOID(colFsRate, p1, 1)) != 0 {
		t.Fatal("bad multi-varbind SET changed the sampler")
	}

	// Sampling 1 in 100 and polling every 2 s on p1, instance 1.
	const rate1, interval = 100, 2
	// With net-snmp's names and the OID index spelled out, as in docs/reference/mib.md.
	ds := fmt.Sprintf("11.1.3.6.1.2.1.2.2.1.1.%d.1", p1)
	out, err = tool(s, "snmpset", "SFLOW-MIB::sFlowFsReceiver."+ds, "i", "1",
		"SFLOW-MIB::sFlowFsPacketSamplingRate."+ds, "i", strconv.Itoa(rate1),
		"SFLOW-MIB::sFlowCpReceiver."+ds, "i", "1", "SFLOW-MIB::sFlowCpInterval."+ds, "i", strconv.Itoa(interval))
	if err != nil {
		t.Fatalf("snmpset sampler: %v\n%s", err, out)
	}
	out, err = tool(s, "snmpget", "-Oqv", "SFLOW-MIB::sFlowFsPacketSamplingRate."+ds)
	if err != nil || strings.TrimSpace(out) != strconv.Itoa(rate1) {
		t.Fatalf("snmpget rate: %v %q", err, out)
	}
	start := time.Now()
	const k1 = 20000
	lab.SendFrames(t, 0, frames(lab, k1))
	// Every sample of the burst, also on a loaded machine: a sample
	// delivered late would otherwise count after the rate change below.
	rates := col.settledFlowRates(start, p1)
	checkSampleCount(t, len(rates), k1, rate1)
	for _, r := range rates {
		if r != rate1 {
			t.Fatalf("flow sample with rate %d, want %d", r, rate1)
		}
	}

	// A new rate takes effect at once.
	const rate2 = 40
	mustSNMPSet(t, g, integer(fsOID(colFsRate, p1, 1), rate2))
	changed := time.Now()
	// agent.Apply updates the kernel at once but hands the workers their
	// share through a channel they read between sample batches; an idle
	// worker waits up to its 1 s tick, so the first batch after the change
	// would still be handled with the old rate (reported to the lead).
	// Wait one tick before sending.
	time.Sleep(1100 * time.Millisecond)
	const k2 = 8000
	lab.SendFrames(t, 0, frames(lab, k2))
	rates = col.settledFlowRates(changed, p1)
	checkSampleCount(t, len(rates), k2, rate2)
	// A CPU's first sample after the change may have been taken with the
	// skip it drew at the old kernel rate (64 for 1/100); it then says
	// so, the rate it was taken at (agent: max of the configured and the
	// kernel's rate). At most one per CPU.
	old := 0
	for _, r := range rates {
		switch {
		case r == rate2:
		case r == 64 && old < runtime.NumCPU():
			old++
		default:
			t.Fatalf("after the rate change a flow sample has rate %d, want %d (or 64 for at most one sample per CPU, %d so far)", r, rate2, old)
		}
	}
	// snmpd killed and restarted: the subagent registers again within 5 s
	// and the daemon keeps sampling meanwhile.
	s.Kill()
	killed := time.Now()
	for range 15 {
		lab.SendFrames(t, 0, frames(lab, 1000))
		time.Sleep(100 * time.Millisecond)
	}
	s.Restart(t)
	restarted := time.Now()
	g.Timeout, g.Retries = 300*time.Millisecond, 0
	if !waitFor(5*time.Second, func() bool {
		res, err := g.Get([]string{"." + rcvrOID(colRcvrOwner, 1).String()})
		return err == nil && res.Variables[0].Type == gosnmp.OctetString
	}) {
		t.Fatalf("subagent not registered again within 5 s of the snmpd restart; snmpd log:\n%s", s.Log())
	}
	t.Logf("answering again %v after the snmpd restart", time.Since(restarted))
	g.Timeout, g.Retries = 2*time.Second, 1
	if owner := string(getVar(t, g, rcvrOID(colRcvrOwner, 1)).Value.([]byte)); owner != "test-manager" {
		t.Fatalf("owner after the restart %q", owner)
	}
	// Every frame sent while snmpd was down was sampled and exported.
	time.Sleep(time.Until(restarted.Add(1200 * time.Millisecond)))
	checkSampleCount(t, len(col.flowRates(killed, p1)), 15000, rate2)

	// Counters arrived every interval seconds all along.
	at := col.counterTimes(start, p1)
	if len(at) < 3 {
		t.Fatalf("%d counter samples of p1 in %v, want >= 3", len(at), time.Since(start))
	}
	var gaps []float64
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]).Seconds())
	}
	sort.Float64s(gaps)
	if med := gaps[len(gaps)/2]; math.Abs(med-interval) > 0.5 {
		t.Errorf("counter samples every %.2f s (median of %v), want %d s", med, gaps, interval)
	}

	// Timeout expiry releases the receiver and stops its samplers and
	// pollers: no datagram at all afterwards (there is no other receiver).
	mustSNMPSet(t, g, integer(rcvrOID(colRcvrTimeout, 1), 2))
	if !waitFor(5*time.Second, func() bool {
		return string(getVar(t, g, rcvrOID(colRcvrOwner, 1)).Value.([]byte)) == ""
	}) {
		t.Fatal("receiver not released within 5 s of a 2 s timeout")
	}
	if getInt(t, g, fsOID(colFsReceiver, p1, 1)) != 0 || getInt(t, g, fsOID(colFsRate, p1, 1)) != 0 ||
		getInt(t, g, cpOID(colCpInterval, p1, 1)) != 0 || getInt(t, g, fsOID(colFsHeader, p1, 1)) != 128 {
		t.Fatal("sampler or poller not reset to defaults after the timeout")
	}
	quiet := time.Now().Add(1500 * time.Millisecond) // datagrams flushed before the expiry may still arrive
	time.Sleep(4 * time.Second)
	if n := len(col.since(quiet)); n != 0 {
		t.Fatalf("%d datagrams after the receiver expired", n)
	}
}
