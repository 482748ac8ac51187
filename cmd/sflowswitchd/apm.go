package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// defaultMetricsAddress is where `sflowswitchd apm` looks for the daemon's
// metrics listener (-metrics) unless -api says otherwise.
const defaultMetricsAddress = "127.0.0.1:9116"

// runAPM implements `sflowswitchd apm`: print the daemon's current APM
// reports (RFC 3729 aggregation of application transactions) as JSON.
func runAPM(args []string, stdout, stderr io.Writer) int {
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
	q := url.Values{}
	if *control != 0 {
		q.Set("control", strconv.FormatUint(uint64(*control), 10))
	}
	if *last {
		q.Set("last", "1")
	}
	u := url.URL{Scheme: "http", Host: *api, Path: "/apm", RawQuery: q.Encode()}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := fetchAPM(ctx, u.String(), stdout); err != nil {
		fmt.Fprintf(stderr, "apm: %v\n", err)
		return 1
	}
	return 0
}

// fetchAPM gets the /apm document and writes it indented.
func fetchAPM(ctx context.Context, u string, out io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("reading %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", u, resp.Status, bytes.TrimSpace(body))
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, body, "", "  "); err != nil {
		return fmt.Errorf("%s: not JSON: %w", u, err)
	}
	if _, err := buf.WriteTo(out); err != nil {
		return fmt.Errorf("writing: %w", err)
	}
	return nil
}
