package host

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// diskSectorSize is the unit of the sector counts in /proc/diskstats: the
// kernel always counts 512-byte sectors there, whatever the device's
// logical block size (Documentation/admin-guide/iostats.rst).
const diskSectorSize = 512

// readDiskIO fills host_disk_io (spec "struct host_disk_io", format
// 2005).
//
// Space, from statfs(2) of each local disk filesystem mounted in
// /proc/self/mounts (see needsDevice; loop devices excluded, see
// isLoopDevice; each source device once, see seenDev), following Ganglia's
// definitions the spec adopts:
//   - disk_total: sum of f_blocks * f_frsize, bytes;
//   - disk_free: sum of f_bavail * f_frsize, bytes available to
//     unprivileged users (df's "Avail");
//   - part_max_used: the highest used / (used + avail) over those
//     filesystems, with used = f_blocks - f_bfree (df's "Use%"), in the
//     spec's percentage type (hundredths of a percent, 10000 = 100%);
//     -1 = unknown when there is no local filesystem.
//
// I/O, from /proc/diskstats, summed over whole physical disks (see
// countsAsDisk): reads (reads completed), bytes_read (sectors read * 512),
// read_time (ms spent reading), writes (writes completed), bytes_written
// (sectors written * 512), write_time (ms spent writing). The 32-bit
// fields wrap modulo 2^32; unreadable ones are all ones (unavailable).
func (r *Reader) readDiskIO() error {
	d := &r.disk
	var errs [2]error
	if err := r.readDiskSpace(d); err != nil {
		errs[0] = fmt.Errorf("host_disk_io: %w", err)
	}
	if err := r.readDiskStats(d); err != nil {
		d.Reads, d.ReadTime, d.Writes, d.WriteTime = sflow.CounterUnavailable32, sflow.CounterUnavailable32, sflow.CounterUnavailable32, sflow.CounterUnavailable32
		d.BytesRead, d.BytesWritten = sflow.CounterUnavailable64, sflow.CounterUnavailable64
		errs[1] = fmt.Errorf("host_disk_io: %w", err)
	}
	return errors.Join(errs[:]...)
}

// readDiskSpace sets disk_total, disk_free and part_max_used. A
// filesystem whose statfs fails is left out and reported; the others
// still count.
func (r *Reader) readDiskSpace(d *sflow.HostDiskIO) error {
	d.DiskTotal, d.DiskFree, d.PartMaxUsed = 0, 0, sflow.PercentageUnknown
	mounts, err := r.mounts.read()
	if err != nil {
		return err
	}
	fstypes, err := r.filesystems.read()
	if err != nil {
		return err
	}
	var errs []error
	r.seenDevs = r.seenDevs[:0]
	for len(mounts) > 0 {
		var line []byte
		line, mounts = nextLine(mounts)
		r.fields = splitFields(r.fields, line)
		if len(r.fields) < 3 {
			continue
		}
		dev, dir, fstype := r.fields[0], r.fields[1], r.fields[2]
		if !needsDevice(fstypes, fstype) || isLoopDevice(dev) || r.seenDev(dev) {
			continue
		}
		r.mountPath = unescapeMount(r.mountPath[:0], dir)
		path := string(r.mountPath)
		var st syscall.Statfs_t
		if err := r.statfs(path, &st); err != nil {
			errs = append(errs, fmt.Errorf("statfs %s: %w", path, err))
			continue
		}
		r.seenDevs = append(r.seenDevs, dev)
		frsize := uint64(st.Frsize)
		if frsize == 0 {
			frsize = uint64(st.Bsize)
		}
		d.DiskTotal += st.Blocks * frsize
		d.DiskFree += st.Bavail * frsize
		if p := usedPercentage(st.Blocks, st.Bfree, st.Bavail); p > d.PartMaxUsed {
			d.PartMaxUsed = p
		}
	}
	return errors.Join(errs...)
}

// usedPercentage is df's Use%: used / (used + available to unprivileged
// users), as a spec percentage (hundredths of a percent), rounded up like
// df so that a nearly full filesystem does not show as less full.
func usedPercentage(blocks, bfree, bavail uint64) sflow.Percentage {
	if bfree > blocks {
		return sflow.PercentageUnknown
	}
	used := blocks - bfree
	if used+bavail == 0 {
		return sflow.PercentageUnknown
	}
	return sflow.Percentage(math.Ceil(float64(used) * 10000 / float64(used+bavail)))
}

// isLoopDevice reports whether the mount source is a loop device: a
// filesystem image (squashfs snaps, ISO images) stored in a file whose
// space already counts in its own filesystem. Read-only images would also
// always look 100% full and mask the real part_max_used.
func isLoopDevice(dev []byte) bool { return bytes.HasPrefix(dev, []byte("/dev/loop")) }

// seenDev reports whether dev was already counted in this poll: a
// filesystem mounted several times (bind mounts, btrfs subvolumes) counts
// once.
func (r *Reader) seenDev(dev []byte) bool {
	for _, s := range r.seenDevs {
		if bytes.Equal(s, dev) {
			return true
		}
	}
	return false
}

// needsDevice reports whether fstype is a local disk filesystem: one that
// /proc/filesystems lists without the "nodev" flag, i.e. that needs a
// block device. This leaves out pseudo filesystems (proc, sysfs, tmpfs,
// cgroup, overlay, ...) and network ones (nfs, cifs: their statfs may
// also block on an unreachable server).
func needsDevice(filesystems, fstype []byte) bool {
	for len(filesystems) > 0 {
		var line []byte
		line, filesystems = nextLine(filesystems)
		flag, name, ok := bytes.Cut(line, []byte{'\t'})
		if ok && len(flag) == 0 && bytes.Equal(bytes.TrimSpace(name), fstype) {
			return true
		}
	}
	return false
}

// unescapeMount appends to dst the mount path s with the kernel's octal
// escapes (\040 space, \011 tab, \012 newline, \134 backslash) decoded.
func unescapeMount(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			dst = append(dst, (s[i+1]-'0')<<6|(s[i+2]-'0')<<3|(s[i+3]-'0'))
			i += 3
			continue
		}
		dst = append(dst, s[i])
	}
	return dst
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// Columns of a /proc/diskstats line after "major minor name".
const (
	dsReads          = 0
	dsSectorsRead    = 2
	dsReadMs         = 3
	dsWrites         = 4
	dsSectorsWritten = 6
	dsWriteMs        = 7
	dsColumns        = 8
)

// readDiskStats sums /proc/diskstats over the disks that countsAsDisk
// accepts.
func (r *Reader) readDiskStats(d *sflow.HostDiskIO) error {
	b, err := r.diskstats.read()
	if err != nil {
		return err
	}
	var sum, cols [dsColumns]uint64
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		r.fields = splitFields(r.fields, line)
		if len(r.fields) < 3+dsColumns {
			if len(r.fields) > 0 {
				return fmt.Errorf("parse %s: %w: %q", r.diskstats.path, errSyntax, line)
			}
			continue
		}
		name := r.fields[2]
		counts, err := r.countsAsDisk(name)
		if err != nil {
			return err
		}
		if !counts {
			continue
		}
		if _, err := uintFields(cols[:], r.fields[3:]); err != nil {
			return fmt.Errorf("parse %s %s: %w", r.diskstats.path, name, err)
		}
		for i := range sum {
			sum[i] += cols[i]
		}
	}
	d.Reads = uint32(sum[dsReads])
	d.BytesRead = sum[dsSectorsRead] * diskSectorSize
	d.ReadTime = uint32(sum[dsReadMs])
	d.Writes = uint32(sum[dsWrites])
	d.BytesWritten = sum[dsSectorsWritten] * diskSectorSize
	d.WriteTime = uint32(sum[dsWriteMs])
	return nil
}

// countsAsDisk reports whether the /proc/diskstats device name is a
// physical disk whose I/O host_disk_io sums. Only whole disks count
// (those with an entry in /sys/block; partitions have none), and of those
// not the ones whose I/O is also counted on another disk, which would be
// counted twice: devices stacked on other block devices (device mapper,
// md RAID, bcache: a non-empty /sys/block/NAME/slaves) and loop devices
// (backed by a file on another disk). The answer for a name never
// changes, so it is cached.
func (r *Reader) countsAsDisk(name []byte) (bool, error) {
	if v, ok := r.disks[string(name)]; ok {
		return v, nil
	}
	// /sys/block spells a '/' in a device name (cciss/c0d0) as '!'.
	sysName := strings.ReplaceAll(string(name), "/", "!")
	dir := filepath.Join(r.opts.SysRoot, "block", sysName)
	counts := false
	if _, err := os.Lstat(dir); err == nil {
		stacked, err := hasEntries(filepath.Join(dir, "slaves"))
		if err != nil {
			return false, err
		}
		counts = !stacked && !strings.HasPrefix(sysName, "loop")
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	r.disks[string(name)] = counts
	return counts, nil
}

// hasEntries reports whether the directory dir exists and is not empty.
func hasEntries(dir string) (bool, error) {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	names, err := f.Readdirnames(1)
	cerr := f.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	if cerr != nil {
		return false, cerr
	}
	return len(names) > 0, nil
}
