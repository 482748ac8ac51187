package dataplane

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/clsact"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/sflowswitchd/sflowswitchd/dataplane/features"
	"github.com/sflowswitchd/sflowswitchd/dataplane/pin"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pinfs"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testskip"
)

// Environment of the "pin" helper role: its pin directory and how it
// attaches p1 (hook and TC mode numbers).
const (
	helperPinDirEnv = "SFLOWSWITCHD_DATAPLANE_HELPER_PINDIR"
	helperPinHowEnv = "SFLOWSWITCHD_DATAPLANE_HELPER_PINHOW"
)

// pinCase is how a pinned test port is attached.
type pinCase struct {
	name   string
	hook   Hook
	tcMode TCMode
	want   string // AttachMode
}

var pinCases = []pinCase{
	{"xdp", HookXDP, TCModeAuto, AttachNative},
	{"tcx", HookTC, TCModeAuto, AttachTCX},
	{"clsact", HookTC, TCModeClsact, AttachClsact},
}

// pinConfig is the Config of the pinned tests (helper and test alike:
// adopting needs the same sizes).
func pinConfig(dir string, c pinCase) Config {
	return Config{Workers: 1, MaxPorts: 2, Hook: c.hook, TCMode: c.tcMode, PinDir: dir, StateWords: 64}
}

// pinHelper is the "pin" role: it opens a Dataplane pinned in the
// directory its environment names and attaches p1 at rate 16.
func pinHelper() error {
	var c pinCase
	how := strings.Split(os.Getenv(helperPinHowEnv), ",")
	h, _ := strconv.Atoi(how[0])
	m, _ := strconv.Atoi(how[1])
	c.hook, c.tcMode = Hook(h), TCMode(m)
	d, err := Open(pinConfig(os.Getenv(helperPinDirEnv), c))
	if err != nil {
		return err
	}
	l, err := netlink.LinkByName("p1")
	if err != nil {
		return fmt.Errorf("p1: %w", err)
	}
	binWord(d.Pinned().StateMemory(), 3, 4242) // a value the adopter must find
	return d.AttachPort(l.Attrs().Index, PortConfig{Rate: 16, HeaderBytes: 64})
}

// binWord sets word i of the state memory.
func binWord(mem []byte, i int, v uint64) {
	for b := 0; b < 8; b++ {
		mem[i*8+b] = byte(v >> (8 * b))
	}
}

// word reads word i of the state memory.
func word(mem []byte, i int) uint64 {
	var v uint64
	for b := 7; b >= 0; b-- {
		v = v<<8 | uint64(mem[i*8+b])
	}
	return v
}

// attachedProg returns how p1 is attached as the kernel shows it and the
// id of the program in that attachment.
func attachedProg(t *testing.T, lab *netlab.Lab) (string, ebpf.ProgramID) {
	t.Helper()
	var mode string
	var id ebpf.ProgramID
	err := lab.Do(lab.Switch, func() error {
		l, err := netlink.LinkByName("p1")
		if err != nil {
			return err
		}
		if mode, err = KernelAttachment(l.Attrs().Index); err != nil || mode == "" {
			return err
		}
		if x := l.Attrs().Xdp; x != nil && x.ProgId != 0 {
			id = ebpf.ProgramID(x.ProgId)
			return nil
		}
		if mode == AttachTCX {
			r, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: ebpf.AttachTCXIngress})
			if err != nil || len(r.Programs) == 0 {
				return fmt.Errorf("TCX query: %v", err)
			}
			id = r.Programs[0].ID
			return nil
		}
		f, err := clsact.FilterAt(clsact.Ingress, l.Attrs().Index)
		if err != nil || f == nil {
			return fmt.Errorf("filter: %v", err)
		}
		id = ebpf.ProgramID(f.Id)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mode, id
}

// TestPinnedAdoptAfterKill: a process that pinned its sampler and is
// SIGKILLed leaves it attached and counting; the next Open in that pin
// directory adopts it: the pool holds every frame (those of the gap
// included), the ring every sample taken meanwhile, the port runs the
// new program, and Close leaves nothing attached or pinned. For each
// attachment: an XDP link, a TCX link, a clsact filter.
func TestPinnedAdoptAfterKill(t *testing.T) {
	for _, c := range pinCases {
		t.Run(c.name, func(t *testing.T) {
			if c.want == AttachTCX {
				skipWithoutTCX(t)
			}
			testPinnedAdoptAfterKill(t, c)
		})
	}
}

func skipWithoutTCX(t *testing.T) {
	t.Helper()
	if err := kernelFeatures().Unavailable(features.FeatureTCX); err != nil {
		forTCModes(t, func(*testing.T, tcCase) {}) // reports the skip
		testskip.Feature(t, kernelFeatures(), features.FeatureTCX)
	}
}

func testPinnedAdoptAfterKill(t *testing.T, c pinCase) {
	dir := pinfs.Dir(t)
	lab := netlab.New(t, 2)
	t.Setenv(helperEnv, "pin")
	t.Setenv(helperPinDirEnv, dir)
	t.Setenv(helperPinHowEnv, fmt.Sprintf("%d,%d", c.hook, c.tcMode))
	before := lab.RxPackets(t, lab.Switch, "p1")
	cmd := lab.Start(t, lab.Switch, os.Args[0])
	deadline := time.Now().Add(10 * time.Second)
	for {
		if mode, _ := attachedProg(t, lab); mode == c.want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("helper did not attach p1 (%s)", c.want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, oldProg := attachedProg(t, lab)
	const k = 8000
	lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, 0, k, 32))
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = cmd.Process.Wait()
	if mode, _ := attachedProg(t, lab); mode != c.want {
		t.Fatalf("after SIGKILL p1 is attached as %q, want %q (pinned)", mode, c.want)
	}
	// The gap: no process runs, the sampler counts and samples.
	lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, k, k, 32))

	var logs logBuffer
	cfg := pinConfig(dir, c)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	d := openIn(t, lab, cfg)
	cfg.Hook = c.hook // openIn's auto -> xdp is not needed here
	if !d.Pinned().Adopted() {
		t.Fatalf("Open did not adopt the pinned state; log:\n%s", logs.String())
	}
	p1 := lab.PortIndex(t, 0)
	if pc, ok := d.Pinned().Ports()[p1]; !ok || pc.KernelRate != 16 || pc.HeaderBytes != 64 {
		t.Fatalf("adopted ports %v, want p1 (%d) at kernel rate 16", d.Pinned().Ports(), p1)
	}
	if got := word(d.Pinned().StateMemory(), 3); got != 4242 {
		t.Errorf("state memory word 3 = %d, want the helper's 4242", got)
	}
	mode, newProg := attachedProg(t, lab)
	if mode != c.want || d.AttachMode(p1) != c.want || newProg == oldProg {
		t.Errorf("after adoption: kernel %q prog %d (helper's %d), AttachMode %q; want %q running a new program",
			mode, newProg, oldProg, d.AttachMode(p1), c.want)
	}
	col := startCollector(t, d, 0)
	pc, err := d.Stats().Ingress(p1)
	if err != nil {
		t.Fatal(err)
	}
	got := col.waitFor(int(pc.Samples), 5*time.Second)
	rx := lab.RxPackets(t, lab.Switch, "p1") - before
	t.Logf("rx %d, counters %+v, ring samples %d", rx, pc, len(got))
	if pc.Pool != rx {
		t.Errorf("pool %d != rx_packets delta %d (the frames of the gap included)", pc.Pool, rx)
	}
	if uint64(len(got))+pc.Drops != pc.Samples {
		t.Errorf("ring samples %d + drops %d != samples %d", len(got), pc.Drops, pc.Samples)
	}
	var seqs []uint32
	for _, s := range got {
		if n, ok := frameSeq(s.Header); ok {
			seqs = append(seqs, n)
		}
	}
	if !slices.ContainsFunc(seqs, func(n uint32) bool { return n < k }) || !slices.ContainsFunc(seqs, func(n uint32) bool { return n >= k }) {
		t.Errorf("samples of the frames before and during the gap expected: %d samples", len(seqs))
	}
	// The new program counts on.
	lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, 2*k, k, 32))
	pc, _ = d.Stats().Ingress(p1)
	if rx := lab.RxPackets(t, lab.Switch, "p1") - before; pc.Pool != rx {
		t.Errorf("after adoption: pool %d != rx_packets delta %d", pc.Pool, rx)
	}
	col.stop(t)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if mode, _ := attachedProg(t, lab); mode != "" {
		t.Errorf("after Close p1 is still attached (%s)", mode)
	}
	if e := pinfs.Entries(t, dir); len(e) != 0 {
		t.Errorf("after Close the pin directory holds %v", e)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after Close the pin directory remains: %v", err)
	}
}

// TestPinnedReleaseAdopt: the exec path. Release leaves the port attached
// and pinned and hands the lock and owner over; an Open with that
// pin.Handover adopts it, the pool exact over the release.
func TestPinnedReleaseAdopt(t *testing.T) {
	for _, c := range pinCases {
		t.Run(c.name, func(t *testing.T) {
			if c.want == AttachTCX {
				skipWithoutTCX(t)
			}
			dir := pinfs.Dir(t)
			lab := netlab.New(t, 2)
			before := lab.RxPackets(t, lab.Switch, "p1")
			cfg := pinConfig(dir, c)
			cfg.Logger = testLogger(t)
			var d *Dataplane
			must(t, lab.Do(lab.Switch, func() (err error) { d, err = Open(cfg); return }))
			p1 := lab.PortIndex(t, 0)
			must(t, d.AttachPort(p1, PortConfig{Rate: 4, HeaderBytes: 64}))
			lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, 0, 3000, 32))
			h, err := d.Release()
			must(t, err)
			if mode, _ := attachedProg(t, lab); mode != c.want {
				t.Fatalf("after Release p1 is attached as %q, want %q", mode, c.want)
			}
			lab.SendFrames(t, 0, seqFrames(lab, 0, noHostMAC, 3000, 3000, 32))
			cfg.Handover = h
			d = openAuto(t, lab, cfg)
			if !d.Pinned().Adopted() || d.AttachMode(p1) != c.want {
				t.Fatalf("not adopted (mode %q)", d.AttachMode(p1))
			}
			pc, _ := d.Stats().Ingress(p1)
			if rx := lab.RxPackets(t, lab.Switch, "p1") - before; pc.Pool != rx {
				t.Errorf("pool %d != rx_packets delta %d", pc.Pool, rx)
			}
			// The lock passed: a third Open in the directory is refused.
			err = lab.Do(lab.Switch, func() error {
				d3, err := Open(pinConfig(dir, c))
				if err == nil {
					return d3.Close()
				}
				return err
			})
			if err == nil || !strings.Contains(err.Error(), "in use by another") {
				t.Errorf("a second Open in a locked pin directory: %v, want refused", err)
			}
		})
	}
}

// TestPinnedStateReplaced: state made with other sizes, or by another
// layout, is never read: Open says why, detaches it and starts afresh.
func TestPinnedStateReplaced(t *testing.T) {
	c := pinCases[0]
	for _, what := range []string{"sizes", "layout"} {
		t.Run(what, func(t *testing.T) {
			dir := pinfs.Dir(t)
			lab := netlab.New(t, 2)
			cfg := pinConfig(dir, c)
			cfg.Logger = testLogger(t)
			var d *Dataplane
			must(t, lab.Do(lab.Switch, func() (err error) { d, err = Open(cfg); return }))
			p1 := lab.PortIndex(t, 0)
			must(t, d.AttachPort(p1, PortConfig{Rate: 4, HeaderBytes: 64}))
			h, err := d.Release()
			must(t, err)
			want := "made with other sizes"
			if what == "sizes" {
				cfg.MaxPorts = 4
			} else {
				meta, ok, err := pin.ReadMeta(dir)
				if !ok || err != nil {
					t.Fatalf("meta: %v %v", ok, err)
				}
				meta.Layout[0] ^= 0xff
				must(t, pin.WriteMeta(dir, meta))
				want = "of another layout"
			}
			var logs logBuffer
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			cfg.Handover = h
			d = openAuto(t, lab, cfg)
			if d.Pinned().Adopted() || !strings.Contains(logs.String(), want) {
				t.Errorf("adopted %v; want replaced with a log line %q; log:\n%s", d.Pinned().Adopted(), want, logs.String())
			}
			if mode, _ := attachedProg(t, lab); mode != "" {
				t.Errorf("the replaced state's sampler is still attached (%s)", mode)
			}
			if d.AttachMode(p1) != "" {
				t.Errorf("replaced state's port is attached in the new Dataplane")
			}
		})
	}
}

// TestPinnedCleanup: what a killed process pinned, Cleanup removes (and
// refuses to while a daemon holds the directory).
func TestPinnedCleanup(t *testing.T) {
	for _, c := range []pinCase{pinCases[0], pinCases[2]} {
		t.Run(c.name, func(t *testing.T) {
			dir := pinfs.Dir(t)
			lab := netlab.New(t, 2)
			cfg := pinConfig(dir, c)
			cfg.Logger = testLogger(t)
			var d *Dataplane
			must(t, lab.Do(lab.Switch, func() (err error) { d, err = Open(cfg); return }))
			must(t, d.AttachPort(lab.PortIndex(t, 0), PortConfig{Rate: 4, HeaderBytes: 64}))
			err := lab.Do(lab.Switch, func() error { return Cleanup(dir, testLogger(t)) })
			if err == nil || !strings.Contains(err.Error(), "in use") {
				t.Errorf("Cleanup while the directory is held: %v, want refused", err)
			}
			// A crash: the pins stay, nothing is detached.
			d.released = true
			must(t, d.Close())
			if mode, _ := attachedProg(t, lab); mode != c.want {
				t.Fatalf("after the crash p1 is attached as %q, want %q", mode, c.want)
			}
			must(t, lab.Do(lab.Switch, func() error { return Cleanup(dir, testLogger(t)) }))
			if mode, _ := attachedProg(t, lab); mode != "" {
				t.Errorf("after Cleanup p1 is still attached (%s)", mode)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("after Cleanup the pin directory remains (%v): %v", err, pinfs.Entries(t, dir))
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
