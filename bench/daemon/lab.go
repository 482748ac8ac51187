package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// lab is a namespace lab made by test/lab/lab.sh (see lab.sh's header): switch PREFIX-sw with bridge ports p1..pN,
// hosts PREFIX-hI, collector PREFIX-col at 198.19.255.2.
type lab struct {
	script string
	prefix string
	nports int
}

// collectorAddr is the collector's address in every lab.
const collectorAddr = "198.19.255.2"

// newLab builds a lab with a prefix unique to this process. The caller
// must call down, also on failure.
func newLab(repo string, nports int) (*lab, error) {
	l := &lab{
		script: filepath.Join(repo, "test", "lab", "lab.sh"),
		prefix: fmt.Sprintf("bd%06x", os.Getpid()&0xffffff),
		nports: nports,
	}
	out, err := exec.Command(l.script, "up", l.prefix, fmt.Sprint(nports)).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("lab.sh up %s: %w: %s", l.prefix, err, out)
	}
	return l, nil
}

// down removes the lab; lab.sh down is idempotent.
func (l *lab) down() error {
	out, err := exec.Command(l.script, "down", l.prefix).CombinedOutput()
	if err != nil {
		return fmt.Errorf("lab.sh down %s: %w: %s", l.prefix, err, out)
	}
	return nil
}

func (l *lab) sw() string        { return l.prefix + "-sw" }
func (l *lab) col() string       { return l.prefix + "-col" }
func (l *lab) host(i int) string { return fmt.Sprintf("%s-h%d", l.prefix, i) }
func nsPath(ns string) string    { return netnsutil.Path(ns) }
func portName(i int) string      { return fmt.Sprintf("p%d", i) }
func (l *lab) ports() []string {
	var p []string
	for i := 1; i <= l.nports; i++ {
		p = append(p, portName(i))
	}
	return p
}

// command returns a command that runs name in namespace ns
// (netnsutil.Command: nsenter keeps /sys and pinned BPF objects visible).
// Setsid puts it in its own process group, so stopping it also stops its
// forks (trafgen forks one sender per CPU).
func command(ctx context.Context, ns string, name string, args ...string) *exec.Cmd {
	cmd := netnsutil.Command(ctx, ns, name, args...)
	cmd.SysProcAttr = newSession()
	return cmd
}

// inNetns runs fn in namespace ns (netnsutil.DoNamed). Sockets fn creates
// belong to ns for their whole life, whatever thread uses them later.
func inNetns(ns string, fn func() error) error { return netnsutil.DoNamed(ns, fn) }

// linkStats reads the 64-bit counters of link name in namespace ns.
func linkStats(ns, name string) (*netlink.LinkStatistics, error) {
	lk, err := netnsutil.Link(ns, name)
	if err != nil {
		return nil, err
	}
	if lk.Attrs().Statistics == nil {
		return nil, fmt.Errorf("link %s in %s: no statistics", name, ns)
	}
	return lk.Attrs().Statistics, nil
}

// trafgenConf is a trafgen config of one 64-byte (60 + FCS) UDP frame from
// host s to host d.
func trafgenConf(s, d int) string {
	return fmt.Sprintf("{ eth(da=%s, sa=%s), ipv4(saddr=%s, daddr=%s, ttl=64), udp(sport=40000, dport=7000), fill(0x54, 18) }\n",
		netlab.HostMAC(d), netlab.HostMAC(s), netlab.HostAddr(s), netlab.HostAddr(d))
}

// startTrafgen starts trafgen at its maximum rate (one sender process) from
// host s to host d; it runs until stopped.
func startTrafgen(ctx context.Context, l *lab, dir string, s, d int) (*exec.Cmd, error) {
	conf := filepath.Join(dir, fmt.Sprintf("h%d-h%d.cfg", s, d))
	if err := os.WriteFile(conf, []byte(trafgenConf(s, d)), 0o644); err != nil {
		return nil, fmt.Errorf("trafgen config: %w", err)
	}
	cmd := command(ctx, l.host(s), "trafgen", "--dev", "eth0", "--conf", conf, "--cpus", "1",
		"--no-sock-mem", "--notouch-irq", "--no-cpu-stats", "--num", "0")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting trafgen h%d->h%d: %w", s, d, err)
	}
	return cmd, nil
}

// stopProc terminates cmd's process group (it was started by us, in a
// session of its own) and reaps it.
func stopProc(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	killGroup(cmd.Process.Pid)
	_ = cmd.Wait()
}

// repoRoot finds the repository's top folder (the sflowswitchd go.mod
// with test/lab/lab.sh beside it; bench/ has a go.mod of its own) from the
// working directory upwards.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if _, lerr := os.Stat(filepath.Join(dir, "test", "lab", "lab.sh")); err == nil && lerr == nil && strings.Contains(string(b), "sflowswitchd") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no sflowswitchd repository (go.mod and test/lab/lab.sh) above the working directory")
		}
		dir = parent
	}
}
