package host

import (
	"errors"
	"fmt"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// readMemory fills host_memory (spec "struct host_memory", format 2004):
//   - /proc/meminfo, kB values times 1024 -> bytes: mem_total MemTotal,
//     mem_free MemFree, mem_shared Shmem, mem_buffers Buffers, mem_cached
//     Cached, swap_total SwapTotal, swap_free SwapFree; a size that is
//     missing or unreadable is 0 (unknown);
//   - /proc/vmstat, raw counts (wrapping modulo 2^32): page_in pgpgin,
//     page_out pgpgout, swap_in pswpin, swap_out pswpout; unavailable ones
//     are sflow.CounterUnavailable32. The kernel counts pgpgin/pgpgout in
//     KiB transferred for paging I/O; they are exported as is, like the
//     Ganglia and hsflowd agents the spec's metrics come from.
func (r *Reader) readMemory() error {
	m := &r.memory
	*m = sflow.HostMemory{}
	var errs [2]error
	if b, err := r.meminfo.read(); err != nil {
		errs[0] = fmt.Errorf("host_memory: %w", err)
	} else {
		parseKeyValues(b, func(key []byte, kb uint64) {
			var dst *uint64
			switch string(key) {
			case "MemTotal":
				dst = &m.MemTotal
			case "MemFree":
				dst = &m.MemFree
			case "Shmem":
				dst = &m.MemShared
			case "Buffers":
				dst = &m.MemBuffers
			case "Cached":
				dst = &m.MemCached
			case "SwapTotal":
				dst = &m.SwapTotal
			case "SwapFree":
				dst = &m.SwapFree
			default:
				return
			}
			*dst = kb * 1024
		})
		if m.MemTotal == 0 {
			errs[0] = fmt.Errorf("host_memory: parse %s: %w: no MemTotal", r.meminfo.path, errSyntax)
		}
	}
	setUnavailable32(&m.PageIn, &m.PageOut, &m.SwapIn, &m.SwapOut)
	if b, err := r.vmstat.read(); err != nil {
		errs[1] = fmt.Errorf("host_memory: %w", err)
	} else {
		parseKeyValues(b, func(key []byte, v uint64) {
			switch string(key) {
			case "pgpgin":
				m.PageIn = uint32(v)
			case "pgpgout":
				m.PageOut = uint32(v)
			case "pswpin":
				m.SwapIn = uint32(v)
			case "pswpout":
				m.SwapOut = uint32(v)
			}
		})
	}
	return errors.Join(errs[:]...)
}
