// The runtime's once-a-second re-read of the CPU affinity and cgroup
// limit (Go 1.25's updatemaxprocs) would be the idle daemon's most
// frequent wake-up; the daemon sizes its per-CPU workers once at start
// and needs no GOMAXPROCS change while it runs.
//
//go:debug updatemaxprocs=0

// Command sflowswitchd is an sFlow version 5 agent for Linux white-box
// switches. Without a subcommand it runs the agent daemon; helper
// subcommands are listed by `sflowswitchd help`.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sflowswitchd/sflowswitchd/cmd/sflowswitchd/internal/apmreports"
	"github.com/sflowswitchd/sflowswitchd/cmd/sflowswitchd/internal/decode"
	"github.com/sflowswitchd/sflowswitchd/cmd/sflowswitchd/internal/show"
	"github.com/sflowswitchd/sflowswitchd/cmd/sflowswitchd/internal/top"
	"github.com/sflowswitchd/sflowswitchd/internal/buildinfo"
	"github.com/sflowswitchd/sflowswitchd/internal/earlysignal"
)

// subcommand is a helper command run as `sflowswitchd NAME args...`.
type subcommand struct {
	name  string
	brief string
	run   func(args []string, stdout, stderr io.Writer) int
}

var subcommands = []subcommand{
	{"decode", "decode sFlow datagrams from UDP or a pcap/pcapng file to JSON", decode.Run},
	{"apm", "print the daemon's APM reports (RFC 3729) as JSON", apmreports.Run},
	{"top", "live collector view of received sFlow: agents, samples per port, top flows, counters", top.Run},
	{"show", "print the settings in force of the running daemon and where each came from", show.Run},
	{"version", "print the version, commit and Go version (also -version)", runVersion},
}

// runVersion is `sflowswitchd version`.
func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "sflowswitchd version: unexpected argument %q\n", args[0])
		return exitUsage
	}
	fmt.Fprintln(stdout, buildinfo.Get(version, commit))
	return exitOK
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand, or to the daemon (runDaemon, in
// run.go) when the first argument is not a subcommand name, so daemon
// flags work without a subcommand. It returns the process exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		// "help" is -h.
		if args[0] == "help" {
			usage(stdout, newFlags().fs)
			return exitOK
		}
		for _, c := range subcommands {
			if args[0] == c.name {
				earlysignal.Release() // the daemon's signals only
				return c.run(args[1:], stdout, stderr)
			}
		}
	}
	return runDaemon(args, stdout, stderr)
}

// usage is -h: the commands, then the daemon's flags with their
// defaults and units.
func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: sflowswitchd [flags]            run the agent (flags below)\n       sflowswitchd COMMAND [flags]    (sflowswitchd COMMAND -h for its flags)\n\ncommands:\n")
	for _, c := range subcommands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.brief)
	}
	fmt.Fprintf(w, "\nflags (durations in seconds also take Go durations: 30s, 1m; man sflowswitchd):\n")
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprint(w, b.String())
}
