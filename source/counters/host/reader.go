// Package host reads the Host sFlow counter records
// (spec/sflow_host.txt: host_descr, host_adapters, host_cpu, host_memory,
// host_disk_io, host_net_io) from /proc and /sys on Linux, for the
// physical-entity data source of the switch (2:1, entPhysicalEntry.1).
//
// Every value is the raw kernel counter converted to the spec's unit; the
// collector computes rates (spec section 3: "the sFlow agent exports raw
// counter values and the sFlow analyzer computes deltas and rates").
// Counters that the spec declares as 32 bits wrap modulo 2^32.
package host

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Adapter is one network adapter (switch port) of the host, reported in
// host_adapters: its ifIndex and MAC address(es).
type Adapter struct {
	IfIndex uint32
	MACs    [][6]byte
}

// Options configures a Reader. Empty roots take the Linux defaults; tests
// point them at fixture trees.
type Options struct {
	// ProcRoot is where procfs is mounted (default "/proc").
	ProcRoot string
	// SysRoot is where sysfs is mounted (default "/sys").
	SysRoot string
	// EtcRoot is the configuration directory holding machine-id
	// (default "/etc").
	EtcRoot string
	// Adapters returns the ports of the switch for host_adapters. It is
	// called once per AppendRecords; the Reader copies what it returns.
	// Nil means no adapters.
	Adapters func() []Adapter
}

// Reader reads the host counter records. It keeps the source files open
// and its records and buffers between polls, so a poll allocates little.
// A Reader is not safe for concurrent use.
type Reader struct {
	opts Options

	// Records owned by the Reader, refilled by every AppendRecords.
	descr    sflow.HostDescr
	adapters sflow.HostAdapters
	cpu      sflow.HostCPU
	memory   sflow.HostMemory
	disk     sflow.HostDiskIO
	net      sflow.HostNetIO

	// Sources, opened on first use.
	hostname, osRelease                        procFile
	loadavg, stat, uptime, cpuinfo, cpuMaxFreq procFile
	meminfo, vmstat                            procFile
	mounts, filesystems, diskstats             procFile
	netDev                                     procFile

	// uuidKnown is set once the host UUID was found; it never changes.
	uuidKnown bool
	// macs backs the MAC lists of adapters.
	macs [][6]byte
	// fields is scratch space for splitting a line into fields.
	fields [][]byte
	// disks caches, per /proc/diskstats device name, whether the device
	// counts as a physical disk (see countsAsDisk).
	disks map[string]bool
	// seenDevs holds the devices already counted in the current poll
	// (mount sources, deduplicated); mountPath is scratch for unescaping.
	seenDevs  [][]byte
	mountPath []byte
	// statfs is syscall.Statfs; tests replace it to describe fixture
	// filesystems.
	statfs func(path string, st *syscall.Statfs_t) error
}

// New returns a Reader for opts.
func New(opts Options) *Reader {
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.SysRoot == "" {
		opts.SysRoot = "/sys"
	}
	if opts.EtcRoot == "" {
		opts.EtcRoot = "/etc"
	}
	proc := func(p string) procFile { return procFile{path: filepath.Join(opts.ProcRoot, p)} }
	return &Reader{
		opts:        opts,
		hostname:    proc("sys/kernel/hostname"),
		osRelease:   proc("sys/kernel/osrelease"),
		loadavg:     proc("loadavg"),
		stat:        proc("stat"),
		uptime:      proc("uptime"),
		cpuinfo:     proc("cpuinfo"),
		cpuMaxFreq:  procFile{path: filepath.Join(opts.SysRoot, "devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")},
		meminfo:     proc("meminfo"),
		vmstat:      proc("vmstat"),
		mounts:      proc("self/mounts"),
		filesystems: proc("filesystems"),
		diskstats:   proc("diskstats"),
		netDev:      proc("net/dev"),
		disks:       make(map[string]bool),
		statfs:      syscall.Statfs,
	}
}

// AppendRecords reads the host counters and appends host_descr,
// host_adapters, host_cpu, host_memory, host_disk_io and host_net_io to
// recs. The records are owned by r and overwritten by the next call.
//
// A source that cannot be read or parsed does not lose the others: the
// fields it feeds carry the spec's "unknown" values, all six records are
// still appended, and the returned error joins one error per failed
// source, each naming the record and the file.
func (r *Reader) AppendRecords(recs []sflow.Record) ([]sflow.Record, error) {
	errs := [...]error{
		r.readDescr(),
		r.readAdapters(),
		r.readCPU(),
		r.readMemory(),
		r.readDiskIO(),
		r.readNetIO(),
	}
	recs = append(recs, &r.descr, &r.adapters, &r.cpu, &r.memory, &r.disk, &r.net)
	return recs, errors.Join(errs[:]...)
}

// Close closes the source files. The Reader reopens them if used again.
func (r *Reader) Close() error {
	files := [...]*procFile{
		&r.hostname, &r.osRelease, &r.loadavg, &r.stat, &r.uptime, &r.cpuinfo,
		&r.cpuMaxFreq, &r.meminfo, &r.vmstat, &r.mounts, &r.filesystems,
		&r.diskstats, &r.netDev,
	}
	var errs []error
	for _, f := range files {
		if err := f.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// readAdapters copies the daemon's adapters into r.adapters, reusing its
// storage.
func (r *Reader) readAdapters() error {
	var in []Adapter
	if r.opts.Adapters != nil {
		in = r.opts.Adapters()
	}
	n := 0
	for i := range in {
		n += len(in[i].MACs)
	}
	// Size the MAC storage first: the adapters' lists are sub-slices of
	// it and must not be left pointing at a replaced array.
	if cap(r.macs) < n {
		r.macs = make([][6]byte, 0, n)
	}
	r.macs = r.macs[:0]
	out := r.adapters.Adapters[:0]
	for i := range in {
		a := sflow.HostAdapter{IfIndex: in[i].IfIndex}
		if len(in[i].MACs) > 0 {
			start := len(r.macs)
			r.macs = append(r.macs, in[i].MACs...)
			a.MACAddresses = r.macs[start:len(r.macs):len(r.macs)]
		}
		out = append(out, a)
	}
	r.adapters.Adapters = out
	return nil
}

// procFile is a kernel-generated text file (procfs or sysfs) read again at
// every poll. It stays open: these files regenerate their content when
// read from offset 0, so a poll costs a pread instead of an open (and the
// allocations of os.Open).
type procFile struct {
	path string
	f    *os.File
	buf  []byte
}

// minReadBuf is the initial read buffer; most sources fit in it.
const minReadBuf = 4096

// read returns the current content of the file. The result is valid until
// the next read of p.
func (p *procFile) read() ([]byte, error) {
	if p.f == nil {
		f, err := os.Open(p.path)
		if err != nil {
			return nil, err // *PathError: names the file
		}
		p.f = f
	}
	if cap(p.buf) < minReadBuf {
		p.buf = make([]byte, minReadBuf)
	}
	for {
		buf := p.buf[:cap(p.buf)]
		n, err := p.f.ReadAt(buf, 0)
		if errors.Is(err, io.EOF) {
			return buf[:n], nil
		}
		if err != nil {
			// Drop the descriptor (e.g. a sysfs file whose device went
			// away); the next poll reopens the path.
			if cerr := p.close(); cerr != nil {
				err = errors.Join(err, cerr)
			}
			return nil, err
		}
		// The buffer filled up: read the whole file again into a larger
		// one, so that the content is one consistent snapshot.
		p.buf = make([]byte, 2*len(buf))
	}
}

// close closes the descriptor, if open.
func (p *procFile) close() error {
	if p.f == nil {
		return nil
	}
	err := p.f.Close()
	p.f = nil
	if err != nil {
		return fmt.Errorf("close %s: %w", p.path, err)
	}
	return nil
}
