package sflow

import "math"

// Counter record formats of the host and hypervisor structures
// (spec/sflow_host.txt). Flow records 2100-2104 are different structures
// (extended_socket_*): structure numbers are per context.
var (
	FormatHostDescr    = Format(0, 2000)
	FormatHostAdapters = Format(0, 2001)
	FormatHostParent   = Format(0, 2002)
	FormatHostCPU      = Format(0, 2003)
	FormatHostMemory   = Format(0, 2004)
	FormatHostDiskIO   = Format(0, 2005)
	FormatHostNetIO    = Format(0, 2006)
	FormatVirtNode     = Format(0, 2100)
	FormatVirtCPU      = Format(0, 2101)
	FormatVirtMemory   = Format(0, 2102)
	FormatVirtDiskIO   = Format(0, 2103)
	FormatVirtNetIO    = Format(0, 2104)
)

func init() {
	registerCounter(FormatHostDescr, "host_descr", decodeHostDescr)
	registerCounter(FormatHostAdapters, "host_adapters", decodeHostAdapters)
	registerCounter(FormatHostParent, "host_parent", decodeHostParent)
	registerCounter(FormatHostCPU, "host_cpu", decodeHostCPU)
	registerCounter(FormatHostMemory, "host_memory", decodeHostMemory)
	registerCounter(FormatHostDiskIO, "host_disk_io", decodeHostDiskIO)
	registerCounter(FormatHostNetIO, "host_net_io", decodeHostNetIO)
	registerCounter(FormatVirtNode, "virt_node", decodeVirtNode)
	registerCounter(FormatVirtCPU, "virt_cpu", decodeVirtCPU)
	registerCounter(FormatVirtMemory, "virt_memory", decodeVirtMemory)
	registerCounter(FormatVirtDiskIO, "virt_disk_io", decodeVirtDiskIO)
	registerCounter(FormatVirtNetIO, "virt_net_io", decodeVirtNetIO)
}

// Maximum lengths of the host_descr strings (spec "struct host_descr").
const (
	maxHostname  = 64
	maxOSRelease = 32
	uuidSize     = 16
)

// MachineType is the spec's machine_type enumeration: the processor
// family. The list may grow, so other values are carried unchanged.
type MachineType uint32

// machine_type values (spec/sflow_host.txt "enum machine_type").
const (
	MachineTypeUnknown MachineType = 0
	MachineTypeOther   MachineType = 1
	MachineTypeX86     MachineType = 2
	MachineTypeX86_64  MachineType = 3
	MachineTypeIA64    MachineType = 4
	MachineTypeSPARC   MachineType = 5
	MachineTypeAlpha   MachineType = 6
	MachineTypePowerPC MachineType = 7
	MachineTypeM68K    MachineType = 8
	MachineTypeMIPS    MachineType = 9
	MachineTypeARM     MachineType = 10
	MachineTypeHPPA    MachineType = 11
	MachineTypeS390    MachineType = 12
)

// OSName is the spec's os_name enumeration. The list may grow, so other
// values are carried unchanged.
type OSName uint32

// os_name values (spec/sflow_host.txt "enum os_name").
const (
	OSNameUnknown   OSName = 0
	OSNameOther     OSName = 1
	OSNameLinux     OSName = 2
	OSNameWindows   OSName = 3
	OSNameDarwin    OSName = 4
	OSNameHPUX      OSName = 5
	OSNameAIX       OSName = 6
	OSNameDragonfly OSName = 7
	OSNameFreeBSD   OSName = 8
	OSNameNetBSD    OSName = 9
	OSNameOpenBSD   OSName = 10
	OSNameOSF       OSName = 11
	OSNameSolaris   OSName = 12
)

// HostDescr is host_descr (counter format 2000): the description of a
// physical or virtual host.
type HostDescr struct {
	// Hostname is string<64>, empty if unknown; longer names are
	// truncated on encoding.
	Hostname string `json:"hostname"`
	// UUID is the 16-byte binary UUID, all zeros if unknown.
	//
	// The draft text in spec/sflow_host.txt declares "opaque uuid<16>"
	// (a length word and up to 16 bytes, "empty if unknown"), but the
	// published Host sFlow structure, the reference decoder (sflowtool),
	// the reference agent (hsflowd) and the shared golden datagrams all use
	// the fixed opaque[16]: no length word, exactly 16 bytes. That is the
	// encoding every collector reads, so it is the one used here.
	UUID        [16]byte    `json:"uuid"`
	MachineType MachineType `json:"machine_type"`
	OSName      OSName      `json:"os_name"`
	// OSRelease is string<32>, e.g. "6.1.0-18-amd64", empty if unknown.
	OSRelease string `json:"os_release"`
}

// Format implements Record.
func (*HostDescr) Format() DataFormat { return FormatHostDescr }

// Name implements Record.
func (*HostDescr) Name() string { return "host_descr" }

// AppendXDR implements Record.
func (h *HostDescr) AppendXDR(b []byte) []byte {
	b = appendString(b, h.Hostname, maxHostname)
	b = append(b, h.UUID[:]...)
	b = appendUint32(b, uint32(h.MachineType))
	b = appendUint32(b, uint32(h.OSName))
	return appendString(b, h.OSRelease, maxOSRelease)
}

func decodeHostDescr(r *reader) Record {
	h := &HostDescr{}
	h.Hostname = r.string(maxHostname)
	copy(h.UUID[:], r.bytes(uuidSize))
	h.MachineType = MachineType(r.uint32())
	h.OSName = OSName(r.uint32())
	h.OSRelease = r.string(maxOSRelease)
	return h
}

// HostAdapter is the spec's host_adapter: a physical or virtual network
// adapter and its MAC addresses.
type HostAdapter struct {
	// IfIndex is the adapter's ifIndex (it must match the vSwitch port's
	// ifIndex if a vSwitch exports sFlow); 0 = unknown.
	IfIndex uint32 `json:"if_index"`
	// MACAddresses is mac_address<>: each MAC is encoded as the spec's
	// "mac" type, 6 bytes padded to 8.
	MACAddresses [][6]byte `json:"mac_address"`
}

// HostAdapters is host_adapters (counter format 2001): the network
// adapters of the entity (physical adapters for a physical server,
// virtual ones for a virtual machine).
type HostAdapters struct {
	Adapters []HostAdapter `json:"adapters"`
}

// Format implements Record.
func (*HostAdapters) Format() DataFormat { return FormatHostAdapters }

// Name implements Record.
func (*HostAdapters) Name() string { return "host_adapters" }

// AppendXDR implements Record.
func (h *HostAdapters) AppendXDR(b []byte) []byte {
	b = appendUint32(b, uint32(len(h.Adapters)))
	for i := range h.Adapters {
		a := &h.Adapters[i]
		b = appendUint32(b, a.IfIndex)
		b = appendUint32(b, uint32(len(a.MACAddresses)))
		for _, m := range a.MACAddresses {
			b = appendMAC(b, m)
		}
	}
	return b
}

// Minimum encoded sizes, bounding the counts a decoder accepts.
const (
	minHostAdapterSize = 8 // ifIndex and an empty mac_address<>
	macSize            = 8 // mac: opaque[6] padded to 8
)

func decodeHostAdapters(r *reader) Record {
	h := &HostAdapters{}
	n := r.count(minHostAdapterSize)
	if n > 0 {
		h.Adapters = make([]HostAdapter, 0, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		a := HostAdapter{IfIndex: r.uint32()}
		m := r.count(macSize)
		if m > 0 {
			a.MACAddresses = make([][6]byte, 0, m)
		}
		for j := 0; j < m && r.err == nil; j++ {
			a.MACAddresses = append(a.MACAddresses, r.mac())
		}
		h.Adapters = append(h.Adapters, a)
	}
	return h
}

// HostParent is host_parent (counter format 2002): the data source of the
// entity containing this one. Physical entities, the roots of the
// containment tree, do not send it.
type HostParent struct {
	// ContainerType is the parent's sFlowDataSource type (e.g.
	// SourceEntPhysicalEntry).
	ContainerType uint32 `json:"container_type"`
	// ContainerIndex is the parent's sFlowDataSource index.
	ContainerIndex uint32 `json:"container_index"`
}

// Format implements Record.
func (*HostParent) Format() DataFormat { return FormatHostParent }

// Name implements Record.
func (*HostParent) Name() string { return "host_parent" }

// AppendXDR implements Record.
func (h *HostParent) AppendXDR(b []byte) []byte {
	b = appendUint32(b, h.ContainerType)
	return appendUint32(b, h.ContainerIndex)
}

func decodeHostParent(r *reader) Record {
	return &HostParent{ContainerType: r.uint32(), ContainerIndex: r.uint32()}
}

// HostCPULoadUnknown is the host_cpu load average meaning "unknown"
// (-1.0, spec "struct host_cpu").
const HostCPULoadUnknown float32 = -1

// HostCPU is host_cpu (counter format 2003): physical server CPU metrics
// (Ganglia's libmetrics definitions; times in milliseconds, counts since
// boot).
//
// spec/sflow_host.txt ends the structure at contexts (68 bytes). Later
// revisions of Host sFlow append cpu_steal, cpu_guest and cpu_guest_nice
// (80 bytes), which the reference decoder reads when the record is long
// enough and which the shared golden datagrams carry. HostCPU encodes the
// 80-byte form unless OmitStealGuest is set, and decodes either form.
type HostCPU struct {
	// LoadOne, LoadFive and LoadFifteen are the 1, 5 and 15 minute load
	// averages (XDR float); HostCPULoadUnknown (-1.0) = unknown.
	LoadOne     float32 `json:"load_one"`
	LoadFive    float32 `json:"load_five"`
	LoadFifteen float32 `json:"load_fifteen"`
	// ProcRun is the number of running processes.
	ProcRun uint32 `json:"proc_run"`
	// ProcTotal is the total number of processes.
	ProcTotal uint32 `json:"proc_total"`
	// CPUNum is the number of CPUs.
	CPUNum uint32 `json:"cpu_num"`
	// CPUSpeed is the CPU speed in MHz.
	CPUSpeed uint32 `json:"cpu_speed"`
	// Uptime is the number of seconds since the last reboot.
	Uptime uint32 `json:"uptime"`
	// CPU times in milliseconds.
	CPUUser   uint32 `json:"cpu_user"`
	CPUNice   uint32 `json:"cpu_nice"`
	CPUSystem uint32 `json:"cpu_system"`
	CPUIdle   uint32 `json:"cpu_idle"`
	CPUWio    uint32 `json:"cpu_wio"`
	CPUIntr   uint32 `json:"cpu_intr"`
	CPUSintr  uint32 `json:"cpu_sintr"`
	// Interrupts is the interrupt count.
	Interrupts uint32 `json:"interrupts"`
	// Contexts is the context switch count.
	Contexts uint32 `json:"contexts"`
	// CPUSteal, CPUGuest and CPUGuestNice are the later extension's
	// steal, guest and guest-nice times in milliseconds.
	CPUSteal     uint32 `json:"cpu_steal"`
	CPUGuest     uint32 `json:"cpu_guest"`
	CPUGuestNice uint32 `json:"cpu_guest_nice"`
	// OmitStealGuest selects the original 68-byte structure without
	// CPUSteal, CPUGuest and CPUGuestNice. The decoder sets it when it
	// reads that form, so re-encoding reproduces the input.
	OmitStealGuest bool `json:"omit_steal_guest,omitempty"`
}

// Format implements Record.
func (*HostCPU) Format() DataFormat { return FormatHostCPU }

// Name implements Record.
func (*HostCPU) Name() string { return "host_cpu" }

// AppendXDR implements Record.
func (c *HostCPU) AppendXDR(b []byte) []byte {
	b = appendFloat32(b, math.Float32bits(c.LoadOne))
	b = appendFloat32(b, math.Float32bits(c.LoadFive))
	b = appendFloat32(b, math.Float32bits(c.LoadFifteen))
	b = appendUint32(b, c.ProcRun)
	b = appendUint32(b, c.ProcTotal)
	b = appendUint32(b, c.CPUNum)
	b = appendUint32(b, c.CPUSpeed)
	b = appendUint32(b, c.Uptime)
	b = appendUint32(b, c.CPUUser)
	b = appendUint32(b, c.CPUNice)
	b = appendUint32(b, c.CPUSystem)
	b = appendUint32(b, c.CPUIdle)
	b = appendUint32(b, c.CPUWio)
	b = appendUint32(b, c.CPUIntr)
	b = appendUint32(b, c.CPUSintr)
	b = appendUint32(b, c.Interrupts)
	b = appendUint32(b, c.Contexts)
	if c.OmitStealGuest {
		return b
	}
	b = appendUint32(b, c.CPUSteal)
	b = appendUint32(b, c.CPUGuest)
	return appendUint32(b, c.CPUGuestNice)
}

func decodeHostCPU(r *reader) Record {
	c := &HostCPU{
		LoadOne:     r.float32(),
		LoadFive:    r.float32(),
		LoadFifteen: r.float32(),
		ProcRun:     r.uint32(),
		ProcTotal:   r.uint32(),
		CPUNum:      r.uint32(),
		CPUSpeed:    r.uint32(),
		Uptime:      r.uint32(),
		CPUUser:     r.uint32(),
		CPUNice:     r.uint32(),
		CPUSystem:   r.uint32(),
		CPUIdle:     r.uint32(),
		CPUWio:      r.uint32(),
		CPUIntr:     r.uint32(),
		CPUSintr:    r.uint32(),
		Interrupts:  r.uint32(),
		Contexts:    r.uint32(),
	}
	if r.err == nil && r.remaining() == 0 {
		c.OmitStealGuest = true
		return c
	}
	// Anything but exactly the three extension fields fails here (short)
	// or in finish (trailing bytes).
	c.CPUSteal = r.uint32()
	c.CPUGuest = r.uint32()
	c.CPUGuestNice = r.uint32()
	return c
}

// HostMemory is host_memory (counter format 2004): physical server memory
// in bytes and paging counts. The spec gives no unknown values here; by
// the sflow_version_5.txt rule an unknown size is 0 and an unavailable
// count (page_in ... swap_out) is CounterUnavailable32.
type HostMemory struct {
	MemTotal   uint64 `json:"mem_total"`
	MemFree    uint64 `json:"mem_free"`
	MemShared  uint64 `json:"mem_shared"`
	MemBuffers uint64 `json:"mem_buffers"`
	MemCached  uint64 `json:"mem_cached"`
	SwapTotal  uint64 `json:"swap_total"`
	SwapFree   uint64 `json:"swap_free"`
	PageIn     uint32 `json:"page_in"`
	PageOut    uint32 `json:"page_out"`
	SwapIn     uint32 `json:"swap_in"`
	SwapOut    uint32 `json:"swap_out"`
}

// Format implements Record.
func (*HostMemory) Format() DataFormat { return FormatHostMemory }

// Name implements Record.
func (*HostMemory) Name() string { return "host_memory" }

// AppendXDR implements Record.
func (m *HostMemory) AppendXDR(b []byte) []byte {
	b = appendUint64(b, m.MemTotal)
	b = appendUint64(b, m.MemFree)
	b = appendUint64(b, m.MemShared)
	b = appendUint64(b, m.MemBuffers)
	b = appendUint64(b, m.MemCached)
	b = appendUint64(b, m.SwapTotal)
	b = appendUint64(b, m.SwapFree)
	b = appendUint32(b, m.PageIn)
	b = appendUint32(b, m.PageOut)
	b = appendUint32(b, m.SwapIn)
	return appendUint32(b, m.SwapOut)
}

func decodeHostMemory(r *reader) Record {
	return &HostMemory{
		MemTotal:   r.uint64(),
		MemFree:    r.uint64(),
		MemShared:  r.uint64(),
		MemBuffers: r.uint64(),
		MemCached:  r.uint64(),
		SwapTotal:  r.uint64(),
		SwapFree:   r.uint64(),
		PageIn:     r.uint32(),
		PageOut:    r.uint32(),
		SwapIn:     r.uint32(),
		SwapOut:    r.uint32(),
	}
}

// Percentage is the spec's percentage type: hundredths of a percent
// (100 = 1%), PercentageUnknown (-1) if unknown (sflow_version_5.txt,
// "typedef int percentage").
type Percentage int32

// PercentageUnknown is the percentage value meaning "unknown".
const PercentageUnknown Percentage = -1

// HostDiskIO is host_disk_io (counter format 2005): physical server disk
// space and I/O. Times are in milliseconds.
type HostDiskIO struct {
	// DiskTotal is the total disk size in bytes.
	DiskTotal uint64 `json:"disk_total"`
	// DiskFree is the free disk space in bytes.
	DiskFree uint64 `json:"disk_free"`
	// PartMaxUsed is the utilization of the most utilized partition.
	PartMaxUsed  Percentage `json:"part_max_used"`
	Reads        uint32     `json:"reads"`
	BytesRead    uint64     `json:"bytes_read"`
	ReadTime     uint32     `json:"read_time"`
	Writes       uint32     `json:"writes"`
	BytesWritten uint64     `json:"bytes_written"`
	WriteTime    uint32     `json:"write_time"`
}

// Format implements Record.
func (*HostDiskIO) Format() DataFormat { return FormatHostDiskIO }

// Name implements Record.
func (*HostDiskIO) Name() string { return "host_disk_io" }

// AppendXDR implements Record.
func (d *HostDiskIO) AppendXDR(b []byte) []byte {
	b = appendUint64(b, d.DiskTotal)
	b = appendUint64(b, d.DiskFree)
	b = appendInt32(b, int32(d.PartMaxUsed))
	b = appendUint32(b, d.Reads)
	b = appendUint64(b, d.BytesRead)
	b = appendUint32(b, d.ReadTime)
	b = appendUint32(b, d.Writes)
	b = appendUint64(b, d.BytesWritten)
	return appendUint32(b, d.WriteTime)
}

func decodeHostDiskIO(r *reader) Record {
	return &HostDiskIO{
		DiskTotal:    r.uint64(),
		DiskFree:     r.uint64(),
		PartMaxUsed:  Percentage(r.int32()),
		Reads:        r.uint32(),
		BytesRead:    r.uint64(),
		ReadTime:     r.uint32(),
		Writes:       r.uint32(),
		BytesWritten: r.uint64(),
		WriteTime:    r.uint32(),
	}
}

// HostNetIO is host_net_io (counter format 2006): physical server network
// totals over all adapters.
type HostNetIO struct {
	BytesIn    uint64 `json:"bytes_in"`
	PktsIn     uint32 `json:"pkts_in"`
	ErrsIn     uint32 `json:"errs_in"`
	DropsIn    uint32 `json:"drops_in"`
	BytesOut   uint64 `json:"bytes_out"`
	PacketsOut uint32 `json:"packets_out"`
	ErrsOut    uint32 `json:"errs_out"`
	DropsOut   uint32 `json:"drops_out"`
}

// Format implements Record.
func (*HostNetIO) Format() DataFormat { return FormatHostNetIO }

// Name implements Record.
func (*HostNetIO) Name() string { return "host_net_io" }

// AppendXDR implements Record.
func (n *HostNetIO) AppendXDR(b []byte) []byte {
	b = appendUint64(b, n.BytesIn)
	b = appendUint32(b, n.PktsIn)
	b = appendUint32(b, n.ErrsIn)
	b = appendUint32(b, n.DropsIn)
	b = appendUint64(b, n.BytesOut)
	b = appendUint32(b, n.PacketsOut)
	b = appendUint32(b, n.ErrsOut)
	return appendUint32(b, n.DropsOut)
}

func decodeHostNetIO(r *reader) Record {
	return &HostNetIO{
		BytesIn:    r.uint64(),
		PktsIn:     r.uint32(),
		ErrsIn:     r.uint32(),
		DropsIn:    r.uint32(),
		BytesOut:   r.uint64(),
		PacketsOut: r.uint32(),
		ErrsOut:    r.uint32(),
		DropsOut:   r.uint32(),
	}
}

// VirtNode is virt_node (counter format 2100): hypervisor statistics
// (libvirt virNodeInfo).
type VirtNode struct {
	// Mhz is the expected CPU frequency.
	Mhz uint32 `json:"mhz"`
	// CPUs is the number of active CPUs.
	CPUs uint32 `json:"cpus"`
	// Memory is the memory size in bytes.
	Memory uint64 `json:"memory"`
	// MemoryFree is the unassigned memory in bytes.
	MemoryFree uint64 `json:"memory_free"`
	// NumDomains is the number of active domains.
	NumDomains uint32 `json:"num_domains"`
}

// Format implements Record.
func (*VirtNode) Format() DataFormat { return FormatVirtNode }

// Name implements Record.
func (*VirtNode) Name() string { return "virt_node" }

// AppendXDR implements Record.
func (v *VirtNode) AppendXDR(b []byte) []byte {
	b = appendUint32(b, v.Mhz)
	b = appendUint32(b, v.CPUs)
	b = appendUint64(b, v.Memory)
	b = appendUint64(b, v.MemoryFree)
	return appendUint32(b, v.NumDomains)
}

func decodeVirtNode(r *reader) Record {
	return &VirtNode{
		Mhz:        r.uint32(),
		CPUs:       r.uint32(),
		Memory:     r.uint64(),
		MemoryFree: r.uint64(),
		NumDomains: r.uint32(),
	}
}

// VirtDomainState is virt_cpu.state, libvirt's virDomainState (the spec
// names the type without listing it; the values are libvirt's).
type VirtDomainState uint32

// virDomainState values.
const (
	VirtDomainNoState     VirtDomainState = 0
	VirtDomainRunning     VirtDomainState = 1
	VirtDomainBlocked     VirtDomainState = 2
	VirtDomainPaused      VirtDomainState = 3
	VirtDomainShutdown    VirtDomainState = 4
	VirtDomainShutoff     VirtDomainState = 5
	VirtDomainCrashed     VirtDomainState = 6
	VirtDomainPMSuspended VirtDomainState = 7
)

// VirtCPU is virt_cpu (counter format 2101): virtual domain CPU
// statistics.
type VirtCPU struct {
	State VirtDomainState `json:"state"`
	// CPUTime is the CPU time used in milliseconds (spec "cpuTime").
	CPUTime uint32 `json:"cpu_time"`
	// NrVirtCPU is the number of virtual CPUs of the domain (spec
	// "nrVirtCpu").
	NrVirtCPU uint32 `json:"nr_virt_cpu"`
}

// Format implements Record.
func (*VirtCPU) Format() DataFormat { return FormatVirtCPU }

// Name implements Record.
func (*VirtCPU) Name() string { return "virt_cpu" }

// AppendXDR implements Record.
func (v *VirtCPU) AppendXDR(b []byte) []byte {
	b = appendUint32(b, uint32(v.State))
	b = appendUint32(b, v.CPUTime)
	return appendUint32(b, v.NrVirtCPU)
}

func decodeVirtCPU(r *reader) Record {
	return &VirtCPU{State: VirtDomainState(r.uint32()), CPUTime: r.uint32(), NrVirtCPU: r.uint32()}
}

// VirtMemory is virt_memory (counter format 2102): virtual domain memory
// in bytes.
type VirtMemory struct {
	// Memory is the memory used by the domain.
	Memory uint64 `json:"memory"`
	// MaxMemory is the memory the domain is allowed (spec "maxMemory").
	MaxMemory uint64 `json:"max_memory"`
}

// Format implements Record.
func (*VirtMemory) Format() DataFormat { return FormatVirtMemory }

// Name implements Record.
func (*VirtMemory) Name() string { return "virt_memory" }

// AppendXDR implements Record.
func (v *VirtMemory) AppendXDR(b []byte) []byte {
	b = appendUint64(b, v.Memory)
	return appendUint64(b, v.MaxMemory)
}

func decodeVirtMemory(r *reader) Record {
	return &VirtMemory{Memory: r.uint64(), MaxMemory: r.uint64()}
}

// VirtDiskIO is virt_disk_io (counter format 2103): virtual domain disk
// statistics.
type VirtDiskIO struct {
	// Capacity is the logical size in bytes.
	Capacity uint64 `json:"capacity"`
	// Allocation is the current allocation in bytes.
	Allocation uint64 `json:"allocation"`
	// Available is the remaining free bytes.
	Available uint64 `json:"available"`
	RdReq     uint32 `json:"rd_req"`
	RdBytes   uint64 `json:"rd_bytes"`
	WrReq     uint32 `json:"wr_req"`
	WrBytes   uint64 `json:"wr_bytes"`
	// Errs is the number of read/write errors.
	Errs uint32 `json:"errs"`
}

// Format implements Record.
func (*VirtDiskIO) Format() DataFormat { return FormatVirtDiskIO }

// Name implements Record.
func (*VirtDiskIO) Name() string { return "virt_disk_io" }

// AppendXDR implements Record.
func (v *VirtDiskIO) AppendXDR(b []byte) []byte {
	b = appendUint64(b, v.Capacity)
	b = appendUint64(b, v.Allocation)
	b = appendUint64(b, v.Available)
	b = appendUint32(b, v.RdReq)
	b = appendUint64(b, v.RdBytes)
	b = appendUint32(b, v.WrReq)
	b = appendUint64(b, v.WrBytes)
	return appendUint32(b, v.Errs)
}

func decodeVirtDiskIO(r *reader) Record {
	return &VirtDiskIO{
		Capacity:   r.uint64(),
		Allocation: r.uint64(),
		Available:  r.uint64(),
		RdReq:      r.uint32(),
		RdBytes:    r.uint64(),
		WrReq:      r.uint32(),
		WrBytes:    r.uint64(),
		Errs:       r.uint32(),
	}
}

// VirtNetIO is virt_net_io (counter format 2104): virtual domain network
// statistics.
type VirtNetIO struct {
	RxBytes   uint64 `json:"rx_bytes"`
	RxPackets uint32 `json:"rx_packets"`
	RxErrs    uint32 `json:"rx_errs"`
	RxDrop    uint32 `json:"rx_drop"`
	TxBytes   uint64 `json:"tx_bytes"`
	TxPackets uint32 `json:"tx_packets"`
	TxErrs    uint32 `json:"tx_errs"`
	TxDrop    uint32 `json:"tx_drop"`
}

// Format implements Record.
func (*VirtNetIO) Format() DataFormat { return FormatVirtNetIO }

// Name implements Record.
func (*VirtNetIO) Name() string { return "virt_net_io" }

// AppendXDR implements Record.
func (v *VirtNetIO) AppendXDR(b []byte) []byte {
	b = appendUint64(b, v.RxBytes)
	b = appendUint32(b, v.RxPackets)
	b = appendUint32(b, v.RxErrs)
	b = appendUint32(b, v.RxDrop)
	b = appendUint64(b, v.TxBytes)
	b = appendUint32(b, v.TxPackets)
	b = appendUint32(b, v.TxErrs)
	return appendUint32(b, v.TxDrop)
}

func decodeVirtNetIO(r *reader) Record {
	return &VirtNetIO{
		RxBytes:   r.uint64(),
		RxPackets: r.uint32(),
		RxErrs:    r.uint32(),
		RxDrop:    r.uint32(),
		TxBytes:   r.uint64(),
		TxPackets: r.uint32(),
		TxErrs:    r.uint32(),
		TxDrop:    r.uint32(),
	}
}
