package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/testkit/testutil"
)

// module is the import path of the repository's Go module.
const module = "github.com/sflowswitchd/sflowswitchd"

// layers are the layers of the repository's packages, lowest first
// (docs/ARCHITECTURE.md, "Layers"), by folder: a package is in the layer
// of the longest prefix below that matches its path. A package may import
// packages of its own layer and of the layers below, never above.
var layers = []struct {
	prefix string
	layer  int
}{
	// 0: implementation below everything, and the test kits.
	{"internal", 0},
	{"testkit", 0},
	// 1: the wire codec, the AgentX protocol, the kernel programs, the
	// configuration.
	{"sflow", 1},
	{"snmpd", 1},
	{"bpf", 1},
	{"config", 1},
	// 2: the kernel dataplane.
	{"dataplane", 2},
	// 2: platform integrations (SONiC's Redis).
	{"platform", 2},
	// 3: the sFlow agent core.
	{"agent", 3},
	// 4: the features built on the core.
	{"agent/kernel", 4},
	{"mib", 4},
	{"apps", 4},
	{"counters", 4},
	// 5: the composition.
	{"daemon", 5},
	// 6: the command.
	{"cmd", 6},
	// 7: tests of the whole.
	{"test", 7},
}

// layerNames name the layers in messages.
var layerNames = []string{"internal/testkit", "codec, protocols, config", "dataplane", "agent core", "features", "composition", "command", "whole-system tests"}

// layerOf returns the layer of a package of the module (its path relative
// to the module), or -1 if no entry matches.
func layerOf(rel string) int {
	best, layer := -1, -1
	for _, l := range layers {
		if (rel == l.prefix || strings.HasPrefix(rel, l.prefix+"/")) && len(l.prefix) > best {
			best, layer = len(l.prefix), l.layer
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
func layerViolations(pkgs []listedPackage) []string {
	var bad []string
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			continue
		}
		from := layerOf(rel)
		if from < 0 {
			bad = append(bad, fmt.Sprintf("%s is in no layer (add its folder to test/policy's layers and docs/ARCHITECTURE.md)", rel))
			continue
		}
		check := func(imports []string, test bool) {
			for _, imp := range imports {
				irel, ok := strings.CutPrefix(imp, module+"/")
				if !ok || irel == rel {
					continue
				}
				to := layerOf(irel)
				switch {
				case to > from:
					bad = append(bad, fmt.Sprintf("%s (layer %d, %s) imports %s (layer %d, %s)", rel, from, layerNames[from], irel, to, layerNames[to]))
				case within(irel, "testkit") && !test && !within(rel, "testkit"):
					bad = append(bad, fmt.Sprintf("%s imports the test kit %s outside its tests", rel, irel))
				case within(rel, "config") && !within(irel, "config") && !within(irel, "testkit"):
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

// TestLayers: no package imports a layer above its own
// (docs/ARCHITECTURE.md, "Layers").
func TestLayers(t *testing.T) {
	pkgs := listPackages(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	for _, v := range layerViolations(pkgs) {
		t.Error(v)
	}
}

// TestLayersCatch: the rule finds each kind of violation (a rule that
// cannot fail checks nothing).
func TestLayersCatch(t *testing.T) {
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
		{pkg("agent", []string{"mib"}, nil), "agent (layer 3, agent core) imports mib (layer 4, features)"},
		{pkg("internal/ethernet", nil, []string{"sflow"}), "internal/ethernet (layer 0, internal/testkit) imports sflow"},
		{pkg("dataplane", []string{"testkit/netlab"}, nil), "dataplane imports the test kit testkit/netlab outside its tests"},
		{pkg("testkit/netlab", []string{"dataplane"}, nil), "testkit/netlab (layer 0, internal/testkit) imports dataplane"},
		{pkg("config", []string{"sflow"}, nil), "config imports sflow: config imports nothing of the project"},
		{pkg("newfolder/x", nil, nil), "newfolder/x is in no layer"},
	} {
		got := layerViolations([]listedPackage{c.p})
		if len(got) != 1 || !strings.HasPrefix(got[0], c.want) {
			t.Errorf("%s: %q, want one violation starting %q", c.p.ImportPath, got, c.want)
		}
	}
	for _, ok := range []listedPackage{
		pkg("daemon", []string{"agent/kernel", "config", "internal/prom"}, []string{"testkit/netlab"}),
		pkg("agent/kernel", []string{"agent", "dataplane"}, nil),
		pkg("dataplane", nil, []string{"testkit/netlab", "testkit/xdptest"}),
		pkg("config", []string{"config/hsflowdconf"}, []string{"testkit/testutil"}),
	} {
		if got := layerViolations([]listedPackage{ok}); len(got) != 0 {
			t.Errorf("%s: %q, want none", ok.ImportPath, got)
		}
	}
}
