package host

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// userHZ is the unit of the CPU times in /proc/stat: USER_HZ ticks per
// second, sysconf(_SC_CLK_TCK). It is 100 in the Linux user-space ABI of
// every architecture Go supports.
const userHZ = 100

// ticksToMs converts USER_HZ ticks to the milliseconds of host_cpu,
// wrapping modulo 2^32 like every 32-bit counter of the spec.
func ticksToMs(ticks uint64) uint32 { return uint32(ticks * (1000 / userHZ)) }

// readCPU fills host_cpu (spec "struct host_cpu", format 2003, plus the
// later cpu_steal, cpu_guest and cpu_guest_nice) from
//   - /proc/loadavg: load_one, load_five, load_fifteen (float, as
//     printed; -1.0 = unknown) and proc_run / proc_total (the "R/T" field:
//     runnable and total scheduling entities);
//   - /proc/stat: the aggregate "cpu" line (user nice system idle iowait
//     irq softirq steal guest guest_nice, USER_HZ ticks -> ms) for cpu_user,
//     cpu_nice, cpu_system, cpu_idle, cpu_wio, cpu_intr, cpu_sintr,
//     cpu_steal, cpu_guest, cpu_guest_nice; the number of "cpuN" lines for
//     cpu_num; "intr" (its first number, the total) for interrupts; "ctxt"
//     for contexts;
//   - /proc/uptime: uptime, seconds truncated;
//   - /proc/cpuinfo: cpu_speed, the first "cpu MHz" rounded; where
//     cpuinfo has none (e.g. ARM), cpu0's cpufreq cpuinfo_max_freq (kHz /
//     1000); 0 = unknown.
//
// Unknown values: loads -1.0, counters (times, interrupts, contexts)
// sflow.CounterUnavailable32, gauges (proc_run, proc_total, cpu_num,
// cpu_speed, uptime) 0.
func (r *Reader) readCPU() error {
	c := &r.cpu
	*c = sflow.HostCPU{
		LoadOne:     sflow.HostCPULoadUnknown,
		LoadFive:    sflow.HostCPULoadUnknown,
		LoadFifteen: sflow.HostCPULoadUnknown,
	}
	var errs [4]error
	// Each reader below sets its fields only on success, so a failed
	// source leaves the unknown values set here (stat's counters are set
	// to unavailable explicitly).
	if err := r.readLoadavg(c); err != nil {
		errs[0] = fmt.Errorf("host_cpu: %w", err)
	}
	if err := r.readStat(c); err != nil {
		setUnavailable32(&c.CPUUser, &c.CPUNice, &c.CPUSystem, &c.CPUIdle, &c.CPUWio,
			&c.CPUIntr, &c.CPUSintr, &c.CPUSteal, &c.CPUGuest, &c.CPUGuestNice,
			&c.Interrupts, &c.Contexts)
		c.CPUNum = 0
		errs[1] = fmt.Errorf("host_cpu: %w", err)
	}
	if err := r.readUptime(c); err != nil {
		errs[2] = fmt.Errorf("host_cpu: %w", err)
	}
	if err := r.readCPUSpeed(c); err != nil {
		errs[3] = fmt.Errorf("host_cpu: %w", err)
	}
	return errors.Join(errs[:]...)
}

// setUnavailable32 sets each counter to sflow.CounterUnavailable32.
func setUnavailable32(ps ...*uint32) {
	for _, p := range ps {
		*p = sflow.CounterUnavailable32
	}
}

// readLoadavg parses /proc/loadavg: "0.52 0.58 0.59 2/345 12345".
func (r *Reader) readLoadavg(c *sflow.HostCPU) error {
	b, err := r.loadavg.read()
	if err != nil {
		return err
	}
	r.fields = splitFields(r.fields, b)
	if len(r.fields) < 4 {
		return fmt.Errorf("parse %s: %w: %q", r.loadavg.path, errSyntax, b)
	}
	var loads [3]float64
	for i := range loads {
		if loads[i], err = parseDecimal(r.fields[i]); err != nil {
			return fmt.Errorf("parse %s: %w", r.loadavg.path, err)
		}
	}
	run, total, ok := bytes.Cut(r.fields[3], []byte{'/'})
	if !ok {
		return fmt.Errorf("parse %s: %w: %q", r.loadavg.path, errSyntax, r.fields[3])
	}
	nRun, err := parseUint(run)
	if err != nil {
		return fmt.Errorf("parse %s: %w", r.loadavg.path, err)
	}
	nTotal, err := parseUint(total)
	if err != nil {
		return fmt.Errorf("parse %s: %w", r.loadavg.path, err)
	}
	c.LoadOne, c.LoadFive, c.LoadFifteen = float32(loads[0]), float32(loads[1]), float32(loads[2])
	c.ProcRun, c.ProcTotal = uint32(nRun), uint32(nTotal)
	return nil
}

// Columns of the /proc/stat "cpu" line (proc(5)).
const (
	statUser = iota
	statNice
	statSystem
	statIdle
	statIowait
	statIRQ
	statSoftIRQ
	statSteal
	statGuest
	statGuestNice
	statColumns
)

// readStat parses /proc/stat. Columns missing on old kernels (steal
// before 2.6.11, guest before 2.6.24, guest_nice before 2.6.33) are
// unavailable.
func (r *Reader) readStat(c *sflow.HostCPU) error {
	b, err := r.stat.read()
	if err != nil {
		return err
	}
	var (
		times              [statColumns]uint64
		nTimes             = -1
		cpus               uint32
		intr, ctxt         uint64
		haveIntr, haveCtxt bool
	)
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		r.fields = splitFields(r.fields, line)
		if len(r.fields) < 2 {
			continue
		}
		name := r.fields[0]
		switch {
		case string(name) == "cpu":
			if nTimes, err = uintFields(times[:], r.fields[1:]); err != nil {
				return fmt.Errorf("parse %s cpu: %w", r.stat.path, err)
			}
		case bytes.HasPrefix(name, []byte("cpu")):
			cpus++
		case string(name) == "intr":
			if intr, err = parseUint(r.fields[1]); err != nil {
				return fmt.Errorf("parse %s intr: %w", r.stat.path, err)
			}
			haveIntr = true
		case string(name) == "ctxt":
			if ctxt, err = parseUint(r.fields[1]); err != nil {
				return fmt.Errorf("parse %s ctxt: %w", r.stat.path, err)
			}
			haveCtxt = true
		}
	}
	if nTimes < statIdle+1 || !haveIntr || !haveCtxt {
		return fmt.Errorf("parse %s: %w: no cpu, intr or ctxt line", r.stat.path, errSyntax)
	}
	dst := [statColumns]*uint32{
		&c.CPUUser, &c.CPUNice, &c.CPUSystem, &c.CPUIdle, &c.CPUWio,
		&c.CPUIntr, &c.CPUSintr, &c.CPUSteal, &c.CPUGuest, &c.CPUGuestNice,
	}
	for i, p := range dst {
		if i < nTimes {
			*p = ticksToMs(times[i])
		} else {
			*p = sflow.CounterUnavailable32
		}
	}
	c.CPUNum = cpus
	c.Interrupts = uint32(intr)
	c.Contexts = uint32(ctxt)
	return nil
}

// readUptime parses /proc/uptime: "889.45 815.54" (seconds up, idle).
func (r *Reader) readUptime(c *sflow.HostCPU) error {
	b, err := r.uptime.read()
	if err != nil {
		return err
	}
	r.fields = splitFields(r.fields, b)
	if len(r.fields) < 1 {
		return fmt.Errorf("parse %s: %w: empty", r.uptime.path, errSyntax)
	}
	up, err := parseDecimal(r.fields[0])
	if err != nil {
		return fmt.Errorf("parse %s: %w", r.uptime.path, err)
	}
	c.Uptime = uint32(up)
	return nil
}

// readCPUSpeed sets cpu_speed from /proc/cpuinfo or cpufreq (see readCPU).
// A missing cpufreq file is not an error: the speed is then unknown (0).
func (r *Reader) readCPUSpeed(c *sflow.HostCPU) error {
	b, err := r.cpuinfo.read()
	if err != nil {
		return err
	}
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		key, val, ok := bytes.Cut(line, []byte{':'})
		if !ok || string(bytes.TrimSpace(key)) != "cpu MHz" {
			continue
		}
		mhz, err := parseDecimal(bytes.TrimSpace(val))
		if err != nil {
			return fmt.Errorf("parse %s cpu MHz: %w", r.cpuinfo.path, err)
		}
		c.CPUSpeed = uint32(math.Round(mhz))
		return nil
	}
	kb, err := r.cpuMaxFreq.read()
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no cpufreq either: speed unknown
	}
	if err != nil {
		return err
	}
	khz, err := parseUint(bytes.TrimSpace(kb))
	if err != nil {
		return fmt.Errorf("parse %s: %w", r.cpuMaxFreq.path, err)
	}
	c.CPUSpeed = uint32((khz + 500) / 1000)
	return nil
}
