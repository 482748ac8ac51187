package main

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/config"
)

// update rewrites the generated references instead of comparing them:
//
//	go test ./cmd/sflowswitchd ./test/policy -run TestReference -update
var update = flag.Bool("update", false, "rewrite docs/reference/*.md generated from the code")

// TestReferenceFlags: docs/reference/flags.md is the flag set of the
// daemon as the code defines it (name, argument, the config key it
// overrides, the usage text), and the subcommands. It is generated, never
// edited by hand, so that it cannot drift from the code; -update
// rewrites it.
func TestReferenceFlags(t *testing.T) {
	keys := map[string]bool{}
	st := reflect.TypeOf(config.Settings{})
	for i := 0; i < st.NumField(); i++ {
		if k, _, _ := strings.Cut(st.Field(i).Tag.Get("toml"), ","); k != "" {
			keys[k] = true
		}
	}
	var b strings.Builder
	b.WriteString(`# Flags

<!-- Generated from cmd/sflowswitchd/flags.go by TestReferenceFlags; do not
edit. Regenerate: go test ./cmd/sflowswitchd ./test/policy -run TestReference -update -->

Command-line flags of ` + "`sflowswitchd`" + `. A flag given on the command
line overrides the config file's key of the same name
([config.md](config.md)), which overrides the built-in default; SIGHUP
re-reads the file, and the flags stay over it. The man page
sflowswitchd(8) says the same.

| flag | argument | config key | meaning |
|---|---|---|---|
`)
	n := 0
	newFlags().fs.VisitAll(func(f *flag.Flag) {
		n++
		arg, usage := flag.UnquoteUsage(f)
		key := strings.ReplaceAll(f.Name, "-", "_")
		if !keys[key] {
			key = ""
		} else {
			key = "`" + key + "`"
		}
		if arg != "" {
			arg = "`" + arg + "`"
		}
		fmt.Fprintf(&b, "| `-%s` | %s | %s | %s |\n", f.Name, arg, key, mdCell(usage))
	})
	if n < 10 {
		t.Fatalf("only %d flags found", n)
	}
	b.WriteString("\n## Subcommands\n\n`sflowswitchd NAME -h` lists each one's flags.\n\n| command | what it does |\n|---|---|\n")
	for _, c := range subcommands {
		fmt.Fprintf(&b, "| `sflowswitchd %s` | %s |\n", c.name, mdCell(c.brief))
	}
	golden(t, "../../docs/reference/flags.md", b.String())
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
		t.Fatalf("%v (generate it: go test ./cmd/sflowswitchd ./test/policy -run TestReference -update)", err)
	}
	if string(got) != want {
		t.Errorf("%s is not what the code generates; run go test ./cmd/sflowswitchd ./test/policy -run TestReference -update", path)
	}
}
