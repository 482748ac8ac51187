package main

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/config"
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

// TestManPageSections: the man page has the sections an operator looks
// for, and its CONFIGURATION section names every setting of the config
// file (config.Keys), transit included.
func TestManPageSections(t *testing.T) {
	b, err := os.ReadFile("../../packaging/deb/sflowswitchd.8")
	if err != nil {
		t.Fatal(err)
	}
	man := string(b)
	for _, sec := range []string{"CONFIGURATION", "SIGNALS", "EXIT STATUS", "EXAMPLES", "FILES", "COMMANDS"} {
		if !strings.Contains(man, "\n.SH "+sec+"\n") {
			t.Errorf("man page has no %s section", sec)
		}
	}
	start, end := strings.Index(man, ".SH CONFIGURATION\n"), strings.Index(man, ".SH SIGNALS\n")
	if start < 0 || end < start {
		t.Fatal("no CONFIGURATION section before SIGNALS")
	}
	conf := man[start:end]
	keys := append(config.Keys(), "address", "max_datagram_size")
	for _, k := range keys {
		if !strings.Contains(conf, k+" =") && !strings.Contains(conf, "["+k+"]") && !strings.Contains(conf, "[["+k+"]]") {
			t.Errorf("the man page's CONFIGURATION section lacks %s", k)
		}
	}
	for _, want := range []string{"SIGHUP", "SIGTERM", "SIGUSR2", "0 is refused"} {
		if !strings.Contains(man, want) {
			t.Errorf("man page lacks %q", want)
		}
	}
}
