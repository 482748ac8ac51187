package host

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// fixtureRoot is a hand-written /proc, /sys and /etc of a 4-CPU switch.
const fixtureRoot = "testdata/switch"

// fixtureStatfs describes the local filesystems mounted in the fixture's
// proc/self/mounts. Statfs of any other path fails the test: the Reader
// must skip pseudo, network and loop filesystems and duplicate devices.
var fixtureStatfs = map[string]syscall.Statfs_t{
	// 6000000 used of 9500000 usable blocks: 63.157...% -> 6316.
	"/": {Bsize: 4096, Frsize: 4096, Blocks: 10000000, Bfree: 4000000, Bavail: 3500000},
	// 96% used -> 9600, the fullest partition.
	"/srv/data": {Bsize: 4096, Frsize: 4096, Blocks: 50000000, Bfree: 2000000, Bavail: 2000000},
	// Mounted as "/mnt/fast\040disk"; Frsize 0 falls back to Bsize.
	"/mnt/fast disk": {Bsize: 4096, Blocks: 2000000, Bfree: 1000000, Bavail: 1000000},
}

// newFixtureReader returns a Reader over the tree at root whose statfs
// answers from fixtureStatfs.
func newFixtureReader(t *testing.T, root string, adapters func() []Adapter) *Reader {
	t.Helper()
	r := New(Options{
		ProcRoot: filepath.Join(root, "proc"),
		SysRoot:  filepath.Join(root, "sys"),
		EtcRoot:  filepath.Join(root, "etc"),
		Adapters: adapters,
	})
	r.statfs = func(path string, st *syscall.Statfs_t) error {
		v, ok := fixtureStatfs[path]
		if !ok {
			t.Errorf("statfs(%q): not a local filesystem of the fixture", path)
			return syscall.ENOENT
		}
		*st = v
		return nil
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// fixtureRecords are the records the fixture must produce, worked out by
// hand from the files in testdata/switch.
type fixtureRecords struct {
	descr    sflow.HostDescr
	adapters sflow.HostAdapters
	cpu      sflow.HostCPU
	memory   sflow.HostMemory
	disk     sflow.HostDiskIO
	net      sflow.HostNetIO
}

func wantFixture() fixtureRecords {
	return fixtureRecords{
		descr: sflow.HostDescr{
			Hostname:    "switch01",
			UUID:        [16]byte{0x4c, 0x4c, 0x45, 0x44, 0x00, 0x42, 0x35, 0x10, 0x80, 0x51, 0xb7, 0xc0, 0x4f, 0x4b, 0x4e, 0x31},
			MachineType: machineType(runtime.GOARCH),
			OSName:      sflow.OSNameLinux,
			OSRelease:   "6.1.0-18-amd64",
		},
		cpu: sflow.HostCPU{
			LoadOne: 0.52, LoadFive: 1.25, LoadFifteen: 2.07,
			ProcRun: 3, ProcTotal: 412,
			CPUNum:   4,
			CPUSpeed: 2394, // first "cpu MHz": 2394.454
			Uptime:   123456,
			// "cpu  4705 356 584 3699176 2376 0 159 7 11 13", ticks * 10.
			CPUUser: 47050, CPUNice: 3560, CPUSystem: 5840, CPUIdle: 36991760,
			CPUWio: 23760, CPUIntr: 0, CPUSintr: 1590,
			CPUSteal: 70, CPUGuest: 110, CPUGuestNice: 130,
			Interrupts: 4346411,
			Contexts:   13666512,
		},
		memory: sflow.HostMemory{
			MemTotal:   8052948 * 1024,
			MemFree:    1234568 * 1024,
			MemShared:  65536 * 1024,
			MemBuffers: 204800 * 1024,
			MemCached:  3145728 * 1024,
			SwapTotal:  2097148 * 1024,
			SwapFree:   2096124 * 1024,
			PageIn:     8653890,
			PageOut:    15493280,
			SwapIn:     256,
			SwapOut:    1024,
		},
		disk: sflow.HostDiskIO{
			// "/", "/srv/data" and "/mnt/fast disk".
			DiskTotal:   (10000000 + 50000000 + 2000000) * 4096,
			DiskFree:    (3500000 + 2000000 + 1000000) * 4096,
			PartMaxUsed: 9600,
			// Whole disks sda, sdb, nvme0n1 and cciss/c0d0; not the
			// partitions, loop0, dm-0 or md0.
			Reads:        34286 + 1000 + 500000 + 7,
			BytesRead:    (1730778 + 80000 + 64000000 + 56) * 512,
			ReadTime:     12534 + 700 + 90000 + 3,
			Writes:       18705 + 2000 + 250000 + 5,
			BytesWritten: (3098656 + 160000 + 32000000 + 40) * 512,
			WriteTime:    30595 + 1400 + 45000 + 2,
		},
		net: sflow.HostNetIO{
			// eth0, swp1 and swp2; not lo.
			BytesIn:    86754868 + 5000000000 + 100,
			PktsIn:     4016, // 4015 + 2^32 + 1, modulo 2^32
			ErrsIn:     1,
			DropsIn:    2 + 7,
			BytesOut:   343113 + 1000 + 200,
			PacketsOut: 3526 + 10 + 2,
			ErrsOut:    3,
			DropsOut:   4 + 1,
		},
	}
}

// gotRecords checks the order and types of the appended records and
// returns them.
func gotRecords(t *testing.T, recs []sflow.Record) fixtureRecords {
	t.Helper()
	names := make([]string, len(recs))
	for i, rec := range recs {
		names[i] = rec.Name()
	}
	want := "host_descr host_adapters host_cpu host_memory host_disk_io host_net_io"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("records = %s, want %s", got, want)
	}
	return fixtureRecords{
		descr:    *recs[0].(*sflow.HostDescr),
		adapters: *recs[1].(*sflow.HostAdapters),
		cpu:      *recs[2].(*sflow.HostCPU),
		memory:   *recs[3].(*sflow.HostMemory),
		disk:     *recs[4].(*sflow.HostDiskIO),
		net:      *recs[5].(*sflow.HostNetIO),
	}
}

func compareRecords(t *testing.T, got, want fixtureRecords) {
	t.Helper()
	pairs := []struct {
		name      string
		got, want any
	}{
		{"host_descr", got.descr, want.descr},
		{"host_adapters", got.adapters.Adapters, want.adapters.Adapters},
		{"host_cpu", got.cpu, want.cpu},
		{"host_memory", got.memory, want.memory},
		{"host_disk_io", got.disk, want.disk},
		{"host_net_io", got.net, want.net},
	}
	for _, p := range pairs {
		if !reflect.DeepEqual(p.got, p.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", p.name, p.got, p.want)
		}
	}
}

func TestFixtureRecords(t *testing.T) {
	r := newFixtureReader(t, fixtureRoot, nil)
	prefix := []sflow.Record{&sflow.HostParent{}}
	recs, err := r.AppendRecords(prefix)
	if err != nil {
		t.Fatalf("AppendRecords: %v", err)
	}
	if recs[0] != prefix[0] {
		t.Fatalf("AppendRecords did not append to the given slice")
	}
	compareRecords(t, gotRecords(t, recs[1:]), wantFixture())

	// A second poll reuses the same records and yields the same values.
	recs2, err := r.AppendRecords(nil)
	if err != nil {
		t.Fatalf("second AppendRecords: %v", err)
	}
	for i := range recs2 {
		if recs2[i] != recs[i+1] {
			t.Errorf("record %d (%s) is a new struct on the second poll", i, recs2[i].Name())
		}
	}
	compareRecords(t, gotRecords(t, recs2), wantFixture())
}

// copyTree copies the fixture to a temporary directory the test may
// modify.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy fixture: %v", err)
	}
	return dst
}

func TestUUIDFallback(t *testing.T) {
	root := copyTree(t, fixtureRoot)
	// Without the SMBIOS UUID, /etc/machine-id is used.
	if err := os.Remove(filepath.Join(root, "sys/class/dmi/id/product_uuid")); err != nil {
		t.Fatal(err)
	}
	r := newFixtureReader(t, root, nil)
	recs, err := r.AppendRecords(nil)
	if err != nil {
		t.Fatalf("AppendRecords: %v", err)
	}
	want := [16]byte{0x3d, 0x12, 0x19, 0xc7, 0xc4, 0xc5, 0x40, 0x4a, 0xaa, 0x1f, 0x6d, 0x2a, 0x48, 0xad, 0xfd, 0xa4}
	if got := recs[0].(*sflow.HostDescr).UUID; got != want {
		t.Errorf("uuid from machine-id = %x, want %x", got, want)
	}

	// With neither, the UUID is all zeros (unknown), which is no error.
	if err := os.Remove(filepath.Join(root, "etc/machine-id")); err != nil {
		t.Fatal(err)
	}
	r = newFixtureReader(t, root, nil)
	recs, err = r.AppendRecords(nil)
	if err != nil {
		t.Fatalf("AppendRecords without uuid sources: %v", err)
	}
	if got := recs[0].(*sflow.HostDescr).UUID; got != ([16]byte{}) {
		t.Errorf("uuid without sources = %x, want zeros", got)
	}
}

func TestParseUUID(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"4C4C4544-0042-3510-8051-B7C04F4B4E31\n", true},
		{"3d1219c7c4c5404aaa1f6d2a48adfda4\n", true},
		{"00000000-0000-0000-0000-000000000000", false}, // unset by vendor
		{"FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", false},
		{"3d1219c7c4c5404aaa1f6d2a48adfda", false},   // 31 digits
		{"3d1219c7c4c5404aaa1f6d2a48adfda4a", false}, // 33 digits
		{"zz1219c7c4c5404aaa1f6d2a48adfda4", false},
		{"", false},
	} {
		if _, ok := parseUUID([]byte(tc.in)); ok != tc.ok {
			t.Errorf("parseUUID(%q) ok = %v, want %v", tc.in, ok, tc.ok)
		}
	}
}

func TestMachineType(t *testing.T) {
	for arch, want := range map[string]sflow.MachineType{
		"386": sflow.MachineTypeX86, "amd64": sflow.MachineTypeX86_64,
		"arm": sflow.MachineTypeARM, "arm64": sflow.MachineTypeARM,
		"ppc64le": sflow.MachineTypePowerPC, "mips64le": sflow.MachineTypeMIPS,
		"s390x": sflow.MachineTypeS390, "sparc64": sflow.MachineTypeSPARC,
		"riscv64": sflow.MachineTypeOther, "loong64": sflow.MachineTypeOther,
	} {
		if got := machineType(arch); got != want {
			t.Errorf("machineType(%q) = %d, want %d", arch, got, want)
		}
	}
}

func TestAdaptersAreCopied(t *testing.T) {
	in := []Adapter{
		{IfIndex: 3, MACs: [][6]byte{{0x02, 0, 0, 0, 0, 0x03}}},
		{IfIndex: 4, MACs: [][6]byte{{0x02, 0, 0, 0, 0, 0x04}, {0x02, 0, 0, 0, 1, 0x04}}},
		{IfIndex: 5},
	}
	r := newFixtureReader(t, fixtureRoot, func() []Adapter { return in })
	recs, err := r.AppendRecords(nil)
	if err != nil {
		t.Fatalf("AppendRecords: %v", err)
	}
	want := []sflow.HostAdapter{
		{IfIndex: 3, MACAddresses: [][6]byte{{0x02, 0, 0, 0, 0, 0x03}}},
		{IfIndex: 4, MACAddresses: [][6]byte{{0x02, 0, 0, 0, 0, 0x04}, {0x02, 0, 0, 0, 1, 0x04}}},
		{IfIndex: 5},
	}
	got := recs[1].(*sflow.HostAdapters).Adapters
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("adapters = %+v, want %+v", got, want)
	}
	// The record does not alias the daemon's slices.
	in[1].MACs[0][5] = 0xee
	if got[1].MACAddresses[0][5] != 0x04 {
		t.Errorf("host_adapters aliases the Adapters callback's MAC slice")
	}
	// A later poll with fewer adapters shrinks the record.
	in = in[:1]
	recs, err = r.AppendRecords(recs[:0])
	if err != nil {
		t.Fatalf("AppendRecords: %v", err)
	}
	if got := recs[1].(*sflow.HostAdapters).Adapters; !reflect.DeepEqual(got, want[:1]) {
		t.Errorf("adapters after shrink = %+v, want %+v", got, want[:1])
	}
}

// TestRereadsChangedFiles checks that a poll sees the files' current
// content although the Reader keeps them open.
func TestRereadsChangedFiles(t *testing.T) {
	root := copyTree(t, fixtureRoot)
	r := newFixtureReader(t, root, nil)
	if _, err := r.AppendRecords(nil); err != nil {
		t.Fatalf("AppendRecords: %v", err)
	}
	// Rewrite in place (same inode, as procfs does) with a longer text.
	f, err := os.OpenFile(filepath.Join(root, "proc/loadavg"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("10.50 11.25 12.75 17/1412 98999\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := r.AppendRecords(nil)
	if err != nil {
		t.Fatalf("AppendRecords: %v", err)
	}
	c := recs[2].(*sflow.HostCPU)
	if c.LoadOne != 10.5 || c.LoadFive != 11.25 || c.LoadFifteen != 12.75 || c.ProcRun != 17 || c.ProcTotal != 1412 {
		t.Errorf("after rewrite: load %v %v %v procs %d/%d", c.LoadOne, c.LoadFive, c.LoadFifteen, c.ProcRun, c.ProcTotal)
	}
}

// TestLargeFileGrowsBuffer reads a file larger than the initial buffer.
func TestLargeFileGrowsBuffer(t *testing.T) {
	root := copyTree(t, fixtureRoot)
	var b strings.Builder
	b.WriteString("cpu  4705 356 584 3699176 2376 0 159 7 11 13\n")
	for i := 0; i < 300; i++ {
		b.WriteString("cpu" + strings.Repeat("9", 1) + " 1 0 1 1 0 0 0 0 0 0\n")
	}
	b.WriteString("intr 4346411" + strings.Repeat(" 0", 5000) + "\nctxt 13666512\n")
	if b.Len() <= 3*minReadBuf {
		t.Fatalf("test file too small: %d", b.Len())
	}
	if err := os.WriteFile(filepath.Join(root, "proc/stat"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newFixtureReader(t, root, nil)
	recs, err := r.AppendRecords(nil)
	if err != nil {
		t.Fatalf("AppendRecords: %v", err)
	}
	c := recs[2].(*sflow.HostCPU)
	if c.CPUNum != 300 || c.CPUUser != 47050 || c.Interrupts != 4346411 || c.Contexts != 13666512 {
		t.Errorf("large /proc/stat: cpu_num %d cpu_user %d interrupts %d contexts %d", c.CPUNum, c.CPUUser, c.Interrupts, c.Contexts)
	}
}

// unknownCPUTimes is host_cpu with /proc/stat unreadable.
func unknownCPUTimes(c *sflow.HostCPU) {
	u := sflow.CounterUnavailable32
	c.CPUUser, c.CPUNice, c.CPUSystem, c.CPUIdle, c.CPUWio, c.CPUIntr, c.CPUSintr = u, u, u, u, u, u, u
	c.CPUSteal, c.CPUGuest, c.CPUGuestNice, c.Interrupts, c.Contexts = u, u, u, u, u
	c.CPUNum = 0
}

// TestMissingSource removes one source file at a time: AppendRecords must
// still return all six records, with the spec's unknown values in the
// fields that file feeds and every other field as in the full fixture,
// and an error naming the file.
func TestMissingSource(t *testing.T) {
	u32, u64 := sflow.CounterUnavailable32, sflow.CounterUnavailable64
	for _, tc := range []struct {
		file   string
		record string
		unset  func(w *fixtureRecords)
	}{
		{"proc/sys/kernel/hostname", "host_descr", func(w *fixtureRecords) { w.descr.Hostname = "" }},
		{"proc/sys/kernel/osrelease", "host_descr", func(w *fixtureRecords) { w.descr.OSRelease = "" }},
		{"proc/loadavg", "host_cpu", func(w *fixtureRecords) {
			w.cpu.LoadOne, w.cpu.LoadFive, w.cpu.LoadFifteen = -1, -1, -1
			w.cpu.ProcRun, w.cpu.ProcTotal = 0, 0
		}},
		{"proc/stat", "host_cpu", func(w *fixtureRecords) { unknownCPUTimes(&w.cpu) }},
		{"proc/uptime", "host_cpu", func(w *fixtureRecords) { w.cpu.Uptime = 0 }},
		{"proc/cpuinfo", "host_cpu", func(w *fixtureRecords) { w.cpu.CPUSpeed = 0 }},
		{"proc/meminfo", "host_memory", func(w *fixtureRecords) {
			m := &w.memory
			m.MemTotal, m.MemFree, m.MemShared, m.MemBuffers, m.MemCached, m.SwapTotal, m.SwapFree = 0, 0, 0, 0, 0, 0, 0
		}},
		{"proc/vmstat", "host_memory", func(w *fixtureRecords) {
			w.memory.PageIn, w.memory.PageOut, w.memory.SwapIn, w.memory.SwapOut = u32, u32, u32, u32
		}},
		{"proc/self/mounts", "host_disk_io", func(w *fixtureRecords) {
			w.disk.DiskTotal, w.disk.DiskFree, w.disk.PartMaxUsed = 0, 0, sflow.PercentageUnknown
		}},
		{"proc/filesystems", "host_disk_io", func(w *fixtureRecords) {
			w.disk.DiskTotal, w.disk.DiskFree, w.disk.PartMaxUsed = 0, 0, sflow.PercentageUnknown
		}},
		{"proc/diskstats", "host_disk_io", func(w *fixtureRecords) {
			d := &w.disk
			d.Reads, d.ReadTime, d.Writes, d.WriteTime = u32, u32, u32, u32
			d.BytesRead, d.BytesWritten = u64, u64
		}},
		{"proc/net/dev", "host_net_io", func(w *fixtureRecords) {
			w.net = sflow.HostNetIO{BytesIn: u64, PktsIn: u32, ErrsIn: u32, DropsIn: u32,
				BytesOut: u64, PacketsOut: u32, ErrsOut: u32, DropsOut: u32}
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			root := copyTree(t, fixtureRoot)
			path := filepath.Join(root, tc.file)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			r := newFixtureReader(t, root, nil)
			recs, err := r.AppendRecords(nil)
			if err == nil {
				t.Fatalf("AppendRecords without %s: no error", tc.file)
			}
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("error %q is not ErrNotExist", err)
			}
			if msg := err.Error(); !strings.Contains(msg, path) || !strings.HasPrefix(msg, tc.record+":") && !strings.HasPrefix(msg, tc.record+" ") {
				t.Errorf("error %q does not name %s and %s", msg, tc.record, path)
			}
			want := wantFixture()
			tc.unset(&want)
			compareRecords(t, gotRecords(t, recs), want)
		})
	}
}

// TestMalformedSource replaces one file with garbage: the parse error
// names the file and the other records are intact.
func TestMalformedSource(t *testing.T) {
	for _, tc := range []struct {
		file, content string
	}{
		{"proc/loadavg", "0.52 1.25\n"},
		{"proc/loadavg", "0.52 x 2.07 3/412 98765\n"},
		{"proc/stat", "cpu  1 2 3\nintr 5\nctxt 6\n"},
		{"proc/stat", "cpu  4705 356 584 3699176\nintr -5\nctxt 6\n"},
		{"proc/uptime", "\n"},
		{"proc/cpuinfo", "cpu MHz\t\t: fast\n"},
		{"proc/meminfo", "Total: lots\n"},
		{"proc/diskstats", "   8       0 sda 1 2 3\n"},
		{"proc/net/dev", "eth0: 1 2 3\n"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			root := copyTree(t, fixtureRoot)
			path := filepath.Join(root, tc.file)
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			r := newFixtureReader(t, root, nil)
			recs, err := r.AppendRecords(nil)
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Fatalf("AppendRecords with malformed %s: error %v, want one naming the file", tc.file, err)
			}
			got, want := gotRecords(t, recs), wantFixture()
			// Records fed by other files are untouched.
			if !strings.HasPrefix(tc.file, "proc/net") && got.net != want.net {
				t.Errorf("host_net_io changed: %+v", got.net)
			}
			if tc.file != "proc/meminfo" && got.memory != want.memory {
				t.Errorf("host_memory changed: %+v", got.memory)
			}
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/fast\040disk`:  "/mnt/fast disk",
		`/a\011b\012c\134d`:  "/a\tb\nc\\d",
		`/plain`:             "/plain",
		`/trailing\04`:       `/trailing\04`,
		`/not\999octal\040x`: `/not\999octal x`,
	} {
		if got := string(unescapeMount(nil, []byte(in))); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUsedPercentage(t *testing.T) {
	for _, tc := range []struct {
		blocks, bfree, bavail uint64
		want                  sflow.Percentage
	}{
		{100, 100, 100, 0},
		{100, 0, 0, 10000},
		{100, 50, 50, 5000},
		{100, 10, 5, 9474}, // 90 / 95 = 94.736...%, rounded up like df
		{0, 0, 0, sflow.PercentageUnknown},
		{10, 20, 0, sflow.PercentageUnknown},
	} {
		if got := usedPercentage(tc.blocks, tc.bfree, tc.bavail); got != tc.want {
			t.Errorf("usedPercentage(%d, %d, %d) = %d, want %d", tc.blocks, tc.bfree, tc.bavail, got, tc.want)
		}
	}
}

// TestCPUSpeedFallback covers cpuinfo without "cpu MHz" (e.g. ARM): the
// speed comes from cpufreq, else it is unknown (0) without an error.
func TestCPUSpeedFallback(t *testing.T) {
	root := copyTree(t, fixtureRoot)
	arm := "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm\nCPU implementer\t: 0x41\n\n"
	if err := os.WriteFile(filepath.Join(root, "proc/cpuinfo"), []byte(arm), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newFixtureReader(t, root, nil)
	recs, err := r.AppendRecords(nil)
	if err != nil {
		t.Fatalf("AppendRecords: %v", err)
	}
	if got := recs[2].(*sflow.HostCPU).CPUSpeed; got != 0 {
		t.Errorf("cpu_speed without any source = %d, want 0", got)
	}

	dir := filepath.Join(root, "sys/devices/system/cpu/cpu0/cpufreq")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cpuinfo_max_freq"), []byte("1999600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err = r.AppendRecords(recs[:0])
	if err != nil {
		t.Fatalf("AppendRecords: %v", err)
	}
	if got := recs[2].(*sflow.HostCPU).CPUSpeed; got != 2000 {
		t.Errorf("cpu_speed from cpufreq 1999600 kHz = %d, want 2000", got)
	}
}
