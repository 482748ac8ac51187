package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func newSession() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// killGroup sends SIGTERM to process group pgid (a session leader we
// started), then SIGKILL if it is still there after a second.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	for i := 0; i < 20; i++ {
		if syscall.Kill(-pgid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// clockTick is USER_HZ, the unit of utime and stime in /proc/PID/stat
// (100 on every Linux architecture Go supports).
const clockTick = 100

// procCPU returns utime+stime of process pid (all its threads).
func procCPU(pid int) (time.Duration, error) {
	return statCPU(fmt.Sprintf("/proc/%d/stat", pid))
}

// threadCPU returns utime+stime of thread tid of this process.
func threadCPU(tid int64) (time.Duration, error) {
	if tid == 0 {
		return 0, nil
	}
	return statCPU(fmt.Sprintf("/proc/self/task/%d/stat", tid))
}

func statCPU(file string) (time.Duration, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces: fields are counted
	// after its closing parenthesis. utime and stime are fields 14, 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("%s: malformed", file)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("%s: too few fields", file)
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%s: bad utime/stime", file)
	}
	return time.Duration(ut+st) * time.Second / clockTick, nil
}

// procMem returns VmRSS and VmHWM of pid in KiB.
func procMem(pid int) (rss, hwm uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss, _ = strconv.ParseUint(f[1], 10, 64)
		case "VmHWM:":
			hwm, _ = strconv.ParseUint(f[1], 10, 64)
		}
	}
	return rss, hwm, nil
}

// loadAvg returns the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// procSwitches sums the voluntary and involuntary context switches of every
// thread of pid: each is a sleep/wake (or preemption) of a daemon thread.
func procSwitches(pid int) (uint64, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			continue // the thread exited meanwhile
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && (f[0] == "voluntary_ctxt_switches:" || f[0] == "nonvoluntary_ctxt_switches:") {
				v, _ := strconv.ParseUint(f[1], 10, 64)
				n += v
			}
		}
	}
	return n, nil
}
