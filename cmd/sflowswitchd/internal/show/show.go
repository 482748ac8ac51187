// Package show is `sflowswitchd show`: it prints the settings in force of
// the running daemon, as the daemon records them in its state directory
// (internal/inforce): the agent address and why it was chosen, the
// collectors, each port's rate (configured and the kernel's) and
// direction, polling, and where every setting came from.
package show

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/internal/inforce"
)

// Run runs `sflowswitchd show [flags]` and returns the exit status: 0
// shown, 1 nothing to show (no daemon has recorded its state), 2 a bad
// flag.
func Run(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("sflowswitchd show", flag.ContinueOnError)
	fset.SetOutput(stderr)
	stateDir := fset.String("state-dir", config.DefaultStateDir, "the daemon's state `directory` (its -state-dir / state_dir)")
	conf := fset.String("config", "", "take the state directory from this config `file` (state_dir)")
	asJSON := fset.Bool("json", false, "print the state file as it is (JSON)")
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	dir := *stateDir
	if *conf != "" {
		s, err := config.Load(config.Layers{File: *conf, Notes: io.Discard})
		if err != nil {
			fmt.Fprintf(stderr, "sflowswitchd show: %s: %v\n", *conf, err)
			return 1
		}
		dir = s.StateDir
	}
	path := filepath.Join(dir, inforce.FileName)
	st, err := inforce.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "sflowswitchd show: %s: no state recorded: no sflowswitchd has run with state directory %s (-state-dir, or -config to take it from a config file)\n", path, dir)
		return 1
	} else if err != nil {
		fmt.Fprintf(stderr, "sflowswitchd show: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return 1
		}
		return 0
	}
	if !alive(st.PID) {
		fmt.Fprintf(stdout, "NOTE: PID %d is not running: this is what the last daemon had in force\n", st.PID)
	}
	if err := inforce.Render(stdout, st); err != nil {
		fmt.Fprintf(stderr, "sflowswitchd show: %v\n", err)
		return 1
	}
	return 0
}

// alive reports whether process pid exists (in this PID namespace).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}
