package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// TestE2EBalances runs `e2e` briefly on both hooks at 1-in-1 and 1-in-10
// (real lab, the generator's frames received by p1, the daemon binary,
// the collector socket): every trial's accounting must balance (e2e
// fails otherwise: the generator's count = p1 rx_packets = sample_pool,
// kernel samples = ring drops + read, read = encoded + sub-sampled +
// drops, encoded − unsent = delivered + collector socket losses), and the
// report must carry the figures of every trial.
func TestE2EBalances(t *testing.T) {
	netlab.RequireRoot(t)
	repo, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "sflowswitchd")
	if out, err := exec.Command("go", "build", "-C", repo, "-o", bin, "./cmd/sflowswitchd").CombinedOutput(); err != nil {
		t.Fatalf("building the daemon: %v\n%s", err, out)
	}
	var out bytes.Buffer
	e2eStdout = &out
	defer func() { e2eStdout = os.Stdout }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Paced: the accounting, not the rate, is under test, and the
	// machine may be busy.
	err = runE2E(ctx, []string{"-bin", bin, "-hooks", "tc,xdp", "-sampling", "1,10", "-rounds", "1",
		"-window", "1s", "-warmup", "300ms", "-gen-rounds", "1", "-rate", "100k",
		"-daemon-args", "-ring-bytes 8388608"})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`- (tc|xdp) 1-in-(\d+) round 1: generator sent (\d+) \(refused (\d+)\) = p1 rx_packets (\d+) .* = sample_pool (\d+); kernel samples (\d+) .*delivered (\d+) .*: balanced`)
	ms := re.FindAllStringSubmatch(out.String(), -1)
	if len(ms) != 4 {
		t.Fatalf("%d balanced trials in the report, want 4", len(ms))
	}
	for _, m := range ms {
		n := func(i int) uint64 { v, _ := strconv.ParseUint(m[i], 10, 64); return v }
		sent, rx, pool, kernel, delivered := n(3), n(5), n(6), n(7), n(8)
		if sent == 0 || sent != rx || rx != pool {
			t.Errorf("%s 1-in-%s: sent %d, rx %d, pool %d", m[1], m[2], sent, rx, pool)
		}
		if m[2] == "1" && kernel != pool {
			t.Errorf("%s 1-in-1: %d kernel samples of %d frames", m[1], kernel, pool)
		}
		if delivered == 0 {
			t.Errorf("%s 1-in-%s: nothing delivered", m[1], m[2])
		}
	}
	for _, want := range []string{"## e2e: the generator alone", "| tc | 1 |", "| xdp | 10 |", "## e2e per round",
		"-polling 0 -ring-bytes 8388608 (collector"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestParseE2EDaemonArgs: -daemon-args is split on white space and kept
// in order (they follow the daemon's own arguments, so a repeated flag
// overrides e2e's).
func TestParseE2EDaemonArgs(t *testing.T) {
	o, err := parseE2E([]string{"-daemon-args", " -ring-bytes  67108864 -log-level info "})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-ring-bytes", "67108864", "-log-level", "info"}
	if !slices.Equal(o.daemonArgs, want) {
		t.Fatalf("daemonArgs %q, want %q", o.daemonArgs, want)
	}
	if o, err = parseE2E(nil); err != nil || len(o.daemonArgs) != 0 {
		t.Fatalf("no -daemon-args: %q, %v", o.daemonArgs, err)
	}
}
