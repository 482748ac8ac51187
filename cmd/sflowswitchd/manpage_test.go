package main

import (
	"flag"
	"os"
	"strings"
	"testing"
)

// TestManPageListsEveryFlag: the Debian package's man page documents
// every daemon flag and every subcommand. (docs/reference/flags.md is
// generated from the same flag set: TestReferenceFlags.)
func TestManPageListsEveryFlag(t *testing.T) {
	man, err := os.ReadFile("../../packaging/deb/sflowswitchd.8")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	newFlags().fs.VisitAll(func(f *flag.Flag) {
		n++
		// roff escapes hyphens: -sampling-unknown-speed is written
		// \-sampling\-unknown\-speed.
		if roff := `\-` + strings.ReplaceAll(f.Name, "-", `\-`); !strings.Contains(string(man), ".BI "+roff+" ") {
			t.Errorf("man page has no .BI entry for -%s", f.Name)
		}
	})
	if n < 10 {
		t.Fatalf("only %d flags found", n)
	}
	for _, c := range subcommands {
		if !strings.Contains(string(man), ".B "+c.name+"\n") {
			t.Errorf("man page does not list the %s command", c.name)
		}
	}
}
