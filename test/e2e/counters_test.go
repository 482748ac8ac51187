package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	goflow "github.com/netsampler/goflow2/v2/decoders/sflow"
	"github.com/vishvananda/netlink"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// TestCounters runs the daemon with 1 s polling. The if_counters of p1
// must equal the kernel's link statistics exactly: before any traffic,
// and, after host1 sent F frames (p1 rx) and host2 sent G flooded frames
// (p1 tx), in a poll taken after the traffic (the lab has no other
// traffic: permanent neighbours, IPv6 off). goflow2 and tshark must read
// the same values. The host counters (2:1) must describe this machine.
func TestCounters(t *testing.T) {
	lab := newLab(t, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	p1ds := sflow.DataSource{Type: sflow.SourceIfIndex, Index: p1}
	col := listen(t, lab, collectorPort)
	d := startDaemon(t, lab, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", "1000", "-ports", "p1,p2", "-polling", "1")
	d.waitReady(t, lab, "p1", "p2")

	// Two polls of p1 while the lab is silent: the last equals the kernel.
	col.waitFor(t, 5*time.Second, "two counter samples of p1", func(dgs []datagram) bool {
		return len(counterSamplesOf(dgs, p1ds)) >= 2
	})
	s0 := lab.LinkStats(t, lab.Switch, "p1")
	dgs := col.snapshot(t)
	c0 := counterSamplesOf(dgs, p1ds)
	checkIfCounters(t, "before traffic", c0[len(c0)-1], s0)

	const f, g = 5000, 3000 // multiples of 100
	sendNumbered(t, lab, 0, 1, 1, f)
	// p1's transmit side: frames host2 sends to an unknown MAC, which the
	// bridge floods out of p1. Host1 receives them through the shared
	// per-CPU backlog, so they go in small paced batches.
	for i := 0; i < g; i += 100 {
		lab.SendFrames(t, 1, floodFrames(lab, 1, 0, uint64(i+1), 100))
		time.Sleep(2 * time.Millisecond)
	}
	sent := time.Now()
	// The second poll received after the traffic was taken at least one
	// polling interval after the first, so after the traffic.
	dgs = col.waitFor(t, 5*time.Second, "two counter samples of p1 after the traffic", func(dgs []datagram) bool {
		n := 0
		for _, c := range counterSamplesOf(dgs, p1ds) {
			if c.at.After(sent) {
				n++
			}
		}
		return n >= 2
	})
	s1 := lab.LinkStats(t, lab.Switch, "p1")
	// A frame the peer's backlog refused counts in tx_dropped, not
	// tx_packets; the if_counters must match the kernel either way.
	if s1.RxPackets-s0.RxPackets != f || s1.TxPackets+s1.TxDropped-s0.TxPackets-s0.TxDropped != g {
		t.Fatalf("kernel: p1 rx +%d tx +%d (dropped +%d), sent %d and %d (lab not quiet?)",
			s1.RxPackets-s0.RxPackets, s1.TxPackets-s0.TxPackets, s1.TxDropped-s0.TxDropped, f, g)
	}
	var c1 counterRec
	var c1dg datagram
	n := 0
	for _, dg := range dgs {
		if cs := counterSamplesOf([]datagram{dg}, p1ds); len(cs) > 0 && dg.at.After(sent) {
			if n++; n == 2 {
				c1, c1dg = cs[0], dg
				break
			}
		}
	}
	checkIfCounters(t, "after traffic", c1, s1)
	// port_name (0:1005), as the host agent sends it: the interface name.
	var names []string
	for _, r := range c1.records {
		if v, ok := r.(*sflow.PortName); ok {
			names = append(names, v.PortName)
		}
	}
	if len(names) != 1 || names[0] != "p1" {
		t.Errorf("port_name records of p1: %q, want [\"p1\"]", names)
	}

	// Independent decoders on the same datagram.
	ifc := ifCountersOf(t, c1)
	var gf *goflow.IfCounters
	for _, s := range c1dg.gf.Samples {
		if cs, ok := s.(goflow.CounterSample); ok && cs.Header.SourceIdType == 0 && cs.Header.SourceIdValue == p1 {
			for _, r := range cs.Records {
				if v, ok := r.Data.(goflow.IfCounters); ok {
					gf = &v
				}
			}
		}
	}
	if gf == nil {
		t.Fatal("goflow2 finds no if_counters of p1 in the datagram")
	}
	if gf.IfIndex != p1 || gf.IfInOctets != ifc.IfInOctets || gf.IfOutOctets != ifc.IfOutOctets ||
		gf.IfInUcastPkts != ifc.IfInUcastPkts || gf.IfOutUcastPkts != ifc.IfOutUcastPkts || gf.IfSpeed != ifc.IfSpeed || gf.IfStatus != ifc.IfStatus {
		t.Errorf("goflow2 if_counters %+v, our decoder %+v", *gf, *ifc)
	}
	rows := tsharkFields(t, []datagram{c1dg}, collectorPort, "sflow_245.ifindex", "sflow_245.ifinoct", "sflow_245.ifoutoct", "sflow_245.ifinpkt", "sflow_245.ifoutpkt")
	found := false
	r := rows[0]
	for i, idx := range r["sflow_245.ifindex"] {
		if idx != strconv.FormatUint(uint64(p1), 10) {
			continue
		}
		found = true
		got := []string{r["sflow_245.ifinoct"][i], r["sflow_245.ifoutoct"][i], r["sflow_245.ifinpkt"][i], r["sflow_245.ifoutpkt"][i]}
		want := []string{fmt.Sprint(s1.RxBytes), fmt.Sprint(s1.TxBytes), fmt.Sprint(s1.RxPackets), fmt.Sprint(s1.TxPackets)}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("tshark: p1 in/out octets, in/out packets %v, kernel %v", got, want)
		}
	}
	if !found {
		t.Errorf("tshark finds no if_counters of p1: %v", r)
	}

	checkHostCounters(t, dgs, lab)
	checkDatagramSequences(t, dgs)
	checkSampleSequences(t, dgs)
}

func ifCountersOf(t *testing.T, c counterRec) *sflow.IfCounters {
	t.Helper()
	for _, r := range c.records {
		if v, ok := r.(*sflow.IfCounters); ok {
			return v
		}
	}
	t.Fatalf("counter sample %d of %s has no if_counters", c.seq, c.source)
	return nil
}

// checkIfCounters compares an if_counters record with kernel statistics.
// The lab's frames are unicast; ifInMulticastPkts is "unavailable" on veth
// (the driver keeps no multicast count) and tx_packets is reported in
// ifOutUcastPkts.
func checkIfCounters(t *testing.T, when string, c counterRec, s netlink.LinkStatistics) {
	t.Helper()
	ifc := ifCountersOf(t, c)
	inPkts := uint64(ifc.IfInUcastPkts)
	if ifc.IfInMulticastPkts != sflow.CounterUnavailable32 { // veth keeps no multicast count
		inPkts += uint64(ifc.IfInMulticastPkts)
	}
	got := [4]uint64{ifc.IfInOctets, inPkts, ifc.IfOutOctets, uint64(ifc.IfOutUcastPkts)}
	want := [4]uint64{s.RxBytes, s.RxPackets, s.TxBytes, s.TxPackets}
	if got != want {
		t.Errorf("%s: p1 if_counters in octets/packets, out octets/packets %v, kernel %v", when, got, want)
	}
	if ifc.IfStatus != 3 {
		t.Errorf("%s: if_status %d, want 3 (admin and oper up)", when, ifc.IfStatus)
	}
	if ifc.IfInErrors != 0 || ifc.IfInDiscards != uint32(s.RxDropped) {
		t.Errorf("%s: in errors %d discards %d, kernel %d %d", when, ifc.IfInErrors, ifc.IfInDiscards, s.RxErrors, s.RxDropped)
	}
}

// checkHostCounters checks the last host counter sample (data source 2:1)
// against this machine: hostname, MemTotal and the number of CPUs.
func checkHostCounters(t *testing.T, dgs []datagram, lab *netlab.Lab) {
	t.Helper()
	hs := counterSamplesOf(dgs, sflow.DataSource{Type: sflow.SourceEntPhysicalEntry, Index: 1})
	if len(hs) == 0 {
		t.Fatal("no host counter sample (data source 2:1)")
	}
	var descr *sflow.HostDescr
	var mem *sflow.HostMemory
	var cpu *sflow.HostCPU
	var adapters *sflow.HostAdapters
	for _, r := range hs[len(hs)-1].records {
		switch v := r.(type) {
		case *sflow.HostDescr:
			descr = v
		case *sflow.HostMemory:
			mem = v
		case *sflow.HostCPU:
			cpu = v
		case *sflow.HostAdapters:
			adapters = v
		}
	}
	if descr == nil || mem == nil || cpu == nil {
		t.Fatalf("host counter sample lacks host_descr (%v), host_memory (%v) or host_cpu (%v)", descr != nil, mem != nil, cpu != nil)
	}
	if h, err := os.Hostname(); err != nil || descr.Hostname != h {
		t.Errorf("host_descr hostname %q, machine %q (%v)", descr.Hostname, h, err)
	}
	if want := procMeminfo(t, "MemTotal") * 1024; mem.MemTotal != want {
		t.Errorf("host_memory mem_total %d, /proc/meminfo %d", mem.MemTotal, want)
	}
	if mem.MemFree == 0 || mem.MemFree > mem.MemTotal {
		t.Errorf("host_memory mem_free %d implausible (total %d)", mem.MemFree, mem.MemTotal)
	}
	if want := procStatCPUs(t); cpu.CPUNum != want {
		t.Errorf("host_cpu cpu_num %d, /proc/stat lists %d CPUs", cpu.CPUNum, want)
	}
	if cpu.Uptime == 0 {
		t.Errorf("host_cpu uptime 0")
	}
	if adapters != nil {
		p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
		ok := false
		for _, a := range adapters.Adapters {
			if a.IfIndex == p1 && len(a.MACAddresses) == 1 && bytes.Equal(a.MACAddresses[0][:], netlab.PortMAC(1)) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("host_adapters %+v lacks p1 (ifindex %d, MAC %s)", adapters.Adapters, p1, netlab.PortMAC(1))
		}
	}
}

// procMeminfo reads a /proc/meminfo value in kB.
func procMeminfo(t *testing.T, key string) uint64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == key+":" {
			v, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("/proc/meminfo has no %s", key)
	return 0
}

// procStatCPUs counts the "cpuN" lines of /proc/stat.
func procStatCPUs(t *testing.T) uint32 {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	var n uint32
	for _, line := range strings.Split(string(b), "\n") {
		if len(line) > 3 && strings.HasPrefix(line, "cpu") && line[3] >= '0' && line[3] <= '9' {
			n++
		}
	}
	return n
}
