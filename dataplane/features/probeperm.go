package features

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// A feature probe the kernel refuses with EPERM or EACCES says nothing of
// the kernel: the process lacked a capability (or a security module
// refused). Such a feature is reported as not probed, naming the
// capabilities missing, never as missing from the kernel (without
// CAP_BPF or CAP_NET_ADMIN the daemon said the kernel
// "lacks xdp (Linux 4.8)").

// PermissionError is a probe refused for lack of privilege: whether the
// kernel has the feature is unknown.
type PermissionError struct {
	// Missing are the capabilities the probe needs that the process
	// lacks (empty: it has them all; something else refused).
	Missing []string
	Err     error
}

func (e *PermissionError) Error() string {
	if len(e.Missing) == 0 {
		return fmt.Sprintf("not permitted to probe although the capabilities it needs are held (a security module, or kernel.unprivileged_bpf_disabled): %v", e.Err)
	}
	return fmt.Sprintf("not permitted to probe: the process lacks %s (%v)", strings.Join(e.Missing, " and "), e.Err)
}

func (e *PermissionError) Unwrap() error { return e.Err }

// probeCaps are the capabilities each probe needs (kernel/bpf/syscall.c:
// BPF programs and most maps need CAP_BPF, networking programs (XDP, TC)
// and XSKMAP CAP_NET_ADMIN too, tracing programs CAP_PERFMON; an AF_XDP
// socket needs CAP_NET_RAW).
var probeCaps = map[string][]int{
	FeatureXDP:           {unix.CAP_BPF, unix.CAP_NET_ADMIN},
	FeatureXDPFrags:      {unix.CAP_BPF, unix.CAP_NET_ADMIN},
	FeatureXDPLoadBytes:  {unix.CAP_BPF, unix.CAP_NET_ADMIN},
	FeatureXDPGetBuffLen: {unix.CAP_BPF, unix.CAP_NET_ADMIN},
	FeatureRingBuf:       {unix.CAP_BPF},
	FeatureRingBufQuery:  {unix.CAP_BPF, unix.CAP_NET_ADMIN},
	FeatureMmapableArray: {unix.CAP_BPF},
	FeatureArrayOfMaps:   {unix.CAP_BPF},
	FeatureGlobalData:    {unix.CAP_BPF},
	FeatureXSKMap:        {unix.CAP_BPF, unix.CAP_NET_ADMIN},
	FeatureAFXDP:         {unix.CAP_NET_RAW},
	FeatureBTFTracepoint: {unix.CAP_BPF, unix.CAP_PERFMON},
	FeatureTCX:           {unix.CAP_BPF, unix.CAP_NET_ADMIN},
	FeaturePsampleTap:    {unix.CAP_BPF, unix.CAP_PERFMON},
}

// capNames names the capabilities of probeCaps.
var capNames = map[int]string{
	unix.CAP_BPF: "CAP_BPF", unix.CAP_NET_ADMIN: "CAP_NET_ADMIN", unix.CAP_PERFMON: "CAP_PERFMON", unix.CAP_NET_RAW: "CAP_NET_RAW",
}

// probeError returns a probe's error, a refusal for lack of privilege
// made a *PermissionError naming the capabilities feature's probe needs
// and the process's effective set lacks.
func probeError(feature string, err error) error {
	if !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EACCES) {
		return err
	}
	var pe *PermissionError
	if errors.As(err, &pe) {
		return err
	}
	return &PermissionError{Missing: missingCaps(probeCaps[feature]), Err: err}
}

// missingCaps returns the names of the capabilities of caps that the
// calling thread's effective set lacks (all of them when it cannot be
// read).
func missingCaps(caps []int) []string {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	err := unix.Capget(&hdr, &data[0])
	var out []string
	for _, c := range caps {
		if err != nil || data[c/32].Effective&(1<<(c%32)) == 0 {
			out = append(out, capNames[c])
		}
	}
	return out
}

// NotPermitted reports whether f's probe was refused for lack of
// privilege (its presence in the kernel unknown), and the error saying
// which capabilities were missing.
func (f Feature) NotPermitted() (*PermissionError, bool) {
	var pe *PermissionError
	ok := errors.As(f.Err, &pe)
	return pe, ok
}

// deniedFeatures says, per set of missing capabilities, which of fs were
// not permitted: "not permitted to use xdp, xdp_frags: the process lacks
// CAP_BPF (operation not permitted)".
func deniedFeatures(fs []Feature) []string {
	var order []string
	names := map[string][]string{}
	cause := map[string]error{}
	for _, f := range fs {
		pe, ok := f.NotPermitted()
		if !ok {
			continue
		}
		key := strings.Join(pe.Missing, " and ")
		if _, seen := names[key]; !seen {
			order = append(order, key)
			cause[key] = pe.Err
		}
		names[key] = append(names[key], f.Name)
	}
	var out []string
	for _, key := range order {
		who := "the process lacks " + key
		if key == "" {
			who = "refused although the capabilities are held (a security module, or kernel.unprivileged_bpf_disabled)"
		}
		out = append(out, fmt.Sprintf("not permitted to use %s: %s (%v)", strings.Join(names[key], ", "), who, errors.Unwrap(cause[key])))
	}
	return out
}
