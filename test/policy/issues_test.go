package policy

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var issueNumber = regexp.MustCompile(`(?i)\bissues? ?#?[0-9]+`)

// TestNoIssueNumbers: code and documentation say why, never which issue
// (the word "issue" and a number): an issue number means nothing to a reader
// without the tracker, and the reason it stood for is what they need.
// Go, C, shell, Makefile and Markdown files are checked.
func TestNoIssueNumbers(t *testing.T) {
	root := repoRoot(t)
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == ".git" || rel == "bin" || strings.HasSuffix(rel, ".cache") || rel == filepath.Join("bench", "results") ||
				(strings.HasPrefix(d.Name(), ".") && rel != ".") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".c", ".h", ".sh", ".md":
		default:
			if d.Name() != "Makefile" {
				return nil
			}
		}
		n++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := issueNumber.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: say why, not which issue", rel, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("only %d files checked", n)
	}
}
