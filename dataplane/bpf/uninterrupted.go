package bpf

import (
	"runtime"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// uninterruptedSignals are the signals an operator or a unit sends the
// daemon (reload, upgrade, stop).
var uninterruptedSignals = []unix.Signal{unix.SIGHUP, unix.SIGUSR2, unix.SIGINT, unix.SIGTERM}

// Uninterrupted runs fn, a program load, on a thread that blocks the
// daemon's signals. The verifier stops when a signal is pending for the
// loading thread and the load is retried from the start (cilium/ebpf's
// BPF_PROG_LOAD on EAGAIN), so signals arriving faster than a
// verification takes (a SIGUSR2 every millisecond during an upgrade in
// place) would hold up the load as long as they come: the new program
// did not run for the whole 15 s of such a storm. Blocked here, a
// process-directed signal goes to another thread (signal(7)), which
// handles it as usual; cilium/ebpf does the same for SIGPROF.
func Uninterrupted(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	for _, s := range uninterruptedSignals {
		set.Val[(s-1)/64] |= 1 << (uint(s-1) % 64)
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return fn() // as without: interruptible
	}
	err := fn()
	// Restoring the mask this thread had cannot fail where blocking
	// succeeded (the same call, valid arguments).
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return err
}

// LoadAndAssign is spec.LoadAndAssign(to, opts), Uninterrupted.
func LoadAndAssign(spec *ebpf.CollectionSpec, to any, opts *ebpf.CollectionOptions) error {
	return Uninterrupted(func() error { return spec.LoadAndAssign(to, opts) })
}
