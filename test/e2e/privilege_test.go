package e2e

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gosnmp/gosnmp"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/snmptest"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// daemonCaps is the capability set the daemon runs with (README
// "Privileges", packaging/sflowswitchd.service): loading and attaching XDP
// (CAP_BPF, CAP_NET_ADMIN), ring buffers and BPF helpers that read kernel
// memory (CAP_PERFMON), AF_XDP sockets (CAP_NET_RAW).
const daemonCaps = "bpf,net_admin,perfmon,net_raw"

// Capability numbers (linux/capability.h) of daemonCaps.
const (
	capNetAdmin = 12
	capNetRaw   = 13
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// unprivilegedCopy copies the daemon binary into a directory user nobody
// can read (the test build directory is private to root).
func unprivilegedCopy(t *testing.T) string {
	t.Helper()
	return unprivilegedCopyOf(t, daemonBin, "sflowswitchd")
}

// unprivilegedCopyOf copies the executable src, as name, into a
// directory user nobody can read.
func unprivilegedCopyOf(t *testing.T, srcPath, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sflowswitchd-caps-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(srcPath)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, name)
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// startDaemonWithCaps runs the daemon holding exactly daemonCaps
// (permitted, effective, inheritable, ambient and bounding sets) with
// no_new_privs: as user nobody (uid/gid 65534, no supplementary groups),
// or as root with every other capability dropped (what the systemd unit
// does).
func startDaemonWithCaps(t *testing.T, lab *netlab.Lab, nobody bool, args ...string) *daemon {
	t.Helper()
	bin := daemonBin
	if nobody {
		bin = unprivilegedCopy(t)
	}
	sp := append(setprivArgs(nobody), bin, "-metrics", metricsAddr)
	uid := -1
	if nobody {
		uid = 65534
	}
	cmd := lab.Start(t, lab.Switch, "setpriv", append(sp, hermetic(t, uid, args)...)...)
	out, ok := cmd.Stdout.(fmt.Stringer)
	if !ok {
		t.Fatalf("netlab.Start output %T", cmd.Stdout)
	}
	return &daemon{cmd: cmd, out: out}
}

// setprivArgs are setpriv's options that leave a process exactly
// daemonCaps with no_new_privs, as user nobody or as root.
func setprivArgs(nobody bool) []string {
	var sp []string
	if nobody {
		sp = []string{"--reuid=65534", "--regid=65534", "--clear-groups"}
	}
	caps := "-all," + "+" + strings.ReplaceAll(daemonCaps, ",", ",+")
	return append(sp, "--inh-caps="+caps, "--ambient-caps="+caps, "--bounding-set="+caps, "--no-new-privs")
}

// perfHelperEnv makes this test binary, re-executed, open one perf event
// and exit (perfOpenHelper in TestMain) instead of running tests.
const perfHelperEnv = "SFLOW_E2E_PERF_OPEN"

// perfOpenHelper opens and closes a CPU-wide PERF_COUNT_SW_BPF_OUTPUT
// event on CPU 0, what the drop notification buffers are made of, and
// returns why not.
func perfOpenHelper() error {
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_BPF_OUTPUT, Sample_type: unix.PERF_SAMPLE_RAW, Wakeup: 1}
	attr.Size = uint32(unsafe.Sizeof(attr))
	fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("perf_event_open: %w", err)
	}
	return unix.Close(fd)
}

// perfEventAllowed asks the kernel, apart from the daemon and its probe,
// whether a process with the daemon's privileges (setprivArgs) may open
// the drop buffers' perf event: this test binary under the same setpriv,
// in perfOpenHelper. Mainline lets CAP_PERFMON open it; Debian's kernels
// add kernel.perf_event_paranoid=3, at which Debian 12's 6.1 requires
// CAP_SYS_ADMIN. It returns the helper's answer ("ok" or its error).
func perfEventAllowed(t *testing.T, nobody bool) (bool, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if nobody {
		self = unprivilegedCopyOf(t, self, "e2e.test")
	}
	cmd := exec.Command("setpriv", append(setprivArgs(nobody), self, "-test.run=^$")...)
	cmd.Env = append(os.Environ(), perfHelperEnv+"=1")
	out, err := cmd.CombinedOutput()
	answer := strings.TrimSpace(string(out))
	var ee *exec.ExitError
	switch {
	case err == nil && answer == "ok":
		return true, answer
	case errors.As(err, &ee) && ee.ExitCode() == 3:
		return false, answer
	default:
		t.Fatalf("perf_event_open helper under setpriv: %v: %s", err, out)
		return false, ""
	}
}

// procCaps reads the capability masks and uid of process pid.
func procCaps(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// TestLeastPrivilege runs the real daemon with only CAP_BPF,
// CAP_NET_ADMIN, CAP_PERFMON and CAP_NET_RAW (it used
// to need CAP_SYS_ADMIN) and checks that it attaches, samples, polls and
// exports: as user nobody, and as root with every other capability
// dropped, there also serving the SFLOW-MIB through a real snmpd.
func TestLeastPrivilege(t *testing.T) {
	t.Run("Nobody", func(t *testing.T) { testLeastPrivilege(t, true) })
	t.Run("RootCapsDropped", func(t *testing.T) { testLeastPrivilege(t, false) })
}

func testLeastPrivilege(t *testing.T, nobody bool) {
	const n, k = 10, 5000
	lab := newLab(t, 2)
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	col := listen(t, lab, 6343)
	agentx := "off"
	var snmp *snmptest.Snmpd
	if !nobody {
		snmp = startSnmpd(t)
		agentx = "unix:" + snmp.SocketPath
	}
	d := startDaemonWithCaps(t, lab, nobody, "-collector", fmt.Sprintf("%s:6343", lab.CollectorAddr),
		"-sampling", strconv.Itoa(n), "-ports", "p1", "-polling", "1", "-agentx", agentx, "-app-api", "127.0.0.1:0")
	// The process (setpriv exec'd the daemon in place: same PID) holds
	// exactly the four capabilities.
	want := fmt.Sprintf("%016x", uint64(1)<<capBPF|1<<capNetAdmin|1<<capPerfmon|1<<capNetRaw)
	deadline := time.Now().Add(testutil.Scaled(5 * time.Second))
	var st map[string]string
	for {
		st = procCaps(t, d.cmd.Process.Pid)
		if strings.HasPrefix(st["Name"], "sflowswitchd") || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, k := range []string{"CapEff", "CapPrm", "CapBnd", "CapAmb"} {
		if st[k] != want {
			t.Errorf("%s = %s, want %s (%s only)", k, st[k], want, daemonCaps)
		}
	}
	if eff, _ := strconv.ParseUint(st["CapEff"], 16, 64); eff&(1<<capSysAdmin) != 0 {
		t.Errorf("the daemon holds CAP_SYS_ADMIN")
	}
	wantUID := "0\t"
	if nobody {
		wantUID = "65534\t"
	}
	if !strings.HasPrefix(st["Uid"], wantUID) || st["NoNewPrivs"] != "1" {
		t.Errorf("Uid %q NoNewPrivs %q, want uid %q with no_new_privs", st["Uid"], st["NoNewPrivs"], wantUID)
	}
	d.waitReady(t, lab, "p1")
	sendNumbered(t, lab, 0, 1, 1, k)
	dgs := col.waitDelivered(t, lab)
	fs := flowSamplesOf(dgs, p1)
	if mean, sd, ok := withinSigmas(len(fs), k, 1.0/n, 4); !ok {
		t.Errorf("%d flow samples, want %.0f ± 4×%.1f", len(fs), mean, sd)
	}
	if len(counterSamplesOf(dgs, sflow.DataSource{Type: sflow.SourceIfIndex, Index: p1})) == 0 {
		t.Errorf("no counter samples of p1 (polling 1 s)")
	}
	checkDatagramSequences(t, dgs)
	checkIndependentDecoders(t, dgs, 6343, p1)
	// The daemon's registry serves every part: per collector, the API
	// socket's kernel drops, Go runtime and process metrics.
	m := mustFetchMetrics(t, lab)
	colLabel := fmt.Sprintf(`collector="%s:6343"`, lab.CollectorAddr)
	if v, ok := m.get("sflowswitchd_collector_datagrams_sent_total", colLabel); !ok || v < uint64(len(dgs)) {
		t.Errorf("sflowswitchd_collector_datagrams_sent_total{%s} = %d, %v; %d datagrams received", colLabel, v, ok, len(dgs))
	}
	for _, name := range []string{"sflowswitchd_app_api_socket_drops_total", "go_goroutines", "process_open_fds", "process_resident_memory_bytes"} {
		if _, ok := m.value(name); !ok {
			t.Errorf("metrics lack %s", name)
		}
	}
	// Drop notifications need a perf event per CPU; whether this
	// kernel lets the daemon's privileges open one is asked of the kernel
	// by a helper with the same privileges. Where it does not (Debian 12:
	// kernel.perf_event_paranoid=3 needs CAP_SYS_ADMIN), the daemon's
	// probe must report tp_btf_kfree_skb missing with the setting named,
	// keep notifications off and say so as a warning, not an error.
	allowed, answer := perfEventAllowed(t, nobody)
	t.Logf("kernel.perf_event_paranoid=%d; a process with %s only opens a BPF output perf event: %v (%s)",
		sysctlInt(t, "kernel/perf_event_paranoid"), daemonCaps, allowed, answer)
	if !allowed {
		if _, on := m.value("sflowswitchd_switch_dropped_packets_counted_total"); on {
			t.Errorf("drop notifications are on although the kernel refuses the daemon a perf event (%s)", answer)
		}
		if v, ok := m.get("sflowswitchd_kernel_feature", `feature="tp_btf_kfree_skb"`); !ok || v != 0 {
			t.Errorf("sflowswitchd_kernel_feature{feature=\"tp_btf_kfree_skb\"} = %d, %v; want 0 (the kernel refuses the perf event: %s)", v, ok, answer)
		}
		for _, want := range []string{`level=WARN msg="drop notifications off"`, "kernel.perf_event_paranoid="} {
			if !strings.Contains(d.log(), want) {
				t.Errorf("daemon log lacks %q (notifications off for want of a perf event):\n%s", want, d.log())
			}
		}
	}
	// Without CAP_SYSLOG the kernel hides its symbol addresses (unless
	// kptr_restrict is 0 and perf_event_paranoid at most 1): drop
	// notifications go out without extended_function, and the daemon
	// says so in its log and in a metric.
	names := uint64(0)
	if sysctlInt(t, "kernel/kptr_restrict") == 0 && sysctlInt(t, "kernel/perf_event_paranoid") <= 1 {
		names = 1
	}
	if v, ok := m.value("sflowswitchd_drop_function_names"); allowed && (!ok || v != names) {
		t.Errorf("sflowswitchd_drop_function_names = %d, %v; want %d", v, ok, names)
	}
	// Drop notifications are on with these capabilities where the kernel
	// allows them the perf event: their per-CPU perf buffers
	// (perf_event_open needs CAP_PERFMON; their locked memory stays
	// within perf_event_mlock_kb without CAP_IPC_LOCK) opened.
	if _, ok := m.value("sflowswitchd_switch_dropped_packets_counted_total"); allowed && !ok {
		t.Errorf("drop notifications are not on (no sflowswitchd_switch_dropped_packets_counted_total)\n%s", d.log())
	}
	if logged := strings.Contains(d.log(), "carry no extended_function"); allowed && logged != (names == 0) {
		t.Errorf("log says drop locations cannot be named: %v, want %v", logged, names == 0)
	}
	if snmp != nil {
		// sFlowAgentAddress.0 through snmpd: the AgentX session works
		// without CAP_SYS_ADMIN (nor CAP_DAC_OVERRIDE: the socket is
		// root's, mode 0600).
		c := snmp.Client(t, "public")
		deadline := time.Now().Add(testutil.Scaled(10 * time.Second))
		for {
			r, err := c.Get([]string{sflowAgentAddressOID})
			if err == nil && len(r.Variables) == 1 && r.Variables[0].Type == gosnmp.OctetString {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("SFLOW-MIB not served through snmpd: %v %+v\nsnmpd:\n%s\ndaemon:\n%s", err, r, snmp.Log(), d.log())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if !d.alive() {
		t.Fatalf("daemon died\n%s", d.log())
	}
	for _, bad := range []string{"missing capabilities", "CAP_SYS_ADMIN", "world-writable", "level=ERROR"} {
		if strings.Contains(d.log(), bad) {
			t.Errorf("daemon log has %q:\n%s", bad, d.log())
		}
	}
	t.Logf("uid %s, capabilities %s: %d flow samples of %d frames at 1 in %d", strings.Fields(st["Uid"])[0], daemonCaps, len(fs), k, n)
	who, extra := "user nobody", ""
	if !nobody {
		who, extra = "root, every other capability dropped", "; SFLOW-MIB served through snmpd"
	}
	recordFault(t, faultRow{
		Fault: "least privilege (" + who + ")", Done: "setpriv: CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON, CAP_NET_RAW only, no_new_privs",
		Observed: fmt.Sprintf("attached, %d flow samples of %d frames at 1 in %d, counters polled%s", len(fs), k, n, extra),
		PeakRSS:  usage(t, d.cmd.Process.Pid).HWM,
	})
}

// sflowAgentAddressOID is SFLOW-MIB sFlowAgentAddress.0.
const sflowAgentAddressOID = ".1.3.6.1.4.1.14706.1.1.3.0"

// TestSystemdUnit checks that the shipped unit grants exactly the
// capabilities TestLeastPrivilege runs the daemon with, forbids gaining
// more (NoNewPrivileges), mounts the system read-only, gives the daemon
// a private state directory, and lets systemd know when it is ready.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile("../../packaging/sflowswitchd.service")
	if err != nil {
		t.Fatal(err)
	}
	set := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			set[k] = append(set[k], v)
		}
	}
	var want []string
	for _, c := range strings.Split(daemonCaps, ",") {
		want = append(want, "CAP_"+strings.ToUpper(c))
	}
	for _, k := range []string{"AmbientCapabilities", "CapabilityBoundingSet"} {
		if len(set[k]) != 1 {
			t.Errorf("%s set %d times, want once", k, len(set[k]))
			continue
		}
		got := strings.Fields(set[k][0])
		if len(got) != len(want) {
			t.Errorf("%s=%s, want %s", k, set[k][0], strings.Join(want, " "))
			continue
		}
		for i := range want {
			if !strings.Contains(set[k][0], want[i]) {
				t.Errorf("%s=%s lacks %s", k, set[k][0], want[i])
			}
		}
	}
	// Type=notify: a reload waits for the daemon's READY=1; a death by
	// SIGHUP before it catches signals is restarted.
	for k, v := range map[string]string{"NoNewPrivileges": "yes", "ProtectSystem": "strict", "StateDirectory": "sflowswitchd", "UMask": "0077",
		"Type": "notify", "RestartForceExitStatus": "SIGHUP"} {
		if len(set[k]) != 1 || set[k][0] != v {
			t.Errorf("%s=%v, want %s", k, set[k], v)
		}
	}
	// A reload checks the file as a start would before the SIGHUP, so
	// that `systemctl reload` fails on a refused file (ExecStart's flags).
	start := strings.Fields(set["ExecStart"][0])
	wantReload := []string{strings.Join(append([]string{start[0], "-check-config"}, start[1:]...), " "), "/bin/kill -HUP $MAINPID"}
	if strings.Join(set["ExecReload"], "\n") != strings.Join(wantReload, "\n") {
		t.Errorf("ExecReload=%q, want %q", set["ExecReload"], wantReload)
	}
	for k, vs := range set {
		for _, v := range vs {
			if strings.Contains(v, "CAP_SYS_ADMIN") {
				t.Errorf("%s=%s grants CAP_SYS_ADMIN", k, v)
			}
		}
	}
	// The sandbox (docs/reference/privileges.md), each setting checked
	// under systemd by vagrant/vm/upgrade.sh.
	for k, v := range map[string]string{"PrivateDevices": "yes", "ReadOnlyPaths": "/proc/sys /sys", "ProtectKernelLogs": "yes",
		"ProtectProc": "invisible", "PrivateMounts": "yes", "MemoryDenyWriteExecute": "yes", "SystemCallErrorNumber": "EPERM",
		"RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK AF_XDP", "ReadWritePaths": "-/sys/fs/bpf"} {
		if len(set[k]) != 1 || set[k][0] != v {
			t.Errorf("%s=%v, want %s", k, set[k], v)
		}
	}
	// ProtectKernelTunables makes /sys/fs/bpf read-only whatever
	// ReadWritePaths says: no pin directory.
	if len(set["ProtectKernelTunables"]) > 0 && set["ProtectKernelTunables"][0] != "no" {
		t.Errorf("ProtectKernelTunables=%v: the BPF file system would be read-only", set["ProtectKernelTunables"])
	}
	filter := strings.Join(set["SystemCallFilter"], " ")
	for _, call := range []string{"@system-service", "bpf", "perf_event_open", "sched_setaffinity", "setrlimit"} {
		if !strings.Contains(" "+filter+" ", " "+call+" ") {
			t.Errorf("SystemCallFilter lacks %s (the daemon calls it): %s", call, filter)
		}
	}
	if _, err := exec.LookPath("systemd-analyze"); err == nil {
		out, err := exec.Command("systemd-analyze", "security", "--offline=yes", "../../packaging/sflowswitchd.service").CombinedOutput()
		var score float64
		if i := strings.Index(string(out), "Overall exposure level for sflowswitchd.service: "); err != nil || i < 0 {
			t.Errorf("systemd-analyze security: %v\n%s", err, out)
		} else if _, err := fmt.Sscanf(string(out[i:]), "Overall exposure level for sflowswitchd.service: %g", &score); err != nil || score > 3.0 {
			t.Errorf("exposure %g (%v), bound 3.0", score, err)
		} else {
			t.Logf("systemd-analyze security --offline=yes: exposure %.1f", score)
		}
	}
}

// sysctlInt reads an integer from /proc/sys/NAME.
func sysctlInt(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("/proc/sys/%s: %v", name, err)
	}
	return v
}
