// Package drops benchmarks dropped-packet notifications in
// namespace labs (internal/testkit/netlab), as root:
//
//	go test -run '^$' -bench . -benchtime 15x ./bench/drops/
//
// BenchmarkDropsForwarding: the bridge's forwarding rate with the drop
// program attached (nothing dropped in the switch's namespace) against
// without it, alternating 1 s windows, one pair per iteration.
// BenchmarkDropsFlood: the real daemon under a flood of drops.
// BenchmarkDropCost: the kernel's cost per drop before/after the header
// copy of paged bytes (needs DROPS_A, the earlier object:
//
//	git show 1f795a9:dataplane/bpf/drops_bpfel.o > /tmp/drops_a.o
//	DROPS_A=/tmp/drops_a.o go test -run '^$' -bench DropCost -benchtime 8x ./bench/drops/
//
// ). Figures are recorded in bench/README.md.
package drops

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/drops"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// trafgen sends one frame as fast as it can (or as extra arguments, e.g.
// "-t", "20us", say) out of eth0 of ns until stop.
type trafgen struct {
	cmd  *exec.Cmd
	conf string
}

func startTrafgen(b *testing.B, ns string, frame []byte, extra ...string) *trafgen {
	b.Helper()
	var sb strings.Builder
	sb.WriteString("{ ")
	for i, c := range frame {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "0x%02x", c)
	}
	sb.WriteString(" }\n")
	conf := filepath.Join(b.TempDir(), "frame.cfg")
	if err := os.WriteFile(conf, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	args := append([]string{"-c", "1", "trafgen", "--dev", "eth0", "--conf", conf, "--cpus", "1", "--no-sock-mem", "--notouch-irq", "--no-cpu-stats"}, extra...)
	cmd := netnsutil.Command(context.Background(), ns, "taskset", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		b.Fatalf("trafgen: %v", err)
	}
	tg := &trafgen{cmd: cmd, conf: conf}
	b.Cleanup(tg.stop)
	return tg
}

// stop kills trafgen's process group (started by us, by its PID).
func (t *trafgen) stop() {
	if t.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
	_ = t.cmd.Wait() // killed on purpose
}

func txPackets(b *testing.B, lab *netlab.Lab, ns, ifname string) uint64 {
	return lab.LinkStats(b, ns, ifname).TxPackets
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// BenchmarkDropsForwarding: one iteration = a pair of 1 s windows, the
// drop program attached in one and not in the other (order alternating),
// with trafgen in host 1 sending 64-byte UDP frames to host 2 through the
// bridge at its maximum rate. Rate = tx_packets of switch port p2 (frames
// forwarded) per second. Host 2 discards the frames with an XDP_DROP
// program on its eth0; on veth that still frees each skb with kfree_skb
// (reason NOT_SPECIFIED, checked with the program pointed at host 2's
// namespace: one drop per frame), so the program runs once per forwarded
// frame and filters it out by namespace, plus once per drop elsewhere on
// the machine: the reported filtered runs. Nothing is dropped in the
// switch's namespace (a stray packet of its own is logged).
func BenchmarkDropsForwarding(b *testing.B) {
	lab := netlab.New(b, 2)
	ino, err := drops.NetnsInode("/run/netns/" + lab.Switch)
	if err != nil {
		b.Fatal(err)
	}
	// Host 2 speaks once so the bridge forwards to p2 only.
	lab.SendFrames(b, 1, [][]byte{netlab.UDPFrame(lab.HostMACs[1], lab.HostMACs[0],
		netip.AddrPortFrom(lab.HostAddrs[1], 7001), netip.AddrPortFrom(lab.HostAddrs[0], 40001), make([]byte, 18))})
	frame := netlab.UDPFrame(lab.HostMACs[0], lab.HostMACs[1],
		netip.AddrPortFrom(lab.HostAddrs[0], 40000), netip.AddrPortFrom(lab.HostAddrs[1], 7001), make([]byte, 18))
	xdpDrop, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1 /* XDP_DROP */), asm.Return()}})
	if err != nil {
		b.Fatal(err)
	}
	defer xdpDrop.Close()
	if err := lab.Do(lab.Hosts[1], func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		l, err := link.AttachXDP(link.XDPOptions{Program: xdpDrop, Interface: ifi.Index, Flags: link.XDPDriverMode})
		if err != nil {
			return err
		}
		b.Cleanup(func() { l.Close() })
		return nil
	}); err != nil {
		b.Fatalf("XDP_DROP on host 2: %v", err)
	}
	tg := startTrafgen(b, lab.Hosts[0], frame)
	defer tg.stop()
	time.Sleep(time.Second)

	// BPF run-time statistics cost two clock reads per program run, so
	// they are on only in the windows that measure the program (withStats),
	// never in the ratio's.
	withStats := false
	window := func(on bool) (pps, runsPerSec, nsPerRun float64) {
		var d *drops.Drops
		if on {
			var err error
			d, err = drops.Open(drops.Config{Netns: ino, Limit: drops.DefaultLimit, HeaderBytes: drops.DefaultHeaderBytes})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
		}
		time.Sleep(300 * time.Millisecond)
		var s0, s1 *ebpf.ProgramStats
		if on && withStats {
			s0 = mustStats(b, d.Program())
		}
		rx0, t0 := txPackets(b, lab, lab.Switch, "p2"), time.Now()
		time.Sleep(time.Second)
		rx1, el := txPackets(b, lab, lab.Switch, "p2"), time.Since(t0)
		if on && withStats {
			s1 = mustStats(b, d.Program())
			// Nothing of the stream may be dropped in the switch; a stray
			// packet of its own (a few a second) is reported.
			if st, err := d.Stats(); err != nil || st.Drops > 10 {
				rc, _ := d.ReasonCounts()
				b.Fatalf("the switch namespace dropped %d packets (%v): %v", st.Drops, err, rc)
			} else if st.Drops > 0 {
				rc, _ := d.ReasonCounts()
				named := map[string]uint64{}
				for c, v := range rc {
					named[d.ReasonName(c)] = v
				}
				b.Logf("stray drops in the switch namespace during the window: %v", named)
			}
			runs := float64(s1.RunCount - s0.RunCount)
			runsPerSec = runs / el.Seconds()
			if runs > 0 {
				nsPerRun = float64(s1.Runtime-s0.Runtime) / runs
			}
		}
		return float64(rx1-rx0) / el.Seconds(), runsPerSec, nsPerRun
	}
	var ratios, on, off, runs, ns []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var pOn, pOff float64
		if i%2 == 0 {
			pOff, _, _ = window(false)
			pOn, _, _ = window(true)
		} else {
			pOn, _, _ = window(true)
			pOff, _, _ = window(false)
		}
		ratios, on, off = append(ratios, pOn/pOff), append(on, pOn), append(off, pOff)
		b.Logf("round %d (load %s): without %.0f pps, with %.0f pps, ratio %.3f", i, loadavg(), pOff, pOn, pOn/pOff)
	}
	b.StopTimer()
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		b.Fatal(err)
	}
	withStats = true
	// Baseline: an empty tp_btf program on the same tracepoint, measured
	// in the same windows (what bpf_stats reports for doing nothing).
	empty, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "kfree_skb",
		License: "GPL", Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		b.Fatal(err)
	}
	defer empty.Close()
	el, err := link.AttachTracing(link.TracingOptions{Program: empty})
	if err != nil {
		b.Fatal(err)
	}
	var emptyNs []float64
	for i := 0; i < 3; i++ {
		e0 := mustStats(b, empty)
		_, r, n := window(true)
		e1 := mustStats(b, empty)
		en := float64(e1.Runtime-e0.Runtime) / float64(e1.RunCount-e0.RunCount)
		runs, ns, emptyNs = append(runs, r), append(ns, n), append(emptyNs, en)
		b.Logf("program cost window %d: ran %.0f/s (all filtered), %.1f ns/run; empty tp_btf program %.1f ns/run", i, r, n, en)
	}
	el.Close()
	stats.Close()
	b.ReportMetric(median(emptyNs), "ns/empty_run")
	slices.Sort(ratios)
	b.Logf("ratios sorted: %.3f", ratios)
	b.ReportMetric(median(ratios), "ratio")
	b.ReportMetric(median(off), "pps_without")
	b.ReportMetric(median(on), "pps_with")
	b.ReportMetric(median(runs), "filtered_runs/s")
	b.ReportMetric(median(ns), "ns/filtered_run")
}

// buildDaemon builds cmd/sflowswitchd into a temporary directory. It
// builds in the product's module (the repository root, two levels above
// this package): bench/ is a module of its own whose go.sum does not list
// the daemon's dependencies.
func buildDaemon(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "sflowswitchd")
	out, err := exec.Command("go", "-C", filepath.Join("..", ".."), "build", "-o", bin, "./cmd/sflowswitchd").CombinedOutput()
	if err != nil {
		b.Fatalf("building the daemon: %v\n%s", err, out)
	}
	return bin
}

// metrics fetches the daemon's drop metrics inside the switch namespace
// (nil when it does not answer).
func metrics(b *testing.B, lab *netlab.Lab) map[string]float64 {
	var conn net.Conn
	err := lab.Do(lab.Switch, func() error {
		var err error
		conn, err = net.DialTimeout("tcp", "127.0.0.1:9116", 2*time.Second)
		return err
	})
	if err != nil {
		return nil
	}
	defer conn.Close()
	req, _ := http.NewRequest("GET", "http://127.0.0.1:9116/metrics", nil)
	if err := req.Write(conn); err != nil {
		b.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "#") || !strings.Contains(l, "drop") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err == nil {
			m[l[:i]] = v
		}
	}
	return m
}

// cpuTicks returns utime+stime of process pid in clock ticks.
func cpuTicks(b *testing.B, pid int) float64 {
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(s[strings.LastIndexByte(string(s), ')')+2:]))
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return u + st
}

// dropProgram opens the daemon's kfree_skb program: the tracing program
// among the BPF objects process pid holds (its fdinfo), so that another
// process's program of the same name is never measured.
func dropProgram(b *testing.B, pid int) *ebpf.Program {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fdinfo", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, fd := range fds {
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(info), "\n") {
			v, ok := strings.CutPrefix(l, "prog_id:")
			if !ok {
				continue
			}
			id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err != nil {
				continue
			}
			p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
			if err != nil {
				continue
			}
			if pi, err := p.Info(); err == nil && pi.Name == "kfree_skb_drops" {
				return p
			}
			p.Close()
		}
	}
	b.Fatalf("process %d holds no kfree_skb_drops program", pid)
	return nil
}

// BenchmarkDropsFlood: the daemon with its defaults (drop notifications
// on, limit 100/s) in a lab whose switch drops every frame of a trafgen
// flood (nftables rule on p1; the daemon samples only p3, which sees no
// traffic, so that its CPU is the drops' and its idle cost). One
// iteration = a pair of 10 s windows under the same flood, notifications
// on in one and off in the other (config file + SIGHUP, order
// alternating). Reported: drops/s, kernel ns per drop (BPF run-time
// statistics), daemon CPU in % of one core with and without
// notifications, notifications/s. Then the counts must be exact over a
// final flood: the per-reason metric equals the nft rule's counter, and
// notified + suppressed + ring_full = drops.
func BenchmarkDropsFlood(b *testing.B) {
	bin := buildDaemon(b)
	lab := netlab.New(b, 3)
	dl := lab.SetupDrops(b)
	var col net.PacketConn
	if err := lab.Do(lab.Collector, func() error {
		var err error
		col, err = net.ListenPacket("udp4", lab.CollectorAddr.String()+":6343")
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer col.Close()
	var received atomic.Int64
	go func() {
		buf := make([]byte, 65536)
		for {
			if _, _, err := col.ReadFrom(buf); err != nil {
				return
			}
			received.Add(1)
		}
	}()
	conf := filepath.Join(b.TempDir(), "sflowswitchd.conf")
	setDrops := func(mode string) {
		body := fmt.Sprintf("drops = %q\nports = [\"p3\"]\npolling = 0\nagentx = \"off\"\nmetrics = \"127.0.0.1:9116\"\n\n[[collector]]\naddress = \"%s:6343\"\n",
			mode, lab.CollectorAddr)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	setDrops("on")
	d := lab.Start(b, lab.Switch, bin, "-config", conf)
	apply := func(mode string) {
		setDrops(mode)
		if err := d.Process.Signal(syscall.SIGHUP); err != nil {
			b.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
		_, on := metrics(b, lab)["sflowswitchd_switch_dropped_packets_counted_total"]
		if on != (mode == "on") {
			b.Fatalf("drops %s not applied", mode)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for metrics(b, lab)["sflowswitchd_switch_dropped_packets_counted_total"] == 0 && time.Now().Before(deadline) {
		lab.SendFrames(b, 0, dl.ACLFrames(1))
		time.Sleep(200 * time.Millisecond)
	}
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	const hz = 100.0 // USER_HZ
	tg := startTrafgen(b, lab.Hosts[0], dl.ACLFrames(1)[0])
	time.Sleep(2 * time.Second)
	var cpuOn, cpuOff, nsDrop, rate, notif []float64
	window := func(mode string) {
		apply(mode)
		var prog *ebpf.Program
		var s0 *ebpf.ProgramStats
		if mode == "on" {
			prog = dropProgram(b, d.Process.Pid)
			defer prog.Close()
			s0 = mustStats(b, prog)
		}
		m0, c0, nft0, t0 := metrics(b, lab), cpuTicks(b, d.Process.Pid), dl.ACLDropped(b), time.Now()
		time.Sleep(10 * time.Second)
		m1, c1, nft1, el := metrics(b, lab), cpuTicks(b, d.Process.Pid), dl.ACLDropped(b), time.Since(t0)
		cpu := (c1 - c0) / hz / el.Seconds() * 100
		drops := float64(nft1-nft0) / el.Seconds()
		if mode == "off" {
			cpuOff = append(cpuOff, cpu)
			b.Logf("notifications off (load %s): %.0f drops/s, daemon CPU %.2f%% of a core", loadavg(), drops, cpu)
			return
		}
		s1 := mustStats(b, prog)
		runs := float64(s1.RunCount - s0.RunCount)
		ns := float64(s1.Runtime-s0.Runtime) / runs
		n := (m1["sflowswitchd_drop_notifications_sent_total"] - m0["sflowswitchd_drop_notifications_sent_total"]) / el.Seconds()
		cpuOn, nsDrop, rate, notif = append(cpuOn, cpu), append(nsDrop, ns), append(rate, drops), append(notif, n)
		b.Logf("notifications on  (load %s): %.0f drops/s, program %.0f runs/s at %.1f ns/run, daemon CPU %.2f%% of a core, %.1f notifications/s",
			loadavg(), drops, runs/el.Seconds(), ns, cpu, n)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			window("on")
			window("off")
		} else {
			window("off")
			window("on")
		}
	}
	b.StopTimer()
	b.ReportMetric(median(rate), "drops/s")
	b.ReportMetric(median(nsDrop), "ns/drop")
	b.ReportMetric(median(cpuOn), "daemon_cpu_on_%")
	b.ReportMetric(median(cpuOff), "daemon_cpu_off_%")
	b.ReportMetric(median(notif), "notifications/s")

	// Exact counts over a final flood with notifications on.
	tg.stop()
	apply("on")
	base := metrics(b, lab)
	nftBase := dl.ACLDropped(b)
	tg = startTrafgen(b, lab.Hosts[0], dl.ACLFrames(1)[0])
	time.Sleep(5 * time.Second)
	tg.stop()
	time.Sleep(1500 * time.Millisecond)
	m := metrics(b, lab)
	const key = `sflowswitchd_switch_dropped_packets_total{reason="NETFILTER_DROP",sflow_reason="acl"}`
	nft := float64(dl.ACLDropped(b) - nftBase)
	reason := m[key] - base[key]
	out := m[`sflowswitchd_drop_notifications_total{outcome="notified"}`] + m[`sflowswitchd_drop_notifications_total{outcome="suppressed"}`] +
		m[`sflowswitchd_drop_notifications_total{outcome="ring_full"}`]
	counted := m["sflowswitchd_switch_dropped_packets_counted_total"]
	b.Logf("final flood: nft %.0f, NETFILTER_DROP metric %.0f; since the last load: counted %.0f = notified %.0f + suppressed %.0f + ring_full %.0f; datagrams received %d",
		nft, reason, counted, m[`sflowswitchd_drop_notifications_total{outcome="notified"}`], m[`sflowswitchd_drop_notifications_total{outcome="suppressed"}`],
		m[`sflowswitchd_drop_notifications_total{outcome="ring_full"}`], received.Load())
	if reason != nft || out != counted || nft == 0 {
		b.Errorf("counts not exact: nft %.0f vs metric %.0f; outcomes %.0f vs counted %.0f", nft, reason, out, counted)
	}
}

func mustStats(b *testing.B, p *ebpf.Program) *ebpf.ProgramStats {
	s, err := p.Stats()
	if err != nil {
		b.Fatal(err)
	}
	return s
}
