package policy

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/config"
)

// update rewrites the generated references instead of comparing them:
//
//	go test ./cmd/sflowswitchd ./test/policy -run TestReference -update
//
// (cmd/sflowswitchd generates the flags, which live in package main.)
var update = flag.Bool("update", false, "rewrite docs/reference/*.md generated from the code")

const regenerate = "go test ./cmd/sflowswitchd ./test/policy -run TestReference -update"

// TestReferenceConfig: docs/reference/config.md is config.Settings as the
// code defines it: every TOML key, its type, its built-in default
// (config.Defaults) and the field's doc comment. Generated, so that a key
// added to the code is in the reference and one removed is not.
func TestReferenceConfig(t *testing.T) {
	docs, consts := fieldDocs(t, filepath.Join(repoRoot(t), "config", "settings.go"))
	var b strings.Builder
	b.WriteString(`# Configuration file keys

<!-- Generated from config/settings.go by TestReferenceConfig; do not edit.
Regenerate: ` + regenerate + ` -->

The TOML file given with ` + "`-config`" + ` (the package installs
/etc/sflowswitchd/sflowswitchd.conf). Precedence: built-in defaults, then
the hsflowd.conf of ` + "`hsflowd_conf`" + `, then this file, then the flags
([flags.md](flags.md)). A file with any error, an unknown key included, is
refused whole with the problem named; on SIGHUP the running settings then
stay. How to use them: [the configuration guide](../guides/configure.md).

| key | type | default | meaning |
|---|---|---|---|
`)
	def := reflect.ValueOf(config.Defaults())
	st := def.Type()
	// The doc comments speak Go: their field and constant names become
	// the keys and values an operator writes.
	// A one-word name (Ports, AgentX) is also a word of the text: it is
	// replaced only where it begins the comment; a name not after a "."
	// (dataplane.Hook is Go).
	var names []string
	for i := 0; i < st.NumField(); i++ {
		if k, _, _ := strings.Cut(st.Field(i).Tag.Get("toml"), ","); k != "" {
			pat := `(^|[^.\w])` + st.Field(i).Name + `\b`
			if strings.EqualFold(st.Field(i).Name, k) {
				pat = `^()` + st.Field(i).Name + `\b`
			}
			names = append(names, pat, "${1}`"+k+"`")
		}
	}
	for c, v := range consts {
		names = append(names, `(^|[^.\w])`+c+`\b`, "${1}"+v)
	}
	operator := func(doc string) string {
		for i := 0; i < len(names); i += 2 {
			doc = regexp.MustCompile(names[i]).ReplaceAllString(doc, names[i+1])
		}
		return doc
	}
	lastDoc := ""
	for i := 0; i < st.NumField(); i++ {
		f := st.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if key == "" || key == "-" {
			continue
		}
		doc := docs[f.Name]
		switch {
		case doc != "":
			lastDoc = key
		case lastDoc != "":
			doc = "See `" + lastDoc + "`."
		default:
			t.Errorf("config.Settings.%s has no doc comment", f.Name)
		}
		typ, name := tomlType(f.Type), "`"+key+"`"
		if typ == "array of tables" {
			name = "`[[" + key + "]]`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, typ, defaultOf(def.Field(i)), mdCell(operator(doc)))
		if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct {
			sub := f.Type.Elem()
			for j := 0; j < sub.NumField(); j++ {
				sk, _, _ := strings.Cut(sub.Field(j).Tag.Get("toml"), ",")
				doc := regexp.MustCompile(`\b`+sub.Field(j).Name+`\b`).ReplaceAllLiteralString(docs[sub.Name()+"."+sub.Field(j).Name], "`"+sk+"`")
				fmt.Fprintf(&b, "| `%s.%s` | %s | | %s |\n", key, sk, tomlType(sub.Field(j).Type), mdCell(operator(doc)))
			}
		}
	}
	golden(t, filepath.Join(repoRoot(t), "docs", "reference", "config.md"), b.String())
}

// fieldDocs returns the doc comments of the struct fields in file, keyed
// "Field" for Settings and "Type.Field" for the other structs, and the
// file's constants given as literals, as Markdown.
func fieldDocs(t *testing.T, file string) (docs, consts map[string]string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docs, consts = map[string]string{}, map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
						consts[name.Name] = "`" + lit.Value + "`"
					}
				}
			}
			return false
		}
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		s, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, fl := range s.Fields.List {
			for _, name := range fl.Names {
				k := name.Name
				if ts.Name.Name != "Settings" {
					k = ts.Name.Name + "." + k
				}
				docs[k] = strings.TrimSpace(fl.Doc.Text())
			}
		}
		return false
	})
	return docs, consts
}

func tomlType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Map:
		return "table of " + tomlType(t.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return "array of tables"
		}
		return "array of " + tomlType(t.Elem())
	}
	return t.String()
}

func defaultOf(v reflect.Value) string {
	if v.IsZero() {
		return ""
	}
	if v.Kind() == reflect.String {
		return "`" + strconv.Quote(v.String()) + "`"
	}
	return fmt.Sprintf("`%v`", v.Interface())
}

// metric is one metric the daemon exports, as the code describes it.
type metric struct {
	name, help, where string
	labels            []string
}

// TestReferenceMetrics: docs/reference/metrics.md lists every metric the
// daemon's code describes (every prom.Desc and prometheus.NewDesc call
// outside tests and benchmarks), with its labels, its help text and the
// package that exports it. A metric added to the code is in the reference
// once regenerated; a description the scan cannot read (a name that is not
// a string literal) fails, so that the scan is extended rather than the
// metric left out.
func TestReferenceMetrics(t *testing.T) {
	byName := map[string]metric{}
	goFiles(t, func(rel string, _ *token.FileSet, f *ast.File) {
		if strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(rel, "bench"+string(filepath.Separator)) ||
			strings.HasPrefix(rel, "test"+string(filepath.Separator)) || strings.HasPrefix(rel, "testkit"+string(filepath.Separator)) {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			var m metric
			switch {
			case pkg.Name == "prom" && sel.Sel.Name == "Desc" && len(call.Args) >= 2:
				name, ok := stringLit(call.Args[0])
				if !ok {
					t.Errorf("%s: prom.Desc with a name that is not a string literal", rel)
					return true
				}
				m.name = "sflowswitchd_" + name
				for _, a := range call.Args[2:] {
					l, ok := stringLit(a)
					if !ok {
						t.Errorf("%s: %s: a label that is not a string literal", rel, m.name)
					}
					m.labels = append(m.labels, l)
				}
			case pkg.Name == "prometheus" && sel.Sel.Name == "NewDesc" && len(call.Args) == 4:
				name, ok := stringLit(call.Args[0])
				if !ok {
					if filepath.ToSlash(rel) != "internal/prom/prom.go" { // prom.Desc itself
						t.Errorf("%s: prometheus.NewDesc with a name that is not a string literal", rel)
					}
					return true
				}
				m.name = name
				if cl, ok := call.Args[2].(*ast.CompositeLit); ok {
					for _, a := range cl.Elts {
						l, _ := stringLit(a)
						m.labels = append(m.labels, l)
					}
				}
			default:
				return true
			}
			m.help, _ = stringLit(call.Args[1])
			m.where = filepath.ToSlash(filepath.Dir(rel))
			if old, dup := byName[m.name]; dup && old.where != m.where {
				m.where = old.where + ", " + m.where
			}
			byName[m.name] = m
			return true
		})
	})
	if len(byName) < 20 {
		t.Fatalf("only %d metrics found", len(byName))
	}
	checkMetricMentions(t, byName)
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(`# Metrics

<!-- Generated from the code's metric descriptions by TestReferenceMetrics;
do not edit. Regenerate: ` + regenerate + ` -->

With ` + "`metrics = \"127.0.0.1:9116\"`" + ` (or ` + "`-metrics`" + `) the daemon serves
Prometheus text at ` + "`/metrics`" + `: the metrics below, and the Go runtime's and
the process's own (` + "`go_*`" + `, ` + "`process_*`" + `: goroutines, heap, GC pauses,
RSS, open descriptors, CPU). Names ending in ` + "`_total`" + ` are counters,
the others gauges. What to watch, and what a rise means:
[the troubleshooting guide](../guides/troubleshoot.md).

| metric | labels | meaning | exported by |
|---|---|---|---|
`)
	for _, n := range names {
		m := byName[n]
		labels := ""
		if len(m.labels) > 0 {
			labels = "`" + strings.Join(m.labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", n, labels, mdCell(m.help), m.where)
	}
	golden(t, filepath.Join(repoRoot(t), "docs", "reference", "metrics.md"), b.String())
}

// stringLit evaluates a string literal or a + concatenation of them.
func stringLit(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		a, ok1 := stringLit(e.X)
		b, ok2 := stringLit(e.Y)
		return a + b, ok1 && ok2
	case *ast.ParenExpr:
		return stringLit(e.X)
	}
	return "", false
}

// mdCell makes s one Markdown table cell.
func mdCell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// golden compares the generated text with the file, or writes it with
// -update.
func golden(t *testing.T, path, want string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it: %s)", err, regenerate)
	}
	if string(got) != want {
		t.Errorf("%s is not what the code generates; run %s", path, regenerate)
	}
}

var metricMention = regexp.MustCompile(`\bsflowswitchd_[a-z][a-z0-9_]*`)

// checkMetricMentions: every metric name the Markdown files mention is
// one the code exports (a name ending in "_" is a prefix of some), so
// that a metric renamed in the code cannot live on in a guide.
func checkMetricMentions(t *testing.T, metrics map[string]metric) {
	t.Helper()
	root := repoRoot(t)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == ".git" || rel == "bin" || strings.HasSuffix(rel, ".cache") || (strings.HasPrefix(d.Name(), ".") && rel != ".") {
				return filepath.SkipDir
			}
			return nil
		}
		// The changelog records what was, under the names of the time.
		if !strings.HasSuffix(path, ".md") || rel == "CHANGELOG.md" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, m := range metricMention.FindAllString(string(b), -1) {
			if seen[m] {
				continue
			}
			seen[m] = true
			if _, ok := metrics[m]; ok {
				continue
			}
			known := false
			if strings.HasSuffix(m, "_") {
				for n := range metrics {
					known = known || strings.HasPrefix(n, m)
				}
			}
			if !known {
				t.Errorf("%s mentions %s, which the code does not export", rel, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// repoRoot is the repository's top directory: the nearest directory above
// the test's that holds go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
