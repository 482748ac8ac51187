package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// sonicConf is the packaged SONiC configuration (deploy/sonic) with the
// test's Redis, hsflowd.auto and state directory, written into dir.
func sonicConf(t *testing.T, sl *sonicLab, dir string) string {
	t.Helper()
	shipped, err := os.ReadFile(filepath.Join("..", "..", "deploy", "sonic", "sflowswitchd-sonic.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.NewReplacer(`"/var/run/redis/sonic-db/database_config.json"`, strconv.Quote(sl.srv.DBConfig),
		`"/etc/hsflowd.auto"`, strconv.Quote(sl.auto), `"/var/lib/sflowswitchd"`, strconv.Quote(dir)).Replace(string(shipped))
	path := filepath.Join(dir, "sonic.conf")
	if err := os.WriteFile(path, []byte(conf+"workers = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// pidAlive tells whether pid is a live process (not a zombie).
func pidAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// readPid reads a pid file (0 when absent).
func readPid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// killPid kills pid when it is alive (cleanup of a test that failed
// half-way).
func killPid(pid int) {
	if pid > 0 && pidAlive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL) // it may just have exited
	}
}

// waitNewCounters waits for counter samples received after since.
func waitNewCounters(t *testing.T, c *collector, since time.Time, what string) {
	t.Helper()
	c.waitFor(t, testutil.Scaled(15*time.Second), what, func(dgs []datagram) bool {
		for _, dg := range dgs {
			if dg.at.After(since) && len(polledSources([]datagram{dg})) > 0 {
				return true
			}
		}
		return false
	})
}

// quietAfter checks that c receives nothing from 500 ms after at for
// a polling interval.
func quietAfter(t *testing.T, c *collector, at time.Time) {
	t.Helper()
	time.Sleep(testutil.Scaled(6 * time.Second))
	for _, dg := range c.snapshot(t) {
		if dg.at.After(at.Add(500 * time.Millisecond)) {
			t.Fatalf("a datagram at %v, after the agent was stopped at %v", dg.at, at)
		}
	}
}

// TestSonicInitScript runs the LSB script the SONiC package installs as
// /etc/init.d/hsflowd (packaging/sonic/hsflowd.init), as SONiC's sflow
// image edits it (its Dockerfile's sed of DAEMON_ARGS for hsflowd), with
// start, status, restart and stop as sflowmgrd's "service hsflowd
// restart|stop" run it, against the built daemon in the lab's switch
// namespace.
func TestSonicInitScript(t *testing.T) {
	sl := newSonicLab(t)
	dir := t.TempDir()
	conf := sonicConf(t, sl, dir)
	raw, err := os.ReadFile(filepath.Join("..", "..", "packaging", "sonic", "hsflowd.init"))
	if err != nil {
		t.Fatal(err)
	}
	// sonic-buildimage dockers/docker-sflow/Dockerfile.j2:
	// sed -ri '/^DAEMON_ARGS=""/c DAEMON_ARGS="-c /var/log/hsflowd.crash"'
	if !strings.Contains(string(raw), "\nDAEMON_ARGS=\"\"\n") {
		t.Fatal(`the script lacks the line DAEMON_ARGS="" that SONiC's image rewrites`)
	}
	script := filepath.Join(dir, "hsflowd")
	edited := strings.Replace(string(raw), "\nDAEMON_ARGS=\"\"\n", "\nDAEMON_ARGS=\"-c /var/log/hsflowd.crash\"\n", 1)
	if err := os.WriteFile(script, []byte(edited), 0o755); err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(dir, "hsflowd.pid")
	logfile := filepath.Join(dir, "hsflowd.log")
	t.Cleanup(func() {
		killPid(readPid(pidfile))
		if t.Failed() {
			b, _ := os.ReadFile(logfile)
			t.Logf("daemon log:\n%s", b)
		}
	})
	service := func(action string) (string, int) {
		t.Helper()
		cmd := netnsutil.Command(t.Context(), sl.lab.Switch, "env", "DAEMON="+daemonBin, "CONFIG="+conf, "PIDFILE="+pidfile,
			"LOGFILE="+logfile, "sh", script, action)
		out, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			code = -1
			if ee, ok := err.(interface{ ExitCode() int }); ok {
				code = ee.ExitCode()
			}
		}
		t.Logf("service hsflowd %s: exit %d: %s", action, code, strings.TrimSpace(string(out)))
		return string(out), code
	}
	if _, code := service("status"); code != 3 {
		t.Fatalf("status before start: exit %d, want 3", code)
	}
	start := time.Now()
	if _, code := service("start"); code != 0 {
		t.Fatalf("start: exit %d", code)
	}
	pid1 := readPid(pidfile)
	if pid1 == 0 || !pidAlive(pid1) {
		t.Fatalf("start: pid file %d, alive %v", pid1, pidAlive(pid1))
	}
	if _, code := service("status"); code != 0 {
		t.Fatalf("status while running: exit %d, want 0", code)
	}
	waitNewCounters(t, sl.c1, start, "counter samples after start")
	restart := time.Now()
	if _, code := service("restart"); code != 0 {
		t.Fatalf("restart: exit %d", code)
	}
	pid2 := readPid(pidfile)
	if pid2 == 0 || pid2 == pid1 || pidAlive(pid1) || !pidAlive(pid2) {
		t.Fatalf("restart: pid %d → %d (old alive %v, new alive %v)", pid1, pid2, pidAlive(pid1), pidAlive(pid2))
	}
	waitNewCounters(t, sl.c1, restart, "counter samples after restart")
	// sflowmgrd restarts a running agent: restart of a started one, and
	// start of a started one, keep one agent.
	if _, code := service("start"); code != 0 || readPid(pidfile) != pid2 {
		t.Fatalf("start while running: exit %d, pid %d (was %d)", code, readPid(pidfile), pid2)
	}
	stop := time.Now()
	if _, code := service("stop"); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	if pidAlive(pid2) {
		t.Fatalf("stop: pid %d still alive", pid2)
	}
	if _, err := os.Stat(pidfile); err == nil {
		t.Error("stop left the pid file")
	}
	if _, code := service("status"); code != 3 {
		t.Errorf("status after stop: exit %d, want 3", code)
	}
	if _, code := service("stop"); code != 0 {
		t.Errorf("stop when stopped: exit %d, want 0", code)
	}
	quietAfter(t, sl.c1, stop)
	if log, _ := os.ReadFile(logfile); !strings.Contains(string(log), "sonic: reading Redis") {
		t.Errorf("the daemon's log (LOGFILE) lacks SONiC mode's start:\n%s", log)
	}
}

// TestSonicSupervisor runs the package's supervisor program "hsflowd"
// (packaging/sonic/supervisor-hsflowd.conf) under Debian's supervisord in
// the lab's switch namespace: supervisorctl start and stop hsflowd.
func TestSonicSupervisor(t *testing.T) {
	const supervisord, supervisorctl = "/usr/bin/supervisord", "/usr/bin/supervisorctl"
	if _, err := os.Stat(supervisord); err != nil {
		testskip.Skip(t, "supervisord not installed (Debian package supervisor; scripts/install-deps.sh test)")
	}
	sl := newSonicLab(t)
	dir := t.TempDir()
	conf := sonicConf(t, sl, dir)
	prog, err := os.ReadFile(filepath.Join("..", "..", "packaging", "sonic", "supervisor-hsflowd.conf"))
	if err != nil {
		t.Fatal(err)
	}
	const shippedCmd = "command=/usr/sbin/sflowswitchd -config /etc/sflowswitchd/sonic.conf"
	if !strings.Contains(string(prog), shippedCmd) {
		t.Fatalf("the supervisor program lacks %q", shippedCmd)
	}
	// Logs to the test's file rather than syslog.
	p := strings.NewReplacer(shippedCmd, "command="+daemonBin+" -config "+conf,
		"stdout_logfile=NONE\nstdout_syslog=true\nstderr_logfile=NONE\nstderr_syslog=true",
		"stdout_logfile="+filepath.Join(dir, "hsflowd.log")+"\nredirect_stderr=true").Replace(string(prog))
	if err := os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "conf.d", "hsflowd.conf"), []byte(p), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "supervisor.sock")
	main := fmt.Sprintf(`[unix_http_server]
file=%[1]s
[supervisord]
nodaemon=true
logfile=%[2]s/supervisord.log
pidfile=%[2]s/supervisord.pid
childlogdir=%[2]s
[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface
[supervisorctl]
serverurl=unix://%[1]s
[include]
files = %[2]s/conf.d/*.conf
`, sock, dir)
	mainConf := filepath.Join(dir, "supervisord.conf")
	if err := os.WriteFile(mainConf, []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	sl.lab.Start(t, sl.lab.Switch, supervisord, "-c", mainConf)
	ctl := func(args ...string) string {
		t.Helper()
		out, err := netnsutil.Command(t.Context(), sl.lab.Switch, supervisorctl, append([]string{"-c", mainConf}, args...)...).CombinedOutput()
		t.Logf("supervisorctl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		return string(out)
	}
	deadline := time.Now().Add(testutil.Scaled(15 * time.Second))
	for !strings.Contains(ctl("status", "hsflowd"), "STOPPED") {
		if time.Now().After(deadline) {
			t.Fatal("supervisord does not list hsflowd as STOPPED (autostart=false)")
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Cleanup(func() {
		if pid, err := strconv.Atoi(strings.TrimSpace(ctl("pid", "hsflowd"))); err == nil {
			killPid(pid)
		}
	})
	start := time.Now()
	if out := ctl("start", "hsflowd"); !strings.Contains(out, "started") {
		t.Fatalf("supervisorctl start hsflowd: %s", out)
	}
	if out := ctl("status", "hsflowd"); !strings.Contains(out, "RUNNING") {
		t.Fatalf("after start: %s", out)
	}
	waitNewCounters(t, sl.c1, start, "counter samples after supervisorctl start")
	pid, _ := strconv.Atoi(strings.TrimSpace(ctl("pid", "hsflowd")))
	stop := time.Now()
	if out := ctl("stop", "hsflowd"); !strings.Contains(out, "stopped") {
		t.Fatalf("supervisorctl stop hsflowd: %s", out)
	}
	if pid == 0 || pidAlive(pid) {
		t.Fatalf("after stop: pid %d alive %v", pid, pidAlive(pid))
	}
	quietAfter(t, sl.c1, stop)
}

// TestSonicServiceVerbatim runs what SONiC's sflow container runs, from
// SONiC's own files (testdata/sonic, copied unchanged): the image's
// `sed -ri ... /etc/init.d/hsflowd` (sonic-buildimage
// dockers/docker-sflow/Dockerfile.j2) on the package's init script, then
// sflowmgrd's commands (sonic-swss cfgmgr/sflowmgr.cpp
// sflowHandleService: "service hsflowd restart" when sFlow is enabled,
// "service hsflowd stop" when disabled) through /bin/sh and Debian's
// service(8), as swss::exec runs them. The container's /etc/init.d and
// /etc/default are the test's, bound over the host's in a private mount
// namespace (and, as in the container, no systemd: service(8) runs the
// script itself); the network namespace is the lab's switch.
func TestSonicServiceVerbatim(t *testing.T) {
	if _, err := os.Stat("/usr/sbin/service"); err != nil {
		testskip.Skip(t, "service(8) not installed (Debian package init-system-helpers)")
	}
	dockerfile, err := os.ReadFile(filepath.Join("testdata", "sonic", "Dockerfile.j2"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RUN (sed -ri .* /etc/init\.d/hsflowd)$`).FindSubmatch(dockerfile)
	if m == nil {
		t.Fatal("SONiC's Dockerfile.j2 has no sed of /etc/init.d/hsflowd")
	}
	sedCmd := string(m[1])
	mgr, err := os.ReadFile(filepath.Join("testdata", "sonic", "sflowmgr-sflowHandleService.cpp"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := regexp.MustCompile(`cmd << "([^"]+)";`).FindAllSubmatch(mgr, -1)
	if len(cmds) != 2 {
		t.Fatalf("sflowHandleService: %d commands, want enable's and disable's", len(cmds))
	}
	enable, disable := string(cmds[0][1]), string(cmds[1][1])

	sl := newSonicLab(t)
	dir := t.TempDir()
	conf := sonicConf(t, sl, dir)
	initd, defaults := filepath.Join(dir, "init.d"), filepath.Join(dir, "default")
	for _, d := range []string{initd, defaults} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script, err := os.ReadFile(filepath.Join("..", "..", "packaging", "sonic", "hsflowd.init"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(initd, "hsflowd"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	pidfile, logfile := filepath.Join(dir, "hsflowd.pid"), filepath.Join(dir, "hsflowd.log")
	// /etc/default/hsflowd: the test's binary, configuration and files
	// (service(8) clears the environment).
	def := fmt.Sprintf("DAEMON=%s\nCONFIG=%s\nPIDFILE=%s\nLOGFILE=%s\n", daemonBin, conf, pidfile, logfile)
	if err := os.WriteFile(filepath.Join(defaults, "hsflowd"), []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		killPid(readPid(pidfile))
		if t.Failed() {
			b, _ := os.ReadFile(logfile)
			t.Logf("daemon log:\n%s", b)
		}
	})
	container := func(command string) int {
		t.Helper()
		prelude := fmt.Sprintf("mount --bind %s /etc/init.d && mount --bind %s /etc/default && "+
			"{ [ ! -d /run/systemd/system ] || mount -t tmpfs none /run/systemd; } && ", initd, defaults)
		cmd := netnsutil.Command(t.Context(), sl.lab.Switch, "unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", prelude+command)
		out, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			code = -1
			if ee, ok := err.(interface{ ExitCode() int }); ok {
				code = ee.ExitCode()
			}
		}
		t.Logf("%s: exit %d: %s", command, code, strings.TrimSpace(string(out)))
		return code
	}
	if code := container(sedCmd); code != 0 {
		t.Fatalf("SONiC's sed: exit %d", code)
	}
	if b, _ := os.ReadFile(filepath.Join(initd, "hsflowd")); !strings.Contains(string(b), "\nDAEMON_ARGS=\"-c /var/log/hsflowd.crash\"\n") {
		t.Fatalf("SONiC's sed did not rewrite DAEMON_ARGS:\n%s", b)
	}
	start := time.Now()
	if code := container(enable); code != 0 {
		t.Fatalf("%s: exit %d", enable, code)
	}
	pid1 := readPid(pidfile)
	if pid1 == 0 || !pidAlive(pid1) {
		t.Fatalf("%s: pid %d alive %v", enable, pid1, pidAlive(pid1))
	}
	waitNewCounters(t, sl.c1, start, "counter samples after "+enable)
	again := time.Now()
	if code := container(enable); code != 0 {
		t.Fatalf("%s (running): exit %d", enable, code)
	}
	pid2 := readPid(pidfile)
	if pid2 == 0 || pid2 == pid1 || pidAlive(pid1) || !pidAlive(pid2) {
		t.Fatalf("%s: pid %d → %d (old alive %v, new alive %v)", enable, pid1, pid2, pidAlive(pid1), pidAlive(pid2))
	}
	waitNewCounters(t, sl.c1, again, "counter samples after a second "+enable)
	stop := time.Now()
	if code := container(disable); code != 0 {
		t.Fatalf("%s: exit %d", disable, code)
	}
	if pidAlive(pid2) {
		t.Fatalf("%s: pid %d still alive", disable, pid2)
	}
	quietAfter(t, sl.c1, stop)
}
