// Package earlysignal catches SIGHUP, SIGUSR2, SIGINT and SIGTERM from the
// process's start: its initialization registers them with os/signal, so a
// signal that arrives while the daemon starts waits in a channel instead
// of taking the default action (a SIGHUP in the first
// ~60 ms, before the daemon registered it, killed it with exit 129; a
// `systemctl reload` right after a start could leave the switch
// unsampled, since systemd does not restart a daemon killed by SIGHUP).
//
// Go code cannot run earlier than a package's initialization: from the
// runtime's start to here (about 3 ms, the other packages' initialization
// included) a SIGHUP still takes its default action. The systemd unit
// closes that window too: Type=notify makes `systemctl reload` wait until
// the daemon reports that it is ready, and RestartForceExitStatus=SIGHUP
// restarts it should it die of one anyway.
package earlysignal

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

var (
	hup  = make(chan os.Signal, 1)
	usr2 = make(chan os.Signal, 1)
	stop = make(chan os.Signal, 1)
)

func init() {
	signal.Notify(hup, syscall.SIGHUP)
	signal.Notify(usr2, syscall.SIGUSR2)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
}

// HUP delivers the SIGHUPs caught. One caught before anyone reads waits
// in it; more coalesce with it (one reload reads the file as it is then).
func HUP() <-chan os.Signal { return hup }

// USR2 delivers the SIGUSR2s caught since the process started (at most
// one queued): an upgrade in place (daemon.UpgradeOn).
func USR2() <-chan os.Signal { return usr2 }

// Context returns a context of parent canceled at the first SIGINT or
// SIGTERM, one caught before the call included.
func Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// Release gives the signals back their default action (for the helper
// subcommands, which a terminal's hangup or Ctrl-C ends).
func Release() {
	signal.Stop(hup)
	signal.Stop(usr2)
	signal.Stop(stop)
}
