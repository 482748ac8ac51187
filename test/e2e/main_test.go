package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// daemonBin is the sflowswitchd binary built once for the whole package.
var daemonBin string

// TestMain builds the daemon once with `go build` into a temporary
// directory, so every test runs the same real binary. With
// SFLOWSWITCHD_E2E_DAEMON set it runs that binary instead, e.g. one built
// from an older commit, to show that a test fails against the code before
// a fix (the hostile suite's before/after evidence).
func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if os.Getenv(perfHelperEnv) == "1" {
		// Re-executed by perfEventAllowed under setpriv: one answer.
		if err := perfOpenHelper(); err != nil {
			fmt.Println(err)
			return 3
		}
		fmt.Println("ok")
		return 0
	}
	dir, err := os.MkdirTemp("", "sflowswitchd-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: temp dir: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if bin := os.Getenv("SFLOWSWITCHD_E2E_DAEMON"); bin != "" {
		if daemonBin, err = filepath.Abs(bin); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: SFLOWSWITCHD_E2E_DAEMON: %v\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "e2e: running %s (SFLOWSWITCHD_E2E_DAEMON), not a fresh build\n", daemonBin)
		return m.Run()
	}
	daemonBin = filepath.Join(dir, "sflowswitchd")
	cmd := exec.Command("go", "build", "-o", daemonBin, "github.com/sflowswitchd/sflowswitchd/cmd/sflowswitchd")
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building the daemon: %v\n", err)
		return 1
	}
	return m.Run()
}
