package sflow

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Host records with a distinct value in every field; the golden tests
// spell out their encodings by hand.
func ctrTestHostDescr() *HostDescr {
	return &HostDescr{
		Hostname:    "leaf-01",
		UUID:        [16]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff},
		MachineType: MachineTypeX86_64,
		OSName:      OSNameLinux,
		OSRelease:   "6.1",
	}
}

func ctrTestHostAdapters() *HostAdapters {
	return &HostAdapters{Adapters: []HostAdapter{
		{IfIndex: 5, MACAddresses: [][6]byte{{0x02, 0, 0, 0, 0, 0x01}}},
		{IfIndex: 0},
		{IfIndex: 0x10, MACAddresses: [][6]byte{{0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f}, {0x02, 0x42, 0xac, 0x11, 0x00, 0x02}}},
	}}
}

func ctrTestHostCPU() *HostCPU {
	return &HostCPU{
		LoadOne: 1.5, LoadFive: 0.75, LoadFifteen: HostCPULoadUnknown,
		ProcRun: 3, ProcTotal: 500, CPUNum: 2, CPUSpeed: 2400, Uptime: 86400,
		CPUUser: 0x101, CPUNice: 0x102, CPUSystem: 0x103, CPUIdle: 0x104, CPUWio: 0x105,
		CPUIntr: 0x106, CPUSintr: 0x107, Interrupts: 0x108, Contexts: 0x109,
		CPUSteal: 0x10a, CPUGuest: 0x10b, CPUGuestNice: 0x10c,
	}
}

func ctrTestHostMemory() *HostMemory {
	return &HostMemory{
		MemTotal: 8 << 30, MemFree: 4 << 30, MemShared: 1 << 20, MemBuffers: 2 << 20, MemCached: 3 << 30,
		SwapTotal: 0, SwapFree: 0, PageIn: 1, PageOut: 2, SwapIn: CounterUnavailable32, SwapOut: CounterUnavailable32,
	}
}

func ctrTestHostDiskIO() *HostDiskIO {
	return &HostDiskIO{
		DiskTotal: 100 << 30, DiskFree: 50 << 30, PartMaxUsed: PercentageUnknown,
		Reads: 0x10, BytesRead: 1<<32 + 1, ReadTime: 0x20, Writes: 0x30, BytesWritten: 2<<32 + 2, WriteTime: 0x40,
	}
}

func ctrTestHostNetIO() *HostNetIO {
	return &HostNetIO{
		BytesIn: 10<<32 + 1, PktsIn: 0x11, ErrsIn: 0x12, DropsIn: 0x13,
		BytesOut: 11<<32 + 2, PacketsOut: 0x21, ErrsOut: 0x22, DropsOut: 0x23,
	}
}

func ctrTestVirtNode() *VirtNode {
	return &VirtNode{Mhz: 3000, CPUs: 16, Memory: 64 << 30, MemoryFree: 32 << 30, NumDomains: 4}
}

func ctrTestVirtCPU() *VirtCPU {
	return &VirtCPU{State: VirtDomainRunning, CPUTime: 123456, NrVirtCPU: 2}
}

func ctrTestVirtMemory() *VirtMemory { return &VirtMemory{Memory: 2 << 30, MaxMemory: 4 << 30} }

func ctrTestVirtDiskIO() *VirtDiskIO {
	return &VirtDiskIO{Capacity: 10 << 30, Allocation: 5 << 30, Available: 4 << 30, RdReq: 10, RdBytes: 1000, WrReq: 20, WrBytes: 2000, Errs: 1}
}

func ctrTestVirtNetIO() *VirtNetIO {
	return &VirtNetIO{RxBytes: 333, RxPackets: 3, RxErrs: 0, RxDrop: 1, TxBytes: 444, TxPackets: 4, TxErrs: 2, TxDrop: 5}
}

// ctrHostTestRecords returns one of each host and virt record.
func ctrHostTestRecords() []Record {
	return []Record{
		ctrTestHostDescr(), ctrTestHostAdapters(), &HostParent{ContainerType: SourceEntPhysicalEntry, ContainerIndex: 1},
		ctrTestHostCPU(), ctrTestHostMemory(), ctrTestHostDiskIO(), ctrTestHostNetIO(),
		ctrTestVirtNode(), ctrTestVirtCPU(), ctrTestVirtMemory(), ctrTestVirtDiskIO(), ctrTestVirtNetIO(),
	}
}

func TestHostDescrGolden(t *testing.T) {
	checkRecordGolden(t, ctrTestHostDescr(), unhex(t, `
		00000007 6c656166 2d303100          // hostname "leaf-01", 1 byte padding
		00112233 44556677 8899aabb ccddeeff // uuid opaque[16]: no length word
		00000003                            // machine_type x86_64
		00000002                            // os_name linux
		00000003 362e3100                   // os_release "6.1"`), false)
}

func TestHostDescrTruncatesAndUnknown(t *testing.T) {
	// A 70-byte hostname is cut to string<64>; unknown UUID is 16 zero
	// bytes, unknown enums 0, unknown release the empty string.
	rec := &HostDescr{Hostname: strings.Repeat("a", 70)}
	checkRecordGolden(t, rec, unhex(t, `
		00000040                            // hostname length 64 (truncated)
		`+strings.Repeat("61", 64)+`        // 64 x "a"
		00000000 00000000 00000000 00000000 // uuid unknown
		00000000                            // machine_type unknown
		00000000                            // os_name unknown
		00000000                            // os_release "" (unknown)`), false)
}

func TestHostAdaptersGolden(t *testing.T) {
	checkRecordGolden(t, ctrTestHostAdapters(), unhex(t, `
		00000003          // adapters<> count
		00000005          // [0] ifIndex
		00000001          // [0] mac_address<> count
		02000000 00010000 // [0] mac 02:00:00:00:00:01 + 2 bytes padding
		00000000          // [1] ifIndex unknown
		00000000          // [1] no MAC addresses
		00000010          // [2] ifIndex
		00000002          // [2] mac_address<> count
		0a0b0c0d 0e0f0000 // [2] mac 0a:0b:0c:0d:0e:0f
		0242ac11 00020000 // [2] mac 02:42:ac:11:00:02`), false)
	checkRecordGolden(t, &HostAdapters{}, unhex(t, `00000000 // no adapters`), false)
}

func TestHostParentGolden(t *testing.T) {
	checkRecordGolden(t, &HostParent{ContainerType: SourceEntPhysicalEntry, ContainerIndex: 1}, unhex(t, `
		00000002 // container_type entPhysicalEntry
		00000001 // container_index`), false)
}

func TestHostCPUGolden(t *testing.T) {
	base := `
		3fc00000 // load_one 1.5 (IEEE 754 single)
		3f400000 // load_five 0.75
		bf800000 // load_fifteen -1.0 = unknown
		00000003 // proc_run
		000001f4 // proc_total 500
		00000002 // cpu_num
		00000960 // cpu_speed 2400 MHz
		00015180 // uptime 86400 s
		00000101 // cpu_user
		00000102 // cpu_nice
		00000103 // cpu_system
		00000104 // cpu_idle
		00000105 // cpu_wio
		00000106 // cpu_intr
		00000107 // cpu_sintr
		00000108 // interrupts
		00000109 // contexts`
	t.Run("with steal/guest", func(t *testing.T) {
		checkRecordGolden(t, ctrTestHostCPU(), unhex(t, base+`
		0000010a // cpu_steal
		0000010b // cpu_guest
		0000010c // cpu_guest_nice`), false)
	})
	t.Run("sflow_host.txt 68-byte form", func(t *testing.T) {
		rec := ctrTestHostCPU()
		rec.OmitStealGuest = true
		rec.CPUSteal, rec.CPUGuest, rec.CPUGuestNice = 0, 0, 0
		want := unhex(t, base)
		if len(want) != 68 {
			t.Fatalf("golden is %d bytes, the spec's host_cpu is 68", len(want))
		}
		checkRecordGolden(t, rec, want, false)
		d, err := Decode(ctrCounterDatagram(FormatHostCPU, want))
		if err != nil {
			t.Fatal(err)
		}
		got := d.Samples[0].(*CounterSample).Records[0].(*HostCPU)
		if !got.OmitStealGuest || *got != *rec {
			t.Errorf("decoded %+v, want %+v", got, rec)
		}
	})
}

func TestHostMemoryGolden(t *testing.T) {
	checkRecordGolden(t, ctrTestHostMemory(), unhex(t, `
		00000002 00000000 // mem_total 8 GiB
		00000001 00000000 // mem_free 4 GiB
		00000000 00100000 // mem_shared 1 MiB
		00000000 00200000 // mem_buffers 2 MiB
		00000000 c0000000 // mem_cached 3 GiB
		00000000 00000000 // swap_total
		00000000 00000000 // swap_free
		00000001          // page_in
		00000002          // page_out
		ffffffff          // swap_in not available
		ffffffff          // swap_out not available`), false)
}

func TestHostDiskIOGolden(t *testing.T) {
	golden := func(partMaxUsed string) []byte {
		return unhex(t, `
		00000019 00000000 // disk_total 100 GiB
		0000000c 80000000 // disk_free 50 GiB
		`+partMaxUsed+`   // part_max_used
		00000010          // reads
		00000001 00000001 // bytes_read
		00000020          // read_time
		00000030          // writes
		00000002 00000002 // bytes_written
		00000040          // write_time`)
	}
	checkRecordGolden(t, ctrTestHostDiskIO(), golden("ffffffff"), false) // -1 = unknown
	rec := ctrTestHostDiskIO()
	rec.PartMaxUsed = 7525                               // 75.25 %
	checkRecordGolden(t, rec, golden("00001d65"), false) // 7525 hundredths of a percent
}

func TestHostNetIOGolden(t *testing.T) {
	checkRecordGolden(t, ctrTestHostNetIO(), unhex(t, `
		0000000a 00000001 // bytes_in
		00000011          // pkts_in
		00000012          // errs_in
		00000013          // drops_in
		0000000b 00000002 // bytes_out
		00000021          // packets_out
		00000022          // errs_out
		00000023          // drops_out`), false)
}

func TestVirtNodeGolden(t *testing.T) {
	checkRecordGolden(t, ctrTestVirtNode(), unhex(t, `
		00000bb8          // mhz 3000
		00000010          // cpus 16
		00000010 00000000 // memory 64 GiB
		00000008 00000000 // memory_free 32 GiB
		00000004          // num_domains`), false)
}

func TestVirtCPUGolden(t *testing.T) {
	checkRecordGolden(t, ctrTestVirtCPU(), unhex(t, `
		00000001 // state running
		0001e240 // cpuTime 123456 ms
		00000002 // nrVirtCpu`), false)
}

func TestVirtMemoryGolden(t *testing.T) {
	checkRecordGolden(t, ctrTestVirtMemory(), unhex(t, `
		00000000 80000000 // memory 2 GiB
		00000001 00000000 // maxMemory 4 GiB`), false)
}

func TestVirtDiskIOGolden(t *testing.T) {
	checkRecordGolden(t, ctrTestVirtDiskIO(), unhex(t, `
		00000002 80000000 // capacity 10 GiB
		00000001 40000000 // allocation 5 GiB
		00000001 00000000 // available 4 GiB
		0000000a          // rd_req
		00000000 000003e8 // rd_bytes 1000
		00000014          // wr_req
		00000000 000007d0 // wr_bytes 2000
		00000001          // errs`), false)
}

func TestVirtNetIOGolden(t *testing.T) {
	checkRecordGolden(t, ctrTestVirtNetIO(), unhex(t, `
		00000000 0000014d // rx_bytes 333
		00000003          // rx_packets
		00000000          // rx_errs
		00000001          // rx_drop
		00000000 000001bc // tx_bytes 444
		00000004          // tx_packets
		00000002          // tx_errs
		00000005          // tx_drop`), false)
}

func TestHostRecordsDecodeErrors(t *testing.T) {
	cpu := ctrTestHostCPU().AppendXDR(nil) // 80 bytes
	cases := []struct {
		name string
		f    DataFormat
		body []byte
		want error
	}{
		{"host_cpu 72 bytes", FormatHostCPU, cpu[:72], ErrShort},
		{"host_cpu 84 bytes", FormatHostCPU, append(append([]byte(nil), cpu...), 0, 0, 0, 0), ErrLength},
		{"host_cpu 64 bytes", FormatHostCPU, cpu[:64], ErrShort},
		{"host_descr hostname of 65 bytes", FormatHostDescr, append(unhex(t, `00000041`), make([]byte, 68+16+8+4)...), ErrTooLong},
		{"host_descr os_release of 33 bytes", FormatHostDescr, append(unhex(t, `00000000 00000000 00000000 00000000 00000000 00000003 00000002 00000021`), make([]byte, 36)...), ErrTooLong},
		{"host_adapters forged count", FormatHostAdapters, unhex(t, `10000000 00000001 00000000`), ErrShort},
		{"host_adapters forged MAC count", FormatHostAdapters, unhex(t, `00000001 00000001 00100000 02000000 00010000`), ErrShort},
		{"host_adapters MAC padding", FormatHostAdapters, unhex(t, `00000001 00000001 00000001 02000000 00010001`), ErrBadPadding},
		{"virt_node short", FormatVirtNode, ctrTestVirtNode().AppendXDR(nil)[:24], ErrShort},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(ctrCounterDatagram(c.f, c.body))
			var de *DecodeError
			if !errors.Is(err, c.want) || !errors.As(err, &de) {
				t.Fatalf("got %v, want a DecodeError wrapping %v", err, c.want)
			}
			t.Log(err)
		})
	}
}

func TestCountersHostTestdata(t *testing.T) {
	d := ctrCheckTestdata(t, "counters_host")
	// The golden host_cpu carries the steal/guest extension.
	var cpus int
	for _, s := range d.Samples {
		for _, rec := range s.(*CounterSample).Records {
			if cpu, ok := rec.(*HostCPU); ok {
				cpus++
				if cpu.OmitStealGuest {
					t.Errorf("host_cpu decoded as the 68-byte form: %+v", cpu)
				}
			}
		}
	}
	if cpus != 1 {
		t.Errorf("%d host_cpu records decoded, want 1", cpus)
	}
}

// ctrHostSflowtoolView renders host and virt records as sflowtool does
// (sflowtool.c readCounters_host_*, readCounters_v*), or returns nil.
func ctrHostSflowtoolView(rec Record) map[string]string {
	switch r := rec.(type) {
	case *HostDescr:
		u := r.UUID
		return map[string]string{
			"hostname":     r.Hostname,
			"UUID":         fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]),
			"machine_type": ctrU(r.MachineType),
			"os_name":      ctrU(r.OSName),
			"os_release":   r.OSRelease,
		}
	case *HostAdapters:
		v := map[string]string{}
		for i, a := range r.Adapters {
			p := fmt.Sprintf("adaptor_list[%d].", i)
			v[p+"ifIndex"] = ctrU(a.IfIndex)
			v[p+"MACs"] = fmt.Sprint(len(a.MACAddresses))
			for j, m := range a.MACAddresses {
				v[fmt.Sprintf("%smac_list[%d]", p, j)] = fmt.Sprintf("%x", m[:])
			}
		}
		return v
	case *HostParent:
		return map[string]string{"parent_dsClass": ctrU(r.ContainerType), "parent_dsIndex": ctrU(r.ContainerIndex)}
	case *HostCPU:
		v := map[string]string{
			"cpu_load_one":     fmt.Sprintf("%.3f", r.LoadOne),
			"cpu_load_five":    fmt.Sprintf("%.3f", r.LoadFive),
			"cpu_load_fifteen": fmt.Sprintf("%.3f", r.LoadFifteen),
			"cpu_proc_run":     ctrU(r.ProcRun),
			"cpu_proc_total":   ctrU(r.ProcTotal),
			"cpu_num":          ctrU(r.CPUNum),
			"cpu_speed":        ctrU(r.CPUSpeed),
			"cpu_uptime":       ctrU(r.Uptime),
			"cpu_user":         ctrU(r.CPUUser),
			"cpu_nice":         ctrU(r.CPUNice),
			"cpu_system":       ctrU(r.CPUSystem),
			"cpu_idle":         ctrU(r.CPUIdle),
			"cpu_wio":          ctrU(r.CPUWio),
			"cpuintr":          ctrU(r.CPUIntr),
			"cpu_sintr":        ctrU(r.CPUSintr),
			"cpuinterrupts":    ctrU(r.Interrupts),
			"cpu_contexts":     ctrU(r.Contexts),
		}
		if !r.OmitStealGuest {
			v["cpu_steal"] = ctrU(r.CPUSteal)
			v["cpu_guest"] = ctrU(r.CPUGuest)
			v["cpu_guest_nice"] = ctrU(r.CPUGuestNice)
		}
		return v
	case *HostMemory:
		return map[string]string{
			"mem_total": ctrU(r.MemTotal), "mem_free": ctrU(r.MemFree), "mem_shared": ctrU(r.MemShared),
			"mem_buffers": ctrU(r.MemBuffers), "mem_cached": ctrU(r.MemCached), "swap_total": ctrU(r.SwapTotal),
			"swap_free": ctrU(r.SwapFree), "page_in": ctrU(r.PageIn), "page_out": ctrU(r.PageOut),
			"swap_in": ctrU(r.SwapIn), "swap_out": ctrU(r.SwapOut),
		}
	case *HostDiskIO:
		return map[string]string{
			"disk_total": ctrU(r.DiskTotal), "disk_free": ctrU(r.DiskFree),
			"disk_partition_max_used": fmt.Sprintf("%.2f", float64(r.PartMaxUsed)/100),
			"disk_reads":              ctrU(r.Reads), "disk_bytes_read": ctrU(r.BytesRead), "disk_read_time": ctrU(r.ReadTime),
			"disk_writes": ctrU(r.Writes), "disk_bytes_written": ctrU(r.BytesWritten), "disk_write_time": ctrU(r.WriteTime),
		}
	case *HostNetIO:
		return map[string]string{
			"nio_bytes_in": ctrU(r.BytesIn), "nio_pkts_in": ctrU(r.PktsIn), "nio_errs_in": ctrU(r.ErrsIn), "nio_drops_in": ctrU(r.DropsIn),
			"nio_bytes_out": ctrU(r.BytesOut), "nio_pkts_out": ctrU(r.PacketsOut), "nio_errs_out": ctrU(r.ErrsOut), "nio_drops_out": ctrU(r.DropsOut),
		}
	case *VirtNode:
		return map[string]string{
			"vnode_mhz": ctrU(r.Mhz), "vnode_cpus": ctrU(r.CPUs), "vnode_memory": ctrU(r.Memory),
			"vnode_memory_free": ctrU(r.MemoryFree), "vnode_num_domains": ctrU(r.NumDomains),
		}
	case *VirtCPU:
		return map[string]string{"vcpu_state": ctrU(r.State), "vcpu_cpu_mS": ctrU(r.CPUTime), "vcpu_cpuCount": ctrU(r.NrVirtCPU)}
	case *VirtMemory:
		return map[string]string{"vmem_memory": ctrU(r.Memory), "vmem_maxMemory": ctrU(r.MaxMemory)}
	case *VirtDiskIO:
		return map[string]string{
			"vdsk_capacity": ctrU(r.Capacity), "vdsk_allocation": ctrU(r.Allocation), "vdsk_available": ctrU(r.Available),
			"vdsk_rd_req": ctrU(r.RdReq), "vdsk_rd_bytes": ctrU(r.RdBytes), "vdsk_wr_req": ctrU(r.WrReq),
			"vdsk_wr_bytes": ctrU(r.WrBytes), "vdsk_errs": ctrU(r.Errs),
		}
	case *VirtNetIO:
		return map[string]string{
			"vnio_bytes_in": ctrU(r.RxBytes), "vnio_pkts_in": ctrU(r.RxPackets), "vnio_errs_in": ctrU(r.RxErrs), "vnio_drops_in": ctrU(r.RxDrop),
			"vnio_bytes_out": ctrU(r.TxBytes), "vnio_pkts_out": ctrU(r.TxPackets), "vnio_errs_out": ctrU(r.TxErrs), "vnio_drops_out": ctrU(r.TxDrop),
		}
	}
	return nil
}
