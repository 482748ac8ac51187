package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/redistest"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// asicFactor is how many packets the test's "ASIC" counts per packet its
// netdev counts: the counters copied into COUNTERS_DB are the netdevs'
// times this, so that a pool from COUNTERS_DB is told from one from the
// netdev.
const asicFactor = 3

// TestSonicPsample is SONiC's sampling path in a kernel with psample and
// act_sample (the Debian 12 and 13 VMs): tc matchall + sample rules with
// group 1 (ingress, on Ethernet0) and group 2 (egress, on Ethernet4),
// installed as SONiC's virtual switch maps SAI sampling onto tc (an
// ingress qdisc, a prio root qdisc), a loop copying the ports' counters
// into COUNTERS_DB as SONiC's flex counters do, and the daemon in SONiC
// mode: the flow samples carry SONiC's ifIndex (data source, input,
// output), the rate of each packet's rule, and pools from COUNTERS_DB,
// never backwards.
func TestSonicPsample(t *testing.T) {
	netlab.RequireRoot(t)
	fs := features.ProbeFeatures()
	testskip.Feature(t, fs, features.FeaturePsample)
	testskip.Feature(t, fs, features.FeatureActSample)
	sl := newSonicLab(t)
	lab := sl.lab
	run := func(args ...string) {
		t.Helper()
		if out, err := lab.Run(lab.Switch, args[0], args[1:]...); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("tc", "qdisc", "add", "dev", "Ethernet0", "handle", "ffff:", "ingress")
	run("tc", "filter", "add", "dev", "Ethernet0", "parent", "ffff:", "matchall", "action", "sample", "rate", "4", "group", "1")
	run("tc", "qdisc", "add", "dev", "Ethernet4", "root", "handle", "1:", "prio")
	run("tc", "filter", "add", "dev", "Ethernet4", "parent", "1:", "matchall", "action", "sample", "rate", "2", "group", "2")
	// The flex-counter loop: every 200 ms each port's netdev counters,
	// times asicFactor, into COUNTERS:<oid>.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	copyCounters := func() {
		var cmds []string
		for i := 0; i < 2; i++ {
			st := lab.LinkStats(t, lab.Switch, redistest.PortName(i))
			cmds = append(cmds, fmt.Sprintf("HSET COUNTERS:%s SAI_PORT_STAT_IF_IN_UCAST_PKTS %d SAI_PORT_STAT_IF_OUT_UCAST_PKTS %d SAI_PORT_STAT_IF_IN_OCTETS %d SAI_PORT_STAT_IF_OUT_OCTETS %d SAI_PORT_STAT_IF_IN_MULTICAST_PKTS 0 SAI_PORT_STAT_IF_IN_BROADCAST_PKTS 0 SAI_PORT_STAT_IF_OUT_MULTICAST_PKTS 0 SAI_PORT_STAT_IF_OUT_BROADCAST_PKTS 0",
				redistest.PortOID(i), asicFactor*st.RxPackets, asicFactor*st.TxPackets, asicFactor*st.RxBytes, asicFactor*st.TxBytes))
		}
		sl.srv.Pipe(redistest.CountersDB, cmds)
	}
	copyCounters()
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
				copyCounters()
			}
		}
	})
	defer func() { cancel(); wg.Wait() }()
	dir := t.TempDir()
	conf := sonicConf(t, sl, dir)
	startDaemon(t, lab, "-config", conf)
	// Direction both, so that Ethernet4's egress samples are its own.
	sl.srv.HSet(redistest.ConfigDB, "SFLOW|global", "sample_direction", "both")
	sl.c1.waitFor(t, testutil.Scaled(20*time.Second), "counter samples (SONiC mode running)", func(dgs []datagram) bool {
		return len(polledSources(dgs)) >= 33
	})
	time.Sleep(testutil.Scaled(2 * time.Second)) // the pools' first counter read
	const n = 2000
	frame := netlab.UDPFrame(netlab.HostMAC(1), netlab.PortMAC(1), netip.AddrPortFrom(netip4(198, 18, 0, 11), 1000), netip.AddrPortFrom(netip4(198, 18, 0, 12), 2000), make([]byte, 64))
	send := func(dev string) {
		// Five bursts 1.5 s apart: COUNTERS_DB (copied every 200 ms, read
		// by the agent every second) has counted the earlier bursts by
		// the time the last one is sampled.
		script := fmt.Sprintf("import socket, time\ns=socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\ns.bind((%q, 0))\nf=bytes.fromhex(%q)\nfor b in range(5):\n    [s.send(f) for _ in range(%d)]\n    time.sleep(1.5)\n", dev, fmt.Sprintf("%x", frame), n/5)
		path := filepath.Join(dir, "send-"+dev+".py")
		if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
			t.Error(err)
			return
		}
		if out, err := lab.Run(lab.Switch, "python3", path); err != nil {
			t.Errorf("sending on %s: %v\n%s", dev, err, out) // not Fatal: another goroutine
		}
	}
	var sends sync.WaitGroup
	sends.Go(func() { send("soe0") })      // into Ethernet0: its ingress, group 1
	sends.Go(func() { send("Ethernet4") }) // out of Ethernet4: its egress, group 2
	sends.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var in, eg []flowRec
	sl.c1.waitFor(t, testutil.Scaled(30*time.Second), "flow samples of Ethernet0 (ingress) and Ethernet4 (egress)", func(dgs []datagram) bool {
		in, eg = flowSamplesOf(dgs, 1), flowSamplesOf(dgs, 5)
		return accountedFor(in, n, 4) && accountedFor(eg, n, 2)
	})
	check := func(name string, ss []flowRec, rate uint32, egress bool) {
		t.Helper()
		var last uint32
		for i, s := range ss {
			if s.rate != rate {
				t.Fatalf("%s sample %d: rate %d, want %d (the rule's)", name, i, s.rate, rate)
			}
			if !egress && s.input != 1 {
				t.Fatalf("%s sample %d: input %d, want SONiC's 1", name, i, s.input)
			}
			if egress && s.output.Value != 5 {
				t.Fatalf("%s sample %d: output %v, want SONiC's 5", name, i, s.output)
			}
			if s.pool < last {
				t.Fatalf("%s sample %d: pool %d after %d: backwards", name, i, s.pool, last)
			}
			last = s.pool
		}
		// The pool is the ASIC's count (COUNTERS_DB, asicFactor times the
		// netdev's): by the last burst's samples COUNTERS_DB counted the
		// bursts before it (copied every 200 ms, read every second), more
		// than the netdev's n frames could give; at most asicFactor × n
		// and the little else the port carried.
		if last <= uint32(n) || last > uint32(asicFactor*n+asicFactor*200) {
			t.Errorf("%s: last pool %d, want more than the netdev's %d and at most about %d×%d (COUNTERS_DB's count)", name, last, n, asicFactor, n)
		}
		t.Logf("%s: %d samples + %d drops of %d frames at 1 in %d, last pool %d", name, len(ss), ss[len(ss)-1].drops, n, rate, last)
	}
	check("Ethernet0 ingress", in, 4, false)
	check("Ethernet4 egress", eg, 2, true)
	for _, dg := range sl.c1.snapshot(t) {
		for _, s := range dg.our.Samples {
			if fs, ok := s.(*sflow.FlowSample); ok && fs.Source.Index != 1 && fs.Source.Index != 5 {
				t.Errorf("a flow sample of data source %d: not a port with a rule", fs.Source.Index)
			}
		}
	}
}

// accountedFor tells whether samples ss of n frames sampled 1 in rate
// look complete: the binomial count within 5 σ (samples + drops).
func accountedFor(ss []flowRec, n int, rate int) bool {
	if len(ss) == 0 {
		return false
	}
	_, _, ok := withinSigmas(len(ss)+int(ss[len(ss)-1].drops), n, 1/float64(rate), 5)
	return ok
}
