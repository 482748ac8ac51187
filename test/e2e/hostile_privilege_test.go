package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// startWithCapSet runs the daemon as root holding only caps (setpriv
// syntax, e.g. "+net_admin,+perfmon") in every set, with no_new_privs.
func startWithCapSet(t *testing.T, lab *netlab.Lab, caps string, args ...string) *daemon {
	t.Helper()
	set := "-all," + caps
	sp := append([]string{"--inh-caps=" + set, "--ambient-caps=" + set, "--bounding-set=" + set, "--no-new-privs",
		daemonBin, "-metrics", metricsAddr}, hermetic(t, -1, args)...)
	cmd := lab.Start(t, lab.Switch, "setpriv", sp...)
	return &daemon{cmd: cmd, out: cmd.Stdout.(fmt.Stringer)}
}

// TestHostilePrivilegeDiagnostics: a daemon started
// without a capability it needs says which one, and never blames the
// kernel: without CAP_BPF it refuses to start naming CAP_BPF (before: the
// kernel "lacks xdp (Linux 4.8)"); without CAP_NET_ADMIN likewise;
// without CAP_PERFMON (the verifier refuses the sampler) one short error
// naming CAP_PERFMON (before: 38 KB of verifier log on one line); without
// CAP_NET_RAW it runs, samples, and reports the AF_XDP probe as not
// permitted for lack of CAP_NET_RAW (before: af_xdp_need_wakeup (Linux
// 5.4) missing).
func TestHostilePrivilegeDiagnostics(t *testing.T) {
	lab := newLab(t, 1)
	col := listenCounting(t, lab, collectorPort)
	collector := fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort)
	for _, c := range []struct {
		without, caps, want, also string
	}{
		{"CAP_BPF", "+net_admin,+perfmon,+net_raw", "lacks CAP_BPF", "not permitted to use xdp"},
		{"CAP_NET_ADMIN", "+bpf,+perfmon,+net_raw", "lacks CAP_NET_ADMIN", "not permitted to use xdp"},
		// The probes pass; the verifier refuses the sampler (EACCES).
		{"CAP_PERFMON", "+bpf,+net_admin,+net_raw", "not permitted: the process lacks CAP_PERFMON", ""},
	} {
		t.Run("Without"+c.without, func(t *testing.T) {
			d := startWithCapSet(t, lab, c.caps, "-collector", collector, "-ports", "p1")
			code := d.waitExit(t, 10*time.Second)
			out := d.log()
			if code != 1 || !strings.Contains(out, c.want) || !strings.Contains(out, c.also) {
				t.Errorf("exit %d; want 1 and a refusal naming %s:\n%s", code, c.without, tail(out, 3000))
			}
			// One short error, not the verifier's log (38 KB on one line
			// without CAP_PERFMON).
			longest := 0
			for _, line := range strings.Split(out, "\n") {
				longest = max(longest, len(line))
			}
			if longest > 1024 {
				t.Errorf("a log line of %d bytes (bound 1024):\n%s", longest, tail(out, 3000))
			}
			if strings.Contains(out, "lacks xdp (Linux") || strings.Contains(out, "kernel feature unavailable") {
				t.Errorf("the kernel blamed for a missing %s:\n%s", c.without, tail(out, 3000))
			}
			recordHostile(t, hostileRow{
				Case:  "start without " + c.without,
				Bound: "refused naming " + c.without + ", never a missing kernel feature; no log line over 1 KiB",
				Peak:  fmt.Sprintf("exit %d, %q named: %v; longest line %d bytes", code, c.want, strings.Contains(out, c.want), longest),
			})
		})
	}
	t.Run("WithoutCAP_NET_RAW", func(t *testing.T) {
		d := startWithCapSet(t, lab, "+bpf,+net_admin,+perfmon", "-collector", collector, "-ports", "p1", "-sampling", "1", "-polling", "0")
		d.waitReady(t, lab, "p1")
		samplesFlow(t, lab, col, "without CAP_NET_RAW")
		out := d.log()
		if !strings.Contains(out, "kernel feature not probed") || !strings.Contains(out, "feature=af_xdp_need_wakeup missing=CAP_NET_RAW") {
			t.Errorf("the AF_XDP probe not reported as lacking CAP_NET_RAW:\n%s", tail(out, 3000))
		}
		if strings.Contains(out, `msg="kernel feature unavailable" feature=af_xdp_need_wakeup`) {
			t.Errorf("af_xdp_need_wakeup reported missing from the kernel:\n%s", tail(out, 3000))
		}
		m := mustFetchMetrics(t, lab)
		v, ok := m.get("sflowswitchd_kernel_feature_not_permitted", `feature="af_xdp_need_wakeup",missing="CAP_NET_RAW"`)
		if !ok || v != 1 {
			t.Errorf("sflowswitchd_kernel_feature_not_permitted for af_xdp_need_wakeup: %d %v", v, ok)
		}
		recordHostile(t, hostileRow{
			Case:  "start without CAP_NET_RAW",
			Bound: "samples; AF_XDP reported not permitted (CAP_NET_RAW), not missing from the kernel",
			Peak:  fmt.Sprintf("sampling; kernel_feature_not_permitted{af_xdp_need_wakeup,CAP_NET_RAW} = %d", v),
		})
	})
}
