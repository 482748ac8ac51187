package e2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/snmptest"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/xdptest"
)

// scalePorts is the port count of BenchmarkScale (at least 1000
// sampled ports).
const scalePorts = 1000

// BenchmarkScale measures the daemon with 1000 sampled ports (lab.sh
// scale: veth pairs in namespaces), with ordinary ifindexes and with
// ifindexes from 100000 (the XDP program's hash map), each iteration a
// fresh daemon (bench/scale.sh; figures in bench/README.md):
//
//   - start-s: from exec to all 1000 ports attached and in the metrics;
//   - rss-MiB: the daemon's VmRSS after start-up and the SNMP walks
//     (hwm-MiB: its peak, VmHWM);
//   - walk-s: a full GETBULK walk of the SFLOW-MIB (snmpbulkwalk
//     -Cr50, net-snmp snmpd as AgentX master), median of 3;
//   - ns-1port, ns-first, ns-last: the XDP program's per-frame cost
//     (BPF_PROG_TEST_RUN, 2^20 runs, median of 5) on an unsampled path
//     with one port configured, and with 1000 configured on the first
//     and on the last port.
func BenchmarkScale(b *testing.B) {
	for _, first := range []int{0, 100000} {
		b.Run("first-ifindex="+strconv.Itoa(first), func(b *testing.B) { benchScale(b, first) })
	}
}

func benchScale(b *testing.B, first int) {
	lab := netlab.NewScale(b, scalePorts, first)
	idx := func(i int) int { return lab.LinkIndex(lab.Switch, fmt.Sprintf("s%d", i)) }
	// Per-frame cost with one port configured, on an in-process Dataplane.
	var one float64
	if err := lab.Do(lab.Switch, func() error {
		dp, err := dataplane.Open(dataplane.Config{Workers: 1, MaxPorts: 2, Hook: dataplane.HookXDP}) // the XDP program's cost, as before the TC hook
		if err != nil {
			return err
		}
		defer dp.Close()
		if err := dp.AttachPort(idx(1), dataplane.PortConfig{Rate: 1024, HeaderBytes: 128}); err != nil {
			return err
		}
		one, err = progCost(lab, "s1", idx(1))
		return err
	}); err != nil {
		b.Fatal(err)
	}

	snmpd := snmptest.Start(b, snmptest.Options{})
	var starts, rss, hwm, walks, firstNs, lastNs []float64
	varbinds := 0
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		cmd := lab.Start(b, lab.Switch, daemonBin, "-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
			"-ports", "s*", "-sampling", "1000", "-max-ports", "1024", "-metrics", metricsAddr, "-agentx", "unix:"+snmpd.SocketPath,
			"-hook", "xdp") // progCost runs the ports' XDP programs
		for {
			m, err := fetchMetrics(lab)
			if err == nil && m.count("sflowswitchd_port_sampling_rate") == scalePorts {
				break
			}
			if time.Since(t0) > time.Minute {
				b.Fatalf("not all %d ports sampled after 1 min (metrics: %v)", scalePorts, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		starts = append(starts, time.Since(t0).Seconds())
		// The walk starts once the MIB is registered (AgentX retries).
		var ws []float64
		for len(ws) < 3 {
			w0 := time.Now()
			out, err := snmpd.Tool("snmpbulkwalk", "-v2c", "-c", "private", "-Cr50", "-On", "-t", "5", snmpd.UDPAddr, ".1.3.6.1.4.1.14706")
			d := time.Since(w0).Seconds()
			n := strings.Count(out, "\n")
			if err != nil || n < scalePorts*15 {
				if time.Since(t0) > time.Minute {
					b.Fatalf("snmpbulkwalk: %v, %d lines\n%.2000s", err, n, out)
				}
				time.Sleep(200 * time.Millisecond)
				continue
			}
			varbinds = n
			ws = append(ws, d)
		}
		walks = append(walks, median(ws))
		r, h := procRSS(b, cmd.Process.Pid)
		rss, hwm = append(rss, r), append(hwm, h)
		f, err := progCost(lab, "s1", idx(1))
		if err != nil {
			b.Fatal(err)
		}
		l, err := progCost(lab, fmt.Sprintf("s%d", scalePorts), idx(scalePorts))
		if err != nil {
			b.Fatal(err)
		}
		firstNs, lastNs = append(firstNs, f), append(lastNs, l)
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			b.Fatal(err)
		}
		_ = cmd.Wait()
	}
	b.Logf("ifindexes %d..%d: start %v s, rss %v MiB, hwm %v MiB, walk %v s (%d varbinds), ns/frame 1 port %.1f, 1000 ports first %v last %v",
		idx(1), idx(scalePorts), starts, rss, hwm, walks, varbinds, one, firstNs, lastNs)
	b.ReportMetric(median(starts), "start-s")
	b.ReportMetric(median(rss), "rss-MiB")
	b.ReportMetric(median(hwm), "hwm-MiB")
	b.ReportMetric(median(walks), "walk-s")
	b.ReportMetric(float64(varbinds), "varbinds")
	b.ReportMetric(one, "ns-1port")
	b.ReportMetric(median(firstNs), "ns-first")
	b.ReportMetric(median(lastNs), "ns-last")
}

// count returns how many series metric name has.
func (m metrics) count(name string) int {
	n := 0
	for _, line := range m {
		if strings.HasPrefix(line, name+"{") {
			n++
		}
	}
	return n
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// procRSS returns VmRSS and VmHWM of pid in MiB.
func procRSS(b *testing.B, pid int) (rss, hwm float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			hwm = kb / 1024
		}
	}
	return rss, hwm
}

// progCost runs the XDP program attached to port name (ifindex idx) in the
// lab's switch namespace with BPF_PROG_TEST_RUN on a 64-byte frame
// received on that port, 2^20 times, 5 times, and returns the median of
// the kernel's mean ns per run.
func progCost(lab *netlab.Lab, name string, idx int) (float64, error) {
	var runs []float64
	err := netnsutil.DoNamed(lab.Switch, func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		if l.Attrs().Xdp == nil || l.Attrs().Xdp.ProgId == 0 {
			return fmt.Errorf("no XDP program on %s", name)
		}
		prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(l.Attrs().Xdp.ProgId))
		if err != nil {
			return err
		}
		defer prog.Close()
		frame := make([]byte, 64)
		copy(frame, []byte{0x02, 0, 0, 0xff, 0xff, 0x01, 0x02, 0, 0, 0x0a, 0, 1, 0x08, 0x00})
		ctx := xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: uint32(idx)}
		for range 5 {
			d, err := testRun(prog, frame, &ctx, 1<<20)
			if err != nil {
				return err
			}
			runs = append(runs, float64(d))
		}
		return nil
	})
	return median(runs), err
}

// xdpMD is struct xdp_md, the context of an XDP test run.
type xdpMD = xdptest.MD

// testRun is BPF_PROG_TEST_RUN with a context; it returns the kernel's
// mean duration per run in ns.
func testRun(prog *ebpf.Program, data []byte, ctx *xdpMD, repeat uint32) (uint32, error) {
	_, d, err := xdptest.Run(prog, data, ctx, repeat)
	return d, err
}
