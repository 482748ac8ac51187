package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pinfs"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// TestPsampleDaemon: the daemon sampling through psample (kernels with
// psample and act_sample: the Debian VMs), in both modes: rules (-hook
// psample: the agent installs a matchall + sample rule on p1) and
// listen-only (-psample-group 5: the rule is installed by hand, as
// another component would). 20 000 numbered frames into p1 at 1 in 10:
// every flow sample carries rate 10, sequence numbers are contiguous,
// pools never run backwards and end within 64 samples below p1's received
// frames, samples + drops are within 5 σ of frames/10, no frame is
// reported twice, and goflow2 and tshark read what our decoder reads.
// rules-upgrade and rules-crash send the frames in two halves around an
// upgrade in place (SIGUSR2) or a SIGKILL and a new daemon (pinned agent
// state): the port's pool and drops continue (no step back), sequence
// numbers continue (a gap only at the kill).
func TestPsampleDaemon(t *testing.T) {
	testskip.Root(t)
	// The modules first, where the kernel has them (the VMs' Debian
	// kernels build both as modules), as the package's postinst would.
	_ = exec.Command("modprobe", "-q", "psample").Run()
	_ = exec.Command("modprobe", "-q", "act_sample").Run()
	fs := features.ProbeFeatures()
	testskip.Feature(t, fs, features.FeaturePsample)
	testskip.Feature(t, fs, features.FeatureActSample)
	for _, mode := range []string{"rules", "listen-only", "rules-upgrade", "rules-crash"} {
		t.Run(mode, func(t *testing.T) { psampleDaemon(t, mode) })
	}
}

func psampleDaemon(t *testing.T, mode string) {
	const rate, frames = 10, 20000
	lab := newLab(t, 2)
	col := listen(t, lab, collectorPort)
	args := []string{"-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort),
		"-sampling", fmt.Sprint(rate), "-ports", "p1", "-polling", "1"}
	if mode != "listen-only" {
		args = append(args, "-hook", "psample")
		if mode != "rules" {
			args = append(args, "-pin-dir", pinfs.Dir(t), "-state-dir", t.TempDir())
		}
	} else {
		tc := func(a ...string) {
			t.Helper()
			if out, err := lab.Run(lab.Switch, "tc", a...); err != nil {
				t.Fatalf("tc %s: %v\n%s", strings.Join(a, " "), err, out)
			}
		}
		tc("qdisc", "add", "dev", "p1", "clsact")
		t.Cleanup(func() { _, _ = lab.Run(lab.Switch, "tc", "qdisc", "del", "dev", "p1", "clsact") })
		tc("filter", "add", "dev", "p1", "ingress", "matchall", "action", "sample", "rate", fmt.Sprint(rate), "group", "5", "trunc", "128")
		args = append(args, "-psample-group", "5")
	}
	rx0, _ := p1Packets(t, lab)
	d := startDaemon(t, lab, args...)
	waitPortInMetrics(t, lab, d, "p1")
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	// Paced: a burst beyond the backlog would lose frames before TC.
	send := func(from, n int) {
		for sent := from; sent < from+n; sent += 500 {
			lab.SendFrames(t, 0, numberedFrames(lab, 0, 1, lab.HostMACs[1], uint64(sent), 500))
			time.Sleep(2 * time.Millisecond)
		}
	}
	var dgs []datagram
	var flows []flowView
	settle := func() {
		for stable, prev := 0, -1; stable < 4; time.Sleep(500 * time.Millisecond) {
			dgs = col.snapshot(t)
			flows = goflowFlowsOf(dgs, p1)
			if len(flows) == prev {
				stable++
			} else {
				stable = 0
			}
			prev = len(flows)
		}
	}
	gapOK := false
	switch mode {
	case "rules-upgrade", "rules-crash":
		send(0, frames/2)
		settle()
		if mode == "rules-upgrade" {
			d.signal(t, syscall.SIGUSR2)
			d.waitLog(t, 60*time.Second, "upgrade in place completed")
		} else {
			d.signal(t, syscall.SIGKILL)
			d.waitExit(t, 10*time.Second)
			d = startDaemon(t, lab, args...)
			gapOK = true
		}
		waitPortInMetrics(t, lab, d, "p1")
		time.Sleep(testutil.Scaled(time.Second)) // the rules in place again
		send(frames/2, frames/2)
	default:
		send(0, frames)
	}
	settle()
	rx1, _ := p1Packets(t, lab)
	rx := rx1 - rx0
	if len(flows) == 0 {
		t.Fatalf("no flow sample of p1\n%s", d.log())
	}
	last := flows[len(flows)-1]
	for i, f := range flows {
		if f.rate != rate {
			t.Errorf("flow sample %d: rate %d, want %d", i, f.rate, rate)
		}
		if i > 0 && ((f.seq != flows[i-1].seq+1 && !(gapOK && f.seq > flows[i-1].seq)) || f.pool < flows[i-1].pool) {
			t.Errorf("flow sample %d: seq %d pool %d after seq %d pool %d", i, f.seq, f.pool, flows[i-1].seq, flows[i-1].pool)
		}
	}
	mean, sd, ok := withinSigmas(len(flows)+int(last.drop), frames, 1.0/rate, 5)
	if gapOK { // samples in flight at the kill: sFlow's gap, counted as numbers
		mean, sd, ok = withinSigmas(int(last.seq)+int(last.drop), frames, 1.0/rate, 5)
	}
	t.Logf("%s: %d frames sent, p1 received %d; %d flow samples + %d drops (expected %.0f ± %.1f); last pool %d", mode, frames, rx, len(flows), last.drop, mean, sd, last.pool)
	if !ok {
		t.Errorf("%d samples + %d drops of %d frames, want %.0f ± 5×%.1f", len(flows), last.drop, frames, mean, sd)
	}
	if uint64(last.pool) > rx || uint64(last.pool)+64*rate < rx {
		t.Errorf("last pool %d, p1 received %d: want at most, and within 64 samples of it", last.pool, rx)
	}
	if dups := duplicateFrames(dgs, p1); len(dups) != 0 {
		t.Errorf("%d frames reported twice", len(dups))
	}
	checkIndependentDecoders(t, dgs, collectorPort, p1)
}

// waitPortInMetrics waits until the daemon's metrics list port (it is
// sampled: psample ports have no BPF attachment to wait for).
func waitPortInMetrics(t *testing.T, lab *netlab.Lab, d *daemon, port string) {
	t.Helper()
	deadline := time.Now().Add(testutil.Scaled(15 * time.Second))
	for {
		if m, err := fetchMetrics(lab); err == nil {
			if _, ok := m.get("sflowswitchd_port_sampling_rate", `port="`+port+`"`); ok {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not in the metrics after 15 s\n%s", port, d.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
