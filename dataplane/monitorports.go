package dataplane

// Ports as the agent configures them: attached or updated in one call,
// and for a monitor port (mirror/SPAN/TAP: sampled frames arrive through
// AF_XDP sockets, one per RX queue) the sockets opened and handed to the
// Source of the worker that owns the port.

import (
	"errors"
	"fmt"

	"github.com/sflowswitchd/sflowswitchd/dataplane/reader"

	"github.com/sflowswitchd/sflowswitchd/dataplane/afxdp"
	"github.com/sflowswitchd/sflowswitchd/dataplane/ports"
)

// SetPort samples a port as s says: it attaches the sampler to a new port
// or updates an attached one (through the config map, no re-attach); a
// monitor port also gets its AF_XDP sockets, read by the Source of
// s.Worker. Frames the port samples before its sockets are in place are
// counted as drops by the sampler (redirect without a socket). A port
// changing mode or worker keeps its counters.
func (d *Dataplane) SetPort(ifindex int, s ports.Sampling) error {
	pc := portConfig(s)
	m := &d.mon
	d.monMu.Lock()
	defer d.monMu.Unlock()
	idx := uint32(ifindex)
	old := m.Get(idx)
	err := d.updatePort(ifindex, pc)
	attached := false
	if errors.Is(err, ErrNotAttached) {
		err = d.AttachPort(ifindex, pc)
		attached = err == nil
	}
	if err != nil {
		return err
	}
	monitor := pc.Mode == ModeMonitor
	if old != nil && (!monitor || old.Worker() != pc.Worker) {
		// Back to inline, or another owner: a socket is read by one worker
		// only, so the old one goes and (for a new owner) a new one comes.
		if err := d.dropMonitor(old); err != nil {
			d.log.Warn("closing monitor sockets", "ifindex", ifindex, "err", err)
		}
		old = nil
	}
	if !monitor || old != nil {
		return nil
	}
	src, err := d.Source(pc.Worker)
	if err == nil {
		// The full MaxHeaderBytes: the worker cuts each sample to its
		// sampler's header size, so a header size change needs no reopen.
		var socks *reader.Monitor
		if socks, err = d.openMonitor(ifindex, MaxHeaderBytes, afxdp.Options{}); err == nil {
			p := reader.NewMonitorPort(idx, pc.Worker, socks)
			m.Put(p)
			if err := src.Add(p); err != nil {
				return fmt.Errorf("dataplane: monitor port %d: %w", ifindex, err)
			}
			d.log.Info("monitor port sampled through AF_XDP", "ifindex", ifindex, "sockets", socks.Queues(), "worker", pc.Worker)
			return nil
		}
	}
	if attached {
		err = errors.Join(err, d.DetachPort(ifindex))
	}
	return fmt.Errorf("dataplane: monitor port %d: %w", ifindex, err)
}

// dropMonitor unbinds p's sockets now (the sampler counts later samples as
// drops) and hands them back to their worker to close. Called with monMu
// held.
func (d *Dataplane) dropMonitor(p *reader.MonitorPort) error {
	err := p.Sockets().Unbind()
	d.mon.Delete(p.IfIndex())
	src, serr := d.Source(p.Worker())
	if serr != nil {
		// The Dataplane is closing: its sources close every socket.
		return errors.Join(err, p.Sockets().Close())
	}
	return errors.Join(err, src.Remove(p))
}

// RemovePort stops sampling a port: a monitor port's sockets are unbound
// before the sampler is detached (so the XSKMAP keys are free when the
// port's slot is reused). A port that is not attached, or has vanished
// and took its attachment with it, is not an error.
func (d *Dataplane) RemovePort(ifindex int) error {
	d.monMu.Lock()
	defer d.monMu.Unlock()
	var errs []error
	if p := d.mon.Get(uint32(ifindex)); p != nil {
		errs = append(errs, d.dropMonitor(p))
	}
	if err := d.DetachPort(ifindex); err != nil && !errors.Is(err, ErrNotAttached) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// portConfig is the attachment of a port sampled as s: the kernel rate,
// the delivery path, the header bytes, the worker and the directions
// (AttachPort finds the port's kind).
func portConfig(s ports.Sampling) PortConfig {
	mode := ModeInline
	if s.Monitor {
		mode = ModeMonitor
	}
	pc := PortConfig{Rate: s.KernelRate, Mode: mode, HeaderBytes: s.HeaderBytes, Worker: s.Worker, Direction: s.Direction.OrIngress(),
		ConfiguredRate: s.Rate}
	switch s.Hook {
	case "xdp":
		pc.Hook = HookXDP
	case "tc":
		pc.Hook = HookTC
	}
	return pc
}

// sampling is pc in the agent's terms (Pinned.Ports).
func sampling(pc PortConfig) ports.Sampling {
	return ports.Sampling{KernelRate: pc.Rate, HeaderBytes: pc.HeaderBytes, Worker: pc.Worker,
		Monitor: pc.Mode == ModeMonitor, Direction: pc.Direction}
}
