// Package gen is a frame generator at kernel speed for the benchmarks:
// the technique of xdp-project's xdp-trafficgen, written with cilium/ebpf.
//
// An XDP program of its own (gen.c, never attached to a device) is run by
// BPF_PROG_RUN in live-frames mode (BPF_F_TEST_XDP_LIVE_FRAMES, Linux 5.18):
// every run makes one real xdp_frame from a template, gives it the next
// length and flow of the configured cycles, and redirects it (XDP_REDIRECT
// into a one-entry devmap) out of a veth in a lab host namespace. The frame
// crosses the veth and its peer, the switch port, receives it through its
// NAPI poll like any frame from a NIC: it meets an XDP program on the port,
// then the stack (TC ingress, the bridge). No socket, no skb on the sending
// side and no copy into the kernel: one thread sends millions of frames per
// second.
//
// Counts are exact: a tracepoint program (xdp:xdp_devmap_xmit) adds up the
// frames the veth accepted and refused at every flush, so Counters().Sent
// is the number of frames the switch port received (its rx_packets grows
// by exactly that much) and Dropped the frames its receive ring had no room
// for (the port's rx_dropped).
//
// The veth accepts redirected frames only while its peer runs NAPI: the
// peer must have an XDP program attached or GRO on (EnableNAPI).
package gen

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/xdptest"
)

// Frame lengths (without FCS) the generator accepts: the IPv4/UDP headers
// fit in the smallest Ethernet frame, and the largest fits a 1500-byte MTU
// (a veth refuses longer frames).
const (
	MinFrameLen = 60
	MaxFrameLen = 1514
	// MaxSizes is the longest cycle of frame lengths (MAX_SIZES in gen.c).
	MaxSizes = 64
	// MaxFlows is the largest number of flows (UDP source ports from
	// SrcPort on).
	MaxFlows = 1 << 15
)

// IMIX is the simple IMIX mix 7:4:1 of 64, 594 and 1518-byte frames
// (with FCS), in an order that spreads the large frames.
var IMIX = []int{60, 590, 60, 60, 590, 60, 1514, 60, 590, 60, 60, 590}

// Config is what the generator sends, and where.
type Config struct {
	// Namespace is the lab host namespace holding Device (the generator's
	// thread enters it).
	Namespace string
	// Device is the veth the frames leave through; its peer receives them.
	Device string
	// SrcMAC, DstMAC, Src and Dst are the frames' Ethernet and IPv4
	// addresses; DstPort their UDP destination port.
	SrcMAC, DstMAC net.HardwareAddr
	Src, Dst       netip.Addr
	DstPort        uint16
	// SrcPort is the first UDP source port: flow i (0 <= i < Flows) has
	// source port SrcPort + i. 0 means 10000.
	SrcPort uint16
	// Flows is the number of flows, one frame each in turn (0 means 1).
	Flows int
	// Sizes are the frame lengths without FCS, one frame each in turn
	// (nil means {60}, a 64-byte frame on the wire).
	Sizes []int
	// Chunk is the number of frames per BPF_PROG_RUN call (0: 65536);
	// a paced Send uses smaller calls.
	Chunk int
	// BatchSize is the kernel's batch: frames run, then flushed to the veth
	// (and the veth's NAPI scheduled), per round (BPF_PROG_RUN batch_size,
	// 1..256; 0: the kernel's default, 64).
	BatchSize int
	// CPU pins the sending thread (-1: not pinned).
	CPU int
}

// Counters are the generator's counts since New, summed over CPUs.
type Counters struct {
	Runs       uint64 // program runs (frames made)
	Redirected uint64 // frames redirected to the veth
	Bad        uint64 // frames the program could not build (never expected)
	Sent       uint64 // frames the veth accepted: the peer's rx_packets
	Dropped    uint64 // frames the veth refused (the peer's ring was full)
	Flushes    uint64 // bulk flushes to the veth
	Errors     uint64 // flushes refused as a whole
	Bytes      uint64 // bytes of the redirected frames (without FCS)
}

// Generator is a loaded generator. Send runs it; it is not safe to call
// Send concurrently.
type Generator struct {
	cfg      Config
	objs     progObjects
	tp       link.Link // gen_xmit on the tracepoint
	xdp      link.Link // gen_frame on the device (see New)
	template []byte
	tid      atomic.Int64

	// The sending threads' CPU time: finished Sends, and where the running
	// one's thread started (CPU).
	cpuMu    sync.Mutex
	cpuDone  time.Duration
	cpuTID   int
	cpuStart time.Duration
}

// New loads the generator's programs for cfg and points its devmap at
// cfg.Device. The caller must Close it.
func New(cfg Config) (*Generator, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	lk, err := netnsutil.Link(cfg.Namespace, cfg.Device)
	if err != nil {
		return nil, err
	}
	ifindex := lk.Attrs().Index
	var st syscall.Stat_t
	if err := syscall.Stat(netnsutil.Path(cfg.Namespace), &st); err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", cfg.Namespace, err)
	}
	spec, err := loadProg()
	if err != nil {
		return nil, err
	}
	var lens [MaxSizes]uint32
	for i, s := range cfg.Sizes {
		lens[i] = uint32(s)
	}
	var mg [8]byte
	if _, err := rand.Read(mg[:]); err != nil {
		return nil, err
	}
	magic := binary.LittleEndian.Uint64(mg[:]) // as gen_frame loads it
	for name, v := range map[string]any{
		progVarMagic:         magic,
		progVarFrameLen:      lens,
		progVarSizeCount:     uint32(len(cfg.Sizes)),
		progVarFlowCount:     uint32(cfg.Flows),
		progVarSportBase:     cfg.SrcPort,
		progVarTargetIfindex: uint32(ifindex),
		progVarTargetNetns:   uint32(st.Ino),
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("setting %s: %w", name, err)
		}
	}
	g := &Generator{cfg: cfg}
	if err := spec.LoadAndAssign(&g.objs, nil); err != nil {
		return nil, fmt.Errorf("loading the generator: %w", err)
	}
	// The devmap resolves the ifindex in the updater's namespace.
	err = netnsutil.DoNamed(cfg.Namespace, func() error {
		return g.objs.TxPort.Put(uint32(0), uint32(ifindex))
	})
	if err != nil {
		g.objs.Close()
		return nil, fmt.Errorf("devmap entry for %s: %w", cfg.Device, err)
	}
	if g.tp, err = link.AttachTracing(link.TracingOptions{Program: g.objs.GenXmit}); err != nil {
		g.objs.Close()
		return nil, fmt.Errorf("attaching the xdp_devmap_xmit counter: %w", err)
	}
	// Attached to the device it sends from, so that the XDP dispatcher
	// holds the program (gen.c, gen_frame): without it every BPF_PROG_RUN
	// call waits for an RCU grace period.
	err = netnsutil.DoNamed(cfg.Namespace, func() error {
		var err error
		g.xdp, err = link.AttachXDP(link.XDPOptions{Program: g.objs.GenFrame, Interface: ifindex, Flags: link.XDPDriverMode})
		return err
	})
	if err != nil {
		g.tp.Close()
		g.objs.Close()
		return nil, fmt.Errorf("attaching the generator to %s: %w", cfg.Device, err)
	}
	maxLen := 0
	for _, s := range cfg.Sizes {
		maxLen = max(maxLen, s)
	}
	payload := make([]byte, maxLen-42)
	copy(payload, mg[:])
	g.template = netlab.UDPFrame(cfg.SrcMAC, cfg.DstMAC,
		netip.AddrPortFrom(cfg.Src, cfg.SrcPort), netip.AddrPortFrom(cfg.Dst, cfg.DstPort), payload)
	return g, nil
}

func (c *Config) normalize() error {
	if c.Namespace == "" || c.Device == "" {
		return errors.New("gen: Namespace and Device are required")
	}
	if len(c.SrcMAC) != 6 || len(c.DstMAC) != 6 || !c.Src.Is4() || !c.Dst.Is4() {
		return errors.New("gen: SrcMAC, DstMAC (Ethernet) and Src, Dst (IPv4) are required")
	}
	if c.SrcPort == 0 {
		c.SrcPort = 10000
	}
	if c.Flows == 0 {
		c.Flows = 1
	}
	if c.Flows < 0 || c.Flows > MaxFlows || int(c.SrcPort)+c.Flows-1 > 65535 {
		return fmt.Errorf("gen: %d flows from source port %d: want 1..%d ports below 65536", c.Flows, c.SrcPort, MaxFlows)
	}
	if len(c.Sizes) == 0 {
		c.Sizes = []int{MinFrameLen}
	}
	if len(c.Sizes) > MaxSizes {
		return fmt.Errorf("gen: %d frame lengths, at most %d", len(c.Sizes), MaxSizes)
	}
	for _, s := range c.Sizes {
		if s < MinFrameLen || s > MaxFrameLen {
			return fmt.Errorf("gen: frame length %d outside %d..%d", s, MinFrameLen, MaxFrameLen)
		}
	}
	if c.Chunk <= 0 {
		c.Chunk = 1 << 16
	}
	if c.BatchSize < 0 || c.BatchSize > 256 {
		return fmt.Errorf("gen: batch size %d outside 1..256", c.BatchSize)
	}
	return nil
}

// Close detaches and unloads the generator.
func (g *Generator) Close() error {
	return errors.Join(g.xdp.Close(), g.tp.Close(), g.objs.Close())
}

// Template returns the longest frame the generator sends (flow 0), as
// sent before its lengths are cut.
func (g *Generator) Template() []byte { return g.template }

// Config returns the generator's configuration with its defaults filled in.
func (g *Generator) Config() Config { return g.cfg }

// Counters reads the counts, summed over CPUs.
func (g *Generator) Counters() (Counters, error) {
	var per []progGenCounters
	if err := g.objs.Counters.Lookup(uint32(0), &per); err != nil {
		return Counters{}, fmt.Errorf("reading the generator's counters: %w", err)
	}
	var c Counters
	bpf.SumPerCPU(&c, per)
	return c, nil
}

// ThreadID is the Linux thread ID of the sending thread while Send runs
// (0 otherwise): its CPU time is the generator's
// (/proc/self/task/TID/schedstat). Softirq work that the kernel runs on
// that thread when a batch ends (the switch port's NAPI poll, when it was
// scheduled on this CPU) is part of it.
func (g *Generator) ThreadID() int { return int(g.tid.Load()) }

// Send makes frames until n have been run (n = 0: until ctx ends), at rate
// frames per second (0: as fast as one thread can). It runs on an OS
// thread of its own inside cfg.Namespace (pinned to cfg.CPU), which is
// discarded afterwards, and returns when done, when ctx ends (nil), or on
// an error. The count is exact (a call cut short by a signal is counted by
// the program, not by its repeat count).
func (g *Generator) Send(ctx context.Context, n uint64, rate float64) error {
	if rate < 0 {
		return fmt.Errorf("gen: rate %v < 0", rate)
	}
	errc := make(chan error, 1)
	go func() {
		// Not unlocked: the thread entered a namespace and may be pinned,
		// so the runtime ends it with this goroutine.
		runtime.LockOSThread()
		if err := netnsutil.Enter(g.cfg.Namespace); err != nil {
			errc <- err
			return
		}
		if g.cfg.CPU >= 0 {
			var set unix.CPUSet
			set.Set(g.cfg.CPU)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				errc <- fmt.Errorf("gen: pinning to CPU %d: %w", g.cfg.CPU, err)
				return
			}
		}
		tid := unix.Gettid()
		if err := g.threadStart(tid); err != nil {
			errc <- err
			return
		}
		err := g.send(ctx, n, rate)
		errc <- errors.Join(err, g.threadEnd(tid))
	}()
	return <-errc
}

// threadStart records the sending thread and its CPU time so far.
func (g *Generator) threadStart(tid int) error {
	c, err := threadCPU(tid)
	if err != nil {
		return err
	}
	g.cpuMu.Lock()
	g.cpuTID, g.cpuStart = tid, c
	g.cpuMu.Unlock()
	g.tid.Store(int64(tid))
	return nil
}

// threadEnd adds the sending thread's CPU time to the finished Sends'.
func (g *Generator) threadEnd(tid int) error {
	g.tid.Store(0)
	c, err := threadCPU(tid)
	g.cpuMu.Lock()
	defer g.cpuMu.Unlock()
	if err == nil {
		g.cpuDone += c - g.cpuStart
	}
	g.cpuTID = 0
	return err
}

// CPU returns the CPU time the sending threads have used since New: the
// finished Sends and the running one (schedstat, nanoseconds). It
// includes the softirq work the kernel ran on them (see ThreadID).
func (g *Generator) CPU() (time.Duration, error) {
	g.cpuMu.Lock()
	defer g.cpuMu.Unlock()
	total := g.cpuDone
	if g.cpuTID != 0 {
		c, err := threadCPU(g.cpuTID)
		if err != nil {
			return 0, err
		}
		total += c - g.cpuStart
	}
	return total, nil
}

// threadCPU returns the run time of thread tid of this process.
func threadCPU(tid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		return 0, fmt.Errorf("gen: CPU time of thread %d: %w", tid, err)
	}
	var ns int64
	if _, err := fmt.Sscan(string(b), &ns); err != nil {
		return 0, fmt.Errorf("gen: schedstat of thread %d: %w", tid, err)
	}
	return time.Duration(ns), nil
}

// send is Send's loop, on the locked thread.
func (g *Generator) send(ctx context.Context, n uint64, rate float64) error {
	c0, err := g.Counters()
	if err != nil {
		return err
	}
	chunk := uint64(g.cfg.Chunk)
	if rate > 0 {
		// About 0.5 ms of frames per call: the pacing is smooth at the
		// scale of the receiver's rings and timers.
		chunk = min(chunk, max(64, uint64(rate/2000)))
	}
	r := newRunner(g.objs.GenFrame.FD(), g.template, g.cfg.BatchSize)
	start := time.Now()
	var done uint64
	for ctx.Err() == nil && (n == 0 || done < n) {
		k := chunk
		if n > 0 {
			k = min(k, n-done)
		}
		if err := r.run(uint32(k)); err != nil {
			if !errors.Is(err, unix.EINTR) {
				return err
			}
			// Cut short by a signal: the program counted what ran.
			c, cerr := g.Counters()
			if cerr != nil {
				return cerr
			}
			done = c.Runs - c0.Runs
			continue
		}
		done += k
		if rate > 0 {
			// A sleep of the thread itself (clock_nanosleep on the
			// monotonic clock, absolute): a Go timer would have to hand
			// the wake-up to this locked, pinned thread through the
			// scheduler, which on a busy machine takes tens of ms.
			due := start.Add(time.Duration(float64(done) / rate * 1e9))
			if d := time.Until(due); d > 0 {
				ts := unix.NsecToTimespec(monoNow() + d.Nanoseconds())
				for {
					err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil)
					if !errors.Is(err, unix.EINTR) {
						break
					}
				}
			}
		}
	}
	return nil
}

// monoNow reads CLOCK_MONOTONIC in ns.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) // cannot fail for this clock
	return ts.Nano()
}

// runner runs the generator in live-frames mode. The system call is made
// here (xdptest.TestRun), not through cilium/ebpf's Program.Run, because
// Run repeats a call interrupted by a signal in full, which would send
// more frames than asked; here the program's own count says how many ran.
// The context is xdp_md's data_end only: the ingress device is the
// loopback of the calling thread's namespace.
type runner struct {
	attr  xdptest.Attr
	frame []byte
	md    xdptest.MD
}

func newRunner(fd int, frame []byte, batch int) *runner {
	r := &runner{frame: frame, md: xdptest.MD{DataEnd: uint32(len(frame))}}
	r.attr = xdptest.Attr{
		ProgFD:     uint32(fd),
		DataSizeIn: uint32(len(frame)),
		CtxSizeIn:  uint32(unsafe.Sizeof(r.md)),
		Flags:      unix.BPF_F_TEST_XDP_LIVE_FRAMES,
		BatchSize:  uint32(batch),
	}
	return r
}

// run runs the program repeat times in live-frames mode; EINTR is
// returned as is.
func (r *runner) run(repeat uint32) error {
	r.attr.DataIn = uint64(uintptr(unsafe.Pointer(&r.frame[0])))
	r.attr.CtxIn = uint64(uintptr(unsafe.Pointer(&r.md)))
	r.attr.Repeat = repeat
	errno := xdptest.TestRun(&r.attr)
	runtime.KeepAlive(r)
	if errno != 0 {
		return fmt.Errorf("BPF_PROG_RUN live frames (repeat %d): %w", repeat, errno)
	}
	return nil
}

// EnableNAPI turns GRO on for device dev in namespace ns: a veth accepts
// redirected frames (XDP_REDIRECT into it, ndo_xdp_xmit) only while its
// peer runs NAPI, which it does with an XDP program attached or with GRO
// requested (drivers/net/veth.c). Called for the switch port that receives
// the generator's frames; it stays on until the lab is removed.
func EnableNAPI(ns, dev string) error {
	return netnsutil.DoNamed(ns, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socket for SIOCETHTOOL: %w", err)
		}
		defer unix.Close(fd)
		// struct ethtool_value {cmd, data}; struct ifreq with ifr_data.
		// The ifreq carries a pointer to val: pinned, so that the kernel
		// reads it where it is.
		val := &struct{ cmd, data uint32 }{cmd: unix.ETHTOOL_SGRO, data: 1}
		var pin runtime.Pinner
		pin.Pin(val)
		defer pin.Unpin()
		var ifr struct {
			name [unix.IFNAMSIZ]byte
			data uintptr
			_    [16]byte
		}
		if len(dev) >= unix.IFNAMSIZ {
			return fmt.Errorf("device name %q too long", dev)
		}
		copy(ifr.name[:], dev)
		ifr.data = uintptr(unsafe.Pointer(val))
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
		if errno != 0 {
			return fmt.Errorf("GRO on for %s (ETHTOOL_SGRO): %w", dev, errno)
		}
		return nil
	})
}

// ThreadedNAPI switches dev's NAPI poll in namespace ns to a kernel thread
// of its own (/sys/class/net/DEV/threaded, written through `ip netns
// exec`, which mounts the namespace's /sys) and returns the PIDs of the
// threads that appeared (named napi/DEV-ID): the receive path of the
// generator's frames then runs there, not on the generator's thread at
// the end of each of its batches. dev must have NAPI on (EnableNAPI).
func ThreadedNAPI(ns, dev string) ([]int, error) {
	before, err := napiThreads(dev)
	if err != nil {
		return nil, err
	}
	out, err := exec.Command("ip", "netns", "exec", ns, "sh", "-c", "echo 1 > /sys/class/net/"+dev+"/threaded").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("threaded NAPI on %s: %w: %s", dev, err, out)
	}
	after, err := napiThreads(dev)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, p := range after {
		if !slices.Contains(before, p) {
			pids = append(pids, p)
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("threaded NAPI on %s: no napi/%s-* thread appeared", dev, dev)
	}
	return pids, nil
}

// napiThreads lists the kernel threads named napi/DEV-*.
func napiThreads(dev string) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "comm"))
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), "napi/"+dev+"-") {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// ParseRate parses a generator rate in frames/s: "max" (0, as fast as it
// goes), "1500", "250k" or "1.5M".
func ParseRate(s string) (float64, error) {
	if s == "max" {
		return 0, nil
	}
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1e3, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, strings.TrimSuffix(s, "M")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bad rate %q", s)
	}
	return v * mult, nil
}
