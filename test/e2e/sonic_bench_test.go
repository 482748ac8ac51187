package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/redistest"
)

// sonicScalePorts is BenchmarkSonicScale's port count: a 512-port switch.
const sonicScalePorts = 512

// BenchmarkSonicScale measures SONiC mode, with the packaged
// configuration (deploy/sonic/sflowswitchd-sonic.conf), on a 512-port switch (its Redis
// content in SONiC's schema; the ports need no netdev: SONiC mode reports
// the ports Redis lists, the netdevs only number psample's samples), each
// iteration a fresh Redis and daemon, polling_interval 5 s (SONiC's
// minimum):
//
//   - ready-to-all-s: from SYSTEM_READY's HSET to a counter sample of
//     every port received;
//   - rss-MiB, hwm-MiB: the daemon's VmRSS and VmHWM then;
//   - collector-ms: from a collector's HSET to hsflowd.auto naming it (the
//     configuration applied); first-dg-ms: to its first datagram.
func BenchmarkSonicScale(b *testing.B) {
	var ready, rss, hwm, change, first float64
	for range b.N {
		r := benchSonicOnce(b)
		ready += r[0]
		rss += r[1]
		hwm += r[2]
		change += r[3]
		first += r[4]
	}
	n := float64(b.N)
	b.ReportMetric(ready/n, "ready-to-all-s")
	b.ReportMetric(rss/n, "rss-MiB")
	b.ReportMetric(hwm/n, "hwm-MiB")
	b.ReportMetric(change/n, "collector-ms")
	b.ReportMetric(first/n, "first-dg-ms")
	b.ReportMetric(0, "ns/op")
}

func benchSonicOnce(b *testing.B) [5]float64 {
	b.StopTimer()
	lab := netlab.New(b, 1)
	srv := redistest.Start(b)
	redistest.Fixture{
		Ports: sonicScalePorts,
		LAG:   "PortChannel9001", Members: []string{"Ethernet0", "Ethernet4"}, // PortChannel0001 would be 1001, Ethernet1000's ifIndex by port_util's rule
		Collectors: map[string][]string{"col1": {"collector_ip", lab.CollectorAddr.String(), "collector_port", "6343"}},
		Global:     []string{"admin_state", "up", "polling_interval", "5", "agent_id", "mgmt0"},
		MAC:        "52:54:00:12:34:56",
	}.Write(srv)
	dir := b.TempDir()
	auto := filepath.Join(dir, "hsflowd.auto")
	cfg := filepath.Join(dir, "sflowswitchd.conf")
	// The packaged SONiC configuration, its paths the test's.
	shipped, err := os.ReadFile(filepath.Join("..", "..", "deploy", "sonic", "sflowswitchd-sonic.conf"))
	if err != nil {
		b.Fatal(err)
	}
	conf := strings.NewReplacer(`"/var/run/redis/sonic-db/database_config.json"`, fmt.Sprintf("%q", srv.DBConfig),
		`"/etc/hsflowd.auto"`, fmt.Sprintf("%q", auto), `"/var/lib/sflowswitchd"`, fmt.Sprintf("%q", dir)).Replace(string(shipped))
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	c1 := &collector{port: 6343, done: make(chan struct{}), conn: collectorSocket(b, lab, 6343)}
	go c1.read()
	b.Cleanup(c1.close)
	d := startDaemon(b, lab, "-config", cfg)
	// The configuration is applied before SYSTEM_READY: hsflowd.auto
	// names the collector while no port is reported.
	waitFileB(b, auto, 30*time.Second, func(s string) bool { return strings.Contains(s, "collector=") })
	b.StartTimer()
	start := time.Now()
	srv.HSet(redistest.StateDB, "SYSTEM_READY|SYSTEM_STATE", "Status", "UP")
	want := sonicScalePorts + 1 // and the LAG
	deadline := start.Add(60 * time.Second)
	var readyS float64
	for {
		if n := len(polledSources(c1.snapshot(b))); n >= want {
			readyS = time.Since(start).Seconds()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("not every port polled within 60 s: %d of %d", len(polledSources(c1.snapshot(b))), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.StopTimer()
	// When each port's first counter sample arrived, by 100 ms.
	hist := map[int]int{}
	seen := map[uint32]bool{}
	for _, dg := range c1.snapshot(b) {
		for idx := range polledSources([]datagram{dg}) {
			if !seen[idx] {
				seen[idx] = true
				hist[int(dg.at.Sub(start)/(100*time.Millisecond))]++
			}
		}
	}
	b.Logf("first counter samples by 100 ms after SYSTEM_READY: %v", hist)
	rss, hwm := procMem(b, d.cmd.Process.Pid)
	c2 := &collector{port: 6350, done: make(chan struct{}), conn: collectorSocket(b, lab, 6350)}
	go c2.read()
	b.Cleanup(c2.close)
	at := time.Now()
	srv.HSet(redistest.ConfigDB, "SFLOW_COLLECTOR|col2", "collector_ip", lab.CollectorAddr.String(), "collector_port", "6350")
	waitFileB(b, auto, 10*time.Second, func(s string) bool { return strings.Contains(s, lab.CollectorAddr.String()+" 6350") })
	changeMS := float64(time.Since(at).Microseconds()) / 1000
	for len(c2.snapshot(b)) == 0 {
		if time.Since(at) > 20*time.Second {
			b.Fatal("no datagram at the new collector within 20 s")
		}
		time.Sleep(time.Millisecond)
	}
	firstMS := float64(time.Since(at).Microseconds()) / 1000
	b.Logf("512 ports: all polled %.2f s after SYSTEM_READY; RSS %.1f MiB (peak %.1f); collector applied in %.1f ms, first datagram in %.0f ms",
		readyS, rss, hwm, changeMS, firstMS)
	d.stop(b)
	return [5]float64{readyS, rss, hwm, changeMS, firstMS}
}

// procMem reads pid's VmRSS and VmHWM in MiB.
func procMem(tb testing.TB, pid int) (rss, hwm float64) {
	tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = v / 1024
		case "VmHWM:":
			hwm = v / 1024
		}
	}
	return rss, hwm
}

// waitFileB waits up to d for the file at path to satisfy ok.
func waitFileB(tb testing.TB, path string, d time.Duration, ok func(string) bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		raw, _ := os.ReadFile(path) // absent until written
		if ok(string(raw)) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s after %v:\n%s", path, d, raw)
		}
		time.Sleep(time.Millisecond)
	}
}
