package dataplane

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
)

// withoutFeatures returns a copy of the running kernel's probed features
// with the named ones switched off, as a kernel lacking them would report.
// The degraded paths then run for real on this kernel.
func withoutFeatures(t *testing.T, names ...string) *features.Features {
	t.Helper()
	fs := features.ProbeFeatures()
	out := &features.Features{Release: fs.Release + "-test"}
	for _, f := range fs.List {
		for _, n := range names {
			if f.Name == n {
				f.Err = ebpf.ErrNotSupported
			}
		}
		out.List = append(out.List, f)
	}
	for _, n := range names {
		if out.Has(n) || !contains(out.List, n) {
			t.Fatalf("feature %q not switched off", n)
		}
	}
	return out
}

func contains(l []features.Feature, name string) bool {
	for _, f := range l {
		if f.Name == name {
			return true
		}
	}
	return false
}

// TestOpenRefusesWithoutRequired: for each required feature, a kernel
// without it makes Open fail before loading anything, with an error
// naming the feature and the kernel release that brought it.
func TestOpenRefusesWithoutRequired(t *testing.T) {
	for _, p := range features.ProbeFeatures().List {
		if !p.Required {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			d, err := Open(Config{Features: withoutFeatures(t, p.Name)})
			if err == nil {
				d.Close()
				t.Fatal("Open succeeded without a required feature")
			}
			var fe *features.FeatureError
			if !errors.As(err, &fe) || len(fe.Missing) != 1 || fe.Missing[0].Name != p.Name {
				t.Fatalf("Open error %v, want a features.FeatureError naming only %s", err, p.Name)
			}
			for _, want := range []string{p.Name, "Linux " + p.Since, "-test"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestWithoutAFXDP: on a kernel without AF_XDP (no XSKMAP, no sockets) the
// sampler still loads (with a DEVMAP in the XSKMAP's place), inline ports
// sample, and monitor ports are refused, by AttachPort and by updatePort,
// without touching the port.
func TestWithoutAFXDP(t *testing.T) {
	lab := netlab.New(t, 2)
	d := openIn(t, lab, Config{MaxPorts: 4, Features: withoutFeatures(t, features.FeatureXSKMap, features.FeatureAFXDP)})
	if typ := d.objs.Xsks.Type(); typ != ebpf.DevMap {
		t.Errorf("xsks map type %v, want DevMap in place of the XSKMAP", typ)
	}
	p1, p2 := lab.PortIndex(t, 0), lab.PortIndex(t, 1)

	err := d.AttachPort(p2, PortConfig{Rate: 1, Mode: ModeMonitor, HeaderBytes: 64})
	var fe *features.FeatureError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "monitor mode unavailable") {
		t.Fatalf("AttachPort(monitor) = %v, want monitor mode unavailable (features.FeatureError)", err)
	}
	if l := switchLink(t, lab, lab.Ports[1]); l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached {
		t.Errorf("refused monitor port has an XDP program attached")
	}

	if err := d.AttachPort(p1, PortConfig{Rate: 1, HeaderBytes: 64}); err != nil {
		t.Fatalf("inline AttachPort: %v", err)
	}
	c := startCollector(t, d, 0)
	frames := seqFrames(lab, 0, noHostMAC, 0, 20, 32)
	lab.SendFrames(t, 0, frames)
	got := c.waitFor(len(frames), 5*time.Second)
	c.stop(t)
	n := 0
	for _, s := range got {
		if _, ok := frameSeq(s.Header); ok {
			n++
		}
	}
	if n != len(frames) {
		t.Errorf("inline port delivered %d of %d samples at rate 1", n, len(frames))
	}
	if err := d.updatePort(p1, PortConfig{Rate: 1, Mode: ModeMonitor, HeaderBytes: 64}); !errors.As(err, &fe) {
		t.Errorf("updatePort to monitor = %v, want a features.FeatureError", err)
	}
	if pc := d.ports[p1].cfg; pc.Mode != ModeInline {
		t.Errorf("refused update changed the port's mode to %v", pc.Mode)
	}
}

// TestWithoutBTFTracepoint: the tracepoint is optional; the sampler loads
// and monitor mode stays available without it.
func TestWithoutBTFTracepoint(t *testing.T) {
	lab := netlab.New(t, 1)
	d := openIn(t, lab, Config{MaxPorts: 2, Features: withoutFeatures(t, features.FeatureBTFTracepoint)})
	if d.Features().Has(features.FeatureBTFTracepoint) {
		t.Error("features.Features() lost the caller's probe results")
	}
	if err := d.modeAvailable(ModeMonitor); err != nil {
		t.Errorf("monitor mode refused without the tracepoint: %v", err)
	}
}
