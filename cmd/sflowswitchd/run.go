package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/sflowswitchd/sflowswitchd/daemon"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/internal/buildinfo"
	"github.com/sflowswitchd/sflowswitchd/internal/earlysignal"
	"github.com/sflowswitchd/sflowswitchd/internal/portlog"
)

// version is the software revision reported in sFlowVersion, `-version`
// and sflowswitchd_build_info; commit is the VCS revision. Release builds
// set them with -ldflags "-X main.version=1.2.3 -X main.commit=HASH"
// (packaging/deb/build.sh); otherwise the Go toolchain's stamp is used
// (internal/buildinfo).
var version, commit = "", ""

// Exit statuses (sflowswitchd(8), EXIT STATUS).
const (
	exitOK = 0
	// exitFailed: the daemon could not start or stopped on an error;
	// -check-config: the configuration is refused.
	exitFailed = 1
	// exitUsage: a bad flag or argument.
	exitUsage = 2
)

// runDaemon runs the agent until SIGINT or SIGTERM; SIGHUP reloads the
// config file (one during start-up once it completes), SIGUSR2 upgrades
// in place (daemon.UpgradeOn). -version, -check-config, -cleanup and
// -upgrade-check run once and exit. A program exec'ed by an upgrade that
// fails rolls back to the previous one (daemon.RollBack).
func runDaemon(args []string, stdout, stderr io.Writer) (code int) {
	// Signals are caught from the process's start (earlysignal): SIGUSR2's
	// default action would end a daemon that is still starting (an
	// upgrade signalled twice).
	level := new(slog.LevelVar) // set by the daemon from log_level
	// Every line that names a port by ifindex also names it by name.
	log := slog.New(portlog.Handler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}), nil))
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
	if code, done := f.parse(args, stdout, stderr); done {
		return code
	}
	if f.version {
		fmt.Fprintln(stdout, buildinfo.Get(version, commit))
		return exitOK
	}
	f.fs.SetOutput(stderr) // hsflowd.conf's notes
	s, err := f.load()
	if f.checkConfig {
		return checkConfig(f.configFile, s.HsflowdConf, err, func() (dataplane.Trial, error) { return daemon.TrialLoad(s) }, stdout, stderr)
	}
	if err != nil {
		// Structured as the rest of the log: one record per problem
		// (config.Load bounds them), each naming its file and line.
		for _, p := range strings.Split(err.Error(), "\n") {
			log.Error("configuration refused; not starting", "problem", p)
		}
		return exitUsage
	}
	if f.cleanup || f.check {
		once := func() error { return daemon.Check(s, log, stdout, version) }
		if f.cleanup {
			once = func() error { return daemon.Cleanup(s, log) }
		}
		if err := once(); err != nil {
			log.Error("failed", "err", err)
			return exitFailed
		}
		return exitOK
	}

	// One daemon per network namespace, before anything is touched; an
	// upgrade in place keeps its predecessor's lock.
	lock, err := daemon.TakeInstanceLock(h)
	if err != nil {
		log.Error("refusing to start", "err", err)
		return exitFailed
	}
	defer lock.Close()
	// A SIGHUP during start-up is applied once start-up completes
	// (ReloadOn), a SIGTERM stops it.
	ctx, stop := earlysignal.Context(context.Background())
	defer stop()
	d, err := daemon.New(daemon.Config{Settings: s, Sources: f.sources, ConfigFile: f.configFile, Logger: log, Level: level, Version: version, Commit: commit,
		Handover: h, InstanceLock: lock})
	if errors.Is(err, daemon.ErrNoAgentAddress) {
		log.Error("refusing to start", "err", err)
		return exitFailed
	} else if err != nil {
		log.Error("starting", "err", err)
		return exitFailed
	}
	go d.ReloadOn(ctx, earlysignal.HUP(), f.loadWithSources)
	go d.UpgradeOn(ctx, earlysignal.USR2(), args)
	if err = d.Run(ctx); errors.Is(err, daemon.ErrUpgrade) {
		err = d.Exec() // returns only if the exec and the rollback failed
	}
	if err != nil {
		log.Error("stopped", "err", err)
		return exitFailed
	}
	log.Info("sflowswitchd stopped", "pid", os.Getpid())
	return exitOK
}

// parse reads the flags. -h prints the whole usage to stdout; a bad flag
// prints one line and where to find the flags, not the whole usage (which
// would push the error off the screen). done: exit with code.
func (f *flagValues) parse(args []string, stdout, stderr io.Writer) (code int, done bool) {
	f.fs.SetOutput(io.Discard)
	f.fs.Usage = func() {}
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, f.fs)
			return exitOK, true
		}
		fmt.Fprintf(stderr, "sflowswitchd: %v (sflowswitchd -h lists the flags and commands)\n", err)
		return exitUsage, true
	}
	if f.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sflowswitchd: unexpected argument %q (sflowswitchd -h lists the flags and commands)\n", f.fs.Arg(0))
		return exitUsage, true
	}
	return 0, false
}

// checkConfig reports the outcome of loading the settings exactly as a
// start or a reload does (flagValues.load: config.Load with
// daemon.Validate): every problem found, or what would be in force. A
// valid configuration's BPF objects are then loaded through the kernel's
// verifier and unloaded (trial: daemon.TrialLoad), attaching nothing: a
// missing kernel feature or a refused program refuses the configuration;
// without the privileges to load BPF that part is skipped, and said so.
func checkConfig(file, hsflowd string, err error, trial func() (dataplane.Trial, error), stdout, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintf(stderr, "sflowswitchd: configuration refused:\n%v\n", err)
		return exitFailed
	}
	var read []string
	if file != "" {
		read = append(read, file)
	}
	if hsflowd != "" {
		read = append(read, hsflowd)
	}
	if len(read) == 0 {
		read = append(read, "defaults and flags")
	}
	t, err := trial()
	if err != nil {
		fmt.Fprintf(stderr, "sflowswitchd: configuration refused: this kernel cannot load what it needs:\n%v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "sflowswitchd: configuration valid: %s\n", strings.Join(read, ", "))
	if t.Skipped != "" {
		fmt.Fprintf(stdout, "sflowswitchd: BPF objects not checked (skipped: %s)\n", t.Skipped)
		return exitOK
	}
	fmt.Fprintf(stdout, "sflowswitchd: BPF objects accepted by the kernel's verifier (loaded, not attached): %s\n", strings.Join(t.Loaded, ", "))
	for _, off := range t.Off {
		fmt.Fprintf(stdout, "sflowswitchd: a start would run without %s\n", off)
	}
	return exitOK
}
