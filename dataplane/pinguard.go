package dataplane

// The pin directory is shared ground: a BPF file system holds other
// tools' pins too, and anyone with the rights can put things in it. So
// the daemon removes only the names it makes (ownPinName), refuses a
// directory holding anything else and the file system's root
// (checkPinEntries, from CheckPinDir), and adopts pinned state only when
// every object it will adopt opens and matches what this program makes
// (checkAdoptable): a damaged directory (a ring missing, a foreign map
// under one of its names) is replaced, with a gap in the data that is
// logged and counted, never left to fail every start.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/bpf"
)

// ownPinName reports whether name is one the daemon makes in its pin
// directory (the package doc of pin.go lists them).
func ownPinName(name string) bool {
	decimal := func(s string) bool {
		_, err := strconv.ParseUint(s, 10, 32)
		return err == nil && s != "" && s[0] != '+'
	}
	switch {
	case name == pinMeta:
		return true
	case strings.HasPrefix(name, pinRingPrefix):
		return decimal(name[len(pinRingPrefix):])
	case strings.HasPrefix(name, pinLinkPrefix):
		return decimal(name[len(pinLinkPrefix):])
	case strings.HasPrefix(name, pinMapPrefix):
		n := name[len(pinMapPrefix):]
		return slices.Contains(pinnedMaps, n) || n == pinPortsMap || n == pinStateMap || n == pinTCTake
	}
	return false
}

// foreignEntries returns the names in dir the daemon does not make.
func foreignEntries(dir string) []string {
	var out []string
	for _, n := range pinnedNames(dir) {
		if !ownPinName(n) {
			out = append(out, n)
		}
	}
	return out
}

// checkPinEntries refuses dir as a pin directory when it is the root of
// a BPF file system (where other tools pin: the daemon would take the
// whole file system for its own) or holds entries the daemon does not
// make (another tool's directory, or a mistake in pin_dir). A directory
// that does not exist yet is fine.
func checkPinEntries(dir string) error {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); errors.Is(err, unix.ENOENT) {
		return nil
	} else if err != nil {
		return fmt.Errorf("pin directory %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("pin directory %s: not a directory", dir)
	}
	if err := unix.Stat(filepath.Join(dir, ".."), &parent); err != nil {
		return fmt.Errorf("pin directory %s: %w", dir, err)
	}
	if parent.Dev != st.Dev || parent.Ino == st.Ino {
		return fmt.Errorf("pin directory %s is the root of a BPF file system, where other tools pin: give the daemon a directory of its own in it (%s)",
			dir, filepath.Join(dir, "sflowswitchd"))
	}
	if f := foreignEntries(dir); len(f) > 0 {
		if len(f) > 5 {
			f = append(f[:5], "...")
		}
		return fmt.Errorf("pin directory %s holds %d entries sflowswitchd does not make (%s): another tool's directory? refused, nothing removed; give the daemon a directory of its own",
			dir, len(foreignEntries(dir)), strings.Join(f, ", "))
	}
	return nil
}

// checkAdoptable opens every pinned object Open adopts and checks that
// it is what this program would make (type, sizes, flags: the spec), so
// that an adoption decided on meta alone cannot fail half-way: a missing
// or foreign object makes the state damaged (replaced, with a gap).
func checkAdoptable(dir string, cfg *Config, spec *ebpf.CollectionSpec) error {
	check := func(name string, ms *ebpf.MapSpec, required bool) error {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if errors.Is(err, os.ErrNotExist) && !required {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer m.Close()
		if err := ms.Compatible(m); err != nil {
			return fmt.Errorf("%s is not the daemon's: %w", name, err)
		}
		return nil
	}
	var errs []error
	for _, n := range pinnedMaps {
		errs = append(errs, check(pinMapPrefix+n, spec.Maps[n], true))
	}
	for w := 0; w < cfg.Workers; w++ {
		errs = append(errs, check(pinRingPrefix+strconv.Itoa(w), spec.Maps[bpf.SamplerMapRings].InnerMap, true))
	}
	errs = append(errs, check(pinMapPrefix+pinPortsMap, portsSpec(cfg.MaxPorts), true))
	if tc, err := bpf.LoadTcSampler(); err == nil {
		errs = append(errs, check(pinMapPrefix+pinTCTake, tc.Maps[bpf.TcSamplerMapTakeProgs], false))
	} else {
		errs = append(errs, fmt.Errorf("loading TC sampler spec: %w", err))
	}
	return errors.Join(errs...)
}

// PinReplaced is why Open replaced the pinned state it found ("" when it
// adopted it, or found none): "layout" (another program version),
// "sizes" (other settings), "unreadable" (no valid meta), "damaged" (an
// object it would adopt missing or not the daemon's). Samples and pools
// start afresh: a gap in the data.
func (d *Dataplane) PinReplaced() string {
	if d.pin == nil {
		return ""
	}
	return d.pin.replaced
}
