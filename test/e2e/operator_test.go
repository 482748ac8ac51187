package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// TestOneInstancePerNamespace: a second daemon in the same network
// namespace refuses to start, naming the running one's PID, although it
// shares neither pin directory, state directory nor metrics address with
// it (two would send under one agent address and the same sub-agent
// IDs); the first keeps running. A daemon in another namespace runs
// beside it.
func TestOneInstancePerNamespace(t *testing.T) {
	lab := newLab(t, 2)
	args := []string{"-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort), "-ports", "p1,p2"}
	d1 := startDaemon(t, lab, args...)
	d1.waitReady(t, lab, "p1", "p2")

	// No -metrics, its own state directory, nothing pinned.
	cmd := lab.Start(t, lab.Switch, daemonBin, hermetic(t, -1, args)...)
	d2 := &daemon{cmd: cmd, out: cmd.Stdout.(fmt.Stringer)}
	if code := d2.waitExit(t, testutil.Scaled(10*time.Second)); code != 1 {
		t.Errorf("second daemon in the namespace: exit %d, want 1\n%s", code, d2.log())
	}
	want := fmt.Sprintf("another sflowswitchd runs in this network namespace: PID %d", d1.cmd.Process.Pid)
	if !strings.Contains(d2.log(), want) || !strings.Contains(d2.log(), `msg="refusing to start"`) {
		t.Errorf("second daemon's refusal lacks %q:\n%s", want, d2.log())
	}
	if strings.Contains(d2.log(), "sampler attached") {
		t.Errorf("the second daemon attached a sampler before refusing:\n%s", d2.log())
	}
	if !d1.alive() {
		t.Fatalf("the first daemon stopped:\n%s", d1.log())
	}
	if _, err := fetchMetrics(lab); err != nil {
		t.Errorf("the first daemon's metrics: %v", err)
	}

	// Another network namespace: another instance.
	lab2 := newLab(t, 2)
	d3 := startDaemon(t, lab2, "-collector", fmt.Sprintf("%s:%d", lab2.CollectorAddr, collectorPort), "-ports", "p1,p2")
	d3.waitReady(t, lab2, "p1", "p2")
	if !d1.alive() || !d3.alive() {
		t.Fatalf("daemons in two namespaces: alive %v %v\n%s\n%s", d1.alive(), d3.alive(), d1.log(), d3.log())
	}
	// A stop frees the namespace: the next start runs, and the log ends
	// with the stop line.
	d1.signal(t, syscall.SIGTERM)
	if code := d1.waitExit(t, testutil.Scaled(10*time.Second)); code != 0 {
		t.Fatalf("SIGTERM: exit %d\n%s", code, d1.log())
	}
	lines := strings.Split(strings.TrimSpace(d1.log()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, `msg="sflowswitchd stopped"`) {
		t.Errorf("the log ends with %q, want the stop line", last)
	}
	d4 := startDaemon(t, lab, args...)
	d4.waitReady(t, lab, "p1", "p2")
}

// TestSettingsInForce: the daemon records the settings in force in its
// state directory (read by `sflowswitchd show`, and hsflowd.auto); the
// start-up line names the version; a refused reload is counted
// (config_reload_failures_total, config_last_reload_success) and
// -check-config refuses the same file; a good reload logs what changed.
func TestSettingsInForce(t *testing.T) {
	lab := newLab(t, 2)
	state := t.TempDir()
	conf := filepath.Join(t.TempDir(), "sflowswitchd.conf")
	collector := fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort)
	writeConf := func(body string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	good := func(rate int) string {
		return fmt.Sprintf("sampling = %d\nports = [\"p1\", \"p2\"]\n\n[[collector]]\naddress = \"%s\"\n", rate, collector)
	}
	writeConf(good(1000))
	d := startDaemon(t, lab, "-config", conf, "-state-dir", state, "-polling", "5s", "-direction", "both")
	d.waitReady(t, lab, "p1", "p2")
	if line := waitLog(t, d, "sflowswitchd starting"); !strings.Contains(line, "version=") || !strings.Contains(line, "commit=") {
		t.Errorf("start-up line %q lacks the version", line)
	}
	for _, want := range []string{`msg="sampler attached" port=p1 `, "rate=1000 kernel_rate=512"} {
		waitLog(t, d, want)
	}

	show := func(want ...string) string {
		t.Helper()
		deadline := time.Now().Add(testutil.Scaled(5 * time.Second))
		for {
			out, err := exec.Command(daemonBin, "show", "-state-dir", state).CombinedOutput()
			missing := ""
			for _, w := range want {
				if !strings.Contains(string(out), w) {
					missing = w
					break
				}
			}
			if err == nil && missing == "" {
				return string(out)
			}
			if time.Now().After(deadline) {
				t.Fatalf("show (%v) lacks %q:\n%s", err, missing, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	out := show(fmt.Sprintf("pid %d", d.cmd.Process.Pid),
		"agent address:  "+lab.AgentAddr.String()+" (mgmt0)  [default]",
		"chosen:", "polling:        5s  [flag]",
		"receiver 1  "+collector, "[file]",
		"  p1 ", "1000       512          both       [sampling: file]",
		"  p2 ")
	for _, want := range [][]string{{"  sampling ", " 1000 ", "[file]"}, {"  direction ", `"both"`, "[flag]"}, {"  polling ", " 5 ", "[flag]"}} {
		if !lineWith(out, want...) {
			t.Errorf("show has no line with %q:\n%s", want, out)
		}
	}
	auto, err := os.ReadFile(filepath.Join(state, "hsflowd.auto"))
	if err != nil {
		t.Fatal(err)
	}
	autoCollector := fmt.Sprintf("collector=%s %d\n", lab.CollectorAddr, collectorPort)
	if collectorPort == 6343 {
		autoCollector = fmt.Sprintf("collector=%s\n", lab.CollectorAddr) // hsflowd leaves the default port out
	}
	for _, want := range []string{"rev_start=", "sampling=1000\n", "polling=5\n", "agentIP=" + lab.AgentAddr.String() + "\n", "agent=mgmt0\n",
		autoCollector, "rev_end="} {
		if !strings.Contains(string(auto), want) {
			t.Errorf("hsflowd.auto lacks %q:\n%s", want, auto)
		}
	}

	// A refused file: -check-config says why, the reload is refused and
	// counted, the settings stay.
	writeConf("samplng = 50\n" + good(1000))
	chk, err := exec.Command(daemonBin, "-config", conf, "-check-config").CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(chk), conf+`:1: unknown setting "samplng" (did you mean "sampling"?)`) {
		t.Errorf("-check-config of the refused file: exit %d\n%s", code, chk)
	}
	d.signal(t, syscall.SIGHUP)
	waitLog(t, d, "config reload refused")
	waitScalar(t, lab, "sflowswitchd_config_reload_failures_total", 1)
	waitScalar(t, lab, "sflowswitchd_config_last_reload_success", 0)

	// A good reload: applied, what changed logged, the metric back to 1.
	writeConf(good(2000))
	chk, err = exec.Command(daemonBin, "-config", conf, "-check-config").CombinedOutput()
	if code := exitCode(err); code != 0 {
		t.Errorf("-check-config of the good file: exit %d\n%s", code, chk)
	}
	d.signal(t, syscall.SIGHUP)
	waitLog(t, d, `msg="configuration reloaded" changed="sampling: 1000 -> 2000"`)
	waitScalar(t, lab, "sflowswitchd_config_last_reload_success", 1)
	waitScalar(t, lab, "sflowswitchd_config_reload_failures_total", 1)
	show("2000       1024         both       [sampling: file]")
}

// lineWith reports whether a line of out holds every one of subs.
func lineWith(out string, subs ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			return true
		}
	}
	return false
}

// exitCode is a command's exit status from its Run/Output error.
func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// waitScalar waits until the scalar metric name reads want.
func waitScalar(t *testing.T, lab *netlab.Lab, name string, want uint64) {
	t.Helper()
	deadline := time.Now().Add(testutil.Scaled(5 * time.Second))
	for {
		m, err := fetchMetrics(lab)
		got := uint64(1 << 63)
		if err == nil {
			got = m.scalar(name)
		}
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d (%v), want %d", name, got, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
