package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/sflowswitchd/sflowswitchd/daemon"
	"github.com/sflowswitchd/sflowswitchd/internal/earlysignal"
)

// version is the software revision reported in sFlowVersion; release
// builds set it with -ldflags "-X main.version=1.2.3" (daemon.Config).
var version = ""

// runDaemon runs the agent until SIGINT or SIGTERM; SIGHUP reloads the
// config file (one during start-up once it completes), SIGUSR2 upgrades
// in place (daemon.UpgradeOn). -cleanup and -upgrade-check run once and
// exit. A program exec'ed by an upgrade that fails rolls back to the
// previous one (daemon.RollBack).
func runDaemon(args []string, stdout, stderr io.Writer) (code int) {
	// Signals are caught from the process's start (earlysignal): SIGUSR2's
	// default action would end a daemon that is still starting (an
	// upgrade signalled twice).
	level := new(slog.LevelVar) // set by the daemon from log_level
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	h, err := daemon.TakeHandover()
	if err != nil {
		log.Error("upgrade in place: the previous program's handover is unreadable; starting as after a crash", "err", err)
	}
	defer func() {
		if code != 0 {
			_ = daemon.RollBack(h, log) // returns only when there is nothing to roll back to
		}
	}()
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
	if f.cleanup || f.check {
		once := func() error { return daemon.Check(s, log, stdout, version) }
		if f.cleanup {
			once = func() error { return daemon.Cleanup(s, log) }
		}
		if err := once(); err != nil {
			log.Error("failed", "err", err)
			return 1
		}
		return 0
	}

	// A SIGHUP during start-up is applied once start-up completes
	// (ReloadOn), a SIGTERM stops it.
	ctx, stop := earlysignal.Context(context.Background())
	defer stop()
	d, err := daemon.New(daemon.Config{Settings: s, Logger: log, Level: level, Version: version, Handover: h})
	if errors.Is(err, daemon.ErrNoAgentAddress) {
		log.Error("refusing to start", "err", err)
		return 1
	} else if err != nil {
		log.Error("starting", "err", err)
		return 1
	}
	go d.ReloadOn(ctx, earlysignal.HUP(), f.load)
	go d.UpgradeOn(ctx, earlysignal.USR2(), args)
	if err = d.Run(ctx); errors.Is(err, daemon.ErrUpgrade) {
		err = d.Exec() // returns only if the exec and the rollback failed
	}
	if err != nil {
		log.Error("stopped", "err", err)
		return 1
	}
	return 0
}
