// Package apmreports is `sflowswitchd apm`: it prints the running
// daemon's APM reports (RFC 3729 aggregation of application
// transactions), fetched as JSON from its metrics listener (GET /apm,
// apps/appsubagent).
package apmreports

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sflowswitchd/sflowswitchd/apps/appsubagent"
)

// defaultMetricsAddress is where `sflowswitchd apm` looks for the daemon's
// metrics listener (-metrics) unless -api says otherwise.
const defaultMetricsAddress = "127.0.0.1:9116"

// Run implements `sflowswitchd apm`: print the daemon's current APM
// reports as JSON.
func Run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	api := fs.String("api", defaultMetricsAddress, "the daemon's metrics listener `address` (its -metrics)")
	control := fs.Uint("control", 0, "only report control `N` (1 flows, 2 clients, 3 servers, 4 applications; 0 = all)")
	last := fs.Bool("last", false, "only the latest report of each control")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after `D`")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: sflowswitchd apm [flags]\n\nPrints the APM reports the daemon computes from application transactions\n(needs the daemon's -app-api and -metrics).\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "apm: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *control > 65535 {
		fmt.Fprintf(stderr, "apm: -control %d above 65535\n", *control)
		return 2
	}
	u := appsubagent.APMURL(*api, uint16(*control), *last)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := appsubagent.FetchAPM(ctx, u, stdout); err != nil {
		fmt.Fprintf(stderr, "apm: %v\n", err)
		return 1
	}
	return 0
}
