// Package testskip is the one place a test of this repository may skip.
//
// CI must not pass by skipping. Under CI (the environment variable CI set,
// as .ci/run does) a test may skip only for a kernel feature that the
// daemon's own probe reports missing (Feature); every other reason to skip
// (not root, a tool not installed) fails the test there instead (Skip).
// Outside CI, on a developer's laptop, both skip. test/policy fails when a
// test calls testing's Skip, Skipf or SkipNow itself.
package testskip

import (
	"fmt"
	"os"
	"testing"
)

// InCI reports whether the tests run under CI (CI set and not "0" or
// "false").
func InCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "0" && v != "false"
}

// Skip skips t for a reason other than a missing kernel feature, outside
// CI; under CI it fails t with the same reason, since CI installs and runs
// everything a test needs (a skip there would hide a setup error).
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("%s (CI is set: a test may skip only for a kernel feature the probe reports missing)", reason)
	}
	t.Skip(reason)
}

// Features is what the kernel feature probe answers
// (dataplane/features.ProbeFeatures, or a lab probe of a kernel module):
// nil when the running kernel has the feature called name, otherwise why
// not.
type Features interface {
	Unavailable(name string) error
}

// Feature skips t when the probe fs reports the kernel feature name
// missing, naming the feature and the probe's reason; it returns when the
// feature is there. This is the only skip allowed under CI.
func Feature(t testing.TB, fs Features, name string) {
	t.Helper()
	if err := fs.Unavailable(name); err != nil {
		t.Skipf("kernel feature %s unavailable: %v", name, err)
	}
}

// Root skips t unless it runs as root (network namespaces, BPF); under CI
// it fails t instead: CI runs as root.
func Root(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "test needs root (network namespaces, BPF programs)")
	}
}
