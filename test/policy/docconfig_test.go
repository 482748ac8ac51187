package policy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/daemon"
)

var tomlBlock = regexp.MustCompile("(?ms)^\\s*```toml\n(.*?)^\\s*```")

// TestDocConfigExamples: every TOML example of the README and the guides
// is a configuration the daemon takes: loaded as a config file and
// validated whole, as at start (config.Load with daemon.Validate). A key
// renamed or a value refused in the code fails here, not on a switch.
// An hsflowd_conf path names an empty hsflowd.conf of the test's own.
func TestDocConfigExamples(t *testing.T) {
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "docs", "guides", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	dir := t.TempDir()
	hsflowd := filepath.Join(dir, "hsflowd.conf")
	if err := os.WriteFile(hsflowd, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	hsflowdConf := regexp.MustCompile(`(?m)^(\s*hsflowd_conf\s*=\s*)"[^"]*"`)
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for i, m := range tomlBlock.FindAllStringSubmatch(string(b), -1) {
			n++
			text := hsflowdConf.ReplaceAllString(m[1], `${1}"`+hsflowd+`"`)
			// Indented examples (inside a list item) are TOML all the same.
			var lines []string
			for _, l := range strings.Split(text, "\n") {
				lines = append(lines, strings.TrimLeft(l, " "))
			}
			file := filepath.Join(dir, "example.toml")
			if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
				t.Fatal(err)
			}
			config.ForgetReportedIgnored()
			if _, err := config.Load(config.Layers{File: file, Notes: discard{}, Check: daemon.Validate}); err != nil {
				t.Errorf("%s, TOML example %d: refused: %v\n%s", rel, i+1, err, m[1])
			}
		}
	}
	if n < 5 {
		t.Fatalf("only %d TOML examples found", n)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
