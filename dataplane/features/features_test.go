package features

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// TestProbeFeatures: every probe really runs (a probe that cannot run
// fails here, e.g. without CAP_BPF) and its answer agrees with the running
// kernel's release: a feature of a release at or below the kernel's (and,
// for tp_btf, a kernel with BTF) must be found; a missing feature must be
// reported as not supported by the kernel (never a permission error: the
// tests run as root), named by Unavailable with the release that brought
// it, listed by Missing and not by Has. So on 6.18 every feature is there,
// on Debian 12's 6.1 every one but tcx (6.6).
func TestProbeFeatures(t *testing.T) {
	fs := ProbeFeatures()
	kernel, ok := parseRelease(fs.Release)
	if !ok {
		t.Fatalf("kernel release %q", fs.Release)
	}
	if len(fs.List) != len(featureProbes) {
		t.Fatalf("%d features probed, want %d", len(fs.List), len(featureProbes))
	}
	_, btfErr := os.Stat("/sys/kernel/btf/vmlinux")
	seen := map[string]bool{}
	var missing []string
	for i, f := range fs.List {
		t.Logf("%-24s since %-22s required=%-5v err=%v", f.Name, f.Since, f.Required, f.Err)
		if f.Name != featureProbes[i].Name {
			t.Errorf("feature %d is %s, want %s (the order of docs/reference/kernels.md)", i, f.Name, featureProbes[i].Name)
		}
		if seen[f.Name] {
			t.Errorf("feature %s probed twice", f.Name)
		}
		seen[f.Name] = true
		if f.Since == "" || f.UsedFor == "" || f.Without == "" {
			t.Errorf("feature %s: Since, UsedFor and Without must be documented", f.Name)
		}
		since, ok := parseRelease(f.Since)
		if !ok {
			t.Errorf("feature %s: Since %q does not start with a release", f.Name, f.Since)
			continue
		}
		expected := !kernel.before(since)
		if f.Name == FeatureBTFTracepoint && btfErr != nil {
			expected = false // no kernel BTF (CONFIG_DEBUG_INFO_BTF)
		}
		if f.Name == FeaturePsample || f.Name == FeatureActSample || f.Name == FeaturePsampleTap {
			expected = false // modules a kernel may be built without (CONFIG_PSAMPLE, CONFIG_NET_ACT_SAMPLE)
		}
		if has := fs.Has(f.Name); has != f.Available() {
			t.Errorf("Has(%s) = %v, Available %v", f.Name, has, f.Available())
		}
		if f.Available() {
			if err := fs.Unavailable(f.Name); err != nil {
				t.Errorf("Unavailable(%s) = %v for an available feature", f.Name, err)
			}
			continue
		}
		missing = append(missing, f.Name)
		if expected {
			t.Errorf("feature %s (Linux %s) missing on kernel %s: %v", f.Name, f.Since, fs.Release, f.Err)
		}
		if !errors.Is(f.Err, ebpf.ErrNotSupported) {
			t.Errorf("feature %s missing with %v, want an error wrapping ebpf.ErrNotSupported (the kernel lacks it)", f.Name, f.Err)
		}
		err := fs.Unavailable(f.Name)
		if err == nil || !strings.Contains(err.Error(), "needs Linux "+f.Since) || !errors.Is(err, f.Err) {
			t.Errorf("Unavailable(%s) = %v, want the release %s and the probe's error", f.Name, err, f.Since)
		}
	}
	var gotMissing []string
	for _, f := range fs.Missing() {
		gotMissing = append(gotMissing, f.Name)
	}
	if strings.Join(gotMissing, ",") != strings.Join(missing, ",") {
		t.Errorf("Missing() = %v, want %v", gotMissing, missing)
	}
	t.Logf("kernel %s: %d of %d features, missing %v", fs.Release, len(fs.List)-len(missing), len(fs.List), missing)
	if fs.Has("no-such-feature") || fs.Unavailable("no-such-feature") == nil {
		t.Error("unknown feature reported available")
	}
}

// release is a kernel release's major and minor number.
type release struct{ major, minor int }

func (r release) before(o release) bool {
	return r.major < o.major || r.major == o.major && r.minor < o.minor
}

// parseRelease reads the "X.Y" a kernel release ("6.1.0-50-amd64") or a
// feature's Since ("5.5 (with kernel BTF)") starts with.
func parseRelease(s string) (release, bool) {
	var r release
	if _, err := fmt.Sscanf(s, "%d.%d", &r.major, &r.minor); err != nil {
		return r, false
	}
	return r, true
}

func TestParseRelease(t *testing.T) {
	for in, want := range map[string]release{
		"6.1.0-50-amd64": {6, 1}, "6.12.117+deb13-amd64": {6, 12}, "6.18.44-fc-v669": {6, 18},
		"5.5 (with kernel BTF)": {5, 5}, "4.8": {4, 8},
	} {
		if got, ok := parseRelease(in); !ok || got != want {
			t.Errorf("parseRelease(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	if _, ok := parseRelease("unknown"); ok {
		t.Error(`parseRelease("unknown") succeeded`)
	}
	if !(release{6, 1}).before(release{6, 6}) || (release{6, 12}).before(release{6, 6}) || (release{6, 6}).before(release{6, 6}) {
		t.Error("before is wrong")
	}
}
