package daemon

import (
	"errors"
	"log/slog"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/dataplane"
	"github.com/sflowswitchd/sflowswitchd/dataplane/drops"
	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
)

// TrialLoad loads, through the kernel's verifier, the BPF objects a start
// with settings s would load (dataplane.TrialLoad: the samplers, the
// transit programs with transit on; the drop program with drops on), and
// unloads them, attaching nothing (sflowswitchd -check-config). The error
// is a required kernel feature missing or a program the verifier
// refuses; what a start would run without (an optional feature missing)
// is in Trial.Off; a process that may not load BPF gets Trial.Skipped.
func TrialLoad(s config.Settings) (dataplane.Trial, error) {
	dpc, err := dataplaneConfig(s, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		return dataplane.Trial{}, err
	}
	dpc.Features = features.ProbeFeatures()
	t, err := dataplane.TrialLoad(dpc)
	if err != nil || t.Skipped != "" || s.Drops != "on" {
		return t, err
	}
	// Drop notifications: off without their tracepoint, as at a start
	// (dropnotify); the program loaded otherwise.
	if err := dpc.Features.Unavailable(features.FeatureBTFTracepoint); err != nil {
		t.Off = append(t.Off, "dropped-packet notifications: "+err.Error())
		return t, nil
	}
	if err := drops.TrialLoad(); err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			t.Skipped = err.Error()
			return t, nil
		}
		return t, err
	}
	t.Loaded = append(t.Loaded, "drop program")
	return t, nil
}
