package dropnotify

import (
	"sync/atomic"

	"github.com/sflowswitchd/sflowswitchd/agent"
)

// PortMap numbers a drop's port, given by the kernel's ifindex, as the
// agent numbers its data sources (SONiC mode: SONiC's ifIndex); false for
// a port the agent does not report.
type PortMap func(kernel uint32) (uint32, bool)

// SetPortMap makes the notifications carry their ports as m numbers them
// (nil: the kernel's ifindex, as outside SONiC mode). Call it before
// Start. With a map, a notification follows the rule of the flow
// samples (hsflowd's mod_sonic evt_discard_sample translates the same
// way): an input or output that m does not know is sent as 0 (unknown),
// and a drop whose ports are all ones the agent does not report (eth0,
// docker0 on a SONiC switch) is not sent, only counted
// (sflowswitchd_drop_notifications_other_ports_total). A drop of no port
// (made locally) is sent as always.
func (d *Runner) SetPortMap(m PortMap) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.portMap = m
}

// mappedSource renumbers the ports of src's notifications with m before
// they reach the reporter; cb is forward, made once (no allocation per
// batch or notification).
type mappedSource struct {
	agent.DropSource
	m     PortMap
	other *atomic.Uint64
	next  func(*agent.DropNotification)
	cb    func(*agent.DropNotification)
}

func newMappedSource(src agent.DropSource, m PortMap, other *atomic.Uint64) *mappedSource {
	s := &mappedSource{DropSource: src, m: m, other: other}
	s.cb = s.forward
	return s
}

// ReadDrops implements agent.DropSource.
func (s *mappedSource) ReadDrops(fn func(*agent.DropNotification)) (int, error) {
	s.next = fn
	return s.DropSource.ReadDrops(s.cb)
}

func (s *mappedSource) forward(n *agent.DropNotification) {
	in, inOK := s.port(n.In)
	out, outOK := s.port(n.Out)
	if (n.In != 0 || n.Out != 0) && !inOK && !outOK {
		s.other.Add(1)
		return
	}
	n.In, n.Out = in, out
	s.next(n)
}

// port maps one port; 0 (none) is not a port.
func (s *mappedSource) port(k uint32) (uint32, bool) {
	if k == 0 {
		return 0, false
	}
	idx, ok := s.m(k)
	if !ok {
		return 0, false
	}
	return idx, true
}
