// Package features probes the running kernel for what it offers of the
// BPF and networking features the agent uses, checked at start (see
// docs/reference/kernels.md for the list, the first kernel with each and
// what the daemon does without it): the sampler's required ones, the
// optional ones (TCX, transit, psample, ...) and the layer-2 ones
// (l2features.go). A probe refused for lack of privilege reports the
// capabilities missing, never a kernel that lacks the feature
// (probeperm.go).
package features

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	ciliumfeatures "github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/afxdp"
	"github.com/sflowswitchd/sflowswitchd/dataplane/psample"
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
	FeatureKernCtx       = "kfunc_cast_to_kern_ctx"
	FeatureTransit       = "tp_btf_qdisc_xmit"
	FeaturePsample       = "psample"
	FeatureActSample     = "act_sample"
	FeaturePsampleTap    = "psample_tap"
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
// probed feature, in the order of docs/reference/kernels.md.
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
	var lacks []string
	denied := deniedFeatures(e.Missing)
	for _, f := range e.Missing {
		if _, ok := f.NotPermitted(); !ok {
			lacks = append(lacks, fmt.Sprintf("%s (Linux %s, %s: %v)", f.Name, f.Since, f.UsedFor, f.Err))
		}
	}
	if len(lacks) > 0 {
		denied = append(denied, fmt.Sprintf("kernel %s lacks %s", e.Release, strings.Join(lacks, "; ")))
	}
	return strings.Join(denied, "; ")
}

// Need returns a *FeatureError naming the features of names the kernel
// lacks, or nil.
func (fs *Features) Need(names ...string) error {
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

// RequiredErr is Need() of every required feature.
func (fs *Features) RequiredErr() error {
	var names []string
	for _, f := range fs.List {
		if f.Required {
			names = append(names, f.Name)
		}
	}
	return fs.Need(names...)
}

// featureProbe is one row of the probe table.
type featureProbe struct {
	Feature
	probe func() error
}

// Why each feature is needed (dataplane/bpf/sampler.c, dataplane/bpf/tc_sampler.c and their shared dataplane/bpf/sampler.h are the reference):
var featureProbes = []featureProbe{
	{Feature{Name: FeatureXDP, Since: "4.8", Required: true,
		UsedFor: "the packet sampler is an XDP program",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return ciliumfeatures.HaveProgramType(ebpf.XDP) }},
	{Feature{Name: FeatureXDPFrags, Since: "5.18", Required: true,
		UsedFor: "SEC(\"xdp.frags\"): the sampler also sees multi-buffer (jumbo, GRO) frames, whose pool and length count",
		Without: "no packet sampling: the daemon does not start"},
		probeXDPFrags},
	{Feature{Name: FeatureXDPLoadBytes, Since: "5.18", Required: true,
		UsedFor: "bpf_xdp_load_bytes copies the sampled header across fragments",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return ciliumfeatures.HaveProgramHelper(ebpf.XDP, asm.FnXdpLoadBytes) }},
	{Feature{Name: FeatureXDPGetBuffLen, Since: "5.18", Required: true,
		UsedFor: "bpf_xdp_get_buff_len gives the full frame length (sFlow frame_length)",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return ciliumfeatures.HaveProgramHelper(ebpf.XDP, asm.FnXdpGetBuffLen) }},
	{Feature{Name: FeatureRingBuf, Since: "5.8", Required: true,
		UsedFor: "one BPF ring buffer per worker carries the samples of inline ports",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return ciliumfeatures.HaveMapType(ebpf.RingBuf) }},
	{Feature{Name: FeatureRingBufQuery, Since: "5.8", Required: true,
		UsedFor: "bpf_ringbuf_query decides when to wake a ring's reader (batched wake-ups)",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return ciliumfeatures.HaveProgramHelper(ebpf.XDP, asm.FnRingbufQuery) }},
	{Feature{Name: FeatureMmapableArray, Since: "5.5", Required: true,
		UsedFor: "BPF_F_MMAPABLE counters array: sample_pool/drops read without a syscall",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return ciliumfeatures.HaveMapFlag(ciliumfeatures.BPF_F_MMAPABLE) }},
	{Feature{Name: FeatureArrayOfMaps, Since: "4.12", Required: true,
		UsedFor: "the rings array of maps (one ring per worker, sized at start)",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return ciliumfeatures.HaveMapType(ebpf.ArrayOfMaps) }},
	{Feature{Name: FeatureGlobalData, Since: "5.2", Required: true,
		UsedFor: "read-only globals cpu_slots and wakeup_bytes set at load",
		Without: "no packet sampling: the daemon does not start"},
		func() error { return ciliumfeatures.HaveMapFlag(ciliumfeatures.BPF_F_RDONLY_PROG) }},
	{Feature{Name: FeatureXSKMap, Since: "4.18",
		UsedFor: "XSKMAP: monitor ports redirect sampled frames to AF_XDP sockets",
		Without: "the sampler is loaded with an empty DEVMAP in its place; monitor ports are refused, inline ports sample normally"},
		func() error { return ciliumfeatures.HaveMapType(ebpf.XSKMap) }},
	{Feature{Name: FeatureAFXDP, Since: "5.4",
		UsedFor: "AF_XDP sockets with need-wakeup ring flags receive monitor ports' samples",
		Without: "monitor ports are refused (a monitor port would drop its traffic with nobody reading); inline ports sample normally"},
		probeAFXDP},
	{Feature{Name: FeatureBTFTracepoint, Since: "5.5 (with kernel BTF)",
		UsedFor: "BTF-typed tracepoint skb:kfree_skb (tp_btf), for dropped-packet notifications",
		Without: "dropped-packet notifications are unavailable; packet sampling and counters are unaffected"},
		probeBTFTracepoint},
	{Feature{Name: FeatureTCX, Since: "6.6",
		UsedFor: "TCX links: the sampler at TC ingress (hook tc, and hook auto on veth ports, where XDP costs a copy per frame) and the egress sampler (direction egress or both) at TC egress",
		Without: "the TC samplers are attached as cls_bpf filters (priority 1, direct-action) on the port's clsact qdisc instead, ingress and egress side; a filter outlives a killed daemon until the next start removes it"},
		ProbeTCX},
	{Feature{Name: FeatureKernCtx, Since: "6.2",
		UsedFor: "the kfunc bpf_cast_to_kern_ctx: the samplers read the FIB generation (the kernel's fib_seq) of the sampled frame's namespace around their route lookups (dataplane/bpf/fib_seq.h), so that extended_router's prefix lengths come only from a copy of the routes in force when the sample was taken",
		Without: "samples carry no extended_router; everything else is unaffected"},
		probeKernCtx},
	{Feature{Name: FeatureTransit, Since: "5.15 (with kernel BTF)",
		UsedFor: "BTF-typed tracepoints qdisc:qdisc_enqueue, net:net_dev_start_xmit and skb:consume_skb (tp_btf): with transit on, a sampled frame is followed to where it leaves (extended_transit, extended_queue, extended_egress_queue; dataplane/bpf/transit.c), which also needs kfunc_cast_to_kern_ctx",
		Without: "samples carry no transit, queue depth or egress queue records; everything else is unaffected"},
		probeTransit},
	{Feature{Name: FeaturePsample, Since: "4.11",
		UsedFor: "the PSAMPLE generic-netlink channel: hook psample and psample_group read the samples a switch ASIC (or act_sample) takes",
		Without: "hook psample and psample_group are refused at start; the XDP and TC samplers are unaffected"},
		func() error { return kernelLacks(psample.ProbePsample(), psample.ErrNoPsample) }},
	{Feature{Name: FeatureActSample, Since: "4.11",
		UsedFor: "tc's sample action: hook psample installs a matchall + sample rule per port (offloaded where the port has hw-tc-offload)",
		Without: "hook psample cannot install its rules (listen-only psample_group still reads rules installed by hand or by the switch software)"},
		func() error { return kernelLacks(psample.ProbeActSample(), psample.ErrNoActSample) }},
	{Feature{Name: FeaturePsampleTap, Since: "5.11 (with module BTF)",
		UsedFor: "an fentry program on psample_sample_packet (the tap, dataplane/bpf/psample_tap.c): the psample path reads its samples in place from a BPF ring buffer, not as a netlink message each",
		Without: "the psample path reads its samples from the netlink socket (a message per sample: about 1.5 times the agent's CPU per sample); nothing else changes"},
		func() error { return kernelLacks(psample.ProbeTap(), psample.ErrNoTap) }},
}

// kernelLacks marks err, when it is lacking (the kernel does not have
// the feature), as ebpf.ErrNotSupported, as the BPF probes say it.
func kernelLacks(err, lacking error) error {
	if errors.Is(err, lacking) {
		return fmt.Errorf("%w: %w", ebpf.ErrNotSupported, err)
	}
	return err
}

// ProbeFeatures probes the running kernel for every feature the agent
// uses. Probes load tiny programs and create tiny maps (CAP_BPF), and one
// AF_XDP socket (CAP_NET_RAW); nothing is attached anywhere. A probe that
// fails for lack of privilege reports the feature as unavailable with a
// *PermissionError naming the capabilities missing (probeperm.go).
func ProbeFeatures() *Features {
	fs := &Features{Release: kernelRelease()}
	for _, p := range featureProbes {
		f := p.Feature
		f.Err = probeError(f.Name, p.probe())
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
	if err := p.Close(); err != nil {
		return err
	}
	return probeBPFOutputEvent()
}

// probeTransit loads (does not attach) an empty tp_btf program for each
// tracepoint the transit programs use (dataplane/bpf/transit.c): qdisc_enqueue came
// in Linux 5.15.
func probeTransit() error {
	for _, tp := range []string{"qdisc_enqueue", "net_dev_start_xmit", "consume_skb", "kfree_skb"} {
		p, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
			Type:         ebpf.Tracing,
			AttachType:   ebpf.AttachTraceRawTp,
			AttachTo:     tp,
			License:      "GPL",
			Instructions: retZero,
		}, ebpf.ProgramOptions{LogDisabled: true})
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.E2BIG) || errors.Is(err, btf.ErrNotFound) {
			return fmt.Errorf("tp_btf program for %s refused: %w", tp, ebpf.ErrNotSupported)
		}
		if err != nil {
			return fmt.Errorf("tp_btf program for %s: %w", tp, err)
		}
		if err := p.Close(); err != nil {
			return err
		}
	}
	return nil
}

// probeBPFOutputEvent opens (and closes) one perf event of the kind the
// drop notification buffers are made of (a CPU-wide
// PERF_COUNT_SW_BPF_OUTPUT event on CPU 0, as cilium/ebpf's perf reader
// opens one per CPU): CAP_PERFMON allows it on a mainline kernel, but
// Debian's kernels add kernel.perf_event_paranoid=3 (their default), at
// which Debian 12's 6.1 refuses it to CAP_PERFMON alone (measured by the
// e2e TestLeastPrivilege in the VM). Drop notifications then cannot run
// for this process, so the feature is reported missing with the setting
// named, as af_xdp_need_wakeup is without CAP_NET_RAW.
func probeBPFOutputEvent() error {
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_SOFTWARE,
		Config:      unix.PERF_COUNT_SW_BPF_OUTPUT,
		Sample_type: unix.PERF_SAMPLE_RAW,
		Wakeup:      1,
	}
	attr.Size = uint32(unsafe.Sizeof(attr))
	fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		paranoid := "unreadable"
		if b, rerr := os.ReadFile("/proc/sys/kernel/perf_event_paranoid"); rerr == nil {
			paranoid = strings.TrimSpace(string(b))
		}
		return fmt.Errorf("perf_event_open of a BPF output event for the drop buffers (kernel.perf_event_paranoid=%s; at 3 Debian's kernels may admit only a fully privileged process, at 2 CAP_PERFMON suffices): %w", paranoid, err)
	}
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("closing the probe's perf event: %w", err)
	}
	return nil
}

// probeAFXDP is afxdp.Probe with the kernel's own "no" (no AF_XDP, or
// rings without need-wakeup) marked ebpf.ErrNotSupported like the other
// probes; a missing CAP_NET_RAW stays a permission error, which the
// message names.
func probeAFXDP() error {
	err := afxdp.Probe()
	if errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, afxdp.ErrNoNeedWakeup) {
		return fmt.Errorf("%w: %w", err, ebpf.ErrNotSupported)
	}
	return err
}

// probeKernCtx looks the kfunc bpf_cast_to_kern_ctx (Linux 6.2) up in the
// kernel's BTF; the TC objects call it weakly, so without it they load
// and skip what needs it.
func probeKernCtx() error {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return fmt.Errorf("kernel BTF: %w: %w", ebpf.ErrNotSupported, err)
	}
	var fn *btf.Func
	if err := spec.TypeByName("bpf_cast_to_kern_ctx", &fn); err != nil {
		return fmt.Errorf("kfunc bpf_cast_to_kern_ctx: %w: %w", ebpf.ErrNotSupported, err)
	}
	return nil
}

// ProbeTCX asks the kernel to create a TCX link for a device that cannot
// exist: a kernel with TCX (Linux 6.6) answers ENODEV, an older one
// refuses the attach type. Nothing is attached anywhere.
func ProbeTCX() error {
	p, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Type:         ebpf.SchedCLS,
		License:      "Dual BSD/GPL",
		Instructions: retZero,
	}, ebpf.ProgramOptions{LogDisabled: true})
	if err != nil {
		return err
	}
	defer p.Close()
	l, err := link.AttachTCX(link.TCXOptions{Interface: math.MaxInt32, Program: p, Attach: ebpf.AttachTCXIngress})
	switch {
	case err == nil:
		return errors.Join(errors.New("TCX probe attached to an ifindex that should not exist"), l.Close())
	case errors.Is(err, unix.ENODEV):
		return nil
	case errors.Is(err, ebpf.ErrNotSupported):
		return fmt.Errorf("TCX links: %w", ebpf.ErrNotSupported)
	}
	return err
}
