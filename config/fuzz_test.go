package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// FuzzParse feeds arbitrary text to the TOML config parser and then to
// Validate, as a SIGHUP with that file would: neither may panic, and a
// text parse accepts must leave settings Validate can judge.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(filepath.Join(testutil.RepoDir(), "packaging", "sflowswitchd.conf.example"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte("sampling = 1000\n[[collector]]\naddress = \"198.18.0.1:6343\"\n"))
	f.Add([]byte("port_sampling = { swp1 = 100 }\nsampling_speed = { \"10G\" = 10000 }\n"))
	f.Add([]byte("a = {b={c={d=1}}}\n"))
	f.Add([]byte("a = " + strings.Repeat("{b=", 3000) + "\n"))
	f.Add([]byte(strings.Repeat("[", 20000)))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The daemon reads no larger file (readLimited); within it the
		// nesting is bounded before the decoder sees the text
		// (checkTOMLShape), and a refusal is a few short lines (boundedError).
		if len(data) > MaxConfigBytes {
			return
		}
		s := Defaults()
		if _, err := parse("fuzz.toml", data, &s); err != nil {
			msg := bound(err).Error()
			lines := strings.Split(msg, "\n")
			if len(lines) > MaxErrorLines+1 {
				t.Fatalf("refusal of %d lines: %.400q", len(lines), msg)
			}
			for _, l := range lines {
				if len(l) > MaxErrorBytes+64 {
					t.Fatalf("refusal line of %d bytes: %.400q", len(l), l)
				}
			}
			return
		}
		_ = s.Validate()
	})
}
