package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/bench/gen"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
)

// lab is a namespace lab made by test/lab/lab.sh (contract: the netlab API):
// PREFIX-sw with bridge br0 and ports p1, p2; hosts PREFIX-h1, PREFIX-h2.
type lab struct {
	script string
	prefix string
	sw     string // switch namespace
	hosts  []string
}

// newLab runs `lab.sh up prefix nports`. The caller must call down.
func newLab(script, prefix string, nports int) (*lab, error) {
	l := &lab{script: script, prefix: prefix, sw: prefix + "-sw"}
	for i := 1; i <= nports; i++ {
		l.hosts = append(l.hosts, fmt.Sprintf("%s-h%d", prefix, i))
	}
	// A lab left by a killed earlier run with the same prefix goes first.
	if err := l.down(); err != nil {
		return nil, err
	}
	if out, err := exec.Command(script, "up", prefix, fmt.Sprint(nports)).CombinedOutput(); err != nil {
		_ = l.down()
		return nil, fmt.Errorf("lab.sh up %s: %w: %s", prefix, err, out)
	}
	return l, nil
}

// down removes the lab (idempotent).
func (l *lab) down() error {
	if out, err := exec.Command(l.script, "down", l.prefix).CombinedOutput(); err != nil {
		return fmt.Errorf("lab.sh down %s: %w: %s", l.prefix, err, out)
	}
	return nil
}

// linkIndex returns the ifindex of link name inside namespace ns.
func linkIndex(ns, name string) (int, error) {
	lk, err := netnsutil.Link(ns, name)
	if err != nil {
		return 0, err
	}
	return lk.Attrs().Index, nil
}

// rxPackets returns the 64-bit rx_packets counter of link name in ns.
func rxPackets(h *netlink.Handle, name string) (uint64, error) {
	lk, err := h.LinkByName(name)
	if err != nil {
		return 0, fmt.Errorf("link %s: %w", name, err)
	}
	st := lk.Attrs().Statistics
	if st == nil {
		return 0, fmt.Errorf("link %s: no statistics", name)
	}
	return st.RxPackets, nil
}

// pinThread locks the calling goroutine to its OS thread and the thread to
// cpu. The goroutine must end without unlocking: the runtime then discards
// the pinned (and possibly namespace-switched) thread.
func pinThread(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu % runtime.NumCPU())
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin thread to CPU %d: %w", cpu, err)
	}
	return nil
}

// stream is the frame source of a part: trafgen or the generator.
type stream interface {
	stop() error
	output() string // what it printed, for an error message
}

func (t *trafgen) output() string { return "trafgen output: " + t.out.String() }

// genStream is bench/gen sending h1 -> h2 until stopped.
type genStream struct {
	g      *gen.Generator
	cancel context.CancelFunc
	done   chan error
}

// startGen starts the generator in host 1: the stream's frame (60 bytes,
// the same addresses and ports as trafgen's) cut to -gen-sizes, pinned to
// CPU 1 as trafgen is, at its maximum rate. p1 gets GRO on (its veth
// accepts redirected frames only with NAPI on); it stays on for the run.
func (b *bench) startGen() (stream, error) {
	if err := gen.EnableNAPI(b.lab.sw, "p1"); err != nil {
		return nil, err
	}
	f := b.frame
	g, err := gen.New(gen.Config{
		Namespace: b.lab.hosts[0], Device: "eth0",
		DstMAC: net.HardwareAddr(f[0:6]), SrcMAC: net.HardwareAddr(f[6:12]),
		Src: netip.AddrFrom4([4]byte(f[26:30])), Dst: netip.AddrFrom4([4]byte(f[30:34])),
		SrcPort: binary.BigEndian.Uint16(f[34:36]), DstPort: binary.BigEndian.Uint16(f[36:38]),
		Sizes: b.o.genSizes, Flows: 1, CPU: 1,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &genStream{g: g, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- g.Send(ctx, 0, 0) }()
	return s, nil
}

func (s *genStream) stop() error {
	s.cancel()
	return errors.Join(<-s.done, s.g.Close())
}

func (s *genStream) output() string { return "generator" }

// trafgen is a running trafgen process inside a host namespace.
type trafgen struct {
	cmd  *exec.Cmd
	conf string
	out  strings.Builder
}

// startTrafgen sends `frame` as fast as trafgen can, out of eth0 of ns, on
// CPU cpu, until stop. frame is the Ethernet frame without FCS.
func startTrafgen(ns string, frame []byte, cpu int) (*trafgen, error) {
	f, err := os.CreateTemp("", "xdpbench-*.cfg")
	if err != nil {
		return nil, fmt.Errorf("trafgen config: %w", err)
	}
	var b strings.Builder
	b.WriteString("{ ")
	for i, c := range frame {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "0x%02x", c)
	}
	b.WriteString(" }\n")
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("writing trafgen config: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return nil, fmt.Errorf("writing trafgen config: %w", err)
	}
	t := &trafgen{conf: f.Name()}
	t.cmd = netnsutil.Command(context.Background(), ns,
		"taskset", "-c", fmt.Sprint(cpu),
		"trafgen", "--dev", "eth0", "--conf", f.Name(), "--cpus", "1",
		"--no-sock-mem", "--notouch-irq", "--no-cpu-stats")
	t.cmd.Stdout = &t.out
	t.cmd.Stderr = &t.out
	// Own process group, so stop reaches trafgen's forked worker too. No
	// Pdeathsig: it fires when the forking OS thread exits, and Go may
	// retire that thread long before the process ends; on SIGINT/SIGTERM
	// killChildren stops trafgen instead.
	t.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := t.cmd.Start(); err != nil {
		os.Remove(f.Name())
		return nil, fmt.Errorf("starting trafgen in %s: %w", ns, err)
	}
	children.Store(t.cmd.Process.Pid, t.conf)
	return t, nil
}

// children maps the PIDs (process group IDs) of running trafgens to their
// config files, for killChildren.
var children sync.Map

// killChildren kills every running trafgen process group we started, by
// PID, and removes its config (used when the benchmark is interrupted).
func killChildren() {
	children.Range(func(k, v any) bool {
		_ = syscall.Kill(-k.(int), syscall.SIGKILL) // best effort: exiting
		_ = os.Remove(v.(string))
		return true
	})
}

// stop kills trafgen's process group (by the PID we started) and reaps it.
func (t *trafgen) stop() error {
	pid := t.cmd.Process.Pid
	defer children.Delete(pid)
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing trafgen %d: %w", pid, err)
	}
	_ = t.cmd.Wait() // killed: the exit status is expected to be an error
	if err := os.Remove(t.conf); err != nil {
		return fmt.Errorf("removing trafgen config: %w", err)
	}
	return nil
}
