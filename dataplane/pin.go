package dataplane

// Adoption of pinned state: the ports a killed or exec'ed process left
// attached are taken over, and every port attached is recorded in the pin
// directory (package pin holds the directory, its lock and its meta map).

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sflowswitchd/sflowswitchd/dataplane/egress"

	"github.com/sflowswitchd/sflowswitchd/dataplane/clsact"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/sflowswitchd/sflowswitchd/dataplane/bpf"
	"github.com/sflowswitchd/sflowswitchd/dataplane/pin"
	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Attach modes as stored in map_ports.
var attachCodes = []string{1: AttachNative, 2: AttachGeneric, 3: AttachTCX, 4: AttachClsact}

func attachCode(mode string) uint8 {
	for i, m := range attachCodes {
		if m != "" && m == mode {
			return uint8(i)
		}
	}
	return 0
}

// openPins locks the pin directory and decides whether its state is
// adopted (same layout and sizes) or replaced (anything else there is
// detached and unpinned, with a log line saying why). Runs in the
// Dataplane's namespace (clsact filters of replaced state).
func (d *Dataplane) openPins(layout [32]byte, sizes pin.Sizes, spec *ebpf.CollectionSpec) error {
	dir := d.cfg.PinDir
	lock, err := pin.Lock(dir, d.cfg.Handover)
	if err != nil {
		return err
	}
	p := &pin.State{Dir: dir, Lock: lock}
	d.pinned.pin = p
	old, ok, err := pin.ReadMeta(dir)
	if err != nil {
		d.log.Warn("pinned sampler state unreadable: replaced", "pin_dir", dir, "err", err)
	}
	p.Meta = pin.Meta{Magic: pin.MetaMagic, Format: pin.MetaFormat, Layout: layout, Sizes: sizes, Created: time.Now().Unix()}
	switch {
	case !ok && len(pin.Names(dir)) == 0:
		return nil // a new directory
	case ok && old.Format == pin.MetaFormat && old.Layout == layout && old.Sizes == sizes:
		if err := pin.CheckAdoptable(dir, spec, d.cfg.Workers, d.cfg.MaxPorts); err != nil {
			p.Replaced = "damaged"
			d.log.Error("pinned sampler state damaged: detached and replaced, pools and samples start afresh (a gap in the data)",
				"pin_dir", dir, "err", err)
			break
		}
		p.Meta = old
		p.Adopt = true
		return nil
	case !ok:
		p.Replaced = "unreadable"
		d.log.Warn("pin directory holds state without a readable description: replaced", "pin_dir", dir, "entries", len(pin.Names(dir)))
	case old.Format != pin.MetaFormat || old.Layout != layout:
		p.Replaced = "layout"
		d.log.Warn("pinned sampler state of another layout (another sflowswitchd version): detached and replaced, pools and samples start afresh",
			"pin_dir", dir, "state_format", old.Format, "state_layout", hex.EncodeToString(old.Layout[:8]), "layout", hex.EncodeToString(layout[:8]))
	default:
		p.Replaced = "sizes"
		d.log.Warn("pinned sampler state made with other sizes: detached and replaced, pools and samples start afresh",
			"pin_dir", dir, "differs", sizes.Differs(old.Sizes))
	}
	return clearPinDir(d.pinned.pin.Dir, old.OwnerID(), d.log)
}

// clearPinDir detaches and unpins what the daemon made in the pin
// directory dir (pin.OwnName; anything else is left, logged):
// links are detached (unpinned, then closed: the last reference), the
// clsact filters of owner (the state's, "" if unknown) are deleted, maps
// are unpinned. Runs in the Dataplane's namespace (openPins) or the
// calling thread's (Cleanup).
func clearPinDir(dir, owner string, log *slog.Logger) error {
	var errs []error
	for _, name := range pin.Names(dir) {
		path := filepath.Join(dir, name)
		if !pin.OwnName(name) {
			log.Warn("pin directory entry the daemon does not make: left alone", "pin_dir", dir, "entry", name)
			continue
		}
		if strings.HasPrefix(name, pin.LinkPrefix) {
			l, err := link.LoadPinnedLink(path, nil)
			if err == nil {
				errs = append(errs, l.Unpin(), l.Close())
				log.Info("pinned sampler link detached", "pin", name)
				continue
			}
			log.Warn("pinned link unreadable: unpinned", "pin", name, "err", err)
		}
		rm := os.Remove
		if name == pin.DropsDir {
			// The drop program's folder: its link goes with its pin.
			rm = os.RemoveAll
		}
		if err := rm(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unpinning %s: %w", name, err))
		}
	}
	if owner != "" {
		n, err := clsact.RemoveOwnerFilters(owner, log)
		errs = append(errs, err)
		if n > 0 {
			log.Info("TC filters of the pinned state removed", "owner", owner, "filters", n)
		}
	}
	return errors.Join(errs...)
}

// adoptPorts takes over the ports the pinned state had attached: each
// port's new program goes in place of the old one (link update, filter
// replace); a port that cannot be taken over (its device gone, its filter
// removed) is detached and forgotten, logged. Runs in the Dataplane's
// namespace, before anything else uses the Dataplane.
func (d *Dataplane) adoptPorts() error {
	type entry struct {
		ifindex uint32
		v       pin.PortValue
	}
	var (
		es []entry
		k  uint32
		v  pin.PortValue
	)
	it := d.pinned.pin.Ports.Iterate()
	for it.Next(&k, &v) {
		es = append(es, entry{k, v})
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading the pinned ports: %w", err)
	}
	used := map[uint32]bool{}
	d.pinned.adopted = map[int]PortConfig{}
	// What the egress samplers counted: they ended with the previous
	// program (egress.Ended).
	d.pinned.adoptedEgress = egress.Ended(d.egressShared, d.filters, func(yield func(int, pin.PortValue) bool) {
		for _, e := range es {
			if !yield(int(e.ifindex), e.v) {
				return
			}
		}
	})
	for _, e := range es {
		ifindex := int(e.ifindex)
		if e.v.Attach == 0 {
			// Sampled at egress only: nothing of it is attached any
			// more; it is attached anew if still configured.
			d.dropPinned(ifindex, e.v)
			if dirs := sflow.Direction(e.v.Dirs); dirs != 0 {
				d.pinned.adopted[ifindex] = PortConfig{Direction: dirs}
			}
			continue
		}
		p, err := d.adoptPort(ifindex, e.v, used)
		if err != nil {
			d.log.Warn("pinned port not taken over: detached, it is attached afresh if still configured",
				"ifindex", ifindex, "err", err)
			d.dropPinned(ifindex, e.v)
			continue
		}
		used[p.slot] = true
		d.ports[ifindex] = p
		pc := p.cfg
		if dirs := sflow.Direction(e.v.Dirs); dirs != 0 {
			pc.Direction = dirs // as configured; attached now: ingress
		}
		d.pinned.adopted[ifindex] = pc
		d.log.Info("sampler taken over", "ifindex", ifindex, "hook", p.hook, "mode", p.mode,
			"rate", p.cfg.Rate, "delivery", p.cfg.Mode.String(), "worker", p.cfg.Worker, "slot", p.slot)
	}
	d.freeSlots = d.freeSlots[:0]
	for s := d.cfg.MaxPorts - 1; s >= 0; s-- {
		if !used[uint32(s)] {
			d.freeSlots = append(d.freeSlots, uint32(s))
		}
	}
	d.stats.publish(d.ports)
	return nil
}

// adoptPort takes over one pinned port.
func (d *Dataplane) adoptPort(ifindex int, v pin.PortValue, used map[uint32]bool) (*port, error) {
	var bc bpf.SamplerPortConfig
	if err := d.configMap(uint32(ifindex)).Lookup(uint32(ifindex), &bc); err != nil {
		return nil, fmt.Errorf("its config: %w", err)
	}
	pc := PortConfig{Rate: bc.SampleMask + 1, Mode: Mode(bc.Mode), HeaderBytes: int(bc.HeaderBytes), Worker: int(bc.Worker),
		Kind: PortKind(bc.Kind)} // a tunnel device stays one: UpdatePort keeps the kind found at attach
	if err := pc.validate(d.cfg.Workers); err != nil {
		return nil, fmt.Errorf("its config: %w", err)
	}
	if bc.Slot != v.Slot || int(v.Slot) >= d.cfg.MaxPorts || used[v.Slot] {
		return nil, fmt.Errorf("counter slot %d (config %d) not valid", v.Slot, bc.Slot)
	}
	if int(v.Attach) >= len(attachCodes) || attachCodes[v.Attach] == "" {
		return nil, fmt.Errorf("unknown attach mode %d", v.Attach)
	}
	p := &port{slot: v.Slot, cfg: pc, mode: attachCodes[v.Attach], hook: HookXDP}
	if p.mode == AttachTCX || p.mode == AttachClsact {
		p.hook = HookTC
	}
	var prog *ebpf.Program
	var err error
	if p.hook == HookTC {
		prog, err = d.portProgramTC(ifindex, p.slot)
	} else {
		prog, err = d.portProgram(ifindex, p.slot, pc.Mode)
	}
	if err != nil {
		return nil, err
	}
	if p.mode == AttachClsact {
		err = d.inNetns(func() error {
			f, err := d.filters.Adopt(clsact.Ingress, ifindex, v.OwnQdisc != 0)
			if err != nil {
				return err
			}
			p.link = f
			return f.Update(prog)
		})
	} else {
		err = d.adoptLink(ifindex, p, prog)
	}
	if err != nil {
		return nil, errors.Join(err, prog.Close())
	}
	p.prog = prog
	return p, nil
}

// adoptLink opens ifindex's pinned link, checks it still holds that
// device, and puts prog in it.
func (d *Dataplane) adoptLink(ifindex int, p *port, prog *ebpf.Program) error {
	l, err := link.LoadPinnedLink(d.pinned.pin.LinkPath(ifindex), nil)
	if err != nil {
		return fmt.Errorf("its pinned link: %w", err)
	}
	info, err := l.Info()
	if err != nil {
		return errors.Join(fmt.Errorf("its pinned link: %w", err), l.Close())
	}
	var dev uint32
	switch {
	case info.XDP() != nil:
		dev = info.XDP().Ifindex
	case info.TCX() != nil:
		dev = info.TCX().Ifindex
	}
	if int(dev) != ifindex {
		// 0: the device is gone and the link with it (defunct).
		return errors.Join(fmt.Errorf("its pinned link holds device %d (0: gone)", dev), l.Close())
	}
	if err := l.Update(prog); err != nil {
		return errors.Join(fmt.Errorf("putting the new program in its link: %w", err), l.Close())
	}
	p.link = l
	p.pinned = true
	return nil
}

// dropPinned detaches and forgets a pinned port that was not taken over.
func (d *Dataplane) dropPinned(ifindex int, v pin.PortValue) {
	path := d.pinned.pin.LinkPath(ifindex)
	if l, err := link.LoadPinnedLink(path, nil); err == nil {
		if err := errors.Join(l.Unpin(), l.Close()); err != nil {
			d.log.Warn("detaching a pinned link", "ifindex", ifindex, "err", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		_ = os.Remove(path)
	}
	if attachCodes[min(int(v.Attach), len(attachCodes)-1)] == AttachClsact {
		_ = d.inNetns(func() error {
			if f, err := d.filters.Adopt(clsact.Ingress, ifindex, v.OwnQdisc != 0); err == nil {
				return f.Close()
			}
			return nil
		})
	}
	if err := d.clearConfig(uint32(ifindex)); err != nil {
		d.log.Warn("clearing a pinned port's config", "ifindex", ifindex, "err", err)
	}
	if int(v.Slot) < d.cfg.MaxPorts {
		d.stats.counters.Zero(v.Slot)
	}
	if err := d.pinned.pin.Ports.Delete(uint32(ifindex)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		d.log.Warn("forgetting a pinned port", "ifindex", ifindex, "err", err)
	}
}

// Cleanup removes what a daemon that is gone left in pin directory dir
// (sflowswitchd -cleanup): it detaches the pinned links, deletes the state's
// clsact filters in the calling thread's network namespace, unpins every
// map and removes the directory. It refuses while a daemon holds the
// directory. A directory that does not exist is no error.
func Cleanup(dir string, log *slog.Logger) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		log.Info("nothing pinned", "pin_dir", dir)
		return nil
	}
	lock, err := pin.Lock(dir, nil)
	if err != nil {
		return err
	}
	defer lock.Close()
	meta, ok, err := pin.ReadMeta(dir)
	if n := len(pin.Names(dir)); !ok && n > 0 {
		// Only the daemon's own state is removed: without its meta the
		// directory may be another tool's (or a daemon's that crashed
		// before writing it: remove it by hand, rm -r).
		return fmt.Errorf("cleaning up %s: no sflowswitchd state description (meta) among its %d entries (%v): not the daemon's pin directory, or damaged; nothing removed", dir, n, err)
	}
	n := len(pin.Names(dir))
	err = clearPinDir(dir, meta.OwnerID(), log)
	if rerr := os.Remove(dir); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, fmt.Errorf("removing the pin directory: %w", rerr))
	}
	if err != nil {
		return fmt.Errorf("cleaning up %s: %w", dir, err)
	}
	log.Info("pinned sampler state removed", "pin_dir", dir, "entries", n)
	return nil
}
