package dataplane

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/sflowswitchd/sflowswitchd/dataplane/pin"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pinfs"
)

// pinForeign pins a map of another tool as path.
func pinForeign(t *testing.T, path string, typ ebpf.MapType) {
	t.Helper()
	spec := &ebpf.MapSpec{Name: "other_tool", Type: typ, KeySize: 4, ValueSize: 8, MaxEntries: 16}
	m, err := ebpf.NewMap(spec)
	must(t, err)
	defer m.Close()
	must(t, m.Pin(path))
}

// TestHostilePinDirForeign: the daemon never removes what it did not
// make. A pin_dir at the root of a BPF file system (where other tools
// pin) and a directory holding another tool's pins are refused by Open
// and by Cleanup, and -cleanup of a directory without the daemon's meta
// removes nothing; the other tool's pins are all still there. Before, a
// directory without meta was cleared whole, and -pin-dir at the bpffs
// root deleted a foreign map before failing to start.
func TestHostilePinDirForeign(t *testing.T) {
	own := pinfs.Dir(t)
	root := filepath.Dir(own) // the bpffs mount
	lab := netlab.New(t, 1)
	log := testLogger(t)
	pinForeign(t, filepath.Join(root, "other_tool_map"), ebpf.Array)
	foreign := filepath.Join(root, "other_tool")
	must(t, os.Mkdir(foreign, 0o700))
	pinForeign(t, filepath.Join(foreign, "their_map"), ebpf.Array)
	noMeta := filepath.Join(root, "no_meta")
	must(t, os.Mkdir(noMeta, 0o700))
	pinForeign(t, filepath.Join(noMeta, "map_counters"), ebpf.Hash) // one of the daemon's names, no meta

	for _, c := range []struct {
		name, dir, want string
	}{
		{"bpffs root", root, "root of a BPF file system"},
		{"another tool's directory", foreign, "does not make"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := pin.CheckDir(c.dir); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("pin.CheckDir(%s): %v, want %q", c.dir, err, c.want)
			}
			err := lab.Do(lab.Switch, func() error {
				d, err := Open(Config{Workers: 1, MaxPorts: 2, PinDir: c.dir, Logger: log})
				if err == nil {
					d.Close()
				}
				return err
			})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Open with pin_dir %s: %v, want refused (%q)", c.dir, err, c.want)
			}
			err = lab.Do(lab.Switch, func() error { return Cleanup(c.dir, log) })
			if err == nil {
				t.Errorf("Cleanup(%s): nil, want refused", c.dir)
			}
		})
	}
	t.Run("cleanup without meta", func(t *testing.T) {
		err := lab.Do(lab.Switch, func() error { return Cleanup(noMeta, log) })
		if err == nil || !strings.Contains(err.Error(), "meta") {
			t.Errorf("Cleanup of a directory without meta: %v, want refused naming meta", err)
		}
	})
	kept := 0
	for _, p := range []string{filepath.Join(root, "other_tool_map"), filepath.Join(foreign, "their_map"), filepath.Join(noMeta, "map_counters")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("another tool's pin %s: %v", p, err)
		} else {
			kept++
		}
	}
	hostileRow(t, "pin_dir at the bpffs root, in another tool's directory; -cleanup of a directory without meta",
		"Open and Cleanup refused, nothing foreign removed", fmt.Sprintf("%d/3 foreign pins kept", kept))
	// The daemon's own directory beside them works, and Close leaves
	// the others alone.
	d := openAuto(t, lab, Config{Workers: 1, MaxPorts: 2, PinDir: own, Logger: log})
	must(t, d.Close())
	if _, err := os.Stat(own); !os.IsNotExist(err) {
		t.Errorf("own pin directory after Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "other_tool_map")); err != nil {
		t.Errorf("after the daemon's Close: %v", err)
	}
	for _, n := range []string{"meta", "map_counters", "ring_0", "ring_12", "link_7", "map_agent_state"} {
		if !pin.OwnName(n) {
			t.Errorf("pin.OwnName(%q) false", n)
		}
	}
	for _, n := range []string{"metadata", "map_their", "ring_x", "link_", "link_-1", "other"} {
		if pin.OwnName(n) {
			t.Errorf("pin.OwnName(%q) true", n)
		}
	}
}

// TestHostilePinDirDamaged: pinned state with a valid meta but an object
// missing (a ring) or foreign (another map under map_counters) does not
// keep the agent down: the upgrade's check (CheckAdopt) opens what it
// would adopt and says the state is replaced; Open replaces it (logged,
// Pinned.Replaced "damaged": a gap) and samples afresh. Before, every start
// failed (exit 1), and an upgrade's check passed while the new program
// failed.
func TestHostilePinDirDamaged(t *testing.T) {
	c := pinCases[0]
	for _, damage := range []string{"missing ring", "foreign map"} {
		t.Run(damage, func(t *testing.T) {
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
			if damage == "missing ring" {
				must(t, os.Remove(filepath.Join(dir, "ring_0")))
			} else {
				must(t, os.Remove(filepath.Join(dir, "map_counters")))
				pinForeign(t, filepath.Join(dir, "map_counters"), ebpf.Hash)
			}
			adopt, why, err := CheckAdopt(pinConfig(dir, c))
			if err != nil || adopt || !strings.Contains(why, "damaged") {
				t.Errorf("CheckAdopt: adopt %v, %q, %v; want replaced (damaged)", adopt, why, err)
			}
			var logs logBuffer
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			cfg.Handover = h
			d = openAuto(t, lab, cfg)
			if d.Pinned().Adopted() || d.Pinned().Replaced() != "damaged" || !strings.Contains(logs.String(), "damaged") {
				t.Errorf("adopted %v, replaced %q; want replaced as damaged, logged:\n%s", d.Pinned().Adopted(), d.Pinned().Replaced(), logs.String())
			}
			if mode, _ := attachedProg(t, lab); mode != "" {
				t.Errorf("the damaged state's sampler is still attached (%s)", mode)
			}
			must(t, d.AttachPort(p1, PortConfig{Rate: 4, HeaderBytes: 64}))
			mode, _ := attachedProg(t, lab)
			if mode != c.want {
				t.Errorf("p1 attached afresh as %q, want %q", mode, c.want)
			}
			hostileRow(t, "pin directory damaged under a valid meta: "+damage,
				"the upgrade's check says replaced; Open replaces it (logged, pinned_state_replaced_total{reason=damaged}) and samples",
				fmt.Sprintf("check: adopt %v (%s); replaced %q; attached afresh as %s", adopt, strings.SplitN(why, ":", 2)[0], d.Pinned().Replaced(), mode))
		})
	}
}

// hostileRow appends a case of the hostile table (`make hostile`: the
// file HOSTILE_REPORT names; test/e2e's recordHostile writes the others)
// and logs it.
func hostileRow(t *testing.T, c, bound, peak string) {
	t.Helper()
	row := fmt.Sprintf("| %s | %s | %s |\n", c, bound, peak)
	t.Logf("hostile report: %s", row)
	name := os.Getenv("HOSTILE_REPORT")
	if name == "" {
		return
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("hostile report: %v", err)
	}
	if _, err := f.WriteString(row); err != nil {
		f.Close()
		t.Fatalf("hostile report: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("hostile report: %v", err)
	}
}
