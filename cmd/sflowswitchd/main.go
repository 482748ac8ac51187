// Command sflowswitchd is an sFlow version 5 agent for Linux white-box
// switches. Without a subcommand it runs the agent daemon; helper
// subcommands are listed by `sflowswitchd help`.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/sflowswitchd/sflowswitchd/cmd/sflowswitchd/internal/apmreports"
	"github.com/sflowswitchd/sflowswitchd/cmd/sflowswitchd/internal/decode"
	"github.com/sflowswitchd/sflowswitchd/cmd/sflowswitchd/internal/top"
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
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand, or to the daemon (runDaemon, in
// run.go) when the first argument is not a subcommand name, so daemon
// flags work without a subcommand. It returns the process exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		// "help" lists the subcommands; -h is left to the daemon's flags.
		if args[0] == "help" {
			usage(stdout)
			return 0
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

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: sflowswitchd [daemon flags]\n       sflowswitchd COMMAND [flags]   (COMMAND -h for its flags)\n\ncommands:\n")
	for _, c := range subcommands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.brief)
	}
}
