package dataplane

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// TestTrialLoad: the kernel's verifier accepts the samplers and the
// transit programs; nothing is pinned (a pin directory given stays
// empty); a required feature missing refuses the load, naming it.
func TestTrialLoad(t *testing.T) {
	netlab.RequireRoot(t)
	pins := t.TempDir()
	tr, err := TrialLoad(Config{Workers: 2, TransitEntries: DefaultTransitEntries, PinDir: pins})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Skipped != "" {
		t.Fatalf("skipped as root: %s", tr.Skipped)
	}
	fs := features.ProbeFeatures()
	want := []string{"samplers (XDP and TC)"}
	if fs.Has(features.FeatureKernCtx) && fs.Has(features.FeatureTransit) {
		want = append(want, "transit programs")
	}
	if strings.Join(tr.Loaded, ",") != strings.Join(want, ",") {
		t.Errorf("loaded %q, want %q (off: %q)", tr.Loaded, want, tr.Off)
	}
	if ents, err := os.ReadDir(pins); err != nil || len(ents) != 0 {
		t.Errorf("the pin directory after a trial load: %v, %v; want it empty", ents, err)
	}

	// A kernel without xdp.frags: refused before anything is loaded.
	fs.List = append([]features.Feature(nil), fs.List...)
	for i := range fs.List {
		if fs.List[i].Name == features.FeatureXDPFrags {
			fs.List[i].Err = errors.New("probe: not supported")
		}
	}
	_, err = TrialLoad(Config{Workers: 1, Features: fs})
	var fe *features.FeatureError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), features.FeatureXDPFrags) {
		t.Errorf("without %s: %v, want a FeatureError naming it", features.FeatureXDPFrags, err)
	}
}

// TestTrialLoadUnprivileged: a process without CAP_BPF and CAP_NET_ADMIN
// (the test binary again, as user nobody) is told the load was skipped,
// and why, not that the kernel lacks the features.
func TestTrialLoadUnprivileged(t *testing.T) {
	if os.Getenv("TRIAL_LOAD_CHILD") == "1" {
		tr, err := TrialLoad(Config{Workers: 1})
		if err != nil {
			t.Fatalf("unprivileged: %v", err)
		}
		if !strings.Contains(tr.Skipped, "lacks CAP_BPF") || len(tr.Loaded) != 0 {
			t.Fatalf("unprivileged: skipped %q, loaded %q; want skipped for lack of CAP_BPF", tr.Skipped, tr.Loaded)
		}
		return
	}
	netlab.RequireRoot(t)
	// A copy of the test binary that user nobody may run (go test's
	// build directory is the builder's alone).
	dir, err := os.MkdirTemp("", "trialload")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "dataplane.test")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestTrialLoadUnprivileged$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TRIAL_LOAD_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestTrialLoadUnprivileged") {
		t.Errorf("as nobody: %v\n%s", err, out)
	}
}
