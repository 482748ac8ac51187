package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// mapFile is where the package map lives, the one list of the
// repository's packages and their layers.
const mapFile = "docs/ARCHITECTURE.md"

// mapHeading opens the section whose first indented block is the map.
const mapHeading = "## The package tree"

// mapEntry is one line of the package map.
type mapEntry struct {
	path  string // relative to the module, without a trailing slash
	layer int
	pkg   bool // a package; false: a folder that is not one
	line  int  // in mapFile
}

// parsePackageMap reads the map: the first indented block after
// mapHeading. A top line is four spaces, the layer (a digit, or a space
// for the layer of the line above), two spaces and a name; an inner line
// is nine spaces and a name relative to the top line above it; a line
// indented further continues a description. A name ending in "/" is a
// folder that is not a package.
func parsePackageMap(text string) ([]mapEntry, error) {
	lines := strings.Split(text, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == mapHeading {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("%s: no heading %q", mapFile, mapHeading)
	}
	var (
		out          []mapEntry
		top          string
		layer        = -1
		inBlock      bool
		seen         = map[string]int{}
		spaces       = func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
		addEntry     func(name string, n int) error
		topHasLayer  bool
		previousLine int
	)
	addEntry = func(name string, n int) error {
		e := mapEntry{path: strings.TrimSuffix(name, "/"), layer: layer, pkg: !strings.HasSuffix(name, "/"), line: n}
		if e.path == "" || filepath.Clean(e.path) != e.path || strings.HasPrefix(e.path, "..") {
			return fmt.Errorf("%s:%d: %q is not a path inside the repository", mapFile, n, name)
		}
		if prev, dup := seen[e.path]; dup {
			return fmt.Errorf("%s:%d: %s is in the map twice (also line %d)", mapFile, n, e.path, prev)
		}
		seen[e.path] = n
		out = append(out, e)
		return nil
	}
	for i := start; i < len(lines); i++ {
		l, n := lines[i], i+1
		if strings.TrimSpace(l) == "" {
			continue
		}
		if spaces(l) < 4 {
			if inBlock {
				break // the block ended
			}
			continue // prose before the block
		}
		inBlock = true
		previousLine = n
		fields := strings.Fields(l)
		switch s := spaces(l); {
		case s == 4 && len(l) > 4 && l[4] >= '0' && l[4] <= '9':
			v, err := strconv.Atoi(fields[0])
			if err != nil || len(fields) < 2 || !strings.HasPrefix(l[5:], "  ") {
				return nil, fmt.Errorf("%s:%d: a top line is \"    L  name  description\"", mapFile, n)
			}
			if v < layer {
				return nil, fmt.Errorf("%s:%d: layer %d after layer %d (lowest first)", mapFile, n, v, layer)
			}
			layer, top, topHasLayer = v, fields[1], true
			if err := addEntry(top, n); err != nil {
				return nil, err
			}
		case s == 7:
			if !topHasLayer {
				return nil, fmt.Errorf("%s:%d: the first line of the map needs a layer", mapFile, n)
			}
			top = fields[0]
			if err := addEntry(top, n); err != nil {
				return nil, err
			}
		case s == 9:
			if top == "" {
				return nil, fmt.Errorf("%s:%d: an inner line before any top line", mapFile, n)
			}
			if err := addEntry(strings.TrimSuffix(top, "/")+"/"+fields[0], n); err != nil {
				return nil, err
			}
		case s > 9:
			// a description continued
		default:
			return nil, fmt.Errorf("%s:%d: indented %d spaces: a top line has 4 (with its layer) or 7, an inner line 9", mapFile, n, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no map after %q (last line read %d)", mapFile, mapHeading, previousLine)
	}
	return out, nil
}

var (
	mapOnce    sync.Once
	mapEntries []mapEntry
	mapErr     error
)

// packageMap returns the map of mapFile, read once.
func packageMap(t *testing.T) []mapEntry {
	t.Helper()
	mapOnce.Do(func() {
		b, err := os.ReadFile(filepath.Join(testutil.RepoDir(), mapFile))
		if err != nil {
			mapErr = err
			return
		}
		mapEntries, mapErr = parsePackageMap(string(b))
	})
	if mapErr != nil {
		t.Fatal(mapErr)
	}
	return mapEntries
}

// mapMismatches compares the map m with the module's packages pkgs (paths
// relative to the module) and the folders that exist (isDir): every
// package is in the map as a package, every package entry is a package,
// and every folder entry is a folder that holds no package itself.
func mapMismatches(m []mapEntry, pkgs []string, isDir func(string) bool) []string {
	var bad []string
	isPkg := map[string]bool{}
	for _, p := range pkgs {
		isPkg[p] = true
	}
	inMap := map[string]mapEntry{}
	for _, e := range m {
		inMap[e.path] = e
		switch {
		case e.pkg && !isPkg[e.path]:
			bad = append(bad, fmt.Sprintf("%s:%d: %s is no package of the module (gone, or a folder: write it with a trailing /)", mapFile, e.line, e.path))
		case !e.pkg && isPkg[e.path]:
			bad = append(bad, fmt.Sprintf("%s:%d: %s/ is a package: write it without the trailing /", mapFile, e.line, e.path))
		case !e.pkg && !isDir(e.path):
			bad = append(bad, fmt.Sprintf("%s:%d: folder %s/ does not exist", mapFile, e.line, e.path))
		}
	}
	for _, p := range pkgs {
		if e, ok := inMap[p]; !ok || !e.pkg {
			bad = append(bad, fmt.Sprintf("package %s is not in the package map (%s, %q)", p, mapFile, mapHeading))
		}
	}
	sort.Strings(bad)
	return bad
}

// TestPackageMap: the package map of docs/ARCHITECTURE.md names every
// package of the module, and nothing that is not there.
func TestPackageMap(t *testing.T) {
	m := packageMap(t)
	var rels []string
	for _, p := range listPackages(t) {
		if rel, ok := strings.CutPrefix(p.ImportPath, module+"/"); ok {
			rels = append(rels, rel)
		}
	}
	root := testutil.RepoDir()
	isDir := func(rel string) bool {
		st, err := os.Stat(filepath.Join(root, rel))
		return err == nil && st.IsDir()
	}
	for _, v := range mapMismatches(m, rels, isDir) {
		t.Error(v)
	}
}

// TestPackageMapCatch: the map check finds a package left out, an entry
// of a package that does not exist, a folder written as a package and a
// missing folder; the parser refuses layers out of order and a name
// twice (a rule that cannot fail checks nothing).
func TestPackageMapCatch(t *testing.T) {
	doc := mapHeading + `

    0  internal/              x
         ethernet             x
         gone                 x
    1  sflow                  x
       apps                   x
       nowhere/               x
`
	m, err := parsePackageMap(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"internal", "internal/ethernet", "internal/gone", "sflow", "apps", "nowhere"}
	if len(m) != len(want) {
		t.Fatalf("parsed %+v, want %v", m, want)
	}
	for i, e := range m {
		if e.path != want[i] {
			t.Errorf("entry %d: %s, want %s", i, e.path, want[i])
		}
	}
	if m[5].layer != 1 || m[1].layer != 0 || m[0].pkg || !m[1].pkg {
		t.Errorf("layers or kinds wrong: %+v", m)
	}
	bad := mapMismatches(m, []string{"internal/ethernet", "sflow", "apps/app", "mib"}, func(rel string) bool { return rel == "internal" })
	for _, w := range []string{"internal/gone is no package", "apps is no package", "folder nowhere/ does not exist",
		"package apps/app is not in the package map", "package mib is not in the package map"} {
		found := false
		for _, b := range bad {
			found = found || strings.Contains(b, w)
		}
		if !found {
			t.Errorf("no mismatch %q in %q", w, bad)
		}
	}
	if len(bad) != 5 {
		t.Errorf("%d mismatches, want 5: %q", len(bad), bad)
	}
	for _, broken := range []string{
		mapHeading + "\n\n    1  sflow  x\n    0  internal/  x\n",
		mapHeading + "\n\n    0  internal/  x\n         ethernet  x\n         ethernet  x\n",
		mapHeading + "\n\n         ethernet  x\n",
	} {
		if _, err := parsePackageMap(broken); err == nil {
			t.Errorf("parsed %q without an error", broken)
		}
	}
}
