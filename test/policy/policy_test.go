package policy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// goFiles parses every Go file of the repository (not .git, bin, caches)
// and calls fn with its path relative to the repository and its syntax.
func goFiles(t *testing.T, fn func(rel string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	root := testutil.RepoDir()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel == ".git", rel == "bin", strings.HasSuffix(rel, ".cache"), strings.HasPrefix(d.Name(), ".") && rel != ".":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		fn(rel, fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNoDirectSkip: a test skips only through internal/testkit/testskip, which
// under CI allows nothing but a kernel feature the probe reports missing.
// A call of testing's Skip, Skipf or SkipNow anywhere else fails.
func TestNoDirectSkip(t *testing.T) {
	n := 0
	goFiles(t, func(rel string, fset *token.FileSet, f *ast.File) {
		if filepath.Dir(rel) == filepath.Join("internal", "testkit", "testskip") {
			return
		}
		ast.Inspect(f, func(node ast.Node) bool {
			call, ok := node.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch sel.Sel.Name {
			case "Skip", "Skipf", "SkipNow":
			default:
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "testskip" {
				n++
				return true
			}
			t.Errorf("%s: %s called directly; use testskip.Feature (a missing kernel feature) or testskip.Skip",
				fset.Position(call.Pos()), sel.Sel.Name)
			return true
		})
	})
	if n == 0 {
		t.Fatal("no testskip call found at all: is the walk reading the repository?")
	}
}

// TestFuzzTargetsRun: every Fuzz function of the repository is in the
// Makefile's FUZZ_TARGETS, which `make fuzz` runs, and every entry there
// names a Fuzz function that exists.
func TestFuzzTargetsRun(t *testing.T) {
	defined := map[string]bool{}
	goFiles(t, func(rel string, _ *token.FileSet, f *ast.File) {
		if !strings.HasSuffix(rel, "_test.go") {
			return
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Fuzz") {
				defined["./"+filepath.ToSlash(filepath.Dir(rel))+":"+fd.Name.Name] = true
			}
		}
	})
	mk, err := os.ReadFile(filepath.Join(testutil.RepoDir(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^FUZZ_TARGETS\s*:=((?:.*\\\n)*.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no FUZZ_TARGETS")
	}
	listed := map[string]bool{}
	for _, f := range strings.Fields(strings.ReplaceAll(string(m[1]), "\\", " ")) {
		listed[f] = true
	}
	for _, k := range sorted(defined) {
		if !listed[k] {
			t.Errorf("%s is a fuzz target that make fuzz does not run (add it to FUZZ_TARGETS)", k)
		}
	}
	for _, k := range sorted(listed) {
		if !defined[k] {
			t.Errorf("FUZZ_TARGETS lists %s, which is not a Fuzz function", k)
		}
	}
	if len(defined) == 0 {
		t.Fatal("no Fuzz function found")
	}
}

func sorted(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
