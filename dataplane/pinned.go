package dataplane

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/sflowswitchd/sflowswitchd/dataplane/clsact"
	"github.com/sflowswitchd/sflowswitchd/dataplane/pin"
	"github.com/sflowswitchd/sflowswitchd/dataplane/ports"
	"github.com/sflowswitchd/sflowswitchd/dataplane/portstats"
	"golang.org/x/sys/unix"
)

// The sampler's state pinned across processes (package pin holds the
// directory, its lock and its meta map): what Open adopted or replaced,
// how each attached port is recorded there, and the agent's state memory
// kept with it. The take-over of the ports themselves is pin.go's.

// Pinned is the sampler's state in the pin directory, across processes:
// whether Open adopted it (which ports, what their egress samplers
// counted) or replaced it, the directory, and the agent's state memory
// pinned with it. What it says of the adoption is fixed when Open
// returns.
type Pinned struct {
	// pin is the pin directory (nil: nothing pinned); adopted the ports
	// taken over from it at Open, with their configuration.
	pin     *pin.State
	adopted map[int]PortConfig
	// adoptedEgress are the egress counts of the adopted ports, as
	// their egress samplers left them (Egress).
	adoptedEgress map[int]portstats.Counters
	// state is the agent's state memory (StateMemory).
	state    *ebpf.Map
	stateMem []byte
}

// Pinned is the sampler's state pinned across processes.
func (d *Dataplane) Pinned() *Pinned { return &d.pinned }

// Ports returns the ports the Dataplane took over from pinned
// state at Open, with their configuration; nil when none. A port's
// Direction is the directions the previous program sampled it in; of
// those only ingress is still attached (AttachMode), the egress sampler
// having ended with that program (Egress). A port the previous
// program sampled at egress only has nothing attached and no rate (0).
func (pn *Pinned) Ports() map[int]ports.Sampling {
	out := make(map[int]ports.Sampling, len(pn.adopted))
	for k, v := range pn.adopted {
		out[k] = sampling(v)
	}
	return out
}

// Replaced is why Open replaced the pinned state it found ("" when it
// adopted it, or found none): "layout" (another program version),
// "sizes" (other settings), "unreadable" (no valid meta), "damaged" (an
// object it would adopt missing or not the daemon's). Samples and pools
// start afresh: a gap in the data.
func (pn *Pinned) Replaced() string {
	if pn.pin == nil {
		return ""
	}
	return pn.pin.Replaced
}

// Adopted reports whether Open took over pinned state.
func (pn *Pinned) Adopted() bool { return pn.pin != nil && pn.pin.Adopt }

// Dir is the pin directory ("" when nothing is pinned).
func (pn *Pinned) Dir() string {
	if pn.pin == nil {
		return ""
	}
	return pn.pin.Dir
}

// portsMap is map_ports, nil without a pin directory.
func (pn *Pinned) portsMap() *ebpf.Map {
	if pn.pin == nil {
		return nil
	}
	return pn.pin.Ports
}

// Egress returns the egress counts (pool, drops) of the ports taken
// over at Open that the previous program sampled at egress, as its egress
// samplers left them: those samplers ended with it, and a port's pool and
// drops continue over them. Nil when none.
func (pn *Pinned) Egress() map[int]portstats.Counters {
	out := make(map[int]portstats.Counters, len(pn.adoptedEgress))
	for k, v := range pn.adoptedEgress {
		out[k] = v
	}
	return out
}

// mapState makes (or adopts) the agent's state memory and maps it.
func (pn *Pinned) mapState(words int, log *slog.Logger) error {
	spec := pin.StateSpec(words)
	m, err := pn.pin.Map(pin.StateMap, spec)
	if err != nil {
		return fmt.Errorf("dataplane: agent state: %w", err)
	}
	if m.MaxEntries() != spec.MaxEntries {
		// Other sizes (snmp_instances, max_ports changed): the agent's
		// numbers start afresh, the samplers are still adopted.
		log.Warn("pinned agent state of another size replaced: sequence numbers start afresh",
			"words", m.MaxEntries(), "want", spec.MaxEntries)
		if err := errors.Join(m.Unpin(), m.Close()); err != nil {
			return fmt.Errorf("dataplane: removing the agent state of another size: %w", err)
		}
		if m, err = ebpf.NewMap(spec); err == nil {
			if err = m.Pin(pn.pin.Path(pin.MapPrefix + pin.StateMap)); err != nil {
				m.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("dataplane: agent state: %w", err)
		}
	}
	pn.state = m
	size := words * 8
	page := os.Getpagesize()
	size = (size + page - 1) / page * page
	mem, err := unix.Mmap(m.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("dataplane: mmap agent state (%d bytes): %w", size, err)
	}
	pn.stateMem = mem[:words*8]
	return nil
}

// StateMemory is the agent's state memory, Config.StateWords 64-bit words
// shared with the kernel's map (zeroed when new): with a pin directory it
// outlives the process as the maps do, and the next Open that adopts the
// maps maps the same memory. nil without StateWords. Valid until Close or
// Release.
func (pn *Pinned) StateMemory() []byte { return pn.stateMem }

// record writes how ifindex is attached to map_ports (and pins an XDP
// or TCX link). Called with the Dataplane's mu held.
func (pn *Pinned) record(ifindex int, p *port) error {
	if pn.pin == nil {
		return nil
	}
	if l, ok := p.link.(link.Link); ok && !p.pinned {
		if err := l.Pin(pn.pin.LinkPath(ifindex)); err != nil {
			return fmt.Errorf("pinning the link: %w", err)
		}
		p.pinned = true
	}
	v := pin.PortValue{Slot: p.slot, Attach: attachCode(p.mode), Dirs: uint8(p.direction())}
	if p.link == nil {
		v.Attach = 0
	}
	if f, ok := p.link.(*clsact.Filter); ok && f.OwnQdisc() {
		v.OwnQdisc = 1
	}
	if err := pn.pin.Ports.Put(uint32(ifindex), v); err != nil {
		return fmt.Errorf("recording the pinned port: %w", err)
	}
	return nil
}

// forget unpins ifindex's link and record (before it is detached).
// Called with the Dataplane's mu held.
func (pn *Pinned) forget(ifindex int, p *port) error {
	if pn.pin == nil {
		return nil
	}
	var errs []error
	if l, ok := p.link.(link.Link); ok && p.pinned {
		if err := l.Unpin(); err != nil {
			errs = append(errs, fmt.Errorf("unpinning the link: %w", err))
		}
		p.pinned = false
	}
	if err := pn.pin.Ports.Delete(uint32(ifindex)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, fmt.Errorf("forgetting the pinned port: %w", err))
	}
	return errors.Join(errs...)
}
