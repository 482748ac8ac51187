package features

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// withoutCaps runs fn on a thread whose effective set lacks caps; the
// thread ends with fn's goroutine (never unlocked), so no other code runs
// on it.
func withoutCaps(t *testing.T, fn func() error, caps ...int) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		for _, c := range caps {
			data[c/32].Effective &^= 1 << (c % 32)
		}
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// TestProbeNotPermitted: a probe the kernel refuses
// for lack of a capability (here a real BPF map creation without
// CAP_BPF) is reported as not permitted, naming the capability the
// process lacks, and the sampler's refusal says so instead of "kernel
// lacks": without CAP_BPF or CAP_NET_ADMIN the daemon used to say the
// kernel lacked xdp (Linux 4.8).
func TestProbeNotPermitted(t *testing.T) {
	testskip.Root(t)
	var missing []string
	err := withoutCaps(t, func() error {
		_, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.RingBuf, MaxEntries: 4096})
		missing = missingCaps(probeCaps[FeatureXDP])
		return probeError(FeatureRingBuf, err)
	}, unix.CAP_BPF, unix.CAP_SYS_ADMIN)
	var pe *PermissionError
	if !errors.As(err, &pe) || !errors.Is(err, unix.EPERM) {
		t.Fatalf("ring buffer map without CAP_BPF: %v, want a PermissionError wrapping EPERM", err)
	}
	if strings.Join(pe.Missing, ",") != "CAP_BPF" || strings.Join(missing, ",") != "CAP_BPF" {
		t.Errorf("missing %v (xdp's %v), want CAP_BPF", pe.Missing, missing)
	}
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Errorf("%v reported as not supported by the kernel", err)
	}
	f := Feature{Name: FeatureXDP, Since: "4.8", UsedFor: "the packet sampler", Required: true,
		Err: &PermissionError{Missing: []string{"CAP_BPF", "CAP_NET_ADMIN"}, Err: unix.EPERM}}
	fe := (&FeatureError{Release: "6.18.0", Missing: []Feature{f}}).Error()
	if strings.Contains(fe, "kernel 6.18.0 lacks") || !strings.Contains(fe, "lacks CAP_BPF and CAP_NET_ADMIN") {
		t.Errorf("refusal %q: want the capabilities named, not the kernel blamed", fe)
	}
	// A feature the kernel does lack is still said so.
	f.Err = ebpf.ErrNotSupported
	if fe := (&FeatureError{Release: "4.4", Missing: []Feature{f}}).Error(); !strings.Contains(fe, "kernel 4.4 lacks xdp (Linux 4.8") {
		t.Errorf("refusal %q", fe)
	}
	// Errors other than EPERM/EACCES are left alone.
	if err := probeError(FeatureXDP, unix.EINVAL); !errors.Is(err, unix.EINVAL) || errors.As(err, &pe) {
		t.Errorf("EINVAL became %v", err)
	}
}
