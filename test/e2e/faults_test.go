package e2e

// The fault suite: each test breaks one thing the agent depends
// on while it samples, then checks that it keeps sampling what it can,
// recovers by itself, and counts what it lost. `make test` runs each
// fault once; `make soak` repeats them (FAULT_ROUNDS) and writes every
// row to the Markdown table of test/e2e/README.md (FAULT_REPORT).

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// faultRounds is how many times a fault is repeated (FAULT_ROUNDS; 1 in
// make test).
func faultRounds(t *testing.T) int {
	if v := os.Getenv("FAULT_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("FAULT_ROUNDS=%q", v)
		}
		return n
	}
	return 1
}

// mibAnswers reports whether the SFLOW-MIB answers through snmpd.
func mibAnswers(g *gosnmp.GoSNMP) bool {
	r, err := g.Get([]string{sflowAgentAddressOID})
	return err == nil && len(r.Variables) == 1 && r.Variables[0].Type == gosnmp.OctetString
}

// TestFaultSnmpdRestart kills snmpd under the running daemon: sampling
// goes on while snmpd is away, and the SFLOW-MIB is served again once
// snmpd is back, without touching the daemon.
func TestFaultSnmpdRestart(t *testing.T) {
	lab := newLab(t, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	snmp := startSnmpd(t)
	col := listenCounting(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "10", "-ports", "p1,p2", "-polling", "0", "-agentx", "unix:"+snmp.SocketPath)
	d.waitReady(t, lab, "p1", "p2")
	g := snmp.Client(t, "public")
	g.Timeout, g.Retries = 500*time.Millisecond, 0
	waitUntil(t, 15*time.Second, "SFLOW-MIB through snmpd", func() bool { return mibAnswers(g) })

	var worst time.Duration
	rounds := faultRounds(t)
	for r := 0; r < rounds; r++ {
		snmp.Kill()
		col.markNow()
		sendNumbered(t, lab, 0, 1, 1, 2000)
		if _, ok := col.firstSince(p1, 5*time.Second); !ok {
			t.Fatalf("round %d: no sample while snmpd is down\n%s", r, d.log())
		}
		restarted := time.Now()
		snmp.Restart(t)
		g = snmp.Client(t, "public")
		g.Timeout, g.Retries = 500*time.Millisecond, 0
		waitUntil(t, 30*time.Second, "SFLOW-MIB after the snmpd restart", func() bool { return mibAnswers(g) })
		worst = max(worst, time.Since(restarted))
	}
	if !d.alive() {
		t.Fatalf("daemon died\n%s", d.log())
	}
	recordFault(t, faultRow{
		Fault: "snmpd killed (SIGKILL) and restarted", Done: fmt.Sprintf("%d× kill snmpd, send 2000 frames, restart snmpd", rounds),
		Observed: "sampling never stopped; the AgentX session re-registered by itself (worst time shown)",
		Recovery: worst, PeakRSS: usage(t, d.cmd.Process.Pid).HWM,
	})
}

// TestFaultCollectorUnreachable makes the collector unreachable (an
// unreachable route in the switch namespace: every send fails), then
// reachable again: every sample of the outage is counted lost for that
// collector, none silently, and datagrams flow again at once.
func TestFaultCollectorUnreachable(t *testing.T) {
	const k = 3000
	lab := newLab(t, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	col := listenCounting(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "1", "-ports", "p1", "-polling", "0", "-agentx", "off")
	d.waitReady(t, lab, "p1")
	route := &netlink.Route{Dst: &net.IPNet{IP: lab.CollectorAddr.AsSlice(), Mask: net.CIDRMask(32, 32)}, Type: unix.RTN_UNREACHABLE}
	rounds := faultRounds(t)
	var worst time.Duration
	for r := 0; r < rounds; r++ {
		if err := inNS(lab.Switch, func(h *netlink.Handle) error { return h.RouteAdd(route) }); err != nil {
			t.Fatalf("unreachable route: %v", err)
		}
		sendNumbered(t, lab, 0, 1, 1, k)
		col.waitDelivered(t, lab) // read, flushed and refused
		if err := inNS(lab.Switch, func(h *netlink.Handle) error { return h.RouteDel(route) }); err != nil {
			t.Fatalf("removing the unreachable route: %v", err)
		}
		back := col.markNow()
		// Frames until a sample of them arrives.
		for i := 0; ; i++ {
			sendNumbered(t, lab, 0, 1, 1, 10)
			if _, ok := col.firstSince(p1, 20*time.Millisecond); ok {
				break
			}
			if time.Since(back) > 10*time.Second {
				t.Fatalf("round %d: no sample 10 s after the route came back\n%s", r, d.log())
			}
		}
		at, _ := col.firstSince(p1, 0)
		worst = max(worst, at.Sub(back))
	}
	col.waitDelivered(t, lab)
	m := mustFetchMetrics(t, lab)
	colLabel := fmt.Sprintf(`collector="%s:%d"`, lab.CollectorAddr, collectorPort)
	// The workers' own count (flow samples only: drop notifications to
	// the same collector are in the per-collector figures too).
	lost := m.sumWith("sflowswitchd_samples_dropped_total", `reason="send_error"`, "")
	collLost := m.sumWith("sflowswitchd_collector_samples_lost_total", colLabel, `reason="send_error"`)
	sendErrs, _ := m.get("sflowswitchd_collector_send_errors_total", colLabel)
	encoded := m.sum("sflowswitchd_flow_samples_total")
	pool, samples, drops := portCounters(m, "p1")
	received := col.totalFlows()
	t.Logf("pool %d, kernel selected %d, kernel drops %d; flow samples %d = received %d + lost (send errors) %d; %d datagrams refused",
		pool, samples, drops, encoded, received, lost, sendErrs)
	if pool != samples {
		t.Errorf("pool %d, selected %d (kernel drops %d): want pool = selected at 1 in 1", pool, samples, drops)
	}
	if encoded != received+lost {
		t.Errorf("flow samples encoded %d != received %d + counted lost %d: %d lost silently", encoded, received, lost, int64(encoded)-int64(received+lost))
	}
	if collLost < lost {
		t.Errorf("collector %s counts %d samples lost, the workers %d", colLabel, collLost, lost)
	}
	if lost < uint64(rounds)*k*9/10 {
		t.Errorf("only %d samples counted lost during %d outages of %d frames at 1 in 1", lost, rounds, k)
	}
	recordFault(t, faultRow{
		Fault: "collector unreachable, then reachable", Done: fmt.Sprintf("%d× unreachable route to the collector, %d frames at 1 in 1, route removed", rounds, k),
		Observed: fmt.Sprintf("every refused datagram counted (%d send errors), flow samples = received + counted lost exactly; datagrams again as soon as the route was back", sendErrs),
		Recovery: worst, PeakRSS: usage(t, d.cmd.Process.Pid).HWM, Lost: encoded - received, Reported: lost,
	})
}

// TestFaultPorts deletes, re-creates, flaps and renames ports under a
// daemon sampling "p*": the other ports never stop, and each changed port
// is sampled again (or forgotten) within seconds.
func TestFaultPorts(t *testing.T) {
	lab := newLab(t, 3)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	col := listenCounting(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "1", "-ports", "p*", "-polling", "0", "-agentx", "off")
	d.waitReady(t, lab, "p1", "p2", "p3")
	bg := startTraffic(lab, 0, 50, 20*time.Millisecond) // p1 all along
	defer bg.stop()

	// sampledAgain sends from host i until a sample of ifindex arrives.
	sampledAgain := func(what string, host int, ifindex uint32, since time.Time) time.Duration {
		t.Helper()
		for {
			lab.SendFrames(t, host, testFrames(lab, host, host, 1, 10))
			if at, ok := col.firstSince(ifindex, 20*time.Millisecond); ok {
				return at.Sub(since)
			}
			if bound := testutil.Scaled(10 * time.Second); time.Since(since) > bound {
				t.Fatalf("%s: no sample of ifindex %d within %v\n%s", what, ifindex, bound, d.log())
			}
		}
	}
	gone := func(port string) time.Duration {
		t.Helper()
		start := time.Now()
		waitUntil(t, 10*time.Second, port+" gone from the metrics", func() bool {
			_, ok := mustFetchMetrics(t, lab).get("sflowswitchd_port_sampling_rate", `port="`+port+`"`)
			return !ok
		})
		return time.Since(start)
	}
	rounds := faultRounds(t)
	var delT, addT, flapT, renT time.Duration
	for r := 0; r < rounds; r++ {
		// Delete p3, then re-create it (the next free number is 3 again).
		lab.DelPort(t, 3)
		delT = max(delT, gone("p3"))
		col.markNow()
		plugged := time.Now()
		if i := lab.AddPort(t); i != 3 {
			t.Fatalf("re-created port is p%d, want p3", i)
		}
		p3 := uint32(lab.LinkIndex(lab.Switch, "p3"))
		addT = max(addT, sampledAgain("re-created p3", len(lab.Hosts)-1, p3, plugged))

		// Flap p2 20 times, 20 ms apart.
		p2 := uint32(lab.LinkIndex(lab.Switch, "p2"))
		err := inNS(lab.Switch, func(h *netlink.Handle) error {
			l, err := h.LinkByName("p2")
			if err != nil {
				return err
			}
			for i := 0; i < 20; i++ {
				if err := h.LinkSetDown(l); err != nil {
					return err
				}
				time.Sleep(20 * time.Millisecond)
				if err := h.LinkSetUp(l); err != nil {
					return err
				}
				time.Sleep(20 * time.Millisecond)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("flapping p2: %v", err)
		}
		col.markNow()
		up := time.Now()
		flapT = max(flapT, sampledAgain("p2 after flapping", 1, p2, up))

		// Rename p2 to p9 and back: sampled under either name.
		for _, names := range [][2]string{{"p2", "p9"}, {"p9", "p2"}} {
			err := inNS(lab.Switch, func(h *netlink.Handle) error {
				l, err := h.LinkByName(names[0])
				if err != nil {
					return err
				}
				if err := h.LinkSetDown(l); err != nil {
					return err
				}
				if err := h.LinkSetName(l, names[1]); err != nil {
					return err
				}
				return h.LinkSetUp(l)
			})
			if err != nil {
				t.Fatalf("renaming %s to %s: %v", names[0], names[1], err)
			}
			col.markNow()
			renamed := time.Now()
			renT = max(renT, sampledAgain("renamed "+names[1], 1, p2, renamed))
			waitUntil(t, 5*time.Second, names[1]+" in the metrics", func() bool {
				_, ok := mustFetchMetrics(t, lab).get("sflowswitchd_port_sampling_rate", `port="`+names[1]+`"`)
				return ok
			})
		}
	}
	// p1 was sampled all along.
	col.markNow()
	if _, ok := col.firstSince(p1, 3*time.Second); !ok {
		t.Errorf("p1 no longer sampled")
	}
	bg.stop()
	if !d.alive() {
		t.Fatalf("daemon died\n%s", d.log())
	}
	hwm := usage(t, d.cmd.Process.Pid).HWM
	for _, r := range []faultRow{
		{Fault: "port deleted", Done: "ip link del of a sampled port (p3) under traffic on p1", Observed: "p3 gone from the metrics; p1 sampled throughout", Recovery: delT},
		{Fault: "port re-created", Done: "the same name (p3) created again", Observed: "sampled again (time to its first sample)", Recovery: addT},
		{Fault: "port flapping", Done: "p2 down/up 20× at 20 ms", Observed: "sampled again after the last up (time to its first sample)", Recovery: flapT},
		{Fault: "port renamed", Done: "p2 renamed p9 and back (both match p*)", Observed: "sampled under the new name, metrics follow the name", Recovery: renT},
	} {
		r.PeakRSS = hwm
		recordFault(t, r)
	}
}

// TestFaultSIGKILLUnderLoad kills the daemon with SIGKILL while frames
// are forwarded through the switch: forwarding loses nothing, and a new
// daemon cleans up and samples again.
func TestFaultSIGKILLUnderLoad(t *testing.T) {
	lab := newLab(t, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	col := listenCounting(t, lab, collectorPort)
	args := []string{"-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort), "-sampling", "1", "-ports", "p1,p2", "-polling", "0", "-agentx", "off"}
	d := startDaemon(t, lab, args...)
	d.waitReady(t, lab, "p1", "p2")

	// Frames h1 -> h2's MAC (forwarded by the bridge) to an address
	// nobody has (h2 drops them silently, no ICMP).
	frames := make([][]byte, 200)
	for i := range frames {
		frames[i] = netlab.UDPFrame(lab.HostMACs[0], lab.HostMACs[1],
			netip.AddrPortFrom(lab.HostAddrs[0], uint16(10000+i)), netip.AddrPortFrom(lab.HostAddrs[1].Next().Next().Next(), 9), make([]byte, 18))
	}
	// h2 receives through its own NAPI ring, not the machine's shared
	// backlog, so that other tests' floods cannot drop its frames.
	privateRxPath(t, lab, lab.Hosts[1])
	rxBefore := lab.RxPackets(t, lab.Hosts[1], "eth0")
	pathBefore := forwardingPath(t, lab)
	rounds := faultRounds(t)
	var sent uint64
	var worst time.Duration
	var hwm uint64
	for r := 0; r < rounds; r++ {
		stop := make(chan struct{})
		sending := make(chan uint64)
		go func() {
			var n uint64
			for {
				select {
				case <-stop:
					sending <- n
					return
				default:
				}
				if err := lab.Do(lab.Hosts[0], func() error { return sendBatch(frames) }); err == nil {
					n += uint64(len(frames))
				}
			}
		}()
		time.Sleep(500 * time.Millisecond)
		hwm = max(hwm, usage(t, d.cmd.Process.Pid).HWM)
		d.signal(t, syscall.SIGKILL)
		d.waitExit(t, 5*time.Second)
		time.Sleep(500 * time.Millisecond)
		col.markNow()
		restarted := time.Now()
		d = startDaemon(t, lab, args...)
		if _, ok := col.firstSince(p1, 10*time.Second); !ok {
			t.Fatalf("round %d: restarted daemon samples nothing\n%s", r, d.log())
		}
		worst = max(worst, time.Since(restarted))
		close(stop)
		sent += <-sending
	}
	// Frames still in the veths' backlogs arrive late on a slow machine
	// (under emulation): read h2's intake until it stops growing.
	rx := uint64(0)
	for deadline := time.Now().Add(testutil.Scaled(2 * time.Second)); ; {
		time.Sleep(200 * time.Millisecond)
		n := lab.RxPackets(t, lab.Hosts[1], "eth0") - rxBefore
		if n == rx || n >= sent || time.Now().After(deadline) {
			rx = n
			break
		}
		rx = n
	}
	// Where the frames went: each hop's counters over the test, and the
	// kernel's backlog drops (softnet_stat), so that a loss names the hop
	// that lost it.
	path := forwardingPath(t, lab).since(pathBefore)
	t.Logf("forwarded during %d SIGKILLs: sent %d, received %d; the path: %s", rounds, sent, rx, path)
	if rx < sent {
		t.Errorf("forwarding lost %d of %d frames across SIGKILL and restart; the path: %s", sent-rx, sent, path)
	}
	if !strings.Contains(d.log(), "startup XDP cleanup") || !strings.Contains(d.log(), "startup TC cleanup") {
		t.Errorf("restarted daemon did not report its start-up clean-up:\n%s", d.log())
	}
	hwm = max(hwm, usage(t, d.cmd.Process.Pid).HWM)
	recordFault(t, faultRow{
		Fault: "SIGKILL under load, restart", Done: fmt.Sprintf("%d× SIGKILL while forwarding h1→h2 at full speed, start again", rounds),
		Observed: fmt.Sprintf("forwarding lost no frame (%d sent, %d received); the new daemon cleaned up and sampled (time from start to first sample)", sent, rx),
		Recovery: worst, PeakRSS: hwm,
	})
}

// TestFaultReloadBadConfigs sends SIGHUP with a broken file and with a
// file where one setting is invalid: both are refused whole, the running
// configuration stays, and a valid file afterwards applies.
func TestFaultReloadBadConfigs(t *testing.T) {
	lab := newLab(t, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	col := listenCounting(t, lab, collectorPort)
	conf := filepath.Join(t.TempDir(), "sflowswitchd.conf")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	good := func(rate int) string {
		return fmt.Sprintf("sampling = %d\npolling = 0\nagentx = \"off\"\nports = [\"p1\", \"p2\"]\n[[collector]]\naddress = \"%s:%d\"\n", rate, lab.CollectorAddr, collectorPort)
	}
	write(good(10))
	d := startDaemon(t, lab, "-config", conf)
	d.waitReady(t, lab, "p1", "p2")
	rate := func() uint64 {
		v, _ := mustFetchMetrics(t, lab).get("sflowswitchd_port_sampling_rate", `port="p1"`)
		return v
	}
	var worst time.Duration
	for r := 0; r < faultRounds(t); r++ {
		cur := rate()
		for _, bad := range []struct{ name, body string }{
			{"broken TOML", "sampling = \n[[collector\n"},
			{"partly invalid", strings.Replace(good(int(cur)+5), "polling = 0", "polling = 0\nheader_bytes = 9999", 1)},
			{"unknown key", good(int(cur)+5) + "samplng = 3\n"},
		} {
			write(bad.body)
			before := strings.Count(d.log(), "config reload refused")
			d.signal(t, syscall.SIGHUP)
			waitUntil(t, 5*time.Second, "reload refused ("+bad.name+")", func() bool {
				return strings.Count(d.log(), "config reload refused") > before
			})
			if got := rate(); got != cur {
				t.Fatalf("%s: rate %d after a refused reload, want %d unchanged", bad.name, got, cur)
			}
		}
		// Still sampling at the old rate.
		col.markNow()
		sendNumbered(t, lab, 0, 1, 1, 500)
		if _, ok := col.firstSince(p1, 5*time.Second); !ok {
			t.Fatalf("no sample after the refused reloads\n%s", d.log())
		}
		next := cur + 5
		write(good(int(next)))
		hup := time.Now()
		d.signal(t, syscall.SIGHUP)
		waitUntil(t, 5*time.Second, "the valid reload", func() bool { return rate() == next })
		worst = max(worst, time.Since(hup))
	}
	recordFault(t, faultRow{
		Fault: "SIGHUP with broken and partly-invalid configs", Done: "SIGHUP with broken TOML, a file with one invalid value, a file with an unknown key; then a valid one",
		Observed: "each refused whole (logged 'config reload refused'), the running rates unchanged and sampling on; the valid file applied (time shown)",
		Recovery: worst, PeakRSS: usage(t, d.cmd.Process.Pid).HWM,
	})
}

// TestFaultClockOffset runs the daemon in a time namespace whose
// CLOCK_MONOTONIC and CLOCK_BOOTTIME are ten years ahead of the host's
// (the machine's clock cannot be stepped by a test; a time namespace is
// the jump the daemon can be shown): the agent uptime in the datagrams
// starts at zero and grows with real time, so nothing mixes clocks or
// takes absolute monotonic values. Wall-clock steps cannot change uptime
// or timers: TestMonotonicTimeOnly checks the code never derives a
// duration from the wall clock.
func TestFaultClockOffset(t *testing.T) {
	const tenYears = 10 * 365 * 24 * 3600
	lab := newLab(t, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	col := listenCounting(t, lab, collectorPort)
	off := strconv.Itoa(tenYears)
	// --fork: the daemon is unshare's child, inside the time namespace.
	// Without it the daemon is exec'd by unshare itself, which Linux
	// before 6.2 leaves outside the namespace it made for its children;
	// such a process cannot start threads (clone fails with EINVAL), and
	// the Go runtime dies ("failed to create new OS thread", 6.1).
	// --kill-child: it dies with unshare.
	cmd := lab.Start(t, lab.Switch, "unshare", "--fork", "--kill-child", "--time", "--monotonic", off, "--boottime", off, daemonBin, "-metrics", metricsAddr,
		"-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort), "-sampling", "1", "-ports", "p1", "-polling", "1", "-agentx", "off")
	out, _ := cmd.Stdout.(fmt.Stringer)
	d := &daemon{cmd: cmd, out: out}
	started := time.Now()
	d.waitReady(t, lab, "p1")
	sendNumbered(t, lab, 0, 1, 1, 100)
	time.Sleep(3 * time.Second)
	sendNumbered(t, lab, 0, 1, 1, 100)
	col.waitQuiet(1500 * time.Millisecond)
	elapsed := time.Since(started)
	col.mu.Lock()
	ups := append([]uint32(nil), col.uptimes...)
	col.mu.Unlock()
	if len(ups) < 3 {
		t.Fatalf("%d datagrams", len(ups))
	}
	first, last := ups[0], ups[len(ups)-1]
	t.Logf("uptime of the first datagram %d ms, of the last %d ms, %v after start", first, last, elapsed)
	if first > 10000 || time.Duration(last)*time.Millisecond > elapsed+time.Second || last-first < 2500 {
		t.Errorf("uptime %d..%d ms over %v: not the daemon's own monotonic uptime", first, last, elapsed)
	}
	if _, ok := col.firstSince(p1, 0); !ok && col.totalFlows() == 0 {
		t.Errorf("no flow sample in the time namespace")
	}
	recordFault(t, faultRow{
		Fault: "clock offset (time namespace)", Done: "daemon started with CLOCK_MONOTONIC and CLOCK_BOOTTIME 10 years ahead",
		Observed: fmt.Sprintf("uptime in datagrams %d→%d ms over %.1f s: its own monotonic uptime; sampling and 1 s polling normal", first, last, elapsed.Seconds()),
		PeakRSS:  usage(t, childPID(t, cmd.Process.Pid)).HWM,
	})
}

// childPID is the only child of process pid (unshare --fork's daemon).
func childPID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		t.Fatalf("children of %d: %v", pid, err)
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		t.Fatalf("process %d has children %q, want one", pid, f)
	}
	c, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatalf("children of %d: %v", pid, err)
	}
	return c
}

// waitUntil polls cond every 50 ms until it holds or fails the test after
// timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	timeout = testutil.Scaled(timeout) // a bound: scaled under emulation
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pathCounters are the counters of each hop of h1 -> switch -> h2 and the
// machine's backlog drops, read together (forwardingPath).
type pathCounters struct {
	h1Tx, h1TxDropped       uint64 // h1's eth0
	p1Rx, p1RxDropped       uint64 // the switch's p1
	p2Tx, p2TxDropped       uint64 // the switch's p2
	h2Rx, h2RxDropped       uint64 // h2's eth0
	backlogDropped, squeeze uint64 // /proc/net/softnet_stat, every CPU
}

func forwardingPath(t testing.TB, lab *netlab.Lab) pathCounters {
	t.Helper()
	h1 := lab.LinkStats(t, lab.Hosts[0], "eth0")
	p1 := lab.LinkStats(t, lab.Switch, "p1")
	p2 := lab.LinkStats(t, lab.Switch, "p2")
	h2 := lab.LinkStats(t, lab.Hosts[1], "eth0")
	c := pathCounters{
		h1Tx: h1.TxPackets, h1TxDropped: h1.TxDropped,
		p1Rx: p1.RxPackets, p1RxDropped: p1.RxDropped,
		p2Tx: p2.TxPackets, p2TxDropped: p2.TxDropped,
		h2Rx: h2.RxPackets, h2RxDropped: h2.RxDropped,
	}
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		t.Logf("softnet_stat: %v", err)
		return c
	}
	// One line per CPU of hex columns: processed, dropped, time_squeeze, ...
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		d, _ := strconv.ParseUint(f[1], 16, 64)
		q, _ := strconv.ParseUint(f[2], 16, 64)
		c.backlogDropped += d
		c.squeeze += q
	}
	return c
}

func (c pathCounters) since(b pathCounters) string {
	return fmt.Sprintf("h1 eth0 tx %d (dropped %d) -> switch p1 rx %d (dropped %d) -> p2 tx %d (dropped %d) -> h2 eth0 rx %d (dropped %d); machine backlog drops %d, time squeezes %d",
		c.h1Tx-b.h1Tx, c.h1TxDropped-b.h1TxDropped, c.p1Rx-b.p1Rx, c.p1RxDropped-b.p1RxDropped,
		c.p2Tx-b.p2Tx, c.p2TxDropped-b.p2TxDropped, c.h2Rx-b.h2Rx, c.h2RxDropped-b.h2RxDropped,
		c.backlogDropped-b.backlogDropped, c.squeeze-b.squeeze)
}
