package main

import (
	"flag"
	"os"
	"strings"
	"testing"
)

// TestManPageAndREADMEListEveryFlag: the Debian package's man page and the
// README document every daemon flag, and the man page every subcommand.
func TestManPageAndREADMEListEveryFlag(t *testing.T) {
	man, err := os.ReadFile("../../packaging/deb/sflowswitchd.8")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
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
		if !strings.Contains(string(readme), "-"+f.Name) {
			t.Errorf("README does not mention -%s", f.Name)
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
