package daemon

// Upgrade in place (SIGUSR2): the running daemon hands over to the binary
// now at its own path, in the same process (exec: same PID, so systemd
// sees no restart), and the samplers never stop:
//
//  1. Check: the new binary is run as `-upgrade-check` with the daemon's
//     own arguments; it must load its settings, find the kernel features
//     it needs and say what it will do with the pinned state (adopt it;
//     or replace it, when its layout differs: logged). If it cannot, the
//     upgrade is refused and this program keeps running.
//  2. Stop: everything stops as for SIGTERM (listeners, AgentX, the
//     workers flush their datagrams and keep their sequence numbers in
//     the pinned agent state), except the samplers: the dataplane is
//     released (dataplane.Release), every port stays attached and
//     counting, samples wait in the rings.
//  3. Exec: the new binary replaces this program, with the pin
//     directory's lock, the clsact owner socket and this program's own
//     executable open across the exec (handover.State in a memfd). It
//     adopts the pinned maps, links and rings (its own programs swapped
//     in), the agent state (sequence numbers, uptime, pool bases) and the
//     SNMP-set configuration (the state directory's snmp.json).
//  4. Rollback: if the exec fails, or the new program fails to start, the
//     previous executable is exec'ed again from its descriptor (the file
//     at the path may be gone) and takes the samplers back the same way.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/handover"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
)

// Handover is what the previous program of this process passed across the
// exec of an upgrade in place (TakeHandover).
type Handover = handover.State

// TakeHandover returns the handover of the previous program when this one
// was exec'ed by an upgrade in place (nil otherwise), and removes it from
// the environment.
func TakeHandover() (*Handover, error) { return handover.Take() }

// ErrUpgrade is Run's return when it stopped for an upgrade in place:
// the caller execs the new program with Exec.
var ErrUpgrade = errors.New("stopped for an upgrade in place")

// UpgradeCheckFlag is the flag the new binary is run with before an
// upgrade (Check).
const UpgradeCheckFlag = "-upgrade-check"

// upgradeCheckTimeout bounds the new binary's check.
const upgradeCheckTimeout = 30 * time.Second

// upgrade is a pending upgrade: where to.
type upgrade struct {
	exe string
	// next is the state for the exec, made when Run released the
	// dataplane.
	next handover.State
}

// UpgradeOn upgrades in place at each signal on sig (SIGUSR2), until ctx
// ends: args are the daemon's command-line arguments, given to the new
// binary's check and to the exec. A refused upgrade leaves this program
// running.
//
// Once an upgrade is under way (checked, Run stopping for the exec), a
// SIGUSR2 starts nothing: a check started then would still run at the
// exec, and its process, a child of the new program that never waits for
// it, would stay a zombie. The new program upgrades again at the next.
func (d *Daemon) UpgradeOn(ctx context.Context, sig <-chan os.Signal, args []string) {
	logged := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
			err := d.prepareUpgrade(ctx, args)
			switch {
			case errors.Is(err, errUpgradeUnderWay):
				if !logged {
					d.log.Info("upgrade in place under way: SIGUSR2 ignored until the new program runs")
					logged = true
				}
			case err != nil:
				d.log.Error("upgrade in place refused; this program keeps running", "err", err)
			}
		}
	}
}

// errUpgradeUnderWay is prepareUpgrade's error once an upgrade is
// prepared.
var errUpgradeUnderWay = errors.New("an upgrade in place is under way")

// prepareUpgrade checks the binary at the daemon's path and, when it can
// start, makes Run stop for the exec.
func (d *Daemon) prepareUpgrade(ctx context.Context, args []string) error {
	d.mu.Lock()
	underWay := d.upgrade != nil
	d.mu.Unlock()
	if underWay {
		return errUpgradeUnderWay
	}
	if d.dp.Pinned().Dir() == "" {
		return errors.New("nothing is pinned (pin_dir off, or not on a BPF file system): an exec would detach every sampler")
	}
	exe, err := os.Executable() // the path, also when the file was replaced
	if err != nil {
		return fmt.Errorf("finding the daemon's executable: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, upgradeCheckTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, exe, append([]string{UpgradeCheckFlag}, args...)...)
	out, err := cmd.CombinedOutput()
	msg := strings.TrimSpace(string(out))
	if err != nil {
		return fmt.Errorf("the binary at %s does not start: %w: %s", exe, err, msg)
	}
	d.log.Info("upgrade in place: the new binary checked", "exe", exe, "check", msg)
	// Drop notifications written from here are counted lost, not left
	// in this program's buffers, which the exec ends (read and sent as
	// the reporter stops).
	d.drops.Pause()
	d.mu.Lock()
	d.upgrade = &upgrade{exe: exe}
	stop := d.stopRun
	d.mu.Unlock()
	if stop != nil {
		stop()
	}
	return nil
}

// release ends Run for an upgrade: the dataplane is released (every
// sampler stays attached and pinned) and the exec's state prepared.
// Called by Run once everything else has stopped.
func (d *Daemon) release() error {
	h, err := d.dp.Release()
	if err != nil {
		return err
	}
	exe, err := unix.Open("/proc/self/exe", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		exe = -1 // no rollback possible; said at exec
	}
	lock := -1
	if d.instanceLock != nil {
		lock = d.instanceLock.Handover() // the same instance after the exec
	}
	d.upgrade.next = handover.State{LockFD: h.LockFD, OwnerFD: h.OwnerFD, ExeFD: exe, InstanceLockFD: lock,
		Args: os.Args, From: d.version, StoppedNs: handover.Monotonic()}
	return nil
}

// Exec replaces this program with the checked binary (after Run returned
// ErrUpgrade). It returns only if that and the rollback to this program's
// own executable both failed: the samplers stay attached, and a restart
// (systemd) adopts them.
func (d *Daemon) Exec() error {
	u := d.upgrade
	if u == nil {
		return errors.New("no upgrade prepared")
	}
	env, err := u.next.Env()
	if err != nil {
		return fmt.Errorf("upgrade: %w", err)
	}
	d.log.Info("upgrade in place: exec", "exe", u.exe, "pid", os.Getpid())
	ignoreAtExec()
	err = syscall.Exec(u.exe, os.Args, env)
	d.log.Error("upgrade in place: exec failed; the previous binary takes the samplers back", "exe", u.exe, "err", err)
	u.next.Rollback = true
	return errors.Join(err, rollback(u.next, d.log))
}

// ignoreAtExec ignores SIGHUP and SIGUSR2 from here to the exec and in
// the new program until it catches them (internal/earlysignal). execve
// gives caught signals their default action, which for both is to end
// the process (a SIGUSR2 or SIGHUP during the exec killed the daemon,
// exit 140 or 129); an ignored signal stays ignored across it (execve(2)).
// In the new program the Go runtime keeps SIGHUP ignored until
// signal.Notify asks for it, and from its start ignores a SIGUSR2 nobody
// asked for (runtime's sigtable: SIGUSR2 is neither _SigKill nor
// _SigThrow). A blocked signal would not do: the runtime unblocks both
// before it installs its handlers. What is lost: a reload asked during
// the exec (the new program reads the configuration as it is anyway) and
// an upgrade asked during one (it is under way).
func ignoreAtExec() {
	signal.Ignore(syscall.SIGHUP, syscall.SIGUSR2)
}

// RollBack execs the previous program again when this one, started by an
// upgrade in place (h), failed to start; it returns only when that is not
// possible (not an upgrade, already a rollback, or the exec failed).
func RollBack(h *Handover, log *slog.Logger) error {
	if h == nil || h.Rollback {
		return nil
	}
	log.Error("upgrade in place: the new program failed to start; the previous binary takes the samplers back", "from", h.From)
	h.Rollback = true
	return rollback(*h, log)
}

// rollback execs the previous executable (its descriptor in st).
func rollback(st handover.State, log *slog.Logger) error {
	if st.ExeFD < 0 {
		return errors.New("rollback: the previous executable is not open")
	}
	env, err := st.Env()
	if err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	args := st.Args
	if len(args) == 0 {
		args = os.Args
	}
	ignoreAtExec()
	err = syscall.Exec(fmt.Sprintf("/proc/self/fd/%d", st.ExeFD), args, env)
	log.Error("rollback failed: exiting; the samplers stay attached for the next start", "err", err)
	return fmt.Errorf("rollback: %w", err)
}

// upgraded logs the handover this program completed, when it was exec'ed
// by an upgrade in place, and closes the previous executable.
func (d *Daemon) upgraded(h *Handover) {
	if h == nil {
		return
	}
	took := time.Duration(handover.Monotonic() - h.StoppedNs)
	d.log.Info("upgrade in place completed", "from", h.From, "to", d.version, "rollback", h.Rollback,
		"stopped_to_running_ms", took.Milliseconds(), "ports_taken_over", len(d.dp.Pinned().Ports()))
	if h.ExeFD >= 0 {
		unix.Close(h.ExeFD)
	}
}

// Check is the new binary's side of an upgrade in place (UpgradeCheckFlag,
// run before the running daemon lets go): it checks what a start with s
// needs and writes what it would do with the pinned samplers to out. An
// error means it would not start.
func Check(s config.Settings, log *slog.Logger, out io.Writer, version string) error {
	if err := requireAgentAddress(s); err != nil {
		return err
	}
	dpc, err := dataplaneConfig(s, log, nil)
	if err != nil {
		return err
	}
	adopt, why, err := dataplane.CheckAdopt(dpc)
	if err != nil {
		return err
	}
	if !adopt {
		log.Warn("upgrade in place: the pinned samplers will be replaced, pools and sequence numbers start afresh", "why", why)
	}
	_, err = fmt.Fprintf(out, "sflowswitchd %s: %s\n", revision(version), why)
	return err
}

// Cleanup removes what a daemon with settings s that is gone left pinned
// (sflowswitchd -cleanup; the package's removal): its samplers are
// detached, its pinned maps and SNMP snapshot removed. It refuses while a
// daemon runs with that pin directory.
func Cleanup(s config.Settings, log *slog.Logger) error {
	if s.PinDir == config.PinOff {
		log.Info("pin_dir off: nothing pinned")
		return nil
	}
	if err := dataplane.Cleanup(s.PinDir, log); err != nil {
		return err
	}
	return handover.NewSNMPStore(s.StateDir, 0).Remove()
}
