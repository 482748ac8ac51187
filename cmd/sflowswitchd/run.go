package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sflowswitchd/sflowswitchd/daemon"
)

// version is the software revision reported in sFlowVersion; release
// builds set it with -ldflags "-X main.version=1.2.3" (daemon.Config).
var version = ""

// runDaemon runs the agent until SIGINT or SIGTERM; SIGHUP reloads the
// config file.
func runDaemon(args []string, stdout, stderr io.Writer) int {
	f := newFlags()
	f.fs.SetOutput(stderr)
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if f.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sflowswitchd: unexpected argument %q (subcommands: sflowswitchd help)\n", f.fs.Arg(0))
		return 2
	}
	s, err := f.load()
	if err != nil {
		fmt.Fprintf(stderr, "sflowswitchd: %v\n", err)
		return 2
	}
	level := new(slog.LevelVar) // set by the daemon from log_level
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d, err := daemon.New(daemon.Config{Settings: s, Logger: log, Level: level, Version: version})
	if errors.Is(err, daemon.ErrNoAgentAddress) {
		log.Error("refusing to start", "err", err)
		return 1
	} else if err != nil {
		log.Error("starting", "err", err)
		return 1
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go d.ReloadOn(ctx, hup, f.load)
	if err := d.Run(ctx); err != nil {
		log.Error("stopped", "err", err)
		return 1
	}
	return 0
}
