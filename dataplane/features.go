// Kernel feature probes: what the running kernel offers of the BPF features
// the agent uses, checked at start (see docs/KERNELS.md for the list, the
// first kernel with each and what the daemon does without it).

package dataplane

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/afxdp"
)

// Feature names: the values of the metric label and of log messages.
const (
	FeatureXDP           = "xdp"
	FeatureXDPFrags      = "xdp_frags"
	FeatureXDPLoadBytes  = "helper_xdp_load_bytes"
	FeatureXDPGetBuffLen = "helper_xdp_get_buff_len"
	FeatureRingBuf       = "ringbuf"
	FeatureRingBufQuery  = "helper_ringbuf_query"
	FeatureMmapableArray = "mmapable_array"
	FeatureArrayOfMaps   = "array_of_maps"
	FeatureGlobalData    = "global_data"
	FeatureXSKMap        = "xskmap"
	FeatureAFXDP         = "af_xdp_need_wakeup"
	FeatureBTFTracepoint = "tp_btf_kfree_skb"
	FeatureTCX           = "tcx"
)

// Feature is one kernel capability the agent uses, and whether the running
// kernel has it.
type Feature struct {
	// Name is one of the Feature* constants.
	Name string
	// Since is the first mainline Linux release with the feature.
	Since string
	// UsedFor says what in the agent needs it.
	UsedFor string
	// Required features are needed to load the sampler at all; without an
	// optional one the daemon runs and does Without.
	Required bool
	// Without is what the daemon does when the kernel lacks the feature.
	Without string
	// Err is nil when the kernel has the feature, otherwise why not
	// (ebpf.ErrNotSupported for "kernel too old or not configured",
	// a permission error when the probe was not allowed).
	Err error
}

// Available reports whether the kernel has the feature.
func (f Feature) Available() bool { return f.Err == nil }

// Features is the result of ProbeFeatures: the kernel release and every
// probed feature, in the order of docs/KERNELS.md.
type Features struct {
	Release string
	List    []Feature
}

// Has reports whether the feature called name is available. Unknown names
// are not available.
func (fs *Features) Has(name string) bool {
	for _, f := range fs.List {
		if f.Name == name {
			return f.Available()
		}
	}
	return false
}

// Unavailable returns nil when the feature called name is available, and
// otherwise why not: the probe's error with the first release that has
// the feature (testskip.Features; tests skip only with this reason).
func (fs *Features) Unavailable(name string) error {
	for _, f := range fs.List {
		if f.Name == name {
			if f.Err == nil {
				return nil
			}
			return fmt.Errorf("needs Linux %s: %w", f.Since, f.Err)
		}
	}
	return fmt.Errorf("no probe for feature %q", name)
}

// Missing returns the features the kernel lacks.
func (fs *Features) Missing() []Feature {
	var out []Feature
	for _, f := range fs.List {
		if !f.Available() {
			out = append(out, f)
		}
	}
	return out
}

// FeatureError reports kernel features an operation needs and the running
// kernel lacks.
type FeatureError struct {
	Release string
	Missing []Feature
}

func (e *FeatureError) Error() string {
	parts := make([]string, len(e.Missing))
	for i, f := range e.Missing {
		parts[i] = fmt.Sprintf("%s (Linux %s, %s: %v)", f.Name, f.Since, f.UsedFor, f.Err)
	}
	return fmt.Sprintf("kernel %s lacks %s", e.Release, strings.Join(parts, "; "))
}

// need returns a *FeatureError naming the features of names the kernel
// lacks, or nil.
func (fs *Features) need(names ...string) error {
	var missing []Feature
	for _, f := range fs.List {
		for _, n := range names {
			if f.Name == n && !f.Available() {
				missing = append(missing, f)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &FeatureError{Release: fs.Release, Missing: missing}
}

// requiredErr is need() of every required feature.
func (fs *Features) requiredErr() error {
	var names []string
	for _, f := range fs.List {
		if f.Required {
			names = append(names, f.Name)
		}
	}
	return fs.need(names...)
}

// featureProbe is one row of the probe table.
type featureProbe struct {
	Feature
	probe func() error
}

// Why each feature is needed (bpf/sampler.c, bpf/tc_sampler.c and their shared bpf/sampler.h are the reference):
var featureProbes = []featureProbe{
	{Feature{Name: FeatureXDP, Since: "4.8", Required: true,
		UsedFor: "the packet sampler is an XDP program",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return features.HaveProgramType(ebpf.XDP) }},
	{Feature{Name: FeatureXDPFrags, Since: "5.18", Required: true,
		UsedFor: "SEC(\"xdp.frags\"): the sampler also sees multi-buffer (jumbo, GRO) frames, whose pool and length count",
		Without: "no packet sampling: the daemon does not start"},
		probeXDPFrags},
	{Feature{Name: FeatureXDPLoadBytes, Since: "5.18", Required: true,
		UsedFor: "bpf_xdp_load_bytes copies the sampled header across fragments",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return features.HaveProgramHelper(ebpf.XDP, asm.FnXdpLoadBytes) }},
	{Feature{Name: FeatureXDPGetBuffLen, Since: "5.18", Required: true,
		UsedFor: "bpf_xdp_get_buff_len gives the full frame length (sFlow frame_length)",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return features.HaveProgramHelper(ebpf.XDP, asm.FnXdpGetBuffLen) }},
	{Feature{Name: FeatureRingBuf, Since: "5.8", Required: true,
		UsedFor: "one BPF ring buffer per worker carries the samples of inline ports",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return features.HaveMapType(ebpf.RingBuf) }},
	{Feature{Name: FeatureRingBufQuery, Since: "5.8", Required: true,
		UsedFor: "bpf_ringbuf_query decides when to wake a ring's reader (batched wake-ups)",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return features.HaveProgramHelper(ebpf.XDP, asm.FnRingbufQuery) }},
	{Feature{Name: FeatureMmapableArray, Since: "5.5", Required: true,
		UsedFor: "BPF_F_MMAPABLE counters array: sample_pool/drops read without a syscall",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return features.HaveMapFlag(features.BPF_F_MMAPABLE) }},
	{Feature{Name: FeatureArrayOfMaps, Since: "4.12", Required: true,
		UsedFor: "the rings array of maps (one ring per worker, sized at start)",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return features.HaveMapType(ebpf.ArrayOfMaps) }},
	{Feature{Name: FeatureGlobalData, Since: "5.2", Required: true,
		UsedFor: "read-only globals cpu_slots and wakeup_bytes set at load",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return features.HaveMapFlag(features.BPF_F_RDONLY_PROG) }},
	{Feature{Name: FeatureXSKMap, Since: "4.18",
		UsedFor: "XSKMAP: monitor ports redirect sampled frames to AF_XDP sockets",
		Without: "the sampler is loaded with an empty DEVMAP in its place; monitor ports are refused, inline ports sample normally"},
		func() error { return features.HaveMapType(ebpf.XSKMap) }},
	{Feature{Name: FeatureAFXDP, Since: "5.4",
		UsedFor: "AF_XDP sockets with need-wakeup ring flags receive monitor ports' samples",
		Without: "monitor ports are refused (a monitor port would drop its traffic with nobody reading); inline ports sample normally"},
		afxdp.Probe},
	{Feature{Name: FeatureBTFTracepoint, Since: "5.5 (with kernel BTF)",
		UsedFor: "BTF-typed tracepoint skb:kfree_skb (tp_btf), for dropped-packet notifications",
		Without: "dropped-packet notifications are unavailable; packet sampling and counters are unaffected"},
		probeBTFTracepoint},
	{Feature{Name: FeatureTCX, Since: "6.6",
		UsedFor: "TCX links: the sampler at TC ingress (hook tc, and hook auto on veth ports, where XDP costs a copy per frame)",
		Without: "the TC sampler is attached as a cls_bpf filter (priority 1, direct-action) on the port's clsact qdisc instead; a filter outlives a killed daemon until the next start removes it"},
		probeTCX},
}

// ProbeFeatures probes the running kernel for every feature the agent
// uses. Probes load tiny programs and create tiny maps (CAP_BPF), and one
// AF_XDP socket (CAP_NET_RAW); nothing is attached anywhere. A probe that
// fails for lack of privilege reports the feature as missing with that
// error.
func ProbeFeatures() *Features {
	fs := &Features{Release: kernelRelease()}
	for _, p := range featureProbes {
		f := p.Feature
		f.Err = p.probe()
		fs.List = append(fs.List, f)
	}
	return fs
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

var (
	retZero = asm.Instructions{asm.LoadImm(asm.R0, 0, asm.DWord), asm.Return()}
	// BPF_F_XDP_HAS_FRAGS is what the loader sets for SEC("xdp.frags").
	xdpFragsFlag = uint32(unix.BPF_F_XDP_HAS_FRAGS)
)

// probeXDPFrags loads an empty XDP program with BPF_F_XDP_HAS_FRAGS
// (Linux 5.18), which older kernels refuse with EINVAL.
func probeXDPFrags() error {
	p, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Type:         ebpf.XDP,
		Flags:        xdpFragsFlag,
		License:      "Dual BSD/GPL",
		Instructions: retZero,
	}, ebpf.ProgramOptions{LogDisabled: true})
	if errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("BPF_F_XDP_HAS_FRAGS refused: %w", ebpf.ErrNotSupported)
	}
	if err != nil {
		return err
	}
	return p.Close()
}

// probeBTFTracepoint loads (does not attach) an empty tp_btf program for
// kfree_skb: it needs BTF-typed tracepoints (Linux 5.5) and the kernel's
// own BTF (CONFIG_DEBUG_INFO_BTF).
func probeBTFTracepoint() error {
	p, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Type:         ebpf.Tracing,
		AttachType:   ebpf.AttachTraceRawTp,
		AttachTo:     "kfree_skb",
		License:      "GPL",
		Instructions: retZero,
	}, ebpf.ProgramOptions{LogDisabled: true})
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.E2BIG) {
		return fmt.Errorf("tp_btf program refused: %w", ebpf.ErrNotSupported)
	}
	if err != nil {
		return err
	}
	return p.Close()
}
