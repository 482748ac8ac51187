package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// module is the import path of the repository's Go module.
const module = "github.com/sflowswitchd/sflowswitchd"

// layerNames name the layers in messages.
var layerNames = []string{"internal", "codec, config", "dataplane", "agent core", "sources, features", "composition", "command", "whole-system tests"}

// layerName names layer l in messages.
func layerName(l int) string {
	if l >= 0 && l < len(layerNames) {
		return layerNames[l]
	}
	return "layer " + strconv.Itoa(l)
}

// testkit is the folder of the test kits, imported only by tests.
const testkit = "internal/testkit"

// layerOf returns the layer of a package of the module (its path relative
// to the module): that of the longest entry of the package map m that is
// the package or a folder above it, or -1 if none is.
func layerOf(m []mapEntry, rel string) int {
	best, layer := -1, -1
	for _, e := range m {
		if within(rel, e.path) && len(e.path) > best {
			best, layer = len(e.path), e.layer
		}
	}
	return layer
}

// within reports whether rel is the folder prefix or below it.
func within(rel, prefix string) bool { return rel == prefix || strings.HasPrefix(rel, prefix+"/") }

// listedPackage is what `go list -json` says of a package.
type listedPackage struct {
	ImportPath                         string
	Imports, TestImports, XTestImports []string
}

// listPackages runs `go list -json ./...` in the repository.
func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = testutil.RepoDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// layerViolations returns, sorted, every import of the module's
// packages that breaks the layer rules: an import of a higher layer; an
// import of a test kit from non-test code (test kits are layer 0, so
// they import nothing above it either); an import by config/ of anything
// outside it (the configuration is a leaf); a package in no layer. The
// imports of a package's tests are held to the same rule.
func layerViolations(m []mapEntry, pkgs []listedPackage) []string {
	var bad []string
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			continue
		}
		from := layerOf(m, rel)
		if from < 0 {
			bad = append(bad, fmt.Sprintf("%s is in no layer (add it to the package tree of docs/ARCHITECTURE.md)", rel))
			continue
		}
		check := func(imports []string, test bool) {
			for _, imp := range imports {
				irel, ok := strings.CutPrefix(imp, module+"/")
				if !ok || irel == rel {
					continue
				}
				to := layerOf(m, irel)
				switch {
				case to > from:
					bad = append(bad, fmt.Sprintf("%s (layer %d, %s) imports %s (layer %d, %s)", rel, from, layerName(from), irel, to, layerName(to)))
				case within(irel, testkit) && !test && !within(rel, testkit):
					bad = append(bad, fmt.Sprintf("%s imports the test kit %s outside its tests", rel, irel))
				case within(rel, "config") && !within(irel, "config") && !within(irel, testkit):
					bad = append(bad, fmt.Sprintf("%s imports %s: config imports nothing of the project", rel, irel))
				}
			}
		}
		check(p.Imports, false)
		check(p.TestImports, true)
		check(p.XTestImports, true)
	}
	sort.Strings(bad)
	return bad
}

// TestLayers: no package imports a layer above its own, the layers being
// those of the package map (docs/ARCHITECTURE.md, "The package tree").
func TestLayers(t *testing.T) {
	m := packageMap(t)
	pkgs := listPackages(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	for _, v := range layerViolations(m, pkgs) {
		t.Error(v)
	}
}

// TestLayersCatch: the rule finds each kind of violation (a rule that
// cannot fail checks nothing).
func TestLayersCatch(t *testing.T) {
	m := packageMap(t)
	pkg := func(path string, imports, testImports []string) listedPackage {
		q := func(rels []string) []string {
			var out []string
			for _, r := range rels {
				out = append(out, module+"/"+r)
			}
			return out
		}
		return listedPackage{ImportPath: module + "/" + path, Imports: q(imports), TestImports: q(testImports)}
	}
	for _, c := range []struct {
		p    listedPackage
		want string
	}{
		{pkg("agent", []string{"mib"}, nil), "agent (layer 3, agent core) imports mib (layer 4, sources, features)"},
		{pkg("internal/ethernet", nil, []string{"sflow"}), "internal/ethernet (layer 0, internal) imports sflow"},
		{pkg("dataplane", []string{"internal/testkit/netlab"}, nil), "dataplane imports the test kit internal/testkit/netlab outside its tests"},
		{pkg("internal/testkit/netlab", []string{"dataplane"}, nil), "internal/testkit/netlab (layer 0, internal) imports dataplane"},
		{pkg("config", []string{"sflow"}, nil), "config imports sflow: config imports nothing of the project"},
		{pkg("newfolder/x", nil, nil), "newfolder/x is in no layer"},
	} {
		got := layerViolations(m, []listedPackage{c.p})
		if len(got) != 1 || !strings.HasPrefix(got[0], c.want) {
			t.Errorf("%s: %q, want one violation starting %q", c.p.ImportPath, got, c.want)
		}
	}
	for _, ok := range []listedPackage{
		pkg("daemon", []string{"source", "config", "internal/prom"}, []string{"internal/testkit/netlab"}),
		pkg("source", []string{"agent", "dataplane"}, nil),
		pkg("dataplane", nil, []string{"internal/testkit/netlab", "internal/testkit/xdptest"}),
		pkg("config", []string{"config/hsflowdconf"}, []string{"internal/testkit/testutil"}),
	} {
		if got := layerViolations(m, []listedPackage{ok}); len(got) != 0 {
			t.Errorf("%s: %q, want none", ok.ImportPath, got)
		}
	}
}
