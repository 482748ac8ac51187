package afxdp

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// TestProbeWithoutCapNetRaw: a process without CAP_NET_RAW cannot create
// an AF_XDP socket; Probe says so (EPERM, naming the capability) instead
// of reporting the kernel as lacking AF_XDP. The capability is dropped
// from the effective set of one locked thread only, which ends with the
// test's goroutine. With the capability (the rest of this package's
// tests, root) the probe succeeds on every kernel the VMs run.
func TestProbeWithoutCapNetRaw(t *testing.T) {
	testskip.Root(t)
	if err := Probe(); err != nil {
		t.Fatalf("Probe as root: %v", err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		data[0].Effective &^= 1 << unix.CAP_NET_RAW
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		errc <- Probe()
	}()
	err := <-errc
	if !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "CAP_NET_RAW") {
		t.Fatalf("Probe without CAP_NET_RAW = %v, want EPERM naming CAP_NET_RAW", err)
	}
	if errors.Is(err, ErrNoNeedWakeup) || errors.Is(err, unix.EAFNOSUPPORT) {
		t.Errorf("Probe without CAP_NET_RAW = %v, reported as a kernel without the feature", err)
	}
}
