package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// TestMain lets the test binary serve as runLive's child: runLive
// re-executes os.Executable() (here: the test binary) with the
// live-in-switch subcommand inside the switch namespace.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == liveInNamespace {
		if err := runLiveInSwitch(context.Background(), os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench/daemon:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestLiveTestrunBalances runs `live -source testrun` briefly (real lab,
// real sampler, agent, sender and collector socket) and checks that its
// accounting balances: the child fails when a produced sample is neither
// delivered nor counted (testrunBalance), and the totals it prints must
// add up here too.
func TestLiveTestrunBalances(t *testing.T) {
	netlab.RequireRoot(t)
	var out bytes.Buffer
	liveStdout = &out
	defer func() { liveStdout = os.Stdout }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := runLive(ctx, []string{"-source=testrun", "-rounds=1", "-duration=1s", "-warmup=200ms", "-max-datagram=1400"})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`# TESTRUN BALANCED produced=(\d+) delivered=(\d+) counted_drops=(\d+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatal("no TESTRUN BALANCED line")
	}
	var v [3]uint64
	for i := range v {
		v[i], _ = strconv.ParseUint(m[i+1], 10, 64)
	}
	if v[0] == 0 || v[1] == 0 || v[0] != v[1]+v[2] {
		t.Errorf("produced %d, delivered %d, counted drops %d", v[0], v[1], v[2])
	}
	tot := regexp.MustCompile(`produced (\d+) = delivered (\d+) \+ ring drops (\d+) \+ agent drops (\d+) .* \+ sub-sampled (\d+) \+ collector socket (\d+) samples`).FindStringSubmatch(out.String())
	if tot == nil {
		t.Fatal("no TESTRUN totals line")
	}
	var sum, produced uint64
	for i, s := range tot[1:] {
		n, _ := strconv.ParseUint(s, 10, 64)
		if i == 0 {
			produced = n
		} else {
			sum += n
		}
	}
	if sum != produced {
		t.Errorf("totals: delivered + drops = %d, produced %d", sum, produced)
	}
}
