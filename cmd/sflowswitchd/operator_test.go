package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
	"github.com/sflowswitchd/sflowswitchd/internal/inforce"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// runCmd runs the command with args as main does and returns its exit
// status, stdout and stderr.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestVersion: -version, --version and `version` print the version, the
// commit and the Go version on one line, and exit 0.
func TestVersion(t *testing.T) {
	version, commit = "1.2.3", "0123456789ab"
	defer func() { version, commit = "", "" }()
	want := "sflowswitchd 1.2.3 (commit 0123456789ab, " + runtime.Version() + ")\n"
	for _, args := range [][]string{{"-version"}, {"--version"}, {"version"}} {
		code, out, errOut := runCmd(t, args...)
		if code != 0 || out != want || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0, %q", args, code, out, errOut, want)
		}
	}
}

// TestBadFlagOneLine: a bad flag prints one line naming it and where the
// flags are listed, not the whole usage; -h lists the commands and the
// flags with their defaults.
func TestBadFlagOneLine(t *testing.T) {
	code, out, errOut := runCmd(t, "-samplng", "100")
	if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "-samplng") || !strings.Contains(errOut, "sflowswitchd -h") {
		t.Errorf("bad flag: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "-sampling", "0")
	if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "0 is not a rate") {
		t.Errorf("-sampling 0: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = runCmd(t, "-h")
	if code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	for _, want := range []string{"  decode ", "  top ", "  apm ", "  show ", "  version ", "-log-level level", "(default info)", "-polling seconds", "(default 20; 0 = off)", "-check-config"} {
		if !strings.Contains(out, want) {
			t.Errorf("-h lacks %q:\n%s", want, out)
		}
	}
}

// TestDurations: the flags in seconds also take Go durations, and plain
// integers still work; a fraction of a second is refused.
func TestDurations(t *testing.T) {
	for _, c := range []struct {
		args    []string
		polling int
		apm     int
	}{{[]string{"-polling", "5s", "-apm-interval", "2m"}, 5, 120}, {[]string{"-polling", "7", "-apm-interval", "30"}, 7, 30}} {
		s, err := loadArgs(t, c.args...)
		if err != nil || int(s.Polling) != c.polling || int(s.APMInterval) != c.apm {
			t.Errorf("%v: polling %d apm_interval %d (%v), want %d %d", c.args, s.Polling, s.APMInterval, err, c.polling, c.apm)
		}
	}
	if code, _, errOut := runCmd(t, "-polling", "1.5s", "-check-config"); code != 2 || !strings.Contains(errOut, "whole number of seconds") {
		t.Errorf("-polling 1.5s: exit %d, %q", code, errOut)
	}
}

// TestCheckConfig: -check-config reads the file, hsflowd.conf and the
// flags as a start does and exits 0 for a valid configuration, 1 with
// every error for a refused one.
func TestCheckConfig(t *testing.T) {
	good := writeFile(t, "good.toml", "sampling = 1000\nports = [\"swp*\"]\n[[collector]]\naddress = \"198.18.0.1:6343\"\n")
	code, out, errOut := runCmd(t, "-config", good, "-check-config")
	if code != 0 || !strings.HasPrefix(out, "sflowswitchd: configuration valid: "+good+"\n") || errOut != "" {
		t.Errorf("good file: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	bad := writeFile(t, "bad.toml", "samplng = 1000\n")
	code, out, errOut = runCmd(t, "-config", bad, "-check-config")
	if want := bad + `:1: unknown setting "samplng" (did you mean "sampling"?)`; code != 1 || out != "" || !strings.Contains(errOut, want) {
		t.Errorf("misspelt key: exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errOut, want)
	}
	// Every value error at once, each located.
	bad = writeFile(t, "bad.toml", "header_bytes = 10\ndrops = \"maybe\"\n")
	code, _, errOut = runCmd(t, "-config", bad, "-check-config")
	for _, want := range []string{bad + ":1: header_bytes 10", bad + `:2: drops "maybe"`} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("two bad values: exit %d, stderr %q lacks %q", code, errOut, want)
		}
	}
	// The flags are checked with the file, as a start would.
	code, _, errOut = runCmd(t, "-config", good, "-header-bytes", "300", "-check-config")
	if code != 1 || !strings.Contains(errOut, "flag -header-bytes: header_bytes 300") {
		t.Errorf("bad flag value: exit %d, stderr %q", code, errOut)
	}
	// hsflowd.conf: read, its notes printed structured, and its errors
	// refuse the configuration.
	h := writeFile(t, "hsflowd.conf", "sflow {\n  sampling = 400\n  collector { ip = 198.18.0.9 }\n  headerBytes = 0\n}\n")
	code, out, errOut = runCmd(t, "-hsflowd-conf", h, "-check-config")
	if code != 0 || !strings.Contains(out, "configuration valid") || !strings.Contains(errOut, `msg="hsflowd setting ignored" file=`+h+" line=4") {
		t.Errorf("hsflowd.conf: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	h = writeFile(t, "hsflowd.conf", "sflow {\n  sampling = 0\n}\n")
	code, _, errOut = runCmd(t, "-hsflowd-conf", h, "-check-config")
	if code != 1 || !strings.Contains(errOut, h+":2:") || !strings.Contains(errOut, "sampling = 0") {
		t.Errorf("hsflowd.conf sampling = 0: exit %d, stderr %q", code, errOut)
	}
	// The packaged configuration is valid as shipped.
	if code, _, errOut := runCmd(t, "-config", "../../packaging/sflowswitchd.conf.example", "-check-config"); code != 0 {
		t.Errorf("the packaged configuration: exit %d: %s", code, errOut)
	}
}

// TestCheckConfigTrialLoad: -check-config has the kernel's verifier
// load the BPF objects the configuration needs (as root: the samplers,
// the transit programs with transit on, the drop program with drops on),
// attaching nothing; a kernel that cannot load them refuses the
// configuration; without the privileges the check says it skipped them.
func TestCheckConfigTrialLoad(t *testing.T) {
	netlab.RequireRoot(t)
	conf := writeFile(t, "c.toml", "transit = true\ndrops = \"on\"\n[[collector]]\naddress = \"198.18.0.1:6343\"\n")
	code, out, errOut := runCmd(t, "-config", conf, "-check-config")
	fs := features.ProbeFeatures()
	want := "samplers (XDP and TC)"
	if fs.Has(features.FeatureKernCtx) && fs.Has(features.FeatureTransit) {
		want += ", transit programs"
	}
	if fs.Has(features.FeatureBTFTracepoint) {
		want += ", drop program"
	}
	if code != 0 || !strings.Contains(out, "sflowswitchd: BPF objects accepted by the kernel's verifier (loaded, not attached): "+want+"\n") {
		t.Errorf("as root: exit %d, stdout %q, stderr %q; want the objects loaded: %s", code, out, errOut, want)
	}

	var stdout, stderr strings.Builder
	refused := func() (dataplane.Trial, error) {
		return dataplane.Trial{}, errors.New("dataplane: loading the samplers: invalid argument")
	}
	if code := checkConfig(conf, "", nil, refused, &stdout, &stderr); code != exitFailed ||
		!strings.Contains(stderr.String(), "configuration refused: this kernel cannot load what it needs:\ndataplane: loading the samplers: invalid argument") || stdout.Len() != 0 {
		t.Errorf("refused by the kernel: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	skipped := func() (dataplane.Trial, error) {
		return dataplane.Trial{Skipped: "the process lacks CAP_BPF"}, nil
	}
	if code := checkConfig(conf, "", nil, skipped, &stdout, &stderr); code != exitOK ||
		stdout.String() != "sflowswitchd: configuration valid: "+conf+"\nsflowswitchd: BPF objects not checked (skipped: the process lacks CAP_BPF)\n" {
		t.Errorf("without privileges: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// TestShow: `show` prints what the daemon recorded in its state
// directory: the agent address and why, collectors, per-port rates and
// direction, polling and the source of every setting; no state is an
// error that says where it looked.
func TestShow(t *testing.T) {
	dir := t.TempDir()
	st := inforce.State{Version: "1.2.3", Commit: "abc", PID: os.Getpid(), Written: time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC),
		ConfigFile: "/etc/sflowswitchd/sflowswitchd.conf",
		Agent:      inforce.Agent{Address: "198.18.0.1", Interface: "eth0", Why: "ranked", Source: "default"},
		Collectors: []inforce.Collector{{Receiver: 1, Address: "198.18.0.9:6343", Source: "file"}, {Receiver: 4, Address: "198.18.0.10:6343", Source: "snmp"}},
		Polling:    20, PollingSource: "hsflowd.conf", HeaderBytes: 128,
		Ports:    []inforce.Port{{Name: "swp1", IfIndex: 3, Rate: 10000, KernelRate: 8192, Direction: "both", RateSource: "sampling: flag"}},
		Settings: []inforce.Value{{Key: "sampling", Value: "10000", Source: "flag"}}}
	if err := inforce.Write(filepath.Join(dir, inforce.FileName), st); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "show", "-state-dir", dir)
	if code != 0 || errOut != "" {
		t.Fatalf("show: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"sflowswitchd 1.2.3 (commit abc), pid ",
		"agent address:  198.18.0.1 (eth0)  [default]",
		"chosen:       ranked",
		"polling:        20s",
		"[hsflowd.conf]",
		"receiver 1  198.18.0.9:6343",
		"receiver 4  198.18.0.10:6343",
		"[snmp]",
		"swp1  3        10000      8192         both",
		"[sampling: flag]",
		"sampling  10000  [flag]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	code, _, errOut = runCmd(t, "show", "-state-dir", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "no state recorded") {
		t.Errorf("show without state: exit %d, stderr %q", code, errOut)
	}
}
