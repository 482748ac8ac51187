package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// TestHsflowdDent runs the daemon on a DENT-style hsflowd.conf alone
// (psample { group=1 }, dent { sw=on switchport=^p[0-9]+$ }, pcap
// { dev=p1 sampling=10 }) beside another program's filter on p1's ingress
// (pref 10): the agent's own matchall + sample rule goes on p1 (pref 1,
// group 1, trunc 128, no skip_sw, verdict continue), no XDP or TC sampler
// is attached to p1, the samples of frames sent into p1 arrive at rate 10
// in number 1/10 (goflow2 and ours agree), the foreign filter still
// counts every frame, and at the daemon's exit its rule goes while the
// foreign filter and its qdisc stay. Needs psample and act_sample (the
// Debian VMs).
func TestHsflowdDent(t *testing.T) {
	testskip.Root(t)
	_ = exec.Command("modprobe", "-q", "psample").Run()
	_ = exec.Command("modprobe", "-q", "act_sample").Run()
	fs := features.ProbeFeatures()
	testskip.Feature(t, fs, features.FeaturePsample)
	testskip.Feature(t, fs, features.FeatureActSample)
	lab := newLab(t, 2)
	col := listen(t, lab, collectorPort)
	tc := func(args ...string) string {
		t.Helper()
		out, err := lab.Run(lab.Switch, "tc", args...)
		if err != nil {
			t.Fatalf("tc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	tc("qdisc", "add", "dev", "p1", "clsact")
	tc("filter", "add", "dev", "p1", "ingress", "pref", "10", "matchall", "action", "pass")
	conf := filepath.Join(t.TempDir(), "hsflowd.conf")
	body := fmt.Sprintf(`sflow {
  collector { ip = %s udpport = %d }
  pcap { dev = p1 ; sampling = 10 }
  psample { group = 1 }
  dent { sw = on ; switchport = "^p[0-9]+$" }
}
`, lab.CollectorAddr, collectorPort)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, lab, "-hsflowd-conf", conf)
	deadline := time.Now().Add(testutil.Scaled(10 * time.Second))
	for !strings.Contains(tc("filter", "show", "dev", "p1", "ingress"), "sample rate 1/10 group 1") {
		if !d.alive() || time.Now().After(deadline) {
			t.Fatalf("no dent rule on p1:\n%s\n%s", tc("filter", "show", "dev", "p1", "ingress"), d.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	rules := tc("filter", "show", "dev", "p1", "ingress")
	for _, want := range []string{"pref 1 ", "handle 0x73667073", "sample rate 1/10 group 1 trunc_size 128", "continue", "pref 10 "} {
		if !strings.Contains(rules, want) {
			t.Errorf("p1 ingress lacks %q:\n%s", want, rules)
		}
	}
	if strings.Contains(rules, "skip_sw") {
		t.Errorf("sw = on, but the rule is skip_sw:\n%s", rules)
	}
	if a := samplerAttachment(t, lab, "p1"); a != "" {
		t.Errorf("p1 has the %s sampler attached besides its psample rule", a)
	}
	time.Sleep(1200 * time.Millisecond) // a worker tick
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	const k = 5000
	sendNumbered(t, lab, 0, 1, 1, k)
	waitSettled(t, col)
	flows := samplesIn(col.snapshot(t), p1, 1, k)
	var drops uint32
	for _, f := range flows {
		if f.rate != 10 {
			t.Fatalf("p1 sampled at %d, want 10", f.rate)
		}
		drops = max(drops, f.drops)
	}
	mean, sd, ok := withinSigmas(len(flows)+int(drops), k, 0.1, 5)
	t.Logf("dent rule on p1: %d samples + %d dropped of %d frames at 1 in 10 (%.0f ± %.1f)", len(flows), drops, k, mean, sd)
	if !ok {
		t.Errorf("%d samples + %d drops of %d frames at 1 in 10, want %.0f ± 5×%.1f", len(flows), drops, k, mean, sd)
	}
	checkIndependentDecoders(t, col.snapshot(t), collectorPort, p1)
	// The foreign filter after ours still classifies every frame (our
	// rule's verdict is continue, as mod_dent's).
	s := tc("-s", "filter", "show", "dev", "p1", "ingress")
	_, foreign, _ := strings.Cut(s, "pref 10 ")
	m := regexp.MustCompile(`Sent \d+ bytes (\d+) pkt`).FindStringSubmatch(foreign)
	if m == nil {
		t.Fatalf("the foreign filter's counters:\n%s", s)
	}
	if n, _ := strconv.Atoi(m[1]); n < k {
		t.Errorf("the foreign filter after ours saw %d packets of the %d sent:\n%s", n, k, s)
	}

	d.signal(t, syscall.SIGTERM)
	if code := d.waitExit(t, testutil.Scaled(20*time.Second)); code != 0 {
		t.Errorf("exit code %d\n%s", code, d.log())
	}
	left := tc("filter", "show", "dev", "p1", "ingress")
	if strings.Contains(left, "sample") || !strings.Contains(left, "pref 10 ") {
		t.Errorf("after exit p1 ingress holds:\n%s\nwant the foreign filter alone", left)
	}
	if q := tc("qdisc", "show", "dev", "p1"); !strings.Contains(q, "clsact") {
		t.Errorf("the foreign filter's clsact went:\n%s", q)
	}
}
