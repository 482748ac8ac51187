package buildinfo

import (
	"runtime"
	"testing"
)

func TestGet(t *testing.T) {
	in := Get("1.2.3", "abc123")
	if in.Version != "1.2.3" || in.Commit != "abc123" || in.GoVersion != runtime.Version() {
		t.Errorf("Get = %+v", in)
	}
	if got, want := in.String(), "sflowswitchd 1.2.3 (commit abc123, "+runtime.Version()+")"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	// A test binary has no module version nor VCS stamp.
	if in := Get("", ""); in.Version != "dev" || in.Commit == "" {
		t.Errorf("Get of an unstamped build = %+v, want version dev and a commit (or unknown)", in)
	}
}
