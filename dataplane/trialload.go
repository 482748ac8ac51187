package dataplane

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
)

// Trial is the outcome of TrialLoad.
type Trial struct {
	// Skipped says why nothing was loaded: the process may not load BPF
	// programs (it lacks CAP_BPF, CAP_NET_ADMIN, ...); "" when it loaded.
	Skipped string
	// Loaded names what the kernel's verifier accepted.
	Loaded []string
	// Off names what a start with this configuration would run without,
	// and why (an optional kernel feature missing): the daemon logs it
	// and goes on.
	Off []string
}

// TrialLoad loads the BPF objects Open would load for cfg (the samplers
// and their maps, and with TransitEntries the transit programs) through
// the kernel's verifier, then unloads them. Unlike Open it pins nothing,
// attaches nothing and touches no port or pinned state, so it may run
// beside a running daemon (sflowswitchd -check-config). The error is a
// missing required feature or the verifier's refusal; a process without
// the privileges to load BPF gets Trial.Skipped instead.
func TrialLoad(cfg Config) (Trial, error) {
	var t Trial
	cfg.PinDir, cfg.Handover = "", nil
	if err := cfg.setDefaults(); err != nil {
		return t, err
	}
	fs := cfg.Features
	if fs == nil {
		fs = features.ProbeFeatures()
	}
	if err := fs.RequiredErr(); err != nil {
		// A required feature whose probe the kernel refused for lack of
		// privilege: the kernel may well have it.
		for _, f := range fs.List {
			if pe, ok := f.NotPermitted(); ok && f.Required {
				t.Skipped = "not permitted to use " + f.Name + ": " + pe.Error()
				return t, nil
			}
		}
		return t, fmt.Errorf("dataplane: the XDP sampler cannot run here: %w", err)
	}
	spec, _, err := samplerSpec(&cfg, fs)
	if err != nil {
		return t, err
	}
	var objs bpf.SamplerObjects
	if err := bpf.LoadAndAssign(spec, &objs, nil); err != nil {
		if notPermitted(err) {
			t.Skipped = bpf.LoadError("loading the samplers", err).Error()
			return t, nil
		}
		return t, bpf.LoadError("dataplane: loading the samplers", err)
	}
	defer objs.Close()
	t.Loaded = append(t.Loaded, "samplers (XDP and TC)")
	if cfg.TransitEntries == 0 {
		return t, nil
	}
	if err := fs.Need(features.FeatureKernCtx, features.FeatureTransit); err != nil {
		t.Off = append(t.Off, "transit records: "+err.Error())
		return t, nil
	}
	tspec, err := bpf.LoadTransit()
	if err != nil {
		return t, fmt.Errorf("dataplane: loading the transit spec: %w", err)
	}
	shared := map[string]*ebpf.Map{
		bpf.TransitMapTransitPending:  objs.TransitPending,
		bpf.TransitMapTransitParked:   objs.TransitParked,
		bpf.TransitMapTransitOutcomes: objs.TransitOutcomes,
		bpf.TransitMapRings:           objs.Rings,
		bpf.TransitMapRingIdle:        objs.RingIdle,
	}
	for name := range shared {
		tspec.Maps[name] = spec.Maps[name].Copy()
	}
	var tobjs bpf.TransitObjects
	if err := bpf.LoadAndAssign(tspec, &tobjs, &ebpf.CollectionOptions{MapReplacements: shared}); err != nil {
		if notPermitted(err) {
			t.Skipped = bpf.LoadError("loading the transit programs", err).Error()
			return t, nil
		}
		return t, bpf.LoadError("dataplane: loading the transit programs", err)
	}
	t.Loaded = append(t.Loaded, "transit programs")
	return t, tobjs.Close()
}

// notPermitted reports whether a load was refused for lack of privilege.
func notPermitted(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)
}
