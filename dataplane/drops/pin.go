package drops

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
)

// The pins of a program (Config.PinDir): a directory per build of the
// program, named by programFingerprint, holding its link, the program
// and the maps a process reads (not scratch, the program's own).
const (
	pinLink = "link"
	pinProg = "prog"
)

// pinnedMaps are the maps pinned beside the program: the counters, the
// configuration and rate budget, and the notification buffers' map and
// doorbell, which the next process fills with its own buffers.
var pinnedMaps = []string{
	bpf.DropsMapConfig, bpf.DropsMapDoorbell, bpf.DropsMapDropBudget, bpf.DropsMapEvents,
	bpf.DropsMapPortDrops, bpf.DropsMapReasonDrops, bpf.DropsMapReasonDropsExt, bpf.DropsMapStats,
}

// programFingerprint names a build of drops.c: a hash of its
// instructions and of its maps' layouts. A process adopts only a
// program of its own build; another is replaced (its counters start
// anew).
func programFingerprint(spec *ebpf.CollectionSpec) string {
	h := fnv.New64a()
	names := make([]string, 0, len(spec.Maps))
	for n := range spec.Maps {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		m := spec.Maps[n]
		fmt.Fprintf(h, "%s:%v:%d:%d:%d:%d;", n, m.Type, m.KeySize, m.ValueSize, m.MaxEntries, m.Flags)
	}
	for _, n := range []string{bpf.DropsProgKfreeSkbDrops} {
		fmt.Fprintf(h, "%s:%v;", n, spec.Programs[n].Instructions)
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// mapField returns the field of objs that holds map name.
func mapField(m *bpf.DropsMaps, name string) **ebpf.Map {
	switch name {
	case bpf.DropsMapConfig:
		return &m.Config
	case bpf.DropsMapDoorbell:
		return &m.Doorbell
	case bpf.DropsMapDropBudget:
		return &m.DropBudget
	case bpf.DropsMapEvents:
		return &m.Events
	case bpf.DropsMapPortDrops:
		return &m.PortDrops
	case bpf.DropsMapReasonDrops:
		return &m.ReasonDrops
	case bpf.DropsMapReasonDropsExt:
		return &m.ReasonDropsExt
	case bpf.DropsMapStats:
		return &m.Stats
	}
	return nil
}

// adopt takes over the program pinned in d.pinned, if there is one:
// its link, program and maps. Programs of other builds pinned beside it
// are detached and unpinned (replaced). A pinned program that cannot be
// opened whole is unpinned too, and false returned: the caller loads a
// new one.
func (d *Drops) adopt() (bool, error) {
	parent := filepath.Dir(d.pinned)
	es, err := os.ReadDir(parent)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("drops: pin directory: %w", err)
	}
	for _, e := range es {
		if e.Name() != filepath.Base(d.pinned) {
			d.stale = append(d.stale, filepath.Join(parent, e.Name()))
		}
	}
	if _, err := os.Stat(filepath.Join(d.pinned, pinLink)); err != nil {
		return false, nil
	}
	l, err := link.LoadPinnedLink(filepath.Join(d.pinned, pinLink), nil)
	if err == nil {
		d.link = l
		d.objs.KfreeSkbDrops, err = ebpf.LoadPinnedProgram(filepath.Join(d.pinned, pinProg), nil)
	}
	for _, n := range pinnedMaps {
		if err != nil {
			break
		}
		*mapField(&d.objs.DropsMaps, n), err = ebpf.LoadPinnedMap(filepath.Join(d.pinned, "map_"+n), nil)
	}
	if err != nil {
		d.replaced = append(d.replaced, ReplacedProgram{Name: filepath.Base(d.pinned), Err: err})
		cerr := d.closeAll()
		d.objs, d.link = bpf.DropsObjects{}, nil
		return false, errors.Join(cerr, unpinAll(d.pinned))
	}
	d.adopted = true
	return true, nil
}

// ReplacedProgram is a pinned program of another build that Open
// detached for its own (or a pinned program it could not open whole:
// Err), with its final counts.
type ReplacedProgram struct {
	Name  string // its folder (the build's fingerprint)
	ID    uint32 // its kernel ID
	Stats Stats  // its counts once detached
	Err   error  // why it could not be read (its counts are then unknown)
}

// retire detaches the pinned programs of other builds (d.stale) and
// reads their final counts, right before the new program is attached:
// drops between the two are counted by neither, a few system calls'
// time.
func (d *Drops) retire() {
	for _, dir := range d.stale {
		r := ReplacedProgram{Name: filepath.Base(dir)}
		l, err := link.LoadPinnedLink(filepath.Join(dir, pinLink), nil)
		var prog *ebpf.Program
		var stats *ebpf.Map
		if err == nil {
			prog, err = ebpf.LoadPinnedProgram(filepath.Join(dir, pinProg), nil)
		}
		if err == nil {
			stats, err = ebpf.LoadPinnedMap(filepath.Join(dir, "map_"+bpf.DropsMapStats), nil)
		}
		if rerr := os.RemoveAll(dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
		if l != nil {
			err = errors.Join(err, l.Close()) // unpinned: detached
		}
		if prog != nil {
			if info, ierr := prog.Info(); ierr == nil {
				id, _ := info.ID()
				r.ID = uint32(id)
			}
			err = errors.Join(err, prog.Close())
		}
		if stats != nil {
			var per []bpf.DropsDropStats
			if lerr := stats.Lookup(uint32(0), &per); lerr == nil {
				bpf.SumPerCPU(&r.Stats, per)
			} else {
				err = errors.Join(err, lerr)
			}
			err = errors.Join(err, stats.Close())
		}
		r.Err = err
		d.replaced = append(d.replaced, r)
	}
	d.stale = nil
}

// pin pins the freshly attached program, its link and maps in d.pinned.
func (d *Drops) pin() error {
	if err := os.MkdirAll(d.pinned, 0o700); err != nil {
		return fmt.Errorf("drops: pin directory: %w", err)
	}
	if err := d.objs.KfreeSkbDrops.Pin(filepath.Join(d.pinned, pinProg)); err != nil {
		return fmt.Errorf("drops: pinning the program: %w", err)
	}
	for _, n := range pinnedMaps {
		if err := (*mapField(&d.objs.DropsMaps, n)).Pin(filepath.Join(d.pinned, "map_"+n)); err != nil {
			return fmt.Errorf("drops: pinning map %s: %w", n, err)
		}
	}
	// The link last: a pinned link is what adopt looks for.
	if err := d.link.Pin(filepath.Join(d.pinned, pinLink)); err != nil {
		return fmt.Errorf("drops: pinning the link: %w", err)
	}
	return nil
}

// unpinAll removes dir and what is pinned in it (a link whose pin goes,
// and that no process holds, is detached).
func unpinAll(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("drops: unpinning: %w", err)
	}
	if parent := filepath.Dir(dir); parent != "" {
		_ = os.Remove(parent) // the pin directory's drops folder, once empty
	}
	return nil
}

// Adopted reports whether Open took over a program an earlier process
// pinned, and that program's count of notifications written before this
// process's buffers were in place: those the earlier process did not read
// are lost with its buffers (a crash), the rest it read.
func (d *Drops) Adopted() (notified uint64, ok bool) { return d.adoptedNotified, d.adopted }

// Replaced returns the pinned programs of other builds (or a damaged one)
// that Open detached, with their final counts: the new program's start
// at 0.
func (d *Drops) Replaced() []ReplacedProgram { return d.replaced }

// ProgramID is the kernel's ID of the attached program (0: unknown): a
// process that adopts a program sees the ID the earlier one had.
func (d *Drops) ProgramID() uint32 {
	info, err := d.objs.KfreeSkbDrops.Info()
	if err != nil {
		return 0
	}
	id, _ := info.ID()
	return uint32(id)
}

// Pause stops the program's writes to this process's buffers: from here
// each notification fails and is counted (ring_full), and the buffers
// keep what they hold for Read to drain. Before Release, so that what
// the process read is every notification written.
func (d *Drops) Pause() error {
	if err := d.rd.Pause(); err != nil {
		return fmt.Errorf("drops: pausing the notification buffers: %w", err)
	}
	return nil
}

// Release closes the process's descriptors and leaves the program
// attached and pinned (Config.PinDir), counting, for the next process to
// adopt. Without a pin directory it is Close.
func (d *Drops) Release() error {
	if d.pinned == "" {
		return d.Close()
	}
	return d.closeAll()
}
