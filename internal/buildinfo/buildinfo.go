// Package buildinfo says which build of sflowswitchd runs: its version,
// the commit it was built from and the Go toolchain, for `sflowswitchd
// version`, the start-up log line and the sflowswitchd_build_info metric.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Info is one build's identity.
type Info struct {
	// Version is the release (the .deb's version), the module version
	// the binary was built from, or "dev".
	Version string
	// Commit is the VCS revision, "unknown" when neither the linker
	// (-X main.commit) nor the Go toolchain's VCS stamp recorded it; a
	// "+dirty" suffix marks a build of a modified tree.
	Commit string
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

// Get returns the build's Info: version and commit as the linker set them
// (-ldflags "-X main.version=... -X main.commit=...", packaging/deb/build.sh),
// else what the Go toolchain stamped into the binary
// (runtime/debug.ReadBuildInfo: the module version, vcs.revision and
// vcs.modified of a build in a git checkout).
func Get(version, commit string) Info {
	in := Info{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		if in.Commit == "" {
			var rev string
			dirty := false
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
			if rev != "" && dirty {
				rev += "+dirty"
			}
			in.Commit = rev
		}
	}
	if in.Version == "" {
		in.Version = "dev"
	}
	if in.Commit == "" {
		in.Commit = "unknown"
	}
	return in
}

// String is the version line: "sflowswitchd VERSION (commit C, go1.x)".
func (in Info) String() string {
	return fmt.Sprintf("sflowswitchd %s (commit %s, %s)", in.Version, in.Commit, in.GoVersion)
}
