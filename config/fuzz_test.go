package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/testkit/testutil"
)

// FuzzParse feeds arbitrary text to the TOML config parser and then to
// Validate, as a SIGHUP with that file would: neither may panic, and a
// text parse accepts must leave settings Validate can judge.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(filepath.Join(testutil.RepoDir(), "deploy", "sflowswitchd.conf.example"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte("sampling = 1000\n[[collector]]\naddress = \"198.18.0.1:6343\"\n"))
	f.Add([]byte("port_sampling = { swp1 = 100 }\nsampling_speed = { \"10G\" = 10000 }\n"))
	f.Add([]byte("a = {b={c={d=1}}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The decoder's memory grows with the square of the nesting depth
		// (issue 25); inputs are kept to a few KiB so that a fuzzing
		// worker stays small.
		if len(data) > 4096 {
			return
		}
		s := Defaults()
		if err := parse("fuzz.toml", data, &s); err != nil {
			return
		}
		_ = s.Validate()
	})
}
