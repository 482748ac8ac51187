package pin

// The pin directory is shared ground: a BPF file system holds other
// tools' pins too, and anyone with the rights can put things in it. So
// the daemon removes only the names it makes (OwnName), refuses a
// directory holding anything else and the file system's root
// (checkEntries, from CheckDir), and adopts pinned state only when every
// object it will adopt opens and matches what this program makes
// (CheckAdoptable): a damaged directory (a ring missing, a foreign map
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

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
)

// OwnName reports whether name is one the daemon makes in its pin
// directory (the package doc lists them). A map pinned under a new name
// must be added here, or Close leaves it (and the directory) behind:
// TestPinnedReleaseAdoptEgress and TestPinnedCleanup see it.
func OwnName(name string) bool {
	decimal := func(s string) bool {
		_, err := strconv.ParseUint(s, 10, 32)
		return err == nil && s != "" && s[0] != '+'
	}
	switch {
	case name == MetaName, name == DropsDir:
		return true
	case strings.HasPrefix(name, RingPrefix):
		return decimal(name[len(RingPrefix):])
	case strings.HasPrefix(name, LinkPrefix):
		return decimal(name[len(LinkPrefix):])
	case strings.HasPrefix(name, MapPrefix):
		n := name[len(MapPrefix):]
		return slices.Contains(pinnedMaps, n) || n == PortsMap || n == StateMap || n == TCTake || n == EgressCounters
	}
	return false
}

// foreignEntries returns the names in dir the daemon does not make.
func foreignEntries(dir string) []string {
	var out []string
	for _, n := range Names(dir) {
		if !OwnName(n) {
			out = append(out, n)
		}
	}
	return out
}

// checkEntries refuses dir as a pin directory when it is the root of a
// BPF file system (where other tools pin: the daemon would take the
// whole file system for its own) or holds entries the daemon does not
// make (another tool's directory, or a mistake in pin_dir). A directory
// that does not exist yet is fine.
func checkEntries(dir string) error {
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
		n := len(f)
		if n > 5 {
			f = append(f[:5], "...")
		}
		return fmt.Errorf("pin directory %s holds %d entries sflowswitchd does not make (%s): another tool's directory? refused, nothing removed; give the daemon a directory of its own",
			dir, n, strings.Join(f, ", "))
	}
	return nil
}

// CheckAdoptable opens every pinned object in dir that adopting needs
// and checks that it is what this program makes (type, sizes, flags:
// sampler's and tc's specs, workers rings, maxPorts port slots), so
// that an adoption decided on meta alone cannot fail half-way: a
// missing or foreign object makes the state damaged (replaced, with a
// gap).
func CheckAdoptable(dir string, sampler *ebpf.CollectionSpec, workers, maxPorts int) error {
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
		errs = append(errs, check(MapPrefix+n, sampler.Maps[n], true))
	}
	for w := 0; w < workers; w++ {
		errs = append(errs, check(RingPrefix+strconv.Itoa(w), sampler.Maps[bpf.SamplerMapRings].InnerMap, true))
	}
	errs = append(errs, check(MapPrefix+PortsMap, PortsSpec(maxPorts), true))
	if tc, err := bpf.LoadTcSampler(); err == nil {
		errs = append(errs, check(MapPrefix+TCTake, tc.Maps[bpf.TcSamplerMapTakeProgs], false))
	} else {
		errs = append(errs, fmt.Errorf("loading TC sampler spec: %w", err))
	}
	return errors.Join(errs...)
}
