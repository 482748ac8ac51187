package host

import (
	"bufio"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// The tests in this file read the running machine's /proc and /sys and
// compare with values the test reads independently (plain line parsing
// with strings/strconv, not the package's parsers).

func procFields(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	var lines [][]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, strings.Fields(sc.Text()))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return lines
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimSuffix(s, ":"), 10, 64)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return v
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return v
}

// netTotals sums /proc/net/dev over non-loopback interfaces: rx bytes,
// tx bytes.
func netTotals(t *testing.T) (rx, tx uint64) {
	for _, f := range procFields(t, "/proc/net/dev")[2:] {
		line := strings.Join(f, " ")
		name, rest, _ := strings.Cut(line, ":")
		if strings.TrimSpace(name) == "lo" {
			continue
		}
		cols := strings.Fields(rest)
		rx += mustUint(t, cols[0])
		tx += mustUint(t, cols[8])
	}
	return rx, tx
}

func newRealReader(t testing.TB) *Reader {
	r := New(Options{})
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

func TestRealMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		testskip.Skip(t, "reads Linux /proc")
	}
	// Independent readings taken before the poll: every counter read by
	// the poll must be at least these.
	loadFields := procFields(t, "/proc/loadavg")[0]
	statLines := procFields(t, "/proc/stat")
	upBefore := mustFloat(t, procFields(t, "/proc/uptime")[0][0])
	rxBefore, txBefore := netTotals(t)
	readsBefore, sectorsBefore := diskTotals(t)
	var memTotalKB uint64
	var cpuLines int
	var userTicks, ctxtBefore uint64
	for _, f := range procFields(t, "/proc/meminfo") {
		if f[0] == "MemTotal:" {
			memTotalKB = mustUint(t, f[1])
		}
	}
	for _, f := range statLines {
		switch {
		case f[0] == "cpu":
			userTicks = mustUint(t, f[1])
		case strings.HasPrefix(f[0], "cpu"):
			cpuLines++
		case f[0] == "ctxt":
			ctxtBefore = mustUint(t, f[1])
		}
	}

	r := newRealReader(t)
	recs, err := r.AppendRecords(nil)
	if err != nil {
		t.Fatalf("AppendRecords on this machine: %v", err)
	}
	got := gotRecords(t, recs)

	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	if got.descr.Hostname != host {
		t.Errorf("hostname = %q, os.Hostname = %q", got.descr.Hostname, host)
	}
	var uts syscall.Utsname
	if err := syscall.Uname(&uts); err != nil {
		t.Fatal(err)
	}
	var rel []byte
	for _, c := range uts.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	if got.descr.OSRelease != string(rel) {
		t.Errorf("os_release = %q, uname -r = %q", got.descr.OSRelease, rel)
	}
	if got.descr.OSName != sflow.OSNameLinux {
		t.Errorf("os_name = %d", got.descr.OSName)
	}
	if runtime.GOARCH == "amd64" && got.descr.MachineType != sflow.MachineTypeX86_64 {
		t.Errorf("machine_type = %d on amd64", got.descr.MachineType)
	}
	if b, err := os.ReadFile("/etc/machine-id"); err == nil {
		if _, err := os.Stat("/sys/class/dmi/id/product_uuid"); os.IsNotExist(err) {
			id := strings.TrimSpace(string(b))
			if hexUUID := hex.EncodeToString(got.descr.UUID[:]); hexUUID != id {
				t.Errorf("uuid = %s, /etc/machine-id = %s", hexUUID, id)
			}
		}
	}

	// host_cpu
	c := got.cpu
	for i, l := range []float32{c.LoadOne, c.LoadFive, c.LoadFifteen} {
		if want := mustFloat(t, loadFields[i]); math.Abs(float64(l)-want) > 0.5 {
			t.Errorf("load[%d] = %v, /proc/loadavg said %v", i, l, want)
		}
	}
	// runtime.NumCPU counts the CPUs of the affinity mask, at most all.
	if int(c.CPUNum) != cpuLines || int(c.CPUNum) < runtime.NumCPU() {
		t.Errorf("cpu_num = %d, /proc/stat has %d cpuN lines, NumCPU %d", c.CPUNum, cpuLines, runtime.NumCPU())
	}
	if d := float64(c.Uptime) - upBefore; d < -1 || d > 2 {
		t.Errorf("uptime = %d, /proc/uptime said %.2f", c.Uptime, upBefore)
	}
	if uint64(c.CPUUser) < userTicks*10 {
		t.Errorf("cpu_user = %d ms, /proc/stat said %d ticks before", c.CPUUser, userTicks)
	}
	if uint64(c.Contexts) < ctxtBefore&0xffffffff {
		t.Errorf("contexts = %d, /proc/stat said %d before", c.Contexts, ctxtBefore)
	}
	if c.ProcRun == 0 || c.ProcTotal < c.ProcRun {
		t.Errorf("proc_run %d proc_total %d", c.ProcRun, c.ProcTotal)
	}
	if c.CPUSteal == sflow.CounterUnavailable32 || c.CPUGuestNice == sflow.CounterUnavailable32 {
		t.Errorf("steal/guest_nice unavailable on a modern kernel")
	}

	// host_memory
	if got.memory.MemTotal != memTotalKB*1024 {
		t.Errorf("mem_total = %d, MemTotal*1024 = %d", got.memory.MemTotal, memTotalKB*1024)
	}
	if got.memory.MemFree > got.memory.MemTotal || got.memory.PageIn == sflow.CounterUnavailable32 {
		t.Errorf("host_memory implausible: %+v", got.memory)
	}

	// host_net_io
	if got.net.BytesIn < rxBefore || got.net.BytesOut < txBefore {
		t.Errorf("net bytes in/out = %d/%d, /proc/net/dev said %d/%d before", got.net.BytesIn, got.net.BytesOut, rxBefore, txBefore)
	}

	checkRealDisk(t, got.disk, readsBefore, sectorsBefore)
}

// checkRealDisk compares host_disk_io with statfs of the root filesystem
// and with the reads and sectors of /proc/diskstats the test read before
// the poll (diskTotals): counters only grow, so the poll's must be at
// least those. (Read after the poll, any disk read in between made the
// test fail on a busy machine.)
func checkRealDisk(t *testing.T, d sflow.HostDiskIO, reads, sectors uint64) {
	t.Helper()
	var rootDev string
	for _, f := range procFields(t, "/proc/self/mounts") {
		if f[1] == "/" {
			rootDev = f[0]
		}
	}
	if strings.HasPrefix(rootDev, "/dev/") && !strings.HasPrefix(rootDev, "/dev/loop") {
		var st syscall.Statfs_t
		if err := syscall.Statfs("/", &st); err != nil {
			t.Fatal(err)
		}
		if total := st.Blocks * uint64(st.Frsize); d.DiskTotal < total {
			t.Errorf("disk_total = %d, less than / alone (%d)", d.DiskTotal, total)
		}
		if d.PartMaxUsed < 0 || d.PartMaxUsed > 10000 {
			t.Errorf("part_max_used = %d", d.PartMaxUsed)
		}
		if d.DiskFree > d.DiskTotal {
			t.Errorf("disk_free %d > disk_total %d", d.DiskFree, d.DiskTotal)
		}
	}
	if uint64(d.Reads) < reads&0xffffffff || d.BytesRead < sectors*512 {
		t.Errorf("disk reads %d bytes_read %d, /proc/diskstats said %d, %d bytes before", d.Reads, d.BytesRead, reads, sectors*512)
	}
}

// diskTotals sums reads and sectors read of the whole, unstacked,
// non-loop disks, by the test's own reading of sysfs and /proc/diskstats.
func diskTotals(t *testing.T) (reads, sectors uint64) {
	t.Helper()
	for _, f := range procFields(t, "/proc/diskstats") {
		name := strings.ReplaceAll(f[2], "/", "!")
		if _, err := os.Stat(filepath.Join("/sys/block", name)); err != nil || strings.HasPrefix(name, "loop") {
			continue
		}
		if slaves, _ := os.ReadDir(filepath.Join("/sys/block", name, "slaves")); len(slaves) > 0 {
			continue
		}
		reads += mustUint(t, f[3])
		sectors += mustUint(t, f[5])
	}
	return reads, sectors
}

// TestRealMachineRereads polls twice, more than a second apart: the
// kernel files kept open must show new values (uptime and CPU time move).
func TestRealMachineRereads(t *testing.T) {
	r := newRealReader(t)
	recs, err := r.AppendRecords(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := recs[2].(*sflow.HostCPU)
	up1 := c.Uptime
	total1 := uint64(c.CPUUser) + uint64(c.CPUNice) + uint64(c.CPUSystem) + uint64(c.CPUIdle) + uint64(c.CPUWio) + uint64(c.CPUIntr) + uint64(c.CPUSintr)
	time.Sleep(1100 * time.Millisecond)
	if _, err := r.AppendRecords(recs[:0]); err != nil {
		t.Fatal(err)
	}
	total2 := uint64(c.CPUUser) + uint64(c.CPUNice) + uint64(c.CPUSystem) + uint64(c.CPUIdle) + uint64(c.CPUWio) + uint64(c.CPUIntr) + uint64(c.CPUSintr)
	if c.Uptime < up1+1 {
		t.Errorf("uptime %d then %d after 1.1 s", up1, c.Uptime)
	}
	// 1.1 s on at least one CPU is at least 1000 ms of CPU time.
	if total2 < total1+1000 {
		t.Errorf("cpu time %d ms then %d ms after 1.1 s", total1, total2)
	}
}

// BenchmarkAppendRecords measures one poll of the real machine.
func BenchmarkAppendRecords(b *testing.B) {
	r := newRealReader(b)
	adapters := []Adapter{{IfIndex: 2, MACs: [][6]byte{{2, 0, 0, 0, 0, 2}}}, {IfIndex: 3, MACs: [][6]byte{{2, 0, 0, 0, 0, 3}}}}
	r.opts.Adapters = func() []Adapter { return adapters }
	recs := make([]sflow.Record, 0, 8)
	var err error
	if recs, err = r.AppendRecords(recs[:0]); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if recs, err = r.AppendRecords(recs[:0]); err != nil {
			b.Fatal(err)
		}
	}
}
