package policy

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// pendingLinks are pages other work adds (the SONiC guide): the index
// may link to them before they exist. Once
// a page exists its entry must go, so that the list never outlives its
// reason.
var pendingLinks = map[string]bool{
	"docs/guides/sonic.md": true,
}

var (
	mdFence   = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```")
	mdCode    = regexp.MustCompile("`[^`\n]*`")
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
)

// TestMarkdownLinks: every relative link in the repository's Markdown
// files names a file or folder that exists, and a link to a heading of a
// Markdown file (file.md#heading) names a heading it has, as GitHub
// makes anchors. Folders move; the links must follow them.
func TestMarkdownLinks(t *testing.T) {
	root := repoRoot(t)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		if b, err := os.ReadFile(path); err == nil {
			for _, m := range mdHeading.FindAllStringSubmatch(mdFence.ReplaceAllString(string(b), ""), -1) {
				s := githubAnchor(m[1])
				for i := 1; a[s]; i++ { // repeated headings get -1, -2, ...
					s = githubAnchor(m[1]) + "-" + strconv.Itoa(i)
				}
				a[s] = true
			}
		}
		anchors[path] = a
		return a
	}
	for p := range pendingLinks {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s exists now: remove it from pendingLinks", p)
		}
	}
	files, links := 0, 0
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
		if !strings.HasSuffix(path, ".md") {
			return nil
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := mdCode.ReplaceAllString(mdFence.ReplaceAllString(string(b), ""), "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, anchor, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), file)
			}
			destRel, _ := filepath.Rel(root, dest)
			if _, err := os.Stat(dest); err != nil {
				if !pendingLinks[filepath.ToSlash(destRel)] {
					t.Errorf("%s: link to %s: no such file", rel, target)
				}
				continue
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[anchor] {
				t.Errorf("%s: link to %s: %s has no heading with anchor #%s", rel, target, destRel, anchor)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 || links < 20 {
		t.Fatalf("only %d Markdown files and %d relative links found", files, links)
	}
}

// githubAnchor is the anchor GitHub gives a heading: lower case, the
// Markdown emphasis and code marks and punctuation removed, spaces made
// hyphens.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
